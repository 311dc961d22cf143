"""Shared helpers for the hook-registry tests: synthetic modules and isolated registries.

Every test gets its own registry class (``class _R(BaseHookRegistry)``), so nothing a test
registers or patches can leak into ``HookRegistry`` or into another test. Synthetic modules are
created from source text under unique names (``_cc_synth_<hex>``) and removed from
``sys.modules`` when the test ends. Test modules import the fixtures explicitly; each one is
registered under its short name (``registry``, ``synth``, ``module_tree``):

    from registry_support import registry_fixture, synth_fixture  # noqa: F401
"""

from __future__ import annotations

import importlib
import sys
import textwrap
import types
import uuid
from typing import TYPE_CHECKING

import pytest

from cardcage.hooks.registry import BaseHookRegistry

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

__all__ = [
    "REGISTRY_LOGGER",
    "ModuleTree",
    "SyntheticModules",
    "messages",
    "module_tree_fixture",
    "registry_fixture",
    "synth_fixture",
    "unique_name",
]

REGISTRY_LOGGER = "cardcage.hooks.registry"


def unique_name(prefix: str = "_cc_synth_") -> str:
    """A module name no other test (or earlier run of this test) uses."""
    return f"{prefix}{uuid.uuid4().hex}"


class SyntheticModules:
    """Creates real module objects from source text and forgets them afterwards."""

    def __init__(self) -> None:
        self._names: list[str] = []

    def make(self, source: str = "", *, name: str | None = None) -> types.ModuleType:
        """Create, register in ``sys.modules`` and execute a module; return it.

        Functions defined in ``source`` get the module's name as ``__module__``, like any
        imported module, so propagation treats them as that module's own.
        """
        module_name = name if name is not None else unique_name()
        if module_name in sys.modules:
            raise RuntimeError(f"synthetic module name {module_name!r} is already taken")
        module = types.ModuleType(module_name)
        module.__file__ = f"<{module_name}>"
        sys.modules[module_name] = module
        self._names.append(module_name)
        code = compile(textwrap.dedent(source), module.__file__, "exec")
        exec(code, module.__dict__)
        return module

    def cleanup(self) -> None:
        for module_name in reversed(self._names):
            sys.modules.pop(module_name, None)
        self._names.clear()


class ModuleTree:
    """Writes importable packages under a directory on ``sys.path``; nothing is imported."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._tops: list[str] = []

    def write(self, files: dict[str, str]) -> None:
        """Write ``{"pkg/sub/mod.py": source}`` files under the root."""
        for relative, source in files.items():
            path = self.root / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(textwrap.dedent(source), encoding="utf-8")
            top = relative.split("/", 1)[0].removesuffix(".py")
            if top not in self._tops:
                self._tops.append(top)
        importlib.invalidate_caches()

    def cleanup(self) -> None:
        for top in self._tops:
            for loaded in [m for m in sys.modules if m == top or m.startswith(top + ".")]:
                del sys.modules[loaded]


def messages(caplog: pytest.LogCaptureFixture, level: int) -> list[str]:
    """Messages the registry logged at exactly ``level``."""
    return [
        r.getMessage() for r in caplog.records if r.name == REGISTRY_LOGGER and r.levelno == level
    ]


@pytest.fixture(name="synth")
def synth_fixture() -> Iterator[SyntheticModules]:
    modules = SyntheticModules()
    try:
        yield modules
    finally:
        modules.cleanup()


@pytest.fixture(name="registry")
def registry_fixture() -> Iterator[type[BaseHookRegistry]]:
    """A registry with its own state; everything it patched is restored afterwards."""

    class _R(BaseHookRegistry):
        pass

    try:
        yield _R
    finally:
        _R.reset()


@pytest.fixture(name="module_tree")
def module_tree_fixture(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleTree]:
    """Packages written to ``tmp_path``, importable by name, unloaded after the test."""
    tree = ModuleTree(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        yield tree
    finally:
        tree.cleanup()
