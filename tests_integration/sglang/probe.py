"""Run SGLang 0.5.23's own start-up steps in this interpreter; report JSON.

Usage: ``probe.py STEP [STEP ...]``, each STEP one of

* ``import``: ``import sglang`` (which resolves SRT's ``current_platform`` on the way);
* ``srt``: ``sglang.srt.platforms.current_platform``, described, with the distribution the
  selector names and the one that ships the selected class;
* ``srt-load``: SGLang's ``sglang.srt.plugins.load_plugins()`` (which applies the hooks);
* ``srt-call``: a call of ``sglang.srt.utils.common.get_device_memory_capacity()``, the function
  demo-cpu's SRT plugin hooks (it asks the platform's ``get_device_total_memory()``);
* ``diffusion``: ``sglang.multimodal_gen.runtime.platforms.current_platform``, described, with
  SGLang's record of the plugin and distribution that supplied it;
* ``diffusion-load``: SGLang's diffusion ``load_plugins()`` and ``apply_plugin_hooks()``, then a
  ``SiluAndMul`` op built and called on a CPU tensor (its forward is chosen by
  ``CustomOp.dispatch_forward``);
* ``srt-conformance`` / ``diffusion-conformance``: how the selected platform's class answers
  every public name of SGLang's base class, compared with SGLang's own class dicts, and its
  identity predicates compared with those of SGLang's own class whose ``_enum`` is the identity
  the vendor declares (``behaves_as``; SGLang's ``OOT`` when it declares none);
* ``cardcage-srt``: cardcage's own SRT selection (``get_current_platform()``), SGLang untouched.

Every test runs this in a fresh interpreter with its own environment and PYTHONPATH (the vendor
sites it wants installed), because SGLang selects its platforms and loads its plugins once per
process, steered by variables it reads at start-up. No SGLang module is stubbed: everything here
is SGLang's code as its wheel ships it. Each step's result records the error, if any; the report
ends with the vendor modules in ``sys.modules`` and whether ``sglang`` was imported. Exit status 0
when every step succeeded, ``STEP_FAILED`` when one raised.
"""

from __future__ import annotations

import importlib
import inspect
import json
import logging
import sys
from typing import Any

STEP_FAILED = 3
WATCHED = ("cardcage_demo_cpu", "cardcage_demo_cuda", "cc_plat_sglang_native")
ADAPTERS = "cardcage.platforms.hosts.sglang.adapter"

SRT_BASE = "sglang.srt.platforms.interface:SRTPlatform"
SRT_ENUM = "sglang.srt.platforms.device_mixin:PlatformEnum"
DIFFUSION_BASE = "sglang.multimodal_gen.runtime.platforms.interface:Platform"
DIFFUSION_ENUM = "sglang.multimodal_gen.runtime.platforms:PlatformEnum"
# cardcage's abstract bases: what the adapter answers with SGLang's attributes instead.
CARDCAGE_SRT_BASE = "cardcage.platforms.interface:SRTPlatform"
CARDCAGE_DIFFUSION_BASE = "cardcage.diffusion.runtime.platforms.interface:Platform"

# Classes an instance may be checked against; each is looked up only if its module is already
# imported (a class whose module was never imported cannot be in an instance's MRO), so the
# check never imports a vendor module behind SGLang's back.
INSTANCE_CHECKS = (
    SRT_BASE,
    DIFFUSION_BASE,
    CARDCAGE_SRT_BASE,
    CARDCAGE_DIFFUSION_BASE,
    "cardcage_demo_cpu.platform:DemoCpuSRTPlatform",
    "cardcage_demo_cpu.diffusion.platform:DemoCpuPlatform",
    "cc_plat_sglang_native.platform:NativeSRTPlatform",
)


def _resolve(qualname: str) -> Any:
    module, _, attr = qualname.partition(":")
    return getattr(importlib.import_module(module), attr)


def _name(obj: Any) -> str:
    return f"{obj.__module__}.{obj.__qualname__}"


def _vendor_class(cls: type) -> type:
    """The class the plugin wrote: the adapter's first base, or ``cls`` itself (no adapter)."""
    return cls.__mro__[1] if cls.__module__ == ADAPTERS else cls


def _describe(platform: Any, enum_qualname: str) -> dict[str, Any]:
    cls = type(platform)
    instance_of = {}
    for qualname in INSTANCE_CHECKS:
        module, _, attr = qualname.partition(":")
        loaded = sys.modules.get(module)
        instance_of[qualname] = loaded is not None and isinstance(platform, getattr(loaded, attr))
    enum = getattr(platform, "_enum", None)
    return {
        "class": _name(cls),
        "vendor_class": _name(_vendor_class(cls)),
        "mro": [_name(k) for k in cls.__mro__],
        "instance_of": instance_of,
        "out_of_tree": platform.is_out_of_tree(),
        "enum": f"{_name(type(enum))}.{enum.name}" if enum is not None else None,
        "enum_is_sglang_oot": enum is _resolve(enum_qualname).OOT,
        "device_name": platform.device_name,
        "device_type": platform.device_type,
    }


def _hooks(registry: Any) -> dict[str, Any]:
    """SGLang's registry as it stands: each target's hooks with their recorded source."""
    return {
        "hooks": {
            target: [
                {
                    "hook": _name(hook),
                    "type": hook_type.name,
                    "source": None if source is None else [source.plugin_name, source.dist_name],
                }
                for hook_type, hook, source in entries
            ]
            for target, entries in registry._hooks.items()
        },
        "patched": sorted(registry._patched),
    }


def _import() -> dict[str, Any]:
    import sglang

    return {"version": sglang.__version__}


def _class_dist(dotted: str) -> str | None:
    """The distribution whose files hold the top-level package of class ``dotted`` (metadata)."""
    from importlib.metadata import packages_distributions

    found = packages_distributions().get(dotted.partition(".")[0], [])
    return found[0] if len(found) == 1 else None


def _srt() -> dict[str, Any]:
    from importlib.metadata import entry_points

    from sglang.srt import platforms
    from sglang.srt.environ import envs
    from sglang.srt.plugins import PLATFORM_PLUGINS_GROUP

    described = _describe(platforms.current_platform, SRT_ENUM)
    # SGLang's explicit selection: the entry point SGLANG_PLATFORM names, by its own reading.
    selector = envs.SGLANG_PLATFORM.get() or None
    by_name = {ep.name: ep for ep in entry_points(group=PLATFORM_PLUGINS_GROUP)}
    chosen = by_name.get(selector) if selector else None
    described["selector"] = selector
    described["selected_dist"] = chosen.dist.name if chosen is not None and chosen.dist else None
    # Automatic mode records no plugin or distribution: the distribution shipping the class
    # SGLang selected (its activated entry point's name is in SGLang's INFO line on stderr).
    described["class_dist"] = _class_dist(described["vendor_class"])
    return described


def _srt_load() -> dict[str, Any]:
    from sglang.srt.plugins import _get_excluded_dists, load_plugins
    from sglang.srt.plugins.hook_registry import HookRegistry

    load_plugins()
    return {"excluded_dists": sorted(_get_excluded_dists()), **_hooks(HookRegistry)}


def _srt_call() -> dict[str, Any]:
    from sglang.srt.utils import common

    return {"device_memory_capacity": common.get_device_memory_capacity()}


def _diffusion() -> dict[str, Any]:
    from sglang.multimodal_gen.runtime import platforms

    described = _describe(platforms.current_platform, DIFFUSION_ENUM)
    record = platforms._current_platform_selection  # SGLang's provenance of the selection
    described["selected_plugin"] = record.plugin_name if record is not None else None
    described["selected_dist"] = platforms.get_selected_platform_dist()
    return described


def _diffusion_load() -> dict[str, Any]:
    from sglang.multimodal_gen.runtime.platforms import plugins

    plugins.load_plugins()
    plugins.apply_plugin_hooks()
    import torch
    from sglang.multimodal_gen.runtime.layers.activation import SiluAndMul

    result = SiluAndMul()(torch.ones(2, 8))
    out = {"excluded_dists": sorted(plugins._get_excluded_dists()), **_hooks(plugins.HookRegistry)}
    out["silu_and_mul"] = result.tolist()
    return out


def _raw(cls: type, name: str) -> tuple[type, Any] | None:
    """``name`` as stored in the first class dict of ``cls``'s MRO that has it."""
    for klass in cls.__mro__:
        if name in vars(klass):
            return klass, vars(klass)[name]
    return None


def _identity(platform: Any, base: type, skip: set[str]) -> dict[str, str]:
    """Every ``is_*`` method of SGLang's base callable without arguments, and its answer."""
    answers: dict[str, str] = {}
    for klass in base.__mro__:
        for name in vars(klass):
            if not name.startswith("is_") or name in answers or name in skip:
                continue
            method = getattr(platform, name)
            try:
                parameters = inspect.signature(method).parameters.values()
            except (TypeError, ValueError):
                continue
            if any(
                p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
                for p in parameters
            ):
                continue
            try:
                answers[name] = repr(method())
            except Exception as exc:
                answers[name] = f"raises {type(exc).__name__}"
    return answers


def _conformance(
    platform: Any, base_qualname: str, cardcage_qualname: str, enum_qualname: str
) -> dict[str, Any]:
    """Compare the selected class with SGLang's base, name by name (raw class-dict entries).

    The vendor's classes are those of the vendor class's MRO outside cardcage's abstract base
    (demo-cpu's own, and the cardcage built-in mixin it chose as a base): their names stay the
    vendor's. Every other public name of SGLang's base (its MRO up to ``object``) must resolve on
    the adapter to the very object SGLang's class dict holds.
    """
    adapter = type(platform)
    base = _resolve(base_qualname)
    cardcage_base = _resolve(cardcage_qualname)
    vendor = _vendor_class(adapter)
    own = [k for k in vendor.__mro__ if k not in cardcage_base.__mro__]
    own_names = set().union(*(vars(k) for k in own))
    public = {n for k in base.__mro__ if k is not object for n in vars(k) if not n.startswith("_")}
    same, differs = [], {}
    for name in sorted(public - own_names):
        theirs, ours = _raw(base, name), _raw(adapter, name)
        assert theirs is not None
        if ours is not None and ours[1] is theirs[1]:
            same.append(name)
        else:
            differs[name] = {
                "adapter": None if ours is None else f"{_name(ours[0])}: {ours[1]!r:.100}",
                "sglang": f"{_name(theirs[0])}: {theirs[1]!r:.100}",
            }
    host_enum = _resolve(enum_qualname)
    oot = host_enum.OOT
    # The identity the vendor declares (behaves_as, a cardcage member), as SGLang's member:
    # SGLang's own class with that _enum is the reference its predicates must answer as.
    declared = getattr(vendor, "behaves_as", None)
    reference_enum = host_enum[declared.name] if declared is not None else oot
    reference_cls = type(
        "SGLangNativeReference",
        (base,),
        {"_enum": reference_enum, "device_name": "reference", "device_type": platform.device_type},
    )
    reference = reference_cls()
    out: dict[str, Any] = {
        "vendor_classes": [_name(k) for k in own],
        "vendor_names": sorted(public & own_names),
        "same": same,
        "differs": differs,
        "behaves_as": None if declared is None else declared.name,
        "identity": _identity(platform, base, own_names),
        "reference_identity": _identity(reference, base, own_names),
        "enum_is_sglang_oot": platform._enum is oot,
    }
    capabilities = getattr(platform, "capabilities", None)
    if capabilities is not None:  # SRT: a frozen msgspec Struct
        import msgspec

        out["capabilities"] = {
            "type": _name(type(capabilities)),
            "sglang_type": _name(type(base.capabilities)),
            "fields": msgspec.structs.asdict(capabilities),
            "sglang_fields": msgspec.structs.asdict(base.capabilities),
        }
    return out


def _srt_conformance() -> dict[str, Any]:
    from sglang.srt import platforms

    return _conformance(platforms.current_platform, SRT_BASE, CARDCAGE_SRT_BASE, SRT_ENUM)


def _diffusion_conformance() -> dict[str, Any]:
    from sglang.multimodal_gen.runtime import platforms

    return _conformance(
        platforms.current_platform, DIFFUSION_BASE, CARDCAGE_DIFFUSION_BASE, DIFFUSION_ENUM
    )


def _cardcage_srt() -> dict[str, Any]:
    from cardcage.platforms.current import get_current_platform

    platform = get_current_platform()
    return {"class": _name(type(platform)), "out_of_tree": platform.is_out_of_tree()}


STEPS = {
    "import": _import,
    "srt": _srt,
    "srt-load": _srt_load,
    "srt-call": _srt_call,
    "diffusion": _diffusion,
    "diffusion-load": _diffusion_load,
    "srt-conformance": _srt_conformance,
    "diffusion-conformance": _diffusion_conformance,
    "cardcage-srt": _cardcage_srt,
}


def main(argv: list[str]) -> int:
    unknown = [s for s in argv if s not in STEPS]
    if not argv or unknown:
        print(f"usage: probe.py {{{'|'.join(STEPS)}}} ...; unknown: {unknown}", file=sys.stderr)
        return 2
    # What an operator sees: SGLang's INFO lines (which plugin it loaded or skipped) on stderr.
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    results: list[dict[str, Any]] = []
    failed = False
    for step in argv:
        try:
            result = {"step": step, "ok": True, **STEPS[step]()}
        except Exception as exc:
            result = {"step": step, "ok": False, "error": f"{type(exc).__name__}: {exc}"}
            failed = True
        results.append(result)
    report: dict[str, Any] = {
        "results": results,
        "modules": sorted(m for m in sys.modules if m.startswith(WATCHED)),
        "sglang_imported": "sglang" in sys.modules,
    }
    stats = sys.modules.get("cardcage_demo_cpu.hooks")
    if stats is not None:  # demo-cpu's SRT hook counters, per target
        report["demo_cpu_calls"] = {t: s.calls for t, s in stats.STATS.as_dict().items()}
    evidence = sys.modules.get("cardcage_demo_cpu.diffusion.evidence")
    if evidence is not None:  # demo-cpu's diffusion counters: register, dispatch, ...
        report["demo_cpu_evidence"] = evidence.EVIDENCE.as_dict()
    native = sys.modules.get("cc_plat_sglang_native.hooks")
    if native is not None:  # the SGLang-native fixture's hook calls
        report["native_calls"] = list(native.CALLS)
    print(json.dumps(report))
    return STEP_FAILED if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
