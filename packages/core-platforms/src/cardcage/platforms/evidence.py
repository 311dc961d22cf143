"""Evidence of what a vendor plugin did in this process: counters, and optionally a file.

A vendor needs to prove, from every worker a runtime starts, that its backend initialised, that
its hook plugin ran and that the runtime really called its code. ``Evidence`` keeps that proof in
one thread-safe object per plugin: ``EVIDENCE.record("forward", "pkg.RMSNorm")`` counts, and
``EVIDENCE.count("forward", "pkg.RMSNorm")`` reads, in this process. The events and keys are the
vendor's to choose.

When the environment variable the plugin names (``Evidence(platform, path_var)``) holds a file
path, the first occurrence of each (event, key) in each process is also appended to it as one
JSON line ``{"pid", "event", "key", "platform"}``, plus ``"value"`` when the occurrence has one,
so a launcher reads what each of its worker processes did with ``read_evidence(path)``. Only
first occurrences are written: the file stays small however many forwards run, and the hot path
takes one lock and one set lookup. Lines are short single ``write()`` calls on a file opened for
appending, so concurrent workers never interleave within a line. Unset or empty, nothing is
written anywhere; a file that cannot be written is reported once per process, at WARNING, and
never takes a worker down.

Import-safe and fork-aware: stdlib only; the lock and the "already written" set are renewed in a
forked child, so the child writes its own first occurrences.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import weakref
from collections import Counter
from typing import TYPE_CHECKING, Any, TypeAlias

if TYPE_CHECKING:
    from collections.abc import Callable

    from cardcage.hooks.envs import EnvVar

__all__ = ["Evidence", "Value", "read_evidence"]

logger = logging.getLogger(__name__)

#: What a ``value`` may be: it goes into a JSON line as it is.
Value: TypeAlias = int | float | str | bool | None


class Evidence:
    """Thread-safe counters per (event, key), mirrored to a JSON-lines file when asked.

    ``platform`` is written into every line (which plugin wrote it, when several share a file);
    ``path_var`` is the plugin's environment variable that names the file.
    """

    def __init__(self, platform: str, path_var: EnvVar[str]) -> None:
        self.platform = platform
        self.path_var = path_var
        self._lock = threading.Lock()
        self._counts: Counter[tuple[str, str]] = Counter()
        self._written: set[tuple[str, str]] = set()
        self._write_failed = False
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=_renewer(weakref.ref(self)))

    def record(self, event: str, key: str, value: Value = None) -> None:
        """Count one occurrence; append it to the evidence file if it is the first here.

        ``value`` (JSON-ready: a number, a string, a bool) goes into that line; later
        occurrences only count, so the file shows the value the first one saw.
        """
        with self._lock:
            self._counts[event, key] += 1
            first = (event, key) not in self._written
            if first:
                self._written.add((event, key))
        if first:
            self._append(event, key, value)

    def count(self, event: str, key: str | None = None) -> int:
        """Occurrences of ``event`` (for ``key``, or for every key) in this process."""
        with self._lock:
            if key is not None:
                return self._counts[event, key]
            return sum(n for (name, _), n in self._counts.items() if name == event)

    def keys(self, event: str) -> list[str]:
        """The keys ``event`` was recorded with in this process, sorted."""
        with self._lock:
            return sorted(key for name, key in self._counts if name == event)

    def as_dict(self) -> dict[str, dict[str, int]]:
        """Every counter, as ``{event: {key: count}}``."""
        with self._lock:
            out: dict[str, dict[str, int]] = {}
            for (event, key), n in self._counts.items():
                out.setdefault(event, {})[key] = n
            return out

    def reset(self) -> None:
        """Forget every counter (tests; a new run in a long-lived process)."""
        with self._lock:
            self._counts.clear()
            self._written.clear()
            self._write_failed = False

    def _after_fork_in_child(self) -> None:
        # The parent's lock may have been held by another thread at fork time, and its
        # "written" set describes the parent's lines, not ours.
        self._lock = threading.Lock()
        self._written = set()

    def _append(self, event: str, key: str, value: Value) -> None:
        path = self.path_var.get()
        if not path:
            return
        entry: dict[str, Value] = {
            "pid": os.getpid(),
            "event": event,
            "key": key,
            "platform": self.platform,
        }
        if value is not None:
            entry["value"] = value
        line = json.dumps(entry)
        try:
            with open(path, "a", encoding="utf-8") as handle:
                handle.write(line + "\n")
        except OSError as exc:
            if not self._write_failed:
                self._write_failed = True
                logger.warning(
                    "cannot append to %s=%s (%s); evidence stays in memory only",
                    self.path_var.name,
                    path,
                    exc,
                )


def _renewer(ref: weakref.ref[Evidence]) -> Callable[[], None]:
    # A weak reference: registering for fork must not keep a discarded record alive.
    def renew() -> None:
        evidence = ref()
        if evidence is not None:
            evidence._after_fork_in_child()

    return renew


def read_evidence(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The records appended to an evidence file, in order; [] when it does not exist."""
    try:
        with open(path, encoding="utf-8") as handle:
            return [json.loads(line) for line in handle if line.strip()]
    except FileNotFoundError:
        return []
