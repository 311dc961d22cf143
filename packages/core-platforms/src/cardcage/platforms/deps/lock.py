"""The baseline a release is compared with: a release read now, or a lock written from one.

A plugin is tested on one host release; what its dependencies looked like there (present or not,
and each callable's signature) is what tells "this release changed ``Foo.bar``" from "``Foo.bar``
always took these parameters". The installed host is the natural baseline; a CI job that checks
wheels without installing the host keeps a lock instead: ``cardcage deps --write-lock FILE``
writes one from the release the plugin was tested on, ``--baseline FILE`` reads it back.

The lock is JSON (``cardcage.deps-lock/1``), one entry per symbol, sorted, so a diff of it in
review says exactly what moved.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .check import lookup
from .errors import LockFileError
from .model import Dependency, Lookup, Param, Signature

if TYPE_CHECKING:
    from collections.abc import Iterable

    from .check import ReleaseSymbols

__all__ = ["LOCK_SCHEMA", "LockBaseline", "ReleaseBaseline", "read_lock", "write_lock"]

LOCK_SCHEMA = "cardcage.deps-lock/1"


class ReleaseBaseline:
    """A release read now (the installed host, or a wheel) as the baseline."""

    def __init__(self, release: ReleaseSymbols) -> None:
        self.release = release

    @property
    def version(self) -> str:
        return self.release.version

    @property
    def host(self) -> str:
        return self.release.host

    def lookup_symbol(self, dependency: Dependency) -> Lookup | None:
        if dependency.host != self.release.host:
            return None
        return lookup(self.release, dependency)


class LockBaseline:
    """A lock file's entries as the baseline."""

    def __init__(self, host: str, version: str, entries: dict[str, Lookup]) -> None:
        self.host = host
        self.version = version
        self.entries = entries

    def lookup_symbol(self, dependency: Dependency) -> Lookup | None:
        if dependency.host != self.host:
            return None
        return self.entries.get(f"{dependency.kind} {dependency.symbol}")


def _signature_json(signature: Signature | None) -> list[list[Any]] | None:
    if signature is None:
        return None
    return [[p.name, p.kind, p.has_default] for p in signature.params]


def write_lock(
    path: str | Path, release: ReleaseSymbols, dependencies: Iterable[Dependency]
) -> int:
    """Write the lock of ``dependencies`` as ``release`` has them; return how many entries."""
    entries: dict[str, Any] = {}
    for dependency in dependencies:
        if dependency.host != release.host:
            continue
        found = lookup(release, dependency)
        entries[f"{dependency.kind} {dependency.symbol}"] = {
            "status": found.status,
            "kind": found.kind,
            "signature": _signature_json(found.signature),
        }
    document = {
        "schema": LOCK_SCHEMA,
        "host": release.host,
        "version": release.version,
        "entries": dict(sorted(entries.items())),
    }
    Path(path).write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    return len(entries)


def read_lock(path: str | Path) -> LockBaseline:
    """The lock at ``path``; a typed error naming the file when it is not one."""
    try:
        document = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise LockFileError(f"--baseline {path}: cannot read it ({exc.strerror})") from None
    except ValueError as exc:
        raise LockFileError(f"--baseline {path}: not JSON ({exc})") from None
    if not isinstance(document, dict) or document.get("schema") != LOCK_SCHEMA:
        raise LockFileError(
            f"--baseline {path}: not a {LOCK_SCHEMA} lock; write one with "
            "cardcage deps --against <the release you tested on> --write-lock FILE"
        )
    entries: dict[str, Lookup] = {}
    for key, entry in document.get("entries", {}).items():
        params = entry.get("signature")
        signature = (
            Signature(tuple(Param(str(n), str(k), bool(d)) for n, k, d in params))
            if params is not None
            else None
        )
        entries[key] = Lookup(entry["status"], kind=entry.get("kind"), signature=signature)
    return LockBaseline(str(document["host"]), str(document["version"]), entries)
