"""``cardcage platform``: the selected platform and the record of why, or the error."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from cardcage.platforms.selection import Candidate, SelectionRecord
from ._common import (
    ErrorInfo,
    allowlist_value,
    error_info,
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
class PlatformReport:
    runtime: str
    mode: Literal["explicit", "automatic"]
    selector_env: str
    selector: str | None
    allowlist_env: str
    allowlist: tuple[str, ...] | None
    selection: Selection | None
    first_access_stack: str | None
    error: ErrorInfo | None

    @property
    def ok(self) -> bool:
        return self.error is None

    def as_json(self) -> dict[str, Any]:
        return {"schema": "cardcage.platform/1", "ok": self.ok, **to_json(self)}


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
        reason=record.reason if record else "installed by cardcage.platforms.testing",
        candidates=tuple(_candidate_row(c) for c in record.candidates) if record else (),
    )


def collect_platform(*, with_stack: bool = False) -> PlatformReport:
    """Resolve ``current_platform`` as the runtime does; report the choice or the error."""
    from cardcage.hooks.profile import SRT_PROFILE
    from cardcage.platforms.current import get_current_platform, get_selection_record

    profile = SRT_PROFILE
    selector = selector_value(profile)
    allowed = allowlist_value(profile)
    selection: Selection | None = None
    error: ErrorInfo | None = None
    stack: str | None = None
    try:
        platform = get_current_platform()
    except Exception as exc:
        error = error_info(exc)
    else:
        record = get_selection_record()
        selection = _selection(platform, record)
        if with_stack and record is not None:
            stack = record.first_access_stack
    return PlatformReport(
        runtime=profile.name,
        mode="explicit" if selector else "automatic",
        selector_env=profile.selector_env,
        selector=selector or None,
        allowlist_env=profile.allowlist_env,
        allowlist=tuple(sorted(allowed)) if allowed is not None else None,
        selection=selection,
        first_access_stack=stack,
        error=error,
    )
