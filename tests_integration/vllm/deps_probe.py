"""What one vLLM release really does with a plugin distribution: run in that release's process.

Usage: ``deps_probe.py [--import MODULE ...] [--variable NAME ...]``; one JSON document on
stdout. In order, as vLLM's own start-up does:

* ``vllm.plugins.load_general_plugins()``, vLLM's general-plugin loader: it imports every
  ``vllm.general_plugins`` entry point (an entry point whose module fails to import is logged
  and skipped) and calls each ``register()``;
* ``vllm.platforms.current_platform``, vLLM's platform selection;
* each ``--import MODULE``, the module a hook target lives in, imported as vLLM's workers and
  model runners import it (a hook on a module nobody imported cannot have run); the error, if
  the release has no such module;
* ``cardcage.platforms.in_effect()``: each hook the plugins registered, with its state now;
* each ``--variable NAME``: what ``vllm.envs`` reads for it, and whether vLLM's start-up check
  of the environment (``current_platform.validate_environ``, as ``EngineArgs`` calls it, with
  vLLM's default ``hard_fail=False``) accepts the environment the plugins left.

No vLLM module is stubbed or patched here.
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import sys
from typing import Any


def _error(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--import", dest="modules", action="append", default=[])
    parser.add_argument("--variable", dest="variables", action="append", default=[])
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr)

    import vllm
    import vllm.plugins

    vllm.plugins.load_general_plugins()
    from vllm.platforms import current_platform

    platform = type(current_platform)
    imports: dict[str, str | None] = {}
    for module in args.modules:
        try:
            importlib.import_module(module)
            imports[module] = None
        except Exception as exc:
            imports[module] = _error(exc)

    from cardcage.platforms import in_effect

    hooks = [
        {k: row[k] for k in ("target", "type", "plugin", "distribution", "state", "in_effect")}
        for row in in_effect()["hooks"]
    ]
    import vllm.envs

    variables: dict[str, dict[str, Any]] = {}
    for name in args.variables:
        try:
            variables[name] = {"read": True, "value": getattr(vllm.envs, name), "error": None}
        except AttributeError as exc:
            variables[name] = {"read": False, "value": None, "error": _error(exc)}
    try:
        current_platform.validate_environ(False)
        startup_error = None
    except ValueError as exc:
        startup_error = _error(exc)
    report = {
        "version": vllm.__version__,
        "platform": f"{platform.__module__}.{platform.__qualname__}",
        "imports": imports,
        "hooks": hooks,
        "variables": variables,
        "environ_refused": startup_error,
    }
    print(json.dumps(report, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
