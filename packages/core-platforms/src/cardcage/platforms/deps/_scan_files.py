"""Finding the Python files an installed distribution ships, for ``plugin_scan``.

A wheel install lists its files in ``RECORD`` (``dist.files``). An editable install (PEP 660)
lists only a ``.pth`` file and perhaps a finder module: the code stays in the project's source
tree, and the installer's files say where. Both layouts must give the same display paths
(``pkg/module.py``, relative to the directory the import package lives in), so a report does not
depend on how the vendor installed its plugin.

Reads files only: it must never import the distribution, its finder modules, or a host.
Import-safe: stdlib only.
"""

from __future__ import annotations

import ast
import importlib.util
import logging
import os
from collections.abc import Iterator
from importlib.metadata import Distribution
from pathlib import Path, PurePosixPath

__all__ = ["distribution_sources"]

logger = logging.getLogger(__name__)

#: Installer machinery an editable install puts in site-packages: read for where the code is,
#: never scanned as the plugin's code. setuptools: ``__editable__.*.finder.py`` (in RECORD as
#: ``__editable___<name>_finder.py``); editables (hatchling's exact mode): ``_editable_impl_*.py``.
_FINDER_PREFIXES = ("__editable__", "_editable_impl_")

#: Marks a project root: when a ``.pth`` names one (a flat layout), these top-level entries are
#: the project's housekeeping, not what the distribution ships.
_PROJECT_MARKERS = ("pyproject.toml", "setup.py", "setup.cfg")
_PROJECT_HOUSEKEEPING = frozenset(
    {
        "tests", "test", "docs", "doc", "build", "dist", "examples", "benchmarks", "scripts",
        "setup.py", "conftest.py", "noxfile.py",
    }
)  # fmt: skip


def distribution_sources(dist: Distribution) -> list[tuple[str, str]]:
    """Every ``.py`` file of ``dist``, as (display path, text), sorted by display path."""
    found: dict[str, Path] = {}
    files = dist.files
    if files is None:
        logger.warning(
            "Distribution %s lists no files (no RECORD): nothing of it can be scanned.",
            dist.name,
        )
        return []
    for entry in files:
        relative = PurePosixPath(str(entry))
        if ".." in relative.parts or relative.parts[0].endswith((".dist-info", ".egg-info")):
            continue  # scripts outside site-packages, and the metadata itself
        located = Path(str(dist.locate_file(entry)))
        if relative.suffix == ".pth":
            for root in _pth_directories(located):
                _add_all(found, _walk_path_entry(root))
        elif relative.suffix == ".py" and relative.name.startswith(_FINDER_PREFIXES):
            for name, target in _finder_mapping(located):
                _add_all(found, _walk_package(name, target))
        elif relative.suffix == ".py":
            found.setdefault(str(relative), located)
    sources: list[tuple[str, str]] = []
    for display in sorted(found):
        text = _read_source(found[display])
        if text is not None:
            sources.append((display, text))
    return sources


def _add_all(found: dict[str, Path], pairs: Iterator[tuple[str, Path]]) -> None:
    for display, path in pairs:
        found.setdefault(display, path)


def _read_source(path: Path) -> str | None:
    """The text of a source file, decoded as Python does (PEP 263 coding line, BOM)."""
    try:
        return importlib.util.decode_source(path.read_bytes())
    except (OSError, UnicodeDecodeError, SyntaxError) as exc:
        logger.warning("Cannot read %s (%s): it is left out of the scan.", path, exc)
        return None


def _pth_directories(pth: Path) -> list[Path]:
    """The directories a ``.pth`` file adds to ``sys.path`` (its ``import`` lines are skipped).

    Relative lines are relative to the ``.pth``'s own directory, as ``site`` reads them.
    """
    try:
        lines = pth.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        logger.warning("Cannot read %s (%s): its directories are not scanned.", pth, exc)
        return []
    directories: list[Path] = []
    for raw in lines:
        line = raw.strip()
        if not line or line.startswith(("#", "import ", "import\t")):
            continue
        directory = pth.parent / line
        if directory.is_dir():
            directories.append(directory)
        else:
            logger.warning("%s names %s, which is not a directory: not scanned.", pth, line)
    return directories


def _walk_path_entry(root: Path) -> Iterator[tuple[str, Path]]:
    """The import packages and modules directly in a ``sys.path`` directory, walked.

    Only importable names are taken (identifiers; namespace packages included), so a source
    directory's ``*.egg-info`` or dot-directories never are. When the directory is a project root
    (flat layout), its tests, docs and build scripts are not part of what the distribution ships.
    """
    is_project_root = any((root / marker).is_file() for marker in _PROJECT_MARKERS)
    for child in sorted(root.iterdir()):
        if is_project_root and child.name in _PROJECT_HOUSEKEEPING:
            continue
        if child.is_dir() and child.name.isidentifier():
            yield from _walk_package(child.name, child)
        elif (
            child.is_file()
            and child.suffix == ".py"
            and child.stem.isidentifier()
            and not child.name.startswith(_FINDER_PREFIXES)
        ):
            yield child.name, child


def _walk_package(name: str, target: Path) -> Iterator[tuple[str, Path]]:
    """Every ``.py`` under an import package's directory (or the one file of a module).

    ``name`` is the import name (``pkg`` or ``pkg.sub``), so the display path is the one a wheel
    install of the same code gives. Subdirectories that are not identifiers are not importable
    and are skipped, as is ``__pycache__``.
    """
    prefix = PurePosixPath(*name.split("."))
    if target.is_file():
        if target.name == "__init__.py":
            target = target.parent
        else:
            yield str(prefix.with_suffix(".py")), target
            return
    if not target.is_dir():
        logger.warning("Editable package %s points at %s, which is missing.", name, target)
        return
    for directory, subdirs, filenames in os.walk(target):
        subdirs[:] = sorted(d for d in subdirs if d.isidentifier() and d != "__pycache__")
        here = PurePosixPath(prefix, *Path(directory).relative_to(target).parts)
        for filename in sorted(filenames):
            if filename.endswith(".py"):
                yield str(here / filename), Path(directory, filename)


def _finder_mapping(finder: Path) -> list[tuple[str, Path]]:
    """(import name, path) pairs an editable finder module maps, read without importing it.

    setuptools writes ``MAPPING = {'pkg': '/src/pkg', ...}``; editables writes one
    ``F.map_module('pkg', '/src/pkg/__init__.py')`` call per package.
    """
    try:
        tree = ast.parse(finder.read_text(encoding="utf-8"), filename=str(finder))
    except (OSError, UnicodeDecodeError, SyntaxError, ValueError) as exc:
        logger.warning("Cannot read the editable finder %s (%s): not followed.", finder, exc)
        return []
    pairs: list[tuple[str, Path]] = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == "MAPPING" for t in node.targets)
            and isinstance(node.value, ast.Dict)
        ):
            for key, value in zip(node.value.keys, node.value.values, strict=True):
                name, path = _str_value(key), _str_value(value)
                if name is not None and path is not None:
                    pairs.append((name, Path(path)))
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "map_module"
            and len(node.args) == 2
        ):
            name, path = _str_value(node.args[0]), _str_value(node.args[1])
            if name is not None and path is not None:
                pairs.append((name, Path(path)))
    return pairs


def _str_value(node: ast.expr | None) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None
