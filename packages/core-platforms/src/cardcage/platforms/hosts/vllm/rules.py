"""vLLM 0.33's own rules of platform selection, as a prediction from metadata (no vLLM needed).

cardcage's selection engine (``cardcage.platforms.selection``) enforces cardcage's rules; vLLM's
differ in almost every step, so they are not a ``SelectionPolicy`` for that engine but this
small predictor, which applies them in vLLM's order (``vllm/platforms/__init__.py`` of 0.33.0):

1. ``VLLM_TARGET_DEVICE`` (default ``cuda``, lower-cased, not stripped) equal to ``cpu`` is
   authoritative: vLLM's CPU built-in, and no platform plugin is even imported;
2. otherwise the ``vllm.platform_plugins`` entry points are imported through vLLM's loader, so
   ``VLLM_PLUGINS`` (unset: every plugin; set: its comma-split names, not stripped, ``""``
   matching nothing) filters them as it filters general plugins; an import that fails is logged
   and skipped;
3. every built-in detection (tpu, cuda, rocm, xpu, cpu) and every imported plugin's
   ``activate()`` is called; one that raises is a WARNING (built-ins: DEBUG) and counts as not
   activated: a silent fallback where cardcage would stop;
4. two or more activated plugins raise ``RuntimeError``; exactly one wins over every built-in;
   else one built-in wins (two raise), else ``UnspecifiedPlatform``. There is no selector;
5. the winner's name is split on its *last dot* and the attribute read (``module:Class`` fails),
   and the class is instantiated with no check of its base.

``activate()`` is called as vLLM would call it: inside ``cardcage.hooks.host.rehearsing`` (vLLM),
so a cardcage-built plugin answers the dotted adapter name it gives vLLM. The built-ins' own
detection needs vLLM's code; without it the prediction says that they decide, and which one
cannot be known here (``Prediction.decided`` is False).

Import-safe: stdlib and ``cardcage.hooks`` only at module scope; vLLM is never imported. The
selection policy the runtime record names (``vllm_policy``) imports the selection engine's
records when it is called.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cardcage.hooks.snapshot import EntryPointSnapshot, PluginEntryPoint
    from cardcage.platforms.selection import SelectionPolicy

__all__ = [
    "ADAPTER_PREFIX",
    "BUILTINS",
    "GROUPS",
    "UNSPECIFIED",
    "VllmActivation",
    "VllmPrediction",
    "allowlist",
    "installed",
    "predict",
    "resolution_problem",
    "target_device",
    "vllm_policy",
]

#: Every entry-point group vLLM 0.33 reads (``vllm/plugins/__init__.py``), with who reads it.
GROUPS: dict[str, str] = {
    "vllm.platform_plugins": "platform selection, on first access of current_platform",
    "vllm.general_plugins": "load_general_plugins(), in every process vLLM starts",
    "vllm.io_processor_plugins": "the IO processor a model asks for, in process 0",
    "vllm.stat_logger_plugins": "stat loggers, in process 0 of async serving",
    "vllm.endpoint_plugins": "API-server routes, only for names listed in VLLM_PLUGINS",
}
#: vLLM's built-in platforms, in the order it calls their detection.
BUILTINS: tuple[tuple[str, str], ...] = (
    ("tpu", "vllm.platforms.tpu.TpuPlatform"),
    ("cuda", "vllm.platforms.cuda.CudaPlatform"),
    ("rocm", "vllm.platforms.rocm.RocmPlatform"),
    ("xpu", "vllm.platforms.xpu.XPUPlatform"),
    ("cpu", "vllm.platforms.cpu.CpuPlatform"),
)
CPU_QUALNAME = dict(BUILTINS)["cpu"]
UNSPECIFIED = "vllm.platforms.interface.UnspecifiedPlatform"
#: Where a cardcage-built plugin's vLLM adapters live (``adapter.adapter_qualname``).
ADAPTER_PREFIX = "cardcage.platforms.hosts.vllm.adapter."
TARGET_DEVICE_ENV = "VLLM_TARGET_DEVICE"
PLUGINS_ENV = "VLLM_PLUGINS"


def installed() -> bool:
    """Whether vLLM is importable here (found, not imported): the vLLM runtime is present."""
    return importlib.util.find_spec("vllm") is not None


def target_device() -> str:
    """``VLLM_TARGET_DEVICE`` as vLLM reads it: default ``cuda``, lower-cased, not stripped."""
    return os.environ.get(TARGET_DEVICE_ENV, "cuda").lower()


def allowlist() -> tuple[str, ...] | None:
    """``VLLM_PLUGINS`` as vLLM reads it: None when unset, else its comma-split items as they are
    (no stripping: ``"a, b"`` names ``"a"`` and ``" b"``; ``""`` names ``""``, matching nothing)."""
    raw = os.environ.get(PLUGINS_ENV)
    return None if raw is None else tuple(raw.split(","))


@dataclass(frozen=True, slots=True)
class VllmActivation:
    """One ``vllm.platform_plugins`` entry point and what vLLM does with it.

    ``loaded``: vLLM imports it and calls ``activate()`` (not when ``VLLM_TARGET_DEVICE=cpu``
    or ``VLLM_PLUGINS`` leaves it out). ``returned``: what ``activate()`` answered (None:
    declined, or it failed). ``error``: the exception of the import (``import_failed``) or of
    ``activate()``. ``vendor``: the cardcage platform class behind a cardcage adapter name.
    ``problem``: why vLLM could not resolve and use the name ``activate()`` returned, or None.
    ``colon``: that name is in ``module:Class`` form.
    """

    ep: PluginEntryPoint
    loaded: bool
    why_not: str = ""
    returned: str | None = None
    error: BaseException | None = None
    import_failed: bool = False
    vendor: str | None = None
    problem: str | None = None
    colon: bool = False

    @property
    def activates(self) -> bool:
        """``activate()`` returned a name (whether or not vLLM calls it here)."""
        return self.returned is not None


@dataclass(frozen=True, slots=True)
class VllmPrediction:
    """What vLLM's selection does in this environment, by vLLM's rules.

    ``outcome``: ``target-cpu`` (``VLLM_TARGET_DEVICE=cpu``: the CPU built-in), ``plugin`` (the
    one activating platform plugin, ``selected``), ``multiple`` (two or more activate: vLLM
    raises ``RuntimeError``) or ``builtins`` (none activates: vLLM's built-in detection decides,
    else ``UnspecifiedPlatform``). ``qualname``: what vLLM resolves, when known. ``decided``:
    whether the outcome is known without running vLLM's own detection. ``fails``: vLLM's
    selection raises (two plugins, or a winner's name it cannot resolve).
    """

    target_device: str
    allowlist: tuple[str, ...] | None
    activations: tuple[VllmActivation, ...]
    outcome: str
    selected: VllmActivation | None
    qualname: str | None

    @property
    def decided(self) -> bool:
        return self.outcome != "builtins"

    @property
    def fails(self) -> bool:
        return self.outcome == "multiple" or (
            self.selected is not None and self.selected.problem is not None
        )

    def activated(self) -> list[VllmActivation]:
        """The plugins vLLM loads whose ``activate()`` returned a name."""
        return [a for a in self.activations if a.loaded and a.activates]


# -- resolving a name the way vLLM does ----------------------------------------------------------


def _vendor_problem(vendor: str) -> str | None:
    """Why the cardcage class behind an adapter name cannot become vLLM's platform, or None."""
    import pkgutil

    try:
        cls = pkgutil.resolve_name(vendor)
    except Exception as exc:
        return f"its cardcage class {vendor} cannot be loaded: {type(exc).__name__}: {exc}"
    if not isinstance(cls, type) or not any("vllm_base_class" in vars(k) for k in cls.__mro__):
        return (
            f"{vendor} is not a cardcage SRT platform class (an SRTPlatform subclass), so "
            "cardcage has no vLLM adapter for it"
        )
    return None


def _missing_vllm(exc: BaseException) -> bool:
    name = getattr(exc, "name", None) or ""
    return isinstance(exc, ImportError) and (name == "vllm" or name.startswith("vllm."))


def resolution_problem(qualname: str) -> tuple[str | None, str | None]:
    """``(vendor, problem)`` for a name ``activate()`` gives vLLM.

    ``vendor``: the cardcage class behind a cardcage adapter name, else None. ``problem``: why
    vLLM's last-dot resolution (then its use of the class) fails, or None. A module that needs
    vLLM, where vLLM is not installed, is not a problem: vLLM would have it.
    """
    text = qualname.strip()
    if text.startswith(ADAPTER_PREFIX):
        from .adapter import vendor_qualname

        try:
            vendor = vendor_qualname(text[len(ADAPTER_PREFIX) :])
        except ValueError as exc:
            return None, str(exc)
        return vendor, _vendor_problem(vendor)
    module, dot, attr = text.rpartition(".")
    if ":" in text:
        return None, (
            f"{qualname!r} is in module:Class form; vLLM splits the name on its last dot and "
            f"reads attribute {attr or text!r} of module {module or text!r}, which fails"
        )
    if not dot:
        return None, f"{qualname!r} has no dot; vLLM resolves only a dotted module.Class name"
    try:
        found: Any = getattr(importlib.import_module(module), attr)
    except Exception as exc:
        if _missing_vllm(exc) and not installed():
            return None, None
        return None, f"vLLM cannot resolve {qualname!r}: {type(exc).__name__}: {exc}"
    if isinstance(found, type) and any("vllm_base_class" in vars(k) for k in found.__mro__):
        return None, (
            f"{qualname!r} is a cardcage platform class handed to vLLM as it is: vLLM would "
            "instantiate it and fail at its first vLLM-only name (dispatch_key, "
            "get_attn_backend_cls, ...), and its _enum is not vLLM's"
        )
    return None, None


# -- the prediction ------------------------------------------------------------------------------


def _why_not(ep: PluginEntryPoint, device: str, allowed: tuple[str, ...] | None) -> str:
    if device == "cpu":
        return f"{TARGET_DEVICE_ENV}=cpu: vLLM selects its CPU built-in without loading plugins"
    if allowed is not None and ep.name not in allowed:
        return f"not in {PLUGINS_ENV}: vLLM's loader skips it"
    return ""


def _activate(ep: PluginEntryPoint, loaded: bool, why_not: str) -> VllmActivation:
    """Import ``ep`` and call its ``activate()`` as vLLM would (``rehearsing(Host.VLLM)``)."""
    from cardcage.hooks.host import Host, rehearsing

    with rehearsing(Host.VLLM):
        try:
            func: Any = ep.load()
        except Exception as exc:
            return VllmActivation(ep, loaded, why_not, error=exc, import_failed=True)
        try:
            returned = func()
        except Exception as exc:
            return VllmActivation(ep, loaded, why_not, error=exc)
    if returned is None:
        return VllmActivation(ep, loaded, why_not)
    text = str(returned)
    vendor, problem = resolution_problem(text)
    return VllmActivation(
        ep, loaded, why_not, text, vendor=vendor, problem=problem, colon=":" in text
    )


def predict(snapshot: EntryPointSnapshot | None = None, *, thorough: bool = True) -> VllmPrediction:
    """Apply vLLM's selection rules to this environment (see the module docstring).

    ``thorough`` (``cardcage doctor``): also call the ``activate()`` of the entry points vLLM
    would not load (``VLLM_TARGET_DEVICE=cpu``, ``VLLM_PLUGINS``), to tell whether that drops a
    platform that would activate. Plugin code runs (imports, ``activate()``); vLLM's never does.
    """
    from cardcage.hooks.snapshot import entry_point_snapshot

    snap = snapshot or entry_point_snapshot()
    device = target_device()
    allowed = allowlist()
    activations: list[VllmActivation] = []
    for ep in snap.group("vllm.platform_plugins"):
        why_not = _why_not(ep, device, allowed)
        loaded = not why_not
        if loaded or thorough:
            activations.append(_activate(ep, loaded, why_not))
        else:
            activations.append(VllmActivation(ep, False, why_not))
    done = tuple(activations)
    if device == "cpu":
        return VllmPrediction(device, allowed, done, "target-cpu", None, CPU_QUALNAME)
    activated = [a for a in done if a.loaded and a.activates]
    if len(activated) >= 2:
        return VllmPrediction(device, allowed, done, "multiple", None, None)
    if len(activated) == 1:
        chosen = activated[0]
        return VllmPrediction(device, allowed, done, "plugin", chosen, chosen.returned)
    return VllmPrediction(device, allowed, done, "builtins", None, None)


# -- the record's selection policy ---------------------------------------------------------------


@functools.cache
def _policy_class() -> type[SelectionPolicy]:
    from cardcage.platforms.selection import SelectionPolicy

    class VllmSelectionPolicy(SelectionPolicy):
        """cardcage's policy record, marked as the vLLM host's (``host``)."""

        __slots__ = ()
        host = "vllm"

    return VllmSelectionPolicy


def _detected_by_vllm() -> bool:
    """The probe of a vLLM built-in: vLLM's own detection decides, which cardcage never runs."""
    return False


def vllm_policy(probes: object = None) -> SelectionPolicy:
    """The vLLM runtime's ``SelectionPolicy``: its built-ins and default, for the commands that
    read them (``cardcage platform``'s chain). The policy says ``host = "vllm"``: the commands
    explain this runtime with ``cardcage.platforms.hosts.vllm.diagnosis`` and this module's
    predictor, never with cardcage's selection engine, whose rules are not vLLM's."""
    del probes
    from cardcage.hooks.profile import VLLM_PROFILE
    from cardcage.platforms.interface import SRTPlatform
    from cardcage.platforms.selection import BuiltinPlatform

    return _policy_class()(
        profile=VLLM_PROFILE,
        base_class=SRTPlatform,
        builtins=tuple(
            BuiltinPlatform(
                alias,
                qualname,
                _detected_by_vllm,
                explicit_allowed=alias == "cpu",
                requirement="vLLM's own detection",
            )
            for alias, qualname in BUILTINS
        ),
        default_qualname=UNSPECIFIED,
        allowlist_filters_automatic=True,
    )
