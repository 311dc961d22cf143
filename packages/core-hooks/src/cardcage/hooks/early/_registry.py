"""``EarlyPatchRegistry``, and applying its hooks under the early patches' failure policy.

Early hooks live in a registry of their own, apart from every runtime's: they are armed before
any runtime exists and stay in place whichever host runs later. The registry works in deferred
mode, so a hook on a module not yet imported is installed right after that module executes,
before any importer copies the target; a target that cannot be patched then is recorded as a
failure of the plugins that hooked it (``_policy``), and raised from the import that revealed
it when one of them belongs to the selected platform.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cardcage.hooks.errors import EarlyPatchError
from cardcage.hooks.registry import BaseHookRegistry, format_source

from ._policy import fail
from ._records import EarlyFailure, who
from ._state import state

if TYPE_CHECKING:
    from collections.abc import Sequence

    from cardcage.hooks.registry import ApplyReport

__all__ = ["EarlyPatchRegistry", "arm_hooks"]


class EarlyPatchRegistry(BaseHookRegistry):
    """The hooks early patches register: always applied in deferred mode, by cardcage.

    Its own state, apart from every runtime's registry: early hooks are armed before any
    runtime exists, and stay in place whichever host (cardcage or SGLang) runs later. It never
    hands hooks to SGLang's registry (``sglang_registry`` is None): SGLang's would apply them
    after its modules import, which is what early patches exist to avoid.
    """


def arm_hooks(targets: Sequence[str]) -> None:
    """Apply the registry's hooks on ``targets`` now, or right after their modules execute."""
    EarlyPatchRegistry.set_deferred_failure_handler(_on_hook_failures)
    report = EarlyPatchRegistry.apply(deferred=True, targets=targets, warn=False)
    if report.failed:
        _on_hook_failures(report)


def _on_hook_failures(report: ApplyReport) -> None:
    registrations = EarlyPatchRegistry.registrations()
    fatal: BaseException | None = None
    for target, exc in sorted(report.failed.items()):
        state.hook_failures[target] = f"{type(exc).__name__}: {exc}"
        sources = {r.source for r in registrations.get(target, ())}
        for source in sorted(sources, key=format_source):
            try:
                fail(EarlyFailure(*who(source), f"patching {target}", exc, (target,)))
            except EarlyPatchError as error:
                fatal = fatal or error
    if fatal is not None:
        raise fatal  # the import that revealed it fails with it
