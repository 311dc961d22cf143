"""Start a host process, import the fixture host, and print what early patches did, as JSON.

Run by ``test_early_patches.py`` in a fresh interpreter per case: early patches run at
interpreter start (the ``.pth`` line of cardcage-core-hooks), steered by the environment, so
each case needs its own process. ``--spawn`` also starts a ``multiprocessing`` spawn child and
reports what the host looks like there; ``--unapply`` undoes the early patches at the end and
reports the host again.
"""

from __future__ import annotations

import importlib
import json
import multiprocessing
import sys
from typing import Any


def host_view() -> dict[str, Any]:
    """What the fixture host computed while importing, and what its calls return now."""
    topk = importlib.import_module("cc_early_host.topk")
    config = importlib.import_module("cc_early_host.config")
    quant = importlib.import_module("cc_early_host.quant")
    layernorm = importlib.import_module("cc_early_host.layernorm")
    platform_info = importlib.import_module("cc_early_host.platform_info")
    try:
        kernel: object = layernorm.fused_add_rms_norm(1.0, 2.0, 3.0, 4.0)
    except TypeError as exc:
        kernel = f"TypeError: {exc}"
    return {
        "config_is_cpu": config._is_cpu,
        "topk_is_cpu": topk._is_cpu,
        "device": topk.DEVICE,
        "backend": topk.topk.backend,
        "backend_now": platform_info.compiler_backend(),
        "vendor": config.VENDOR,
        "have_accel": quant.HAVE_ACCEL,
        "accel_name": quant.ACCEL_NAME,
        "kernel": kernel,
        "early_imported": "cardcage.hooks.early" in sys.modules,
        "modules": sorted(m for m in sys.modules if m.startswith(("cc_fixture", "cc_missing"))),
    }


def _child(queue: Any) -> None:
    queue.put(host_view())


def spawn_child() -> dict[str, Any]:
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    process = context.Process(target=_child, args=(queue,))
    process.start()
    view: dict[str, Any] = queue.get(timeout=60)
    process.join(60)
    return view


def main() -> int:
    out: dict[str, Any] = {
        # Before anything here imports cardcage: only the .pth line can have loaded these.
        "at_start": sorted(
            m for m in sys.modules if m.startswith(("cardcage", "cc_fixture", "cc_early"))
        ),
    }
    out["host"] = host_view()
    if "--spawn" in sys.argv:
        out["child"] = spawn_child()
    from cardcage.hooks import early, load_plugins

    report = early.report()
    out["early"] = {
        "requested": list(report.requested),
        "booted": report.booted,
        "error": report.error,
        "plugins": {p.name: [p.status, p.dist_name, p.detail] for p in report.plugins},
        "patches": [
            [p.kind, p.target, p.status, p.plugin, p.dist_name, p.pending_module, p.error]
            for p in report.patches
        ],
        "failures": [[f.plugin, f.dist_name, f.step] for f in early.failures()],
    }
    try:
        plugins = load_plugins()
    except Exception as exc:
        out["load_error"] = {
            "type": type(exc).__name__,
            "mro": [k.__name__ for k in type(exc).__mro__],
            "message": str(exc),
            "fields": {k: getattr(exc, k, None) for k in ("plugin", "distribution", "group")},
        }
    else:
        out["selection"] = None if plugins.selection is None else plugins.selection.dist_name
    if "--unapply" in sys.argv:
        early.unapply()
        for name in ("cc_early_host.topk", "cc_early_host.quant", "cc_early_host.layernorm"):
            sys.modules.pop(name, None)  # re-import them over the restored modules
        out["after_unapply"] = host_view()
    print(json.dumps(out, default=repr))
    return 0


if __name__ == "__main__":
    sys.exit(main())
