"""Import SGLang 0.5.23's own modules here and report, as JSON, what early patches did to them.

Usage: ``early_probe.py STEP [STEP ...]``, each STEP one of

* ``start``: what interpreter start left behind, before this script imports anything of SGLang
  or of cardcage: whether the ``.pth`` line imported ``cardcage.hooks.early``, whether SGLang
  is imported, the calls the fixture's counting hook has seen;
* ``srt-import``: ``import sglang.srt.sampling.penaltylib.repetition_penalty``, whose module
  body calls ``get_compiler_backend()`` in a ``@torch.compile(backend=...)`` decorator;
* ``srt-load``: SGLang's ``sglang.srt.plugins.load_plugins()``, the ordinary route of a hook;
* ``srt-call``: one call of ``sglang.srt.utils.common.get_compiler_backend()`` from here;
* ``diffusion``: ``import sglang.multimodal_gen.runtime.layers.layernorm``, then SGLang's
  ``RMSNorm`` built and called on a bf16 CPU tensor (its ``__init__`` picks a forward method
  from the module's ``USE_AITER``);
* ``srt-platform``: SGLang's SRT ``current_platform`` (``import sglang`` resolves it), and what
  it raised, if anything: the failure policy's ``EarlyPatchError`` reaches the caller here;
* ``report``: ``cardcage.hooks.early.report()``, if the ``.pth`` line imported it.

Every step reports the counting hook's calls so far (the caller module of each), so a test sees
which calls happened while SGLang imported and which after. The test starts this in a fresh
interpreter per case: early patches run at interpreter start, steered by the environment.
Nothing of SGLang is stubbed. Exit status 0 when every step succeeded, 3 when one raised.
"""

from __future__ import annotations

import importlib
import json
import sys
from typing import Any

STEP_FAILED = 3
EARLY = "cardcage.hooks.early"
COUNTING = "cc_fixture_sglang_early.counting"
KERNELS = "cc_fixture_sglang_early.aiter_kernels"
REPETITION_PENALTY = "sglang.srt.sampling.penaltylib.repetition_penalty"
LAYERNORM = "sglang.multimodal_gen.runtime.layers.layernorm"
AITER_FLAGS = "sglang.multimodal_gen.runtime.platforms.aiter"


def _calls() -> list[str]:
    counting = sys.modules.get(COUNTING)
    return list(counting.CALLS) if counting is not None else []


def _start() -> dict[str, Any]:
    return {"early_imported": EARLY in sys.modules, "sglang_imported": "sglang" in sys.modules}


def _srt_import() -> dict[str, Any]:
    importlib.import_module(REPETITION_PENALTY)
    plugins = sys.modules.get("sglang.srt.plugins")
    return {"sglang_plugins_loaded": bool(getattr(plugins, "_plugins_loaded", False))}


def _srt_load() -> dict[str, Any]:
    from sglang.srt.plugins import load_plugins
    from sglang.srt.plugins.hook_registry import HookRegistry

    load_plugins()
    hooks = HookRegistry._hooks.get("sglang.srt.utils.common.get_compiler_backend", [])
    return {
        "sglang_hooks": [
            [t.name, None if s is None else [s.plugin_name, s.dist_name]] for t, _, s in hooks
        ]
    }


def _srt_call() -> dict[str, Any]:
    from sglang.srt.utils.common import get_compiler_backend

    return {"backend": str(get_compiler_backend())}


def _diffusion() -> dict[str, Any]:
    import torch

    layernorm = importlib.import_module(LAYERNORM)
    norm = layernorm.RMSNorm(8)
    with torch.no_grad():
        # bf16: SGLang's aiter branch hands fp32 back to its native path.
        out = norm(torch.full((2, 8), 3.0, dtype=torch.bfloat16))
    aiter_module = sys.modules.get("aiter")
    kernels = sys.modules.get(KERNELS)
    rms_norm = getattr(layernorm, "rms_norm", None)
    return {
        "flag_module_use_aiter": sys.modules[AITER_FLAGS].USE_AITER,
        "layernorm_use_aiter": layernorm.USE_AITER,
        "layernorm_rms_norm": None if rms_norm is None else rms_norm.__module__,
        "forward_method": norm._forward_method.__name__,
        "output_is_normalized": bool(torch.allclose(out.float(), torch.ones(2, 8), atol=1e-2)),
        "aiter_is_stand_in": hasattr(aiter_module, "__cardcage_stand_in__"),
        "stand_in_kernel_calls": list(kernels.CALLS) if kernels is not None else [],
    }


def _srt_platform() -> dict[str, Any]:
    try:
        from sglang.srt import platforms

        platform = platforms.current_platform
    except Exception as exc:
        return {
            "raised": type(exc).__name__,
            "message": str(exc),
            "plugin": getattr(exc, "plugin", None),
            "distribution": getattr(exc, "distribution", None),
        }
    return {"raised": None, "class": f"{type(platform).__module__}.{type(platform).__qualname__}"}


def _report() -> dict[str, Any]:
    early = sys.modules.get(EARLY)
    if early is None:
        return {"early": None}
    report = early.report()
    return {
        "early": {
            "booted": report.booted,
            "plugins": [[p.name, p.dist_name, p.status] for p in report.plugins],
            "patches": {
                p.target: {
                    "kind": p.kind,
                    "source": [p.plugin, p.dist_name],
                    "status": p.status,
                    "detail": p.detail,
                }
                for p in report.patches
            },
            "failures": [f.line() for f in early.failures()],
        }
    }


STEPS = {
    "start": _start,
    "srt-import": _srt_import,
    "srt-load": _srt_load,
    "srt-call": _srt_call,
    "diffusion": _diffusion,
    "srt-platform": _srt_platform,
    "report": _report,
}


def main(argv: list[str]) -> int:
    unknown = [s for s in argv if s not in STEPS]
    if not argv or unknown:
        print(f"usage: early_probe.py {' '.join(STEPS)} ...; unknown: {unknown}", file=sys.stderr)
        return 2
    results: list[dict[str, Any]] = []
    failed = False
    for step in argv:
        try:
            result = {"step": step, "ok": True, **STEPS[step]()}
        except Exception as exc:
            result = {"step": step, "ok": False, "error": f"{type(exc).__name__}: {exc}"}
            failed = True
        result["calls"] = _calls()
        results.append(result)
    print(json.dumps({"results": results}))
    return STEP_FAILED if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
