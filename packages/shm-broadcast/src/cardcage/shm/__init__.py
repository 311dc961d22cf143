"""cardcage.shm: a shared-memory broadcast queue (one writer, many readers on one node).

The seed's API (SGLang's / vLLM's ``shm_broadcast``) with timeouts, typed errors for dead peers,
a spin-then-yield-then-futex wait that costs no CPU while idle, and no ``/dev/shm`` leaks::

    from cardcage.shm import MessageQueue

    writer = MessageQueue(n_reader=2, n_local_reader=2)
    handle = writer.export_handle()           # plain data: send it to the readers
    # in reader process r: q = MessageQueue.create_from_handle(handle, r)
    writer.wait_until_ready()                 # readers call it too
    writer.enqueue({"step": 1})               # readers: q.dequeue()
    writer.barrier()                          # collectives: every party calls them in order

Import-safe and cheap: no torch, no numpy; zmq is imported only by queues with remote readers.
Every public name is loaded on first use (PEP 562), so ``import cardcage.shm`` costs about what
``python -c pass`` does; ``benchmarks/bench_shm.py`` holds it to 1.3x.
"""

from __future__ import annotations

# ``typing`` alone costs about as much as starting Python: not imported at run time.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from ._remote import RemoteGapError
    from ._segment import SHM_DIR, SHM_PREFIX, ShmRingBuffer, sweep_stale
    from .errors import (
        AttachError,
        CancelledError,
        CollectiveMismatchError,
        QueueClosedError,
        QueueRoleError,
        QueueTimeoutError,
        ReaderDiedError,
        RemoteAddressRequiredError,
        ShmBroadcastError,
        ShmSpaceError,
        WriterDiedError,
    )
    from .queue import DEFAULT_MAX_CHUNK_BYTES, DEFAULT_MAX_CHUNKS, Handle, MessageQueue

__version__ = "0.1.0"

__all__ = [
    "Handle",
    "MessageQueue",
    "ShmRingBuffer",
    "in_the_same_node_as",
    "sweep_stale",
    "DEFAULT_MAX_CHUNKS",
    "DEFAULT_MAX_CHUNK_BYTES",
    "SHM_DIR",
    "SHM_PREFIX",
    "AttachError",
    "CancelledError",
    "CollectiveMismatchError",
    "QueueClosedError",
    "QueueRoleError",
    "QueueTimeoutError",
    "ReaderDiedError",
    "RemoteAddressRequiredError",
    "RemoteGapError",
    "ShmBroadcastError",
    "ShmSpaceError",
    "WriterDiedError",
]

#: Where each lazily exported name lives (a submodule of this package).
_EXPORTS: dict[str, str] = {
    "Handle": "queue",
    "MessageQueue": "queue",
    "DEFAULT_MAX_CHUNKS": "queue",
    "DEFAULT_MAX_CHUNK_BYTES": "queue",
    "ShmRingBuffer": "_segment",
    "sweep_stale": "_segment",
    "SHM_DIR": "_segment",
    "SHM_PREFIX": "_segment",
    "RemoteGapError": "_remote",  # lives with the zmq code
    **dict.fromkeys(
        (
            "AttachError",
            "CancelledError",
            "CollectiveMismatchError",
            "QueueClosedError",
            "QueueRoleError",
            "QueueTimeoutError",
            "ReaderDiedError",
            "RemoteAddressRequiredError",
            "ShmBroadcastError",
            "ShmSpaceError",
            "WriterDiedError",
        ),
        "errors",
    ),
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(f"{__name__}.{module}"), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


def in_the_same_node_as(pg: object, source_rank: int = 0) -> list[bool]:
    """See :func:`cardcage.shm.process_group.in_the_same_node_as` (needs torch)."""
    from .process_group import in_the_same_node_as as impl

    return impl(pg, source_rank)
