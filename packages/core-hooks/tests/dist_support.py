"""Real distributions for discovery tests: dist-info folders and plugin modules on ``sys.path``.

Nothing here mocks ``importlib.metadata``: ``DistFactory.add`` writes
``<name>-<version>.dist-info/{METADATA,entry_points.txt}`` and the plugin modules into a
temporary site directory, prepends it to ``sys.path`` and calls
``cardcage.hooks.snapshot.refresh()`` so the loader discovers them exactly as it would discover an
installed wheel.

Every test gets its own entry-point groups and environment-variable names (``plugin_profile``),
its own hook registry (``plugin_registry``) and uniquely named modules, so it never depends on
what else is installed and leaves nothing behind: plugin modules leave ``sys.modules``, the sites
leave ``sys.path``, the process-wide snapshot and the loader's once-gates are restored.

Test modules load the fixtures with ``pytest_plugins = ["dist_support"]``.

Plugin modules written by ``add`` start with a fixed header, so a test body can use:

``journal``
    the per-test journal module: ``journal.record(kind, value)`` appends to ``journal.EVENTS``;
    ``journal.REGISTRY`` and ``journal.PROFILE`` are the test's registry and profile.
``REGISTRY``, ``PROFILE``, ``HookType``, ``current_plugin_source``
    shortcuts for the above and for the cardcage names a plugin uses.
``NAME``, ``DIST``
    the entry-point name and distribution that point at this module.

Importing a plugin module records ``("import", NAME)``. A plugin given without a body gets
``register()`` that counts its calls in ``CALLS`` and records ``("register", NAME)``; a platform
entry point without a body gets ``activate()`` that records ``("activate", NAME)``.
"""

from __future__ import annotations

import importlib
import re
import sys
import textwrap
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

import pytest

from cardcage.hooks import snapshot as snapshot_module
from cardcage.hooks.loader import reset_plugin_state
from cardcage.hooks.profile import RuntimeProfile
from cardcage.hooks.registry import BaseHookRegistry

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping
    from pathlib import Path
    from types import ModuleType

__all__ = [
    "Dist",
    "DistFactory",
    "dists",
    "plugin_profile",
    "plugin_registry",
    "snapshot_guard",
]

_HEADER = """\
import {journal} as journal
from cardcage.hooks.registry import HookType, current_plugin_source

REGISTRY = journal.REGISTRY
PROFILE = journal.PROFILE
NAME = {name!r}
DIST = {dist!r}
journal.record("import", NAME)
"""

_DEFAULT_REGISTER = """
CALLS = 0


def register():
    global CALLS
    CALLS += 1
    journal.record("register", NAME)
"""

_DEFAULT_ACTIVATE = """
def activate():
    journal.record("activate", NAME)
    return None
"""

_JOURNAL = """\
EVENTS = []
REGISTRY = None
PROFILE = None


def record(kind, value):
    EVENTS.append((kind, value))
"""


def _ident(text: str) -> str:
    return re.sub(r"\W+", "_", text).strip("_").lower()


@dataclass
class Dist:
    """A distribution written by ``DistFactory.add``."""

    name: str
    version: str
    site: Path
    dist_info: Path
    modules: dict[str, str] = field(default_factory=dict)  # entry-point name -> module name

    def module(self, entry_point: str) -> str:
        """The module that entry point ``entry_point`` of this distribution points at."""
        return self.modules[entry_point]

    def imported(self, entry_point: str) -> bool:
        return self.modules[entry_point] in sys.modules

    def loaded(self, entry_point: str) -> ModuleType:
        return sys.modules[self.modules[entry_point]]


class DistFactory:
    """Writes real distributions into per-test site directories; see the module docstring."""

    def __init__(
        self,
        tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch,
        profile: RuntimeProfile,
        registry: type[BaseHookRegistry],
    ) -> None:
        self.token = uuid.uuid4().hex[:10]
        self.profile = profile
        self.registry = registry
        self._root = tmp_path / "sites"
        self._monkeypatch = monkeypatch
        self._written: set[str] = set()
        self._sites: list[Path] = []
        self.default_site = self.site()
        self.journal_name = self.module_name("journal")
        self.write_module(self.journal_name, _JOURNAL)
        self.journal = cast("Any", importlib.import_module(self.journal_name))
        self.journal.REGISTRY = registry
        self.journal.PROFILE = profile

    # -- sites and modules -----------------------------------------------------------------------

    def site(self) -> Path:
        """A new, empty directory, prepended to ``sys.path`` (so it is searched first)."""
        path = self._root / f"site{len(self._sites)}"
        path.mkdir(parents=True)
        self._monkeypatch.syspath_prepend(str(path))
        self._sites.append(path)
        return path

    def module_name(self, label: str) -> str:
        """A module name unique to this test."""
        return f"cc_{_ident(label)}_{self.token}"

    def write_module(self, name: str, source: str, *, site: Path | None = None) -> str:
        """Write ``name.py`` (no import); it is removed from ``sys.modules`` after the test."""
        path = (site or self.default_site) / f"{name}.py"
        path.write_text(source, encoding="utf-8")
        self._written.add(name)
        importlib.invalidate_caches()
        return name

    def module(self, label: str, source: str) -> str:
        """Write a plain module (a hook target, say) under a unique name and return the name."""
        return self.write_module(self.module_name(label), textwrap.dedent(source))

    # -- distributions -----------------------------------------------------------------------

    def add(
        self,
        name: str,
        *,
        version: str = "1.0",
        plugins: Mapping[str, str | None] | None = None,
        platforms: Mapping[str, str | None] | None = None,
        entry_points: Mapping[str, Mapping[str, str]] | None = None,
        modules: Mapping[str, str] | None = None,
        site: Path | None = None,
        refresh: bool = True,
    ) -> Dist:
        """Write distribution ``name`` and (by default) rescan.

        ``plugins`` and ``platforms`` map entry-point names (in the profile's plugin and
        platform groups) to the body of the module each points at, or None for the default
        body; ``entry_points`` adds raw ``{group: {name: value}}`` lines and ``modules`` raw
        ``{module name: source}`` files. Entry points are written in the order given.
        """
        where = site or self.default_site
        groups: dict[str, dict[str, str]] = {}
        dist = Dist(name, version, where, where / f"{_escape(name)}-{version}.dist-info")
        for group, callback, specs, default in (
            (self.profile.plugin_group, "register", plugins, _DEFAULT_REGISTER),
            (self.profile.platform_group, "activate", platforms, _DEFAULT_ACTIVATE),
        ):
            for ep_name, body in (specs or {}).items():
                module = self.module_name(f"{name}_{ep_name}")
                header = _HEADER.format(journal=self.journal_name, name=ep_name, dist=name)
                source = header + (textwrap.dedent(body) if body is not None else default)
                self.write_module(module, source, site=where)
                groups.setdefault(group, {})[ep_name] = f"{module}:{callback}"
                dist.modules[ep_name] = module
        for group, entries in (entry_points or {}).items():
            groups.setdefault(group, {}).update(entries)
        for module, source in (modules or {}).items():
            self.write_module(module, textwrap.dedent(source), site=where)
        dist.dist_info.mkdir()
        (dist.dist_info / "METADATA").write_text(
            f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n", encoding="utf-8"
        )
        lines: list[str] = []
        for group, entries in groups.items():
            lines.append(f"[{group}]")
            lines.extend(f"{ep_name} = {value}" for ep_name, value in entries.items())
            lines.append("")
        (dist.dist_info / "entry_points.txt").write_text("\n".join(lines), encoding="utf-8")
        importlib.invalidate_caches()
        if refresh:
            self.refresh()
        return dist

    def refresh(self) -> snapshot_module.EntryPointSnapshot:
        importlib.invalidate_caches()
        return snapshot_module.refresh()

    # -- environment -------------------------------------------------------------------------

    def select(self, platform: str) -> None:
        """Set the profile's selector variable (for this test only)."""
        self._monkeypatch.setenv(self.profile.selector_env, platform)

    def allow(self, allowlist: str) -> None:
        """Set the profile's allowlist variable (for this test only)."""
        self._monkeypatch.setenv(self.profile.allowlist_env, allowlist)

    # -- observations ------------------------------------------------------------------------

    def events(self, kind: str | None = None) -> list[Any]:
        """What the plugin modules recorded, in order; with ``kind``, only those values."""
        events: list[tuple[str, Any]] = self.journal.EVENTS
        if kind is None:
            return list(events)
        return [value for k, value in events if k == kind]

    def close(self) -> None:
        for name in self._written:
            sys.modules.pop(name, None)


def _escape(name: str) -> str:
    """The dist-info folder spelling of a project name (as wheel installers write it)."""
    return re.sub(r"[-_.]+", "_", name)


# -- fixtures ---------------------------------------------------------------------------------


@pytest.fixture
def snapshot_guard(monkeypatch: pytest.MonkeyPatch) -> None:
    """Restore the process-wide entry-point snapshot after the test, whatever it installed."""
    monkeypatch.setattr(snapshot_module, "_snapshot", snapshot_module._snapshot)


@pytest.fixture
def plugin_profile(monkeypatch: pytest.MonkeyPatch) -> RuntimeProfile:
    """A runtime profile with its own groups and variables, none of them set."""
    tag = uuid.uuid4().hex[:12]
    fresh = RuntimeProfile(
        name=f"t{tag}",
        platform_group=f"test.{tag}.platforms",
        plugin_group=f"test.{tag}.plugins",
        selector_env=f"CARDCAGE_TEST_{tag.upper()}_PLATFORM",
        allowlist_env=f"CARDCAGE_TEST_{tag.upper()}_PLUGINS",
    )
    for variable in (
        fresh.selector_env,
        fresh.allowlist_env,
        "CARDCAGE_STRICT_HOOKS",
        "CARDCAGE_DEFERRED_HOOKS",
    ):
        monkeypatch.delenv(variable, raising=False)
    return fresh


@pytest.fixture
def plugin_registry(plugin_profile: RuntimeProfile) -> Iterator[type[BaseHookRegistry]]:
    """A hook registry of this test's own; its patches and the loader's gates are undone after."""

    class _R(BaseHookRegistry):
        pass

    yield _R
    reset_plugin_state(plugin_profile, _R)
    _R.reset()


@pytest.fixture
def dists(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    plugin_profile: RuntimeProfile,
    plugin_registry: type[BaseHookRegistry],
    snapshot_guard: None,
) -> Iterator[DistFactory]:
    """Write real distributions for this test; see ``DistFactory``."""
    del snapshot_guard
    factory = DistFactory(tmp_path, monkeypatch, plugin_profile, plugin_registry)
    yield factory
    factory.close()
