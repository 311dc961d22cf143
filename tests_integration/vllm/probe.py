"""Run vLLM 0.33's own start-up steps in this interpreter; report JSON on stdout.

Usage: ``probe.py STEP [STEP ...]``, each STEP one of

* ``load``: ``vllm.plugins.load_general_plugins()``, vLLM's general-plugin loader, as vLLM's
  ``EngineArgs`` and workers call it;
* ``platform``: ``vllm.platforms.current_platform`` (vLLM's selection), described, and the
  names vLLM calls on it answered;
* ``hooks``: cardcage's registry after vLLM's loader ran (targets, sources, applied, pending),
  then calls of the hooked functions: ``resolve_obj_by_qualname`` through the alias
  ``vllm.platforms`` imported, and the deferred target after importing its module.

No vLLM module is stubbed. Each step's result records the error, if any. Exit status 0 when every
step succeeded, ``STEP_FAILED`` when one raised.
"""

from __future__ import annotations

import json
import logging
import sys
import types
from typing import Any

STEP_FAILED = 3


def _name(obj: Any) -> str:
    return f"{obj.__module__}.{obj.__qualname__}"


def step_load() -> dict[str, Any]:
    import vllm.plugins

    vllm.plugins.load_general_plugins()
    return {"plugins_loaded": vllm.plugins.plugins_loaded}


def _owner(cls: type, name: str) -> type:
    """The first class of ``cls``'s MRO whose own namespace defines ``name``."""
    return next(klass for klass in cls.__mro__ if name in vars(klass))


def step_platform() -> dict[str, Any]:
    from vllm.platforms import current_platform
    from vllm.platforms.interface import CpuArchEnum, DeviceCapability, Platform, PlatformEnum

    cls = type(current_platform)
    out: dict[str, Any] = {
        "class": _name(cls),
        "is_vllm_platform": isinstance(current_platform, Platform),
        "enum_is_vllm_oot": current_platform._enum is PlatformEnum.OOT,
        "out_of_tree": current_platform.is_out_of_tree(),
        "device_name": current_platform.device_name,
        "device_type": current_platform.device_type,
    }
    if cls.__module__ != "cardcage.platforms.hosts.vllm.adapter":
        return out
    from cardcage.platforms.hosts.vllm.adapter import adapted_class

    vendor = adapted_class(cls)
    vllm_bases = [_name(k) for k in cls.__mro__ if k.__module__.startswith("vllm.")]
    config = types.SimpleNamespace(parallel_config=types.SimpleNamespace(worker_cls="auto"))
    cpu_like = "vllm.platforms.cpu.CpuPlatform" in vllm_bases
    attn_backend = None
    if not cpu_like:
        # vLLM's abstract base leaves the config alone and names no backend. A CPU-like adapter's
        # base (CpuPlatform) needs a real VllmConfig, and it imports the backend it names, which
        # imports vLLM's kernels: scenario-vllm-engine has both.
        current_platform.check_and_update_config(config)
        attn_backend = current_platform.get_attn_backend_cls(None, None)
    capability = cls.get_device_capability()
    arch = cls.get_cpu_architecture()
    out.update(
        vendor_class=_name(vendor) if vendor else None,
        has_device_capability=current_platform.has_device_capability((8, 0)),
        class_has_device_capability=cls.has_device_capability(80),
        device_capability=capability,
        capability_is_vllm_type=capability is None or isinstance(capability, DeviceCapability),
        total_memory=current_platform.get_device_total_memory(0),
        class_total_memory=cls.get_device_total_memory(0),
        attn_backend=attn_backend,
        attn_backend_defined_by=_name(_owner(cls, "get_attn_backend_cls")),
        worker_cls=config.parallel_config.worker_cls,
        vllm_bases=vllm_bases,
        is_cpu=current_platform.is_cpu(),
        kernels_from=_name(cls.import_kernels.__func__),
        cpu_arch=arch.name,
        cpu_arch_is_vllm_enum=isinstance(arch, CpuArchEnum),
        dispatch_key=current_platform.dispatch_key,
        dist_backend=current_platform.dist_backend,
        communicator=cls.get_device_communicator_cls(),
        device_name_of_0=cls.get_device_name(0),
        supported_quantization=current_platform.supported_quantization,
        punica_wrapper=cls.get_punica_wrapper(),
        is_unspecified=current_platform.is_unspecified(),
        device_control_env_var=cls.device_control_env_var,
        base_device_control_env_var=next(
            k for k in cls.__mro__ if k.__module__.startswith("vllm.")
        ).device_control_env_var,
    )
    return out


def step_hooks() -> dict[str, Any]:
    from cardcage.hooks.registry import HookRegistry

    registrations = {
        target: [[r.hook_type.name, list(r.source) if r.source else None] for r in records]
        for target, records in HookRegistry.registrations().items()
    }
    out: dict[str, Any] = {
        "registrations": registrations,
        "applied": sorted(HookRegistry.applied_targets()),
        "pending": HookRegistry.pending_targets(),
    }
    import vllm.platforms

    vllm.platforms.resolve_obj_by_qualname("vllm.platforms.interface.Platform")
    if "cardcage_demo_cpu.hooks" in sys.modules:
        stats = sys.modules["cardcage_demo_cpu.hooks"].STATS
        out["demo_cpu_calls"] = {t: s.calls for t, s in stats.as_dict().items()}
    fixture = sys.modules.get("cc_fixture_vllm_hooks")
    if fixture is not None:
        from vllm.platforms import current_platform

        current_platform.is_sleep_mode_available()
        from vllm.platforms.zen_cpu import ZenCpuPlatform

        ZenCpuPlatform.__new__(ZenCpuPlatform).is_zen_cpu()
        out["fixture_calls"] = list(fixture.CALLS)
        out["applied_after_import"] = sorted(HookRegistry.applied_targets())
    return out


def step_release() -> dict[str, Any]:
    """What this vLLM release is, read from its own classes (for the release table's check)."""
    import inspect

    import vllm
    import vllm.envs
    from vllm.platforms.cpu import CpuPlatform
    from vllm.platforms.interface import Platform

    environ = inspect.getsource(Platform.validate_environ)
    return {
        "version": vllm.__version__,
        # Annotated-only names too (``device_name: str``): every platform sets them.
        "platform_names": sorted({*vars(Platform), *Platform.__annotations__}),
        "cpu_config_raises_without_triton": "raise RuntimeError"
        in inspect.getsource(CpuPlatform.check_and_update_config).split("HAS_TRITON", 1)[-1][:400],
        "removed_env_table": hasattr(vllm.envs, "removed_environment_variables"),
        "removed_env": sorted(getattr(vllm.envs, "removed_environment_variables", {})),
        # validate_environ's own rule for the V1 model runner's variable (0.34 on).
        "refuses_v1_runner": "no longer supported"
        in (environ.split("VLLM_USE_V2_MODEL_RUNNER", 1)[1:] or [""])[0][:400],
    }


STEPS = {
    "load": step_load,
    "platform": step_platform,
    "hooks": step_hooks,
    "release": step_release,
}


def main(argv: list[str]) -> int:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    results = []
    for name in argv:
        try:
            results.append({"step": name, "ok": True, **STEPS[name]()})
        except Exception as exc:
            logging.getLogger("probe").exception("step %s failed", name)
            results.append(
                {
                    "step": name,
                    "ok": False,
                    "error": f"{type(exc).__name__}: {exc}",
                    "error_type": _name(type(exc)),
                    "fields": {
                        k: getattr(exc, k, None) for k in ("group", "plugin", "distribution")
                    },
                }
            )
            break
    watched = ("cardcage_demo_cpu", "cc_fixture_vllm_hooks", "cc_fixture_vllm_broken",
               "cc_fixture_vllm_platform")  # fmt: skip
    report = {
        "results": results,
        "modules": sorted(m for m in sys.modules if m.split(".")[0] in watched),
    }
    print(json.dumps(report, default=str))
    return 0 if all(r["ok"] for r in results) else STEP_FAILED


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
