"""Evidence of what demo-cpu did in this process: counters, and optionally a file.

A vendor needs to prove, from every worker, that its backend initialised, that its hook plugin
ran, and that the runtime really called its code. Both halves of the package keep that evidence
in one thread-safe object, ``EVIDENCE``. The diffusion half records

* ``init_backend``: ``DemoCpuPlatform.init_backend()`` ran (key: the dispatch key it registered);
* ``register``: the hook plugin's ``register()`` ran (key: the hook target);
* ``dispatch``: the hook saw ``CustomOp.dispatch_forward()`` choose a forward (key:
  ``"<op class> -> <forward>"``);
* ``forward``: the vendor's forward ran (key: the op class);
* ``all_to_all``: the sequence-parallel exchange ran through ``DemoCpuCommunicator`` (key: the
  communicator's name, ``sp-rank<N>`` in a worker).

The SRT half records, with a ``value`` where there is one to show:

* ``init_backend`` (key ``srt``): ``DemoCpuSRTPlatform.init_backend()`` ran; value: the torch
  intra-op threads it set (None without torch);
* ``device_total_memory`` (key: the device id): the device's answer to "how much memory?";
  value: bytes;
* ``register`` (key: the hook target): the general plugin registered its hook with SGLang;
* ``hook`` (key: the hook target): the hook ran; value: what the hooked function returned
  (for ``sglang.srt.utils.common.get_device_memory_capacity``, MiB).

``EVIDENCE.count("forward", "...RMSNorm")`` reads a counter in this process. When
``CARDCAGE_DEMO_CPU_EVIDENCE`` names a file, the first occurrence of each (event, key) in each
process is also appended to it as one JSON line ``{"pid", "event", "key", "platform"}``, plus
``"value"`` when the event has one, so a launcher reads what each of its worker processes did
with ``read_evidence(path)``. Only first occurrences are written: the file stays small however
many forwards run, and the hot path takes one lock and one set lookup. Lines are short single
``write()`` calls on a file opened for appending, so concurrent workers never interleave within
a line. Unset or empty, nothing is written anywhere.

Import-safe and fork-aware: stdlib and the package's envs only; the lock and the "already
written" set are renewed in a forked child, so the child writes its own first occurrences.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections import Counter
from typing import Any, TypeAlias

from cardcage_demo_cpu.envs import CARDCAGE_DEMO_CPU_EVIDENCE

__all__ = ["EVENTS", "EVIDENCE", "Evidence", "Value", "read_evidence"]

logger = logging.getLogger(__name__)

#: The events this package records: the diffusion half's in the order a worker produces them,
#: then the SRT half's own.
EVENTS = (
    "init_backend",
    "register",
    "dispatch",
    "forward",
    "all_to_all",
    "device_total_memory",
    "hook",
)

#: What a ``value`` may be: it goes into a JSON line as it is.
Value: TypeAlias = int | float | str | bool | None

_PLATFORM = "demo_cpu"


class Evidence:
    """Thread-safe counters per (event, key), mirrored to a JSON-lines file when asked."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: Counter[tuple[str, str]] = Counter()
        self._written: set[tuple[str, str]] = set()
        self._write_failed = False

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
        path = CARDCAGE_DEMO_CPU_EVIDENCE.get()
        if not path:
            return
        entry: dict[str, Value] = {
            "pid": os.getpid(),
            "event": event,
            "key": key,
            "platform": _PLATFORM,
        }
        if value is not None:
            entry["value"] = value
        line = json.dumps(entry)
        try:
            with open(path, "a", encoding="utf-8") as handle:
                handle.write(line + "\n")
        except OSError as exc:
            # Diagnostics must never take a worker down; say so once per process.
            if not self._write_failed:
                self._write_failed = True
                logger.warning(
                    "cannot append to %s=%s (%s); evidence stays in memory only",
                    CARDCAGE_DEMO_CPU_EVIDENCE.name,
                    path,
                    exc,
                )


def read_evidence(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The records appended to an evidence file, in order; [] when it does not exist."""
    try:
        with open(path, encoding="utf-8") as handle:
            return [json.loads(line) for line in handle if line.strip()]
    except FileNotFoundError:
        return []


#: The evidence of this process.
EVIDENCE = Evidence()

if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=EVIDENCE._after_fork_in_child)
