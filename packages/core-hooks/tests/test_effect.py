"""``cardcage.hooks.effect.in_effect()``: what runs now, asked in the process that runs it.

Each test uses its own registry class and synthetic modules (``registry_support``); the hand-off
rows are exercised with wrappers built the way a host's own registry builds them (a
``functools.wraps`` wrapper whose closure holds the hook), since the real host applies them in
the scenario that runs SGLang's engine.
"""

from __future__ import annotations

import functools
from typing import Any

from registry_support import SyntheticModules, registry_fixture, synth_fixture  # noqa: F401

from cardcage.hooks import effect
from cardcage.hooks.registry import BaseHookRegistry, HookSource, HookType

Registry = type[BaseHookRegistry]

DOUBLE = """
def f(x):
    return x * 2
"""


def _around(original: Any, x: int) -> int:
    return original(x) + 1


def _rows_for(target: str) -> list[effect.HookEffect]:
    return [row for row in effect.in_effect() if row.target == target]


def test_a_registered_hook_is_not_applied_until_apply(
    registry: Registry, synth: SyntheticModules
) -> None:
    module = synth.make(DOUBLE)
    target = f"{module.__name__}:f"
    registry.register(target, _around, HookType.AROUND, source=HookSource("p", "dist-p"))
    (row,) = _rows_for(target)
    assert (row.state, row.in_effect, row.applied_by) == ("not-applied", False, "cardcage")
    assert (row.plugin, row.distribution, row.type) == ("p", "dist-p", "AROUND")


def test_an_applied_hook_is_in_effect(registry: Registry, synth: SyntheticModules) -> None:
    module = synth.make(DOUBLE)
    target = f"{module.__name__}:f"
    registry.register(target, _around, HookType.AROUND)
    registry.apply_hooks()
    assert module.f(2) == 5
    (row,) = _rows_for(target)
    assert row.state == "in-effect"
    assert row.registry.endswith(registry.__qualname__)


def test_an_attribute_replaced_after_apply_is_reported_replaced_since(
    registry: Registry, synth: SyntheticModules
) -> None:
    module = synth.make(DOUBLE)
    target = f"{module.__name__}:f"
    registry.register(target, _around, HookType.AROUND)
    registry.apply_hooks()
    module.f = lambda x: x  # a later monkeypatch by someone else
    (row,) = _rows_for(target)
    assert row.state == "replaced-since"
    assert not row.in_effect


def test_a_hook_registered_after_apply_is_not_applied_while_the_first_stays_in_effect(
    registry: Registry, synth: SyntheticModules
) -> None:
    module = synth.make(DOUBLE)
    target = f"{module.__name__}:f"
    registry.register(target, _around, HookType.AROUND)
    registry.apply_hooks()

    def late(result: int, x: int) -> int:
        return result

    registry.register(target, late, HookType.AFTER)
    states = {row.hook.rsplit(".", 1)[-1]: row.state for row in _rows_for(target)}
    assert states == {"_around": "in-effect", "late": "not-applied"}


def test_rows_filter_by_distribution_with_normalised_names(
    registry: Registry, synth: SyntheticModules
) -> None:
    module = synth.make(DOUBLE)
    target = f"{module.__name__}:f"
    registry.register(target, _around, HookType.AROUND, source=HookSource("p", "Vendor_Plugin"))
    assert [r.target for r in effect.in_effect("vendor-plugin") if r.target == target] == [target]
    assert [r for r in effect.in_effect("someone-else") if r.target == target] == []


def _host_style_wrapper(original: Any, hook: Any) -> Any:
    """How a host's registry wraps a function for an AROUND hook: a closure over both."""

    @functools.wraps(original)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return hook(original, *args, **kwargs)

    return wrapper


def test_a_handed_over_hook_is_in_effect_once_the_hosts_wrapper_holds_it(
    synth: SyntheticModules,
) -> None:
    module = synth.make(DOUBLE)
    target = f"{module.__name__}.f"
    effect.record_handoff("host", "host.registry:R", target, _around, "AROUND", None)
    (row,) = _rows_for(target)
    assert (row.state, row.applied_by) == ("not-applied", "host")
    module.f = _host_style_wrapper(module.f, _around)
    (row,) = _rows_for(target)
    assert row.state == "in-effect"


def test_a_handed_over_hook_whose_module_is_not_imported_is_not_imported() -> None:
    target = "_cc_never_imported_module_for_effect.f"
    effect.record_handoff("host", "host.registry:R", target, _around, "AROUND", None)
    (row,) = _rows_for(target)
    assert row.state == "not-imported"


def test_reaches_follows_descriptors_partials_and_closures() -> None:
    def hook() -> None: ...

    wrapped = _host_style_wrapper(lambda: None, hook)
    assert effect.reaches(staticmethod(wrapped), hook)
    assert effect.reaches(functools.partial(wrapped), hook)
    assert not effect.reaches(lambda: None, hook)
