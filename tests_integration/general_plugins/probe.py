"""Run one runtime start-up (load_plugins) in this process and print what happened as JSON.

The scenario tests run this in a fresh subprocess per case, because plugin loading is once per
process and steered by environment variables read at start-up.
"""

from __future__ import annotations

import json
import logging
import sys


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.records: list[dict[str, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(
            {
                "logger": record.name,
                "level": record.levelname,
                "message": record.getMessage(),
                "traceback": self.format(record) if record.exc_info else "",
            }
        )


def main() -> int:
    collect = _Collect()
    logging.getLogger("cardcage").addHandler(collect)
    logging.getLogger("cardcage").setLevel(logging.DEBUG)

    from cardcage.hooks import load_plugins

    out: dict[str, object] = {}
    try:
        report = load_plugins()
    except Exception as exc:
        out["error"] = {"type": type(exc).__name__, "message": str(exc)}
        out["error_fields"] = {
            k: getattr(exc, k, None) for k in ("plugin", "distribution", "group", "targets")
        }
    else:
        out["plugins"] = {p.name: p.status for p in report.plugins}
        out["selection"] = (
            None
            if report.selection is None
            else [report.selection.entry_point, report.selection.dist_name]
        )
        out["failed_targets"] = sorted(report.apply.failed) if report.apply else []
        import cc_fixture_target

        out["compute"] = cc_fixture_target.compute(2)
        out["greet"] = cc_fixture_target.greet("ada")
    out["modules"] = sorted(m for m in sys.modules if m.startswith("cc_fixture"))
    out["logs"] = collect.records
    print(json.dumps(out, default=list))
    return 0


if __name__ == "__main__":
    sys.exit(main())
