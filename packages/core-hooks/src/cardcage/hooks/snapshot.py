"""One entry-point scan per process, indexed by group.

``importlib.metadata.entry_points(group=...)`` reads every installed distribution's metadata on
each call, whatever the group; SGLang calls it three times during start-up. cardcage scans once,
keeps the result indexed by group, and answers every later lookup from memory. ``refresh()``
rescans (after installing a package at run time, or in tests). A spawned worker may be handed its
parent's snapshot with ``install_snapshot()`` instead of scanning again.

The scan reads the file system directly: each ``sys.path`` directory is listed once and every
``*.dist-info`` / ``*.egg-info`` folder in it contributes its ``entry_points.txt``, first on
``sys.path`` winning for a distribution found twice, the rule ``importlib.metadata`` applies
(``entry_points()`` agrees with the snapshot). A zip file, an ``.egg`` or a distribution finder
other than the path finder on ``sys.meta_path`` is handed to ``importlib.metadata``; only then is
that module (which pulls in email, zipfile, csv, pathlib) imported, never at module scope.
Distribution names and versions are read lazily, both from one read of METADATA, because parsing
METADATA of every distribution costs more than the scan itself.
"""

from __future__ import annotations

import importlib
import os
import sys
import threading

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable
    from importlib.metadata import Distribution

__all__ = [
    "DistributionInfo",
    "EntryPointSnapshot",
    "PluginEntryPoint",
    "entry_point_snapshot",
    "install_snapshot",
    "refresh",
]


def normalize_dist_name(name: str) -> str:
    """PEP 503 normalisation with underscores, as importlib.metadata uses for de-duplication.

    ``re.sub(r"[-_.]+", "_", name).lower()``, without compiling a pattern at start-up.
    """
    name = name.replace("-", "_").replace(".", "_")
    while "__" in name:
        name = name.replace("__", "_")
    return name.lower()


class DistributionInfo:
    """A distribution that provides entry points: its name and version, read on first use.

    The scan knows a distribution by its metadata folder (``path``, the ``*.dist-info`` or
    ``*.egg-info`` directory); a distribution that ``importlib.metadata`` found instead (in a zip
    file, say) is kept as its ``Distribution`` object (``dist``). Either way the name and the
    version come from one parse of METADATA, made the first time either is asked for.
    """

    __slots__ = ("_dist", "_name", "_path", "_version", "normalized_name")

    def __init__(
        self,
        normalized_name: str,
        dist: Distribution | None = None,
        *,
        name: str | None = None,
        version: str | None = None,
        path: str | None = None,
    ) -> None:
        self.normalized_name = normalized_name
        self._dist = dist
        self._path = path
        self._name = name
        self._version = version

    @property
    def name(self) -> str:
        """The project name as its METADATA spells it (``cardcage-demo-cpu``)."""
        name = self._name
        if name is None:
            name, _ = self._read_metadata()
        return name

    @property
    def version(self) -> str:
        version = self._version
        if version is None:
            _, version = self._read_metadata()
        return version

    def _read_metadata(self) -> tuple[str, str]:
        # One read for both fields; a field given to the constructor is kept as given.
        name: object = None
        version: object = None
        if self._path is not None:
            name, version = _metadata_name_version(self._path)
        elif self._dist is not None:
            message = self._dist.metadata
            name, version = message["Name"], message["Version"]
        if self._name is None:
            self._name = str(name) if name else self.normalized_name
        if self._version is None:
            self._version = str(version) if version else "unknown"
        return self._name, self._version

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
        """Import the module and return the object the value names (``module:attr.attr``).

        A value that is not of that form raises ``MalformedEntryPointError`` naming the
        distribution whose metadata holds it, rather than an import or attribute error that
        would blame the plugin's code.
        """
        spec, bracket, extras = self.value.partition("[")
        module_name, colon, attrs = spec.strip().partition(":")
        modules = module_name.strip().split(".")
        names = attrs.strip().split(".") if colon else []
        if not all(part.isidentifier() for part in modules + names) or (
            bracket and not extras.rstrip().endswith("]")
        ):
            from .errors import MalformedEntryPointError

            raise MalformedEntryPointError(self.group, self.name, self.value, self.dist_name)
        obj: object = importlib.import_module(".".join(modules))
        for attr in names:
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
    """Every entry point of every installed distribution, as one scan saw it.

    A scan keeps each distribution's ``entry_points.txt`` text and parses a group's lines the
    first time the group is asked for: a process asks for two or three groups, and most of what
    is installed declares only console scripts.
    """

    __slots__ = ("_by_group", "_texts")

    def __init__(self, entries: Iterable[PluginEntryPoint]) -> None:
        self._by_group = _index(entries)
        self._texts: list[tuple[str, DistributionInfo]] | None = None

    @classmethod
    def _from_texts(cls, texts: list[tuple[str, DistributionInfo]]) -> EntryPointSnapshot:
        snapshot = cls(())
        snapshot._texts = texts
        return snapshot

    def group(self, group: str) -> tuple[PluginEntryPoint, ...]:
        """The entry points of one group, in ``sys.path`` discovery order."""
        found = self._by_group.get(group)
        if found is not None:
            return found
        texts = self._texts
        if texts is None:
            return ()
        # A group's header names it, so a text without the name has none of its entries.
        found = tuple(
            ep
            for text, dist in texts
            if group in text
            for ep in _parse_entry_points(text, dist)
            if ep.group == group
        )
        with _lock:  # two threads asking at once get the same tuple
            if self._texts is not None:
                return self._by_group.setdefault(group, found)
            return self._by_group.get(group, ())

    def groups(self) -> tuple[str, ...]:
        return tuple(sorted(self._parse_all()))

    def _parse_all(self) -> dict[str, tuple[PluginEntryPoint, ...]]:
        texts = self._texts
        if texts is not None:
            every = _index(ep for text, dist in texts for ep in _parse_entry_points(text, dist))
            with _lock:
                if self._texts is not None:
                    # Keep the tuples group() already handed out (not the empty ones).
                    every.update((g, eps) for g, eps in self._by_group.items() if g in every)
                    self._by_group = every
                    self._texts = None
        return self._by_group

    def __reduce__(self) -> tuple[object, ...]:
        everything = self._parse_all()
        return (EntryPointSnapshot, ([ep for eps in everything.values() for ep in eps],))


def _index(entries: Iterable[PluginEntryPoint]) -> dict[str, tuple[PluginEntryPoint, ...]]:
    by_group: dict[str, list[PluginEntryPoint]] = {}
    for ep in entries:
        by_group.setdefault(ep.group, []).append(ep)
    return {group: tuple(eps) for group, eps in by_group.items()}


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


# What a scan keeps: each distribution's entry_points.txt, parsed a group at a time.
_Texts = list[tuple[str, DistributionInfo]]

# What importlib.metadata's PathDistribution.read_text() treats as "no such file".
_MISSING_FILE = (FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError)


_READ_FLAGS = os.O_RDONLY | getattr(os, "O_BINARY", 0)
_CHUNK = 1 << 16


def _read_text(path: str) -> str | None:
    """The UTF-8 text of ``path``, or None when it cannot be read as a file (as importlib does).

    ``os.open``/``os.read`` rather than ``open()``: a scan reads one file per installed
    distribution, and the file object machinery costs more than the read itself.
    """
    try:
        fd = os.open(path, _READ_FLAGS)
    except _MISSING_FILE:
        return None
    try:
        data = os.read(fd, _CHUNK)
        if len(data) == _CHUNK:
            chunks = [data]
            while chunk := os.read(fd, _CHUNK):
                chunks.append(chunk)
            data = b"".join(chunks)
    except _MISSING_FILE:  # a directory opens on POSIX; reading it fails
        return None
    finally:
        os.close(fd)
    return data.decode("utf-8")


def _metadata_name_version(info_dir: str) -> tuple[str | None, str | None]:
    """``Name`` and ``Version`` from the headers of METADATA (or PKG-INFO), read once.

    Reads the files ``importlib.metadata`` reads, in its order (METADATA, PKG-INFO, then the
    path itself, for a legacy ``*.egg-info`` file), and matches header names the way the email
    parser does: case-insensitively, first occurrence wins, headers end at the first blank line.
    """
    text = (
        _read_text(os.path.join(info_dir, "METADATA"))
        or _read_text(os.path.join(info_dir, "PKG-INFO"))
        or _read_text(info_dir)
    )
    name: str | None = None
    version: str | None = None
    if not text:
        return name, version
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    for line in text.partition("\n\n")[0].split("\n"):  # the headers, not the description
        if not line:
            break  # an empty first line: no headers
        if line[0] in " \t":
            continue  # a folded continuation line
        key, sep, value = line.partition(":")
        if not sep:
            break  # not a header: the email parser ends the headers here too
        key = key.lower()
        if key == "name":
            if name is None:
                name = value.lstrip(" \t")
        elif key == "version" and version is None:
            version = value.lstrip(" \t")
        if name is not None and version is not None:
            break
    return name, version


def _dist_key(dist: Distribution) -> str:
    # PathDistribution derives the normalised name from its folder name without parsing
    # METADATA; that is also the key importlib.metadata de-duplicates on (first on sys.path wins).
    key = getattr(dist, "_normalized_name", None)
    if isinstance(key, str) and key:
        return key
    return normalize_dist_name(str(dist.metadata["Name"]))


def _add_distributions(dists: Iterable[Distribution], seen: set[str], entries: _Texts) -> None:
    """Entry points of distributions found by ``importlib.metadata`` (zip files, other finders)."""
    for dist in dists:
        key = _dist_key(dist)
        if key in seen:
            continue
        seen.add(key)
        text = dist.read_text("entry_points.txt")
        if text:
            entries.append((text, DistributionInfo(key, dist)))


def _fallback(entry: object, seen: set[str], entries: _Texts) -> None:
    """A ``sys.path`` entry the directory scan does not read (a zip file, an egg)."""
    from importlib import metadata

    context = metadata.DistributionFinder.Context(path=[entry])  # type: ignore[list-item]
    _add_distributions(metadata.MetadataPathFinder.find_distributions(context), seen, entries)


def _info_key(folder: str, path: str) -> str:
    """The de-duplication key of a ``*.dist-info`` / ``*.egg-info`` folder, as importlib has it.

    The name part of the folder name (before the first ``-``), normalised; importlib reads the
    name from METADATA instead when the suffix is not spelled in lower case, and so does this.
    """
    stem, _, suffix = folder.rpartition(".")
    name: str | None = stem.partition("-")[0]
    if suffix not in ("dist-info", "egg-info"):
        name = _metadata_name_version(path)[0] or name
    return normalize_dist_name(name or "")


def _scan_directory(root: str, seen: set[str], entries: _Texts) -> None:
    """Every distribution in one ``sys.path`` directory; a zip file or egg goes to importlib."""
    if os.path.basename(root).lower().endswith(".egg"):
        _fallback(root, seen, entries)
        return
    try:
        names = os.listdir(root or ".")
    except NotADirectoryError:
        _fallback(root, seen, entries)
        return
    except (OSError, ValueError):
        return  # missing or unreadable: importlib.metadata finds nothing there either
    prefix = os.path.join(root, "")
    for folder in names:
        if not folder.lower().endswith((".dist-info", ".egg-info")):
            continue
        path = prefix + folder
        key = _info_key(folder, path)
        if key in seen:
            continue
        seen.add(key)
        text = _read_text(path + os.sep + "entry_points.txt")
        if text:
            entries.append((text, DistributionInfo(key, path=path)))


def scan() -> EntryPointSnapshot:
    """Read the entry points of every distribution on ``sys.path`` (no caching).

    Sees what ``importlib.metadata.distributions()`` sees, in its order: the finders on
    ``sys.meta_path`` in turn, the path finder's distributions ``sys.path`` entry by entry, the
    first distribution of each normalised name winning.
    """
    from importlib.machinery import PathFinder

    seen: set[str] = set()
    entries: _Texts = []
    for finder in sys.meta_path:
        if finder is PathFinder:
            for root in sys.path:
                entry: object = root  # typed list[str], but anything can be put on sys.path
                if isinstance(entry, str):
                    _scan_directory(entry, seen, entries)
                else:
                    _fallback(entry, seen, entries)
            continue
        find = getattr(finder, "find_distributions", None)
        if find is not None:
            from importlib import metadata

            _add_distributions(find(metadata.DistributionFinder.Context()), seen, entries)
    return EntryPointSnapshot._from_texts(entries)


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
