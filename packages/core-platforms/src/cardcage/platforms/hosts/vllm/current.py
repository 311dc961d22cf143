"""The vLLM runtime's ``current_platform`` accessor, for ``cardcage platform --runtime vllm``.

cardcage never selects vLLM's platform; it reports vLLM's choice:

* where vLLM is installed, ``get_current_platform()`` is vLLM's own ``current_platform``
  (``vllm.platforms``; the first access runs vLLM's selection in this process, with vLLM's code),
  and the record names what vLLM selected, with the candidates as vLLM's rules saw them
  (``rules.predict``), and says so when the prediction and vLLM's choice differ;
* where it is not, ``get_current_platform()`` is a ``PredictedPlatform``: what vLLM's rules
  select here, from the installed metadata and the plugins' own ``activate()``; a vLLM
  built-in cannot be told apart without vLLM's detection, and the record says so.

A failure of vLLM's selection (two activating plugins, a name it cannot resolve) propagates as
vLLM raises it. Nothing is cached: each call asks vLLM (which caches its own choice) or predicts
again, so the command sees the environment as it is.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from . import rules

if TYPE_CHECKING:
    from cardcage.platforms.selection import Candidate, SelectionRecord

__all__ = ["PredictedPlatform", "get_current_platform", "get_selection_record", "record_for"]

_last: list[SelectionRecord] = []


@dataclass(frozen=True, slots=True)
class _Kind:
    """A platform kind by name (``PlatformEnum`` member names: OOT, CPU, UNSPECIFIED, ...)."""

    name: str


@dataclass(frozen=True, slots=True, init=False)
class PredictedPlatform:
    """The platform vLLM's rules select where vLLM is not installed: a description, not a
    platform (nothing of vLLM can be built without vLLM)."""

    qualname: str
    device_name: str | None
    device_type: str | None
    _enum: _Kind

    def __init__(
        self, qualname: str, device_name: str | None, device_type: str | None, kind: str
    ) -> None:
        init = object.__setattr__
        init(self, "qualname", qualname)
        init(self, "device_name", device_name)
        init(self, "device_type", device_type)
        init(self, "_enum", _Kind(kind))


def _candidates(prediction: rules.VllmPrediction, winner: str | None) -> list[Candidate]:
    from cardcage.platforms.selection import Candidate

    rows: list[Candidate] = []
    for a in prediction.activations:
        ep = a.ep
        if not a.loaded:
            outcome, detail = "not-loaded" if "cpu" in a.why_not else "not-allowed", a.why_not
        elif a.import_failed:
            outcome = "unavailable"
            detail = f"import failed ({type(a.error).__name__}: {a.error}); vLLM logs and skips it"
        elif a.error is not None:
            outcome = "declined"
            detail = (
                f"activate() raised {type(a.error).__name__}: {a.error}; vLLM logs a WARNING and "
                "counts it as not activated"
            )
        elif a.returned is None:
            outcome, detail = "declined", "activate() returned None"
        else:
            outcome = "selected" if ep.name == winner else "activated"
            detail = f"activate() -> {a.returned}"
        rows.append(
            Candidate(
                ep.name,
                "entry-point",
                outcome,
                ep.dist_name,
                ep.dist.version if ep.dist else None,
                ep.value,
                detail,
            )
        )
    return rows


def _reason(prediction: rules.VllmPrediction) -> str:
    if prediction.outcome == "target-cpu":
        return "VLLM_TARGET_DEVICE=cpu selects vLLM's CPU built-in; no platform plugin is loaded"
    if prediction.outcome == "plugin" and prediction.selected is not None:
        ep = prediction.selected.ep
        return (
            f"platform plugin {ep.name!r} ({ep.dist_name}) is the only one that activated; "
            "vLLM prefers it over every built-in"
        )
    if prediction.outcome == "multiple":
        names = ", ".join(repr(a.ep.name) for a in prediction.activated())
        return f"{names} activate: vLLM raises RuntimeError (only one platform plugin may)"
    return (
        "no platform plugin activated: vLLM's built-in detection (tpu, cuda, rocm, xpu, cpu) "
        "decides, and UnspecifiedPlatform when none matches"
    )


def record_for(
    prediction: rules.VllmPrediction, qualname: str, builtin: str | None, reason: str
) -> SelectionRecord:
    """The selection record of vLLM's choice ``qualname``, with the prediction's candidates."""
    from cardcage.platforms.selection import SelectionRecord

    chosen = prediction.selected if prediction.outcome == "plugin" else None
    winner = chosen.ep if chosen is not None and builtin is None else None
    raw = os.environ.get(rules.TARGET_DEVICE_ENV, "")
    return SelectionRecord(
        runtime="vllm",
        mode="explicit" if prediction.outcome == "target-cpu" else "automatic",
        selector_env=rules.TARGET_DEVICE_ENV,
        selector=raw,
        qualname=qualname,
        plugin_name=winner.name if winner else None,
        dist_name=winner.dist_name if winner else None,
        dist_version=winner.dist.version if winner and winner.dist else None,
        builtin=builtin,
        reason=reason,
        candidates=_candidates(prediction, winner.name if winner else None),
    )


def _builtin_alias(qualname: str) -> str | None:
    return next((alias for alias, name in rules.BUILTINS if name == qualname), None)


def _actual(prediction: rules.VllmPrediction) -> Any:
    """vLLM's own ``current_platform``, and its record."""
    import importlib

    platforms = importlib.import_module("vllm.platforms")
    platform = platforms.current_platform
    cls = type(platform)
    qualname = f"{cls.__module__}.{cls.__qualname__}"
    builtin = _builtin_alias(qualname)
    if builtin is None and cls.__module__ == "vllm.platforms.zen_cpu":
        builtin = "cpu"
    reason = f"vLLM's own selection: {_reason(prediction)}"
    expected = prediction.qualname
    if prediction.decided and expected is not None:
        from .adapter import adapted_class

        vendor = adapted_class(cls)
        same = expected.strip() == qualname or (
            vendor is not None
            and prediction.selected is not None
            and prediction.selected.vendor is not None
            and prediction.selected.vendor.replace(":", ".")
            == f"{vendor.__module__}.{vendor.__qualname__}"
        )
        if not same and not (builtin == "cpu" and prediction.outcome == "target-cpu"):
            reason += f" (vLLM's rules predicted {expected}; vLLM chose otherwise)"
    record = record_for(prediction, qualname, builtin if prediction.outcome != "plugin" else None,
                        reason)  # fmt: skip
    return platform, record


def _predicted(prediction: rules.VllmPrediction) -> Any:
    """Without vLLM: a description of what its rules select."""
    reason = f"predicted by vLLM's rules (vLLM is not installed here): {_reason(prediction)}"
    if prediction.outcome == "target-cpu":
        platform = PredictedPlatform(rules.CPU_QUALNAME, "cpu", "cpu", "CPU")
        return platform, record_for(prediction, platform.qualname, "cpu", reason)
    chosen = prediction.selected
    if prediction.outcome == "plugin" and chosen is not None and chosen.returned is not None:
        device_name = device_type = None
        if chosen.vendor is not None and chosen.problem is None:
            import pkgutil

            vendor = pkgutil.resolve_name(chosen.vendor)
            device_name = getattr(vendor, "device_name", None)
            device_type = getattr(vendor, "device_type", None)
        if chosen.problem is not None:
            from cardcage.platforms.errors import InvalidPlatformClassError

            ep = chosen.ep
            raise InvalidPlatformClassError(
                f"vLLM would select platform plugin {ep.name!r} ({ep.dist_name}), and then "
                f"fail: {chosen.problem}. Return host_qualname(<module:Class>) from activate() "
                "(cardcage.platforms.host), which gives vLLM the dotted name of its adapter.",
                plugin=ep.name,
                distribution=ep.dist_name,
                group=ep.group,
            )
        platform = PredictedPlatform(chosen.returned.strip(), device_name, device_type, "OOT")
        return platform, record_for(prediction, platform.qualname, None, reason)
    if prediction.outcome == "multiple":
        names = [a.ep.name for a in prediction.activated()]
        raise RuntimeError(
            f"vLLM's selection would raise: only one platform plugin can be activated, but "
            f"{names} activate. Leave one of them out of VLLM_PLUGINS, or turn off the others' "
            "opt-in."
        )
    platform = PredictedPlatform(rules.UNSPECIFIED, None, None, "UNSPECIFIED")
    return platform, record_for(prediction, rules.UNSPECIFIED, None, reason)


def get_current_platform() -> Any:
    """vLLM's ``current_platform`` where vLLM is installed, else the predicted one."""
    prediction = rules.predict(thorough=False)
    platform, record = _actual(prediction) if rules.installed() else _predicted(prediction)
    _last[:] = [record]
    return platform


def get_selection_record() -> SelectionRecord | None:
    """The record of the last ``get_current_platform()`` call, or None before the first."""
    return _last[0] if _last else None
