"""Fail when one cardcage distribution imports another distribution's private module.

What a distribution offers the others is its public modules (names without a leading ``_``),
documented in docs/index.md ("Import paths"). A private module may change in any release, so a
sibling that imported it would break when installed beside a newer or older release of it. The
``lint`` nox session runs this over every package's ``src``; it reads the source with ``ast``
and imports nothing.

    python tools/check_import_boundaries.py [REPO_ROOT]
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path


def _owners(root: Path) -> dict[str, str]:
    """Each cardcage package (``cardcage.hooks``, ...) -> the distribution folder that holds it."""
    owners: dict[str, str] = {}
    for package in sorted((root / "packages").glob("*/src/cardcage/*/__init__.py")):
        owners[f"cardcage.{package.parent.name}"] = package.parents[3].name
    return owners


def _imported_modules(tree: ast.AST) -> list[tuple[int, str]]:
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
            found += [(node.lineno, f"{node.module}.{alias.name}") for alias in node.names]
    return found


def violations(root: Path) -> list[str]:
    owners = _owners(root)
    problems: list[str] = []
    for source in sorted((root / "packages").glob("*/src/**/*.py")):
        distribution = source.relative_to(root / "packages").parts[0]
        tree = ast.parse(source.read_text(encoding="utf-8"), filename=str(source))
        for line, module in _imported_modules(tree):
            parts = module.split(".")
            owner = owners.get(".".join(parts[:2]))
            if owner is None or owner == distribution:
                continue
            if any(part.startswith("_") and not part.endswith("__") for part in parts[2:]):
                where = source.relative_to(root)
                problems.append(
                    f"{where}:{line}: imports {module} (private to packages/{owner}); use a public "
                    "module of that distribution, or make the module public and document it in "
                    "docs/index.md#import-paths"
                )
    return problems


def main() -> int:
    root = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[1]
    problems = violations(root)
    for problem in problems:
        print(problem, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
