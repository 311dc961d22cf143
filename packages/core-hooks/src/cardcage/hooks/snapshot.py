"""One entry-point scan per process, indexed by group.

``importlib.metadata.entry_points(group=...)`` reads every installed distribution's metadata on
each call, whatever the group; SGLang calls it three times during start-up. cardcage scans once,
keeps the result indexed by group, and answers every later lookup from memory. ``refresh()``
rescans (after installing a package at run time, or in tests). A spawned worker may be handed its
parent's snapshot with ``install_snapshot()`` instead of scanning again.

Import-safe: ``importlib.metadata`` (which pulls in email, zipfile, csv, pathlib) is imported on
the first scan, never at module scope. Distribution names and versions are read lazily, because
parsing METADATA of every distribution costs more than the scan itself.
"""

from __future__ import annotations

import importlib
import os
import re
import threading

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping
    from importlib.metadata import Distribution

__all__ = [
    "DistributionInfo",
    "EntryPointSnapshot",
    "PluginEntryPoint",
    "entry_point_snapshot",
    "install_snapshot",
    "refresh",
]

_NAME_SEPARATORS = re.compile(r"[-_.]+")


def normalize_dist_name(name: str) -> str:
    """PEP 503 normalisation with underscores, as importlib.metadata uses for de-duplication."""
    return _NAME_SEPARATORS.sub("_", name).lower()


class DistributionInfo:
    """A distribution that provides entry points: its name and version, read on first use."""

    __slots__ = ("_dist", "_name", "_version", "normalized_name")

    def __init__(
        self,
        normalized_name: str,
        dist: Distribution | None = None,
        *,
        name: str | None = None,
        version: str | None = None,
    ) -> None:
        self.normalized_name = normalized_name
        self._dist = dist
        self._name = name
        self._version = version

    @property
    def name(self) -> str:
        """The project name as its METADATA spells it (``cardcage-demo-cpu``)."""
        if self._name is None:
            found = self._dist.metadata["Name"] if self._dist is not None else None
            self._name = str(found) if found else self.normalized_name
        return self._name

    @property
    def version(self) -> str:
        if self._version is None:
            found = self._dist.version if self._dist is not None else None
            self._version = str(found) if found else "unknown"
        return self._version

    def __reduce__(self) -> tuple[object, ...]:
        # Pickled for spawned workers: resolve the lazy fields, drop the Distribution object.
        return (_rebuild_dist, (self.normalized_name, self.name, self.version))

    def __repr__(self) -> str:
        return f"DistributionInfo({self.name!r}, version={self.version!r})"


def _rebuild_dist(normalized: str, name: str, version: str) -> DistributionInfo:
    return DistributionInfo(normalized, name=name, version=version)


class PluginEntryPoint:
    """One entry point: ``name = value`` in ``group``, provided by ``dist``."""

    __slots__ = ("dist", "group", "name", "value")

    def __init__(self, name: str, value: str, group: str, dist: DistributionInfo | None) -> None:
        self.name = name
        self.value = value
        self.group = group
        self.dist = dist

    @property
    def dist_name(self) -> str | None:
        return self.dist.name if self.dist is not None else None

    @property
    def module(self) -> str:
        return self.value.partition(":")[0].strip()

    def load(self) -> object:
        """Import the module and return the object the value names (``module:attr.attr``)."""
        spec = self.value.split("[", 1)[0].strip()
        module_name, _, attrs = spec.partition(":")
        obj: object = importlib.import_module(module_name.strip())
        for attr in filter(None, attrs.strip().split(".")):
            obj = getattr(obj, attr)
        return obj

    def __reduce__(self) -> tuple[object, ...]:
        return (PluginEntryPoint, (self.name, self.value, self.group, self.dist))

    def __repr__(self) -> str:
        dist = self.dist.name if self.dist is not None else None
        return (
            f"PluginEntryPoint({self.name!r}, {self.value!r}, group={self.group!r}, dist={dist!r})"
        )


class EntryPointSnapshot:
    """Every entry point of every installed distribution, as one scan saw it."""

    __slots__ = ("_by_group",)

    def __init__(self, entries: Iterable[PluginEntryPoint]) -> None:
        by_group: dict[str, list[PluginEntryPoint]] = {}
        for ep in entries:
            by_group.setdefault(ep.group, []).append(ep)
        self._by_group: Mapping[str, tuple[PluginEntryPoint, ...]] = {
            group: tuple(eps) for group, eps in by_group.items()
        }

    def group(self, group: str) -> tuple[PluginEntryPoint, ...]:
        """The entry points of one group, in ``sys.path`` discovery order."""
        return self._by_group.get(group, ())

    def groups(self) -> tuple[str, ...]:
        return tuple(sorted(self._by_group))

    def __reduce__(self) -> tuple[object, ...]:
        return (EntryPointSnapshot, ([ep for eps in self._by_group.values() for ep in eps],))


def _parse_entry_points(text: str, dist: DistributionInfo) -> Iterable[PluginEntryPoint]:
    group: str | None = None
    for raw_line in text.splitlines():
        line = raw_line.strip()
        if not line or line[0] in "#;":
            continue
        if line[0] == "[" and line[-1] == "]":
            group = line[1:-1].strip()
            continue
        name, sep, value = line.partition("=")
        if group is None or not sep:
            continue
        yield PluginEntryPoint(name.strip(), value.strip(), group, dist)


def _dist_key(dist: Distribution) -> str:
    # PathDistribution derives the normalised name from its folder name without parsing
    # METADATA; that is also the key importlib.metadata de-duplicates on (first on sys.path wins).
    key = getattr(dist, "_normalized_name", None)
    if isinstance(key, str) and key:
        return key
    return normalize_dist_name(str(dist.metadata["Name"]))


def scan() -> EntryPointSnapshot:
    """Read the entry points of every distribution on ``sys.path`` (no caching)."""
    from importlib import metadata

    seen: set[str] = set()
    entries: list[PluginEntryPoint] = []
    for dist in metadata.distributions():
        key = _dist_key(dist)
        if key in seen:
            continue
        seen.add(key)
        text = dist.read_text("entry_points.txt")
        if text:
            entries.extend(_parse_entry_points(text, DistributionInfo(key, dist)))
    return EntryPointSnapshot(entries)


_lock = threading.Lock()
_snapshot: EntryPointSnapshot | None = None


def entry_point_snapshot() -> EntryPointSnapshot:
    """The process-wide snapshot; the first call scans."""
    global _snapshot
    current = _snapshot
    if current is not None:
        return current
    with _lock:
        if _snapshot is None:
            _snapshot = scan()
        return _snapshot


def refresh() -> EntryPointSnapshot:
    """Rescan now and make the new snapshot the process-wide one."""
    global _snapshot
    fresh = scan()
    with _lock:
        _snapshot = fresh
    return fresh


def _reinit_lock_after_fork() -> None:
    global _lock
    _lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reinit_lock_after_fork)


def install_snapshot(snapshot: EntryPointSnapshot) -> None:
    """Use a snapshot taken elsewhere (for example by the parent of a spawned worker)."""
    global _snapshot
    with _lock:
        _snapshot = snapshot
