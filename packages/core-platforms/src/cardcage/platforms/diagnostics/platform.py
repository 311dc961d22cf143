"""``cardcage platform``: each runtime's selected platform and the record of why, or the error.

Each installed runtime is resolved through its own accessor (``cardcage.platforms.current`` for
SRT, ``cardcage.diffusion.runtime.platforms.current`` for diffusion, reached by ``importlib``), so
the command sees exactly what that runtime would select in this process.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from collections.abc import Sequence

    from cardcage.platforms.selection import Candidate, SelectionPolicy, SelectionRecord
from ._common import (
    ErrorInfo,
    RuntimeSelection,
    allowlist_value,
    defined_profiles,
    error_info,
    provider_package,
    runtime_distribution,
    runtime_profiles,
    runtime_selection,
    selector_value,
    to_json,
)


@dataclass(frozen=True)
class CandidateRow:
    """One platform candidate the selection chain considered, and what happened to it."""

    name: str
    kind: str  # entry-point | built-in
    outcome: str
    distribution: str | None
    version: str | None
    value: str | None
    detail: str


@dataclass(frozen=True)
class Selection:
    """The platform this process runs on and why (from the selection record)."""

    platform: str
    device_name: str | None
    device_type: str | None
    enum: str | None
    plugin: str | None
    distribution: str | None
    version: str | None
    builtin: str | None
    reason: str
    candidates: tuple[CandidateRow, ...]


@dataclass(frozen=True)
class RuntimePlatform:
    """One runtime's platform: the choice and why (its selection record), or the error."""

    runtime: str
    mode: Literal["explicit", "automatic"]
    selector_env: str
    selector: str | None
    allowlist_env: str
    allowlist: tuple[str, ...] | None
    #: Whether the allowlist also filters automatic platform discovery (SRT yes, diffusion no).
    allowlist_filters_platforms: bool
    #: Built-in aliases in the order automatic selection probes them.
    builtin_chain: tuple[str, ...]
    #: Built-in aliases the selector accepts (diffusion: every one but xpu).
    selector_builtins: tuple[str, ...]
    #: The automatic fallback chain, in words.
    chain: str
    selection: Selection | None
    first_access_stack: str | None
    error: ErrorInfo | None

    @property
    def ok(self) -> bool:
        return self.error is None

    def as_json(self) -> dict[str, Any]:
        document: dict[str, Any] = {"ok": self.ok, **to_json(self)}
        del document["chain"]
        return document


@dataclass(frozen=True)
class PlatformReport:
    """Every requested runtime's platform, SRT first.

    The JSON document keeps the single-runtime layout of ``cardcage.platform/1`` at the top level
    (the fields of ``runtimes[0]``) and lists every runtime under ``runtimes``; its ``ok`` is
    true only when every listed runtime resolved.
    """

    runtimes: tuple[RuntimePlatform, ...]

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.runtimes)

    def as_json(self) -> dict[str, Any]:
        runtimes = [r.as_json() for r in self.runtimes]
        first = {k: v for k, v in runtimes[0].items() if k != "ok"}
        return {"schema": "cardcage.platform/1", "ok": self.ok, **first, "runtimes": runtimes}


_TEST_HARNESS = "installed by the runtime's testing.set_current_platform()"


def _candidate_row(candidate: Candidate) -> CandidateRow:
    return CandidateRow(
        name=candidate.name,
        kind=candidate.kind,
        outcome=candidate.outcome,
        distribution=candidate.dist_name,
        version=candidate.dist_version,
        value=candidate.value,
        detail=candidate.detail,
    )


def _selection(platform: object, record: SelectionRecord | None) -> Selection:
    cls = type(platform)
    enum = getattr(platform, "_enum", None)
    device_name = getattr(platform, "device_name", None)
    device_type = getattr(platform, "device_type", None)
    return Selection(
        platform=record.qualname if record else f"{cls.__module__}.{cls.__qualname__}",
        device_name=device_name if isinstance(device_name, str) else None,
        device_type=device_type if isinstance(device_type, str) else None,
        enum=getattr(enum, "name", None),
        plugin=record.plugin_name if record else None,
        distribution=record.dist_name if record else None,
        version=record.dist_version if record else None,
        builtin=record.builtin if record else None,
        reason=record.reason if record else _TEST_HARNESS,
        candidates=tuple(_candidate_row(c) for c in record.candidates) if record else (),
    )


def _collect_runtime(selection_ref: RuntimeSelection, with_stack: bool) -> RuntimePlatform:
    """Resolve one runtime's ``current_platform`` through its own accessor, as it would."""
    profile = selection_ref.profile
    selector = selector_value(profile)
    allowed = allowlist_value(profile)
    selection: Selection | None = None
    error: ErrorInfo | None = None
    stack: str | None = None
    policy: SelectionPolicy | None = None
    try:
        # A broken installation of the runtime is reported like a failed selection.
        policy = selection_ref.load_policy()
        current = selection_ref.accessor()
    except Exception as exc:
        error = error_info(exc)
    else:
        try:
            platform = current.get_current_platform()
        except Exception as exc:
            error = error_info(exc)
        else:
            record = current.get_selection_record()
            selection = _selection(platform, record)
            if with_stack and record is not None:
                stack = record.first_access_stack
    builtins = policy.builtins if policy is not None else ()
    return RuntimePlatform(
        runtime=profile.name,
        mode="explicit" if selector else "automatic",
        selector_env=profile.selector_env,
        selector=selector or None,
        allowlist_env=profile.allowlist_env,
        allowlist=tuple(sorted(allowed)) if allowed is not None else None,
        allowlist_filters_platforms=policy is None or policy.allowlist_filters_automatic,
        builtin_chain=tuple(b.alias for b in builtins),
        selector_builtins=tuple(b.alias for b in builtins if b.explicit_allowed),
        chain=selection_ref.chain,
        selection=selection,
        first_access_stack=stack,
        error=error,
    )


def platform_runtimes() -> tuple[str, ...]:
    """The runtimes whose selection ``cardcage platform`` can explain here (installed ones)."""
    return tuple(p.name for p in runtime_profiles() if runtime_selection(p) is not None)


def collect_platform(
    runtimes: Sequence[str] | None = None, *, with_stack: bool = False
) -> PlatformReport:
    """Resolve each runtime's ``current_platform`` as that runtime does; report choice or error.

    ``runtimes`` names the runtimes to explain (default: every installed one, SRT first). A
    runtime that is not installed raises ``LookupError`` naming the package to install.
    """
    installed = {p.name: p for p in runtime_profiles()}
    names = platform_runtimes() if runtimes is None else tuple(runtimes)
    refs: list[RuntimeSelection] = []
    for name in names:
        profile = installed.get(name)
        ref = runtime_selection(profile) if profile is not None else None
        if ref is None:
            raise LookupError(_not_installed(name))
        refs.append(ref)
    collected: list[RuntimePlatform] = []
    for ref in refs:  # a loop, not a generator: the first-access stack stays readable
        collected.append(_collect_runtime(ref, with_stack))
    return PlatformReport(tuple(collected))


def _not_installed(name: str) -> str:
    known = {p.name: p for p in defined_profiles()}
    profile = known.get(name)
    if profile is None:
        return f"no runtime named {name!r} (known: {', '.join(sorted(known))})"
    package = provider_package(profile) or "its package"
    dist = runtime_distribution(profile) or "the distribution that provides it"
    return (
        f"the {name} runtime is not installed ({package} cannot be imported): pip install "
        f"{dist}, or choose another runtime with --runtime"
    )
