"""Start a runtime process the way SRT does (platform, then general plugins) and report as JSON.

Each scenario case runs this in a fresh interpreter with its own environment and PYTHONPATH (the
fixture sites it wants installed), because platform selection and plugin loading are once per
process and steered by variables read at start-up.
"""

from __future__ import annotations

import json
import sys
from typing import Any

WATCHED = ("cc_plat", "cardcage_demo", "cc_fixture")


def _error(exc: BaseException) -> dict[str, Any]:
    return {
        "type": type(exc).__name__,
        "bases": [klass.__name__ for klass in type(exc).__mro__[1:]],
        "message": str(exc),
        "plugin": getattr(exc, "plugin", None),
        "distribution": getattr(exc, "distribution", None),
        "cause": type(exc.__cause__).__name__ if exc.__cause__ else None,
    }


def main() -> int:
    out: dict[str, Any] = {}
    try:
        from cardcage.platforms import current_platform

        out["platform"] = f"{type(current_platform).__module__}.{type(current_platform).__name__}"
        out["device_name"] = current_platform.device_name
        out["out_of_tree"] = current_platform.is_out_of_tree()
    except Exception as exc:
        out["error"] = _error(exc)
    else:
        from cardcage.hooks import load_plugins

        try:
            report = load_plugins()
        except Exception as exc:
            out["load_error"] = _error(exc)
        else:
            out["plugins"] = {p.name: p.status for p in report.plugins}
            out["excluded_reason"] = report.selection.reason if report.selection else None
            import cc_fixture_target

            out["greet"] = cc_fixture_target.greet("ada")
        demo = sys.modules.get("cardcage_demo_cpu.hooks")
        if demo is not None:
            from cardcage.platforms import get_current_platform

            get_current_platform()
            out["demo_cpu_platform_calls"] = demo.STATS.get(demo.PLATFORM_ACCESS).calls
    out["modules"] = sorted(m for m in sys.modules if m.startswith(WATCHED))
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
