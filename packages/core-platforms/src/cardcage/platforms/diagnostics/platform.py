"""``cardcage platform``: each runtime's selected platform and the record of why, or the error.

Each registered runtime (``cardcage.hooks.runtimes``) is resolved through the accessor its record
names (``cardcage.platforms.current`` for SRT; another runtime's own module, reached by
``importlib``), so the command sees exactly what that runtime would select in this process.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from collections.abc import Sequence

    from cardcage.hooks.runtimes import Runtime
    from cardcage.platforms.selection import Candidate, SelectionPolicy, SelectionRecord
from ._common import (
    ErrorInfo,
    allowlist_value,
    choose_runtimes,
    error_info,
    registered,
    selector_value,
    to_json,
)
from .host_releases import RuntimeHost, runtime_hosts


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
    #: What each installed host release (SGLang) does with this choice: whether it can select
    #: it too (metadata only; empty when no host is installed or it has no such runtime).
    hosts: tuple[RuntimeHost, ...] = ()

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


def _collect_runtime(runtime: Runtime, with_stack: bool) -> RuntimePlatform:
    """Resolve one runtime's ``current_platform`` through its own accessor, as it would."""
    profile = runtime.profile
    selector = selector_value(profile)
    allowed = allowlist_value(profile)
    selection: Selection | None = None
    error: ErrorInfo | None = None
    stack: str | None = None
    policy: SelectionPolicy | None = None
    try:
        # A broken installation of the runtime is reported like a failed selection.
        policy = runtime.load_policy()
        current = runtime.accessor_module()
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
        chain=runtime.fallback_chain(policy) if policy is not None else "unknown",
        selection=selection,
        first_access_stack=stack,
        error=error,
        hosts=runtime_hosts(profile.name, selection.plugin) if selection is not None else (),
    )


def platform_runtimes() -> tuple[str, ...]:
    """The runtimes whose selection ``cardcage platform`` can explain here (registered ones)."""
    return tuple(r.name for r in registered())


def collect_platform(
    runtimes: Sequence[str] | None = None, *, with_stack: bool = False
) -> PlatformReport:
    """Resolve each runtime's ``current_platform`` as that runtime does; report choice or error.

    ``runtimes`` names the runtimes to explain (default: every registered one, SRT first). A
    runtime that is not installed raises ``LookupError`` saying how to install one.
    """
    chosen = choose_runtimes(runtimes)
    if not chosen:
        raise LookupError(
            "no runtime is registered in the 'cardcage.runtimes' entry-point group; reinstall "
            "cardcage-core-platforms (it registers 'srt')"
        )
    collected: list[RuntimePlatform] = []
    for runtime in chosen:  # a loop, not a generator: the first-access stack stays readable
        collected.append(_collect_runtime(runtime, with_stack))
    return PlatformReport(tuple(collected))
