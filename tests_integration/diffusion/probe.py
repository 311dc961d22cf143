"""Start a diffusion worker's platform and plugin phases in this interpreter; report JSON.

Usage: ``probe.py STEP [STEP ...]``, each STEP one of

* ``select``: ``get_current_platform()`` (the first access selects the platform);
* ``load``: ``plugins.load_plugins()`` (phase 1: import the general plugins, run register());
* ``apply``: ``plugins.apply_plugin_hooks()`` (phase 2, implies phase 1);
* ``init``: ``initialize_current_platform()`` (the platform's init_backend(), once per process);
* ``greet``: call the hooked fixture function ``cc_diff_target.greet("ada")``.

Each scenario case runs this in a fresh interpreter with its own environment and PYTHONPATH (the
fixture sites it wants installed), because selection and both plugin phases are once per process
and steered by variables read at start-up. Every step runs, in order, even after one failed (a
worker calling ``initialize_current_platform()`` again must see the same failure); each result
records the error, if any, and which earlier step's exception it was chained from. The report
ends with the vendor modules in ``sys.modules``, whether torch was imported and, when demo-cpu's
diffusion half ran, its evidence counters. Exit status: 0
when every step succeeded, ``STARTUP_FAILED`` when one raised.
"""

from __future__ import annotations

import json
import logging
import sys
from typing import Any

STARTUP_FAILED = 3
WATCHED = ("cc_diff", "cardcage_demo")


def _error(exc: BaseException, earlier: list[BaseException | None]) -> dict[str, Any]:
    cause = exc.__cause__
    return {
        "type": type(exc).__name__,
        "message": str(exc),
        "plugin": getattr(exc, "plugin", None),
        "distribution": getattr(exc, "distribution", None),
        "cause": type(cause).__name__ if cause is not None else None,
        # Index of the earlier step whose exception this one was raised from, if any.
        "cause_of_step": next((i for i, e in enumerate(earlier) if e is cause), None)
        if cause is not None
        else None,
    }


def _select() -> dict[str, Any]:
    from cardcage.diffusion.runtime import platforms

    platform = platforms.get_current_platform()
    record = platforms.get_selection_record()
    assert record is not None
    return {
        "platform": f"{type(platform).__module__}.{type(platform).__qualname__}",
        "device_name": platform.device_name,
        "out_of_tree": platform.is_out_of_tree(),
        "dist": platforms.get_selected_platform_dist(),
        "mode": record.mode,
        "plugin": record.plugin_name,
        "reason": record.reason,
        "candidates": {f"{c.kind}:{c.name}": c.outcome for c in record.candidates},
    }


def _plugins(apply: bool) -> dict[str, Any]:
    from cardcage.diffusion.runtime.platforms import plugins

    report = plugins.apply_plugin_hooks() if apply else plugins.load_plugins()
    out: dict[str, Any] = {"plugins": {p.name: p.status for p in report.plugins}}
    if report.apply is not None:
        out["applied"] = sorted(report.apply.applied)
        out["failed"] = sorted(report.apply.failed)
    return out


def _init() -> dict[str, Any]:
    from cardcage.diffusion.runtime.platforms import initialize_current_platform

    initialize_current_platform()
    return {}


def _greet() -> dict[str, Any]:
    import cc_diff_target

    return {"greet": cc_diff_target.greet("ada")}


STEPS = {
    "select": _select,
    "load": lambda: _plugins(apply=False),
    "apply": lambda: _plugins(apply=True),
    "init": _init,
    "greet": _greet,
}


def main(argv: list[str]) -> int:
    unknown = [s for s in argv if s not in STEPS]
    if not argv or unknown:
        print(f"usage: probe.py {{{'|'.join(STEPS)}}} ...; unknown: {unknown}", file=sys.stderr)
        return 2
    # What an operator sees: warnings and errors on stderr (the tests read the JSON on stdout).
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    results: list[dict[str, Any]] = []
    raised: list[BaseException | None] = []
    for step in argv:
        try:
            result = {"step": step, "ok": True, **STEPS[step]()}
            raised.append(None)
        except Exception as exc:
            result = {"step": step, "ok": False, "error": _error(exc, raised)}
            raised.append(exc)
        results.append(result)
    report = {
        "results": results,
        "modules": sorted(m for m in sys.modules if m.startswith(WATCHED)),
        "torch_imported": "torch" in sys.modules,
    }
    demo = sys.modules.get("cardcage_demo_cpu.diffusion.evidence")
    if demo is not None:  # demo-cpu's own counters: init_backend, register, dispatch, forward
        report["demo_cpu_evidence"] = demo.EVIDENCE.as_dict()
    print(json.dumps(report))
    return STARTUP_FAILED if any(e is not None for e in raised) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
