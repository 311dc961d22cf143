"""Test helpers for runtimes and plugin authors: hermetic hooks and real fake distributions.

* ``isolated_hooks(registry)`` / the ``hook_sandbox`` pytest fixture: hooks registered and applied
  inside are undone afterwards, so one test's patches never leak into the next.
* ``write_distribution(site, name, entry_points=..., modules=...)``: writes a real
  ``<name>-<version>.dist-info`` (METADATA and entry_points.txt) plus module files into a
  directory, so discovery is tested exactly as for an installed wheel, never by mocking
  ``importlib.metadata``. ``on_sys_path(site)`` puts it on ``sys.path`` and rescans.

Use the fixture by importing it into a test module or conftest.py
(``from cardcage.hooks.testing import hook_sandbox``), or list ``"cardcage.hooks.testing"`` in a
top-level conftest.py's ``pytest_plugins``.
"""

from __future__ import annotations

import contextlib
import importlib
import sys
import textwrap
from typing import TYPE_CHECKING

from .loader import reset_plugin_state
from .profile import SRT_PROFILE
from .registry import BaseHookRegistry, HookRegistry
from .snapshot import entry_point_snapshot, install_snapshot, normalize_dist_name, refresh

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping
    from pathlib import Path

__all__ = ["hook_sandbox", "isolated_hooks", "on_sys_path", "write_distribution"]


@contextlib.contextmanager
def isolated_hooks(
    registry: type[BaseHookRegistry] = HookRegistry,
) -> Iterator[type[BaseHookRegistry]]:
    """Undo, on exit, every registration and patch made inside the block."""
    with registry.sandbox():
        yield registry


def write_distribution(
    site: Path,
    name: str,
    *,
    version: str = "0.1.0",
    entry_points: Mapping[str, Mapping[str, str]] | None = None,
    modules: Mapping[str, str] | None = None,
) -> Path:
    """Write distribution ``name`` into ``site``; return its ``.dist-info`` directory.

    ``entry_points`` maps group to ``{entry-point name: "module:attr"}``; ``modules`` maps a
    dotted module name to its source (packages get an ``__init__.py``).
    """
    dist_info = site / f"{normalize_dist_name(name)}-{version}.dist-info"
    dist_info.mkdir(parents=True, exist_ok=True)
    (dist_info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n", encoding="utf-8"
    )
    sections = []
    for group, points in (entry_points or {}).items():
        lines = "".join(f"{key} = {value}\n" for key, value in points.items())
        sections.append(f"[{group}]\n{lines}")
    (dist_info / "entry_points.txt").write_text("\n".join(sections), encoding="utf-8")
    for module, source in (modules or {}).items():
        parts = module.split(".")
        folder = site.joinpath(*parts[:-1])
        folder.mkdir(parents=True, exist_ok=True)
        for depth in range(1, len(parts)):
            init = site.joinpath(*parts[:depth], "__init__.py")
            if not init.exists():
                init.write_text("", encoding="utf-8")
        (folder / f"{parts[-1]}.py").write_text(textwrap.dedent(source), encoding="utf-8")
    importlib.invalidate_caches()
    return dist_info


@contextlib.contextmanager
def on_sys_path(site: Path) -> Iterator[None]:
    """Prepend ``site`` to ``sys.path`` and rescan entry points; undo both on exit.

    Modules imported from ``site`` are removed from ``sys.modules`` on exit, and the SRT
    loader's once-per-process state is reset, so the next test starts clean.
    """
    before = entry_point_snapshot()
    path = str(site)
    sys.path.insert(0, path)
    importlib.invalidate_caches()
    refresh()
    try:
        yield
    finally:
        if path in sys.path:
            sys.path.remove(path)
        for module_name, module in list(sys.modules.items()):
            module_file = getattr(module, "__file__", None) or ""
            if module_file.startswith(path):
                del sys.modules[module_name]
        install_snapshot(before)
        reset_plugin_state(SRT_PROFILE, HookRegistry)


try:
    import pytest
except ImportError:  # pragma: no cover - pytest is optional
    pass
else:

    @pytest.fixture
    def hook_sandbox() -> Iterator[type[BaseHookRegistry]]:
        """The SRT ``HookRegistry``, with everything done to it undone after the test."""
        with isolated_hooks(HookRegistry) as registry:
            yield registry
