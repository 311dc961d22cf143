"""What queue construction needs from a ``torch.distributed`` process group (gloo on CPU): which
ranks share ``/dev/shm`` with the writer, and a small-object broadcast for the handshake.

``MessageQueue.create_from_process_group`` (in ``queue``) builds on these; this module knows
nothing of queues, so the dependency runs one way (``queue`` -> ``process_group``). torch is
imported inside the functions only: ``import cardcage.shm`` never loads it.
"""

from __future__ import annotations

import pickle
import secrets
from typing import Any

from ._segment import ShmRingBuffer
from .errors import AttachError

__all__ = ["broadcast_object", "in_the_same_node_as"]

_PROBE_BYTES = 32


def broadcast_object(obj: Any, src: int, pg: Any) -> Any:
    """Broadcast a small picklable object from global rank ``src`` (no numpy needed, unlike
    ``torch.distributed.broadcast_object_list``). Peers of a process group trust each other."""
    import torch
    import torch.distributed as dist

    is_src = dist.get_rank() == src
    data = bytearray(pickle.dumps(obj, pickle.HIGHEST_PROTOCOL)) if is_src else bytearray()
    size = torch.tensor([len(data)], dtype=torch.int64)
    dist.broadcast(size, src=src, group=pg)
    if not is_src:
        data = bytearray(int(size.item()))
    dist.broadcast(torch.frombuffer(data, dtype=torch.uint8), src=src, group=pg)
    return pickle.loads(data)


def in_the_same_node_as(pg: Any, source_rank: int = 0) -> list[bool]:
    """For every rank of ``pg``, whether it shares ``/dev/shm`` with group rank ``source_rank``.

    The source creates a small segment and writes a random token; every other rank attaches by
    name and compares. A rank that cannot attach is reported as another node.
    """
    import torch
    import torch.distributed as dist

    if str(dist.get_backend(pg)).lower() == "nccl":
        raise ValueError("in_the_same_node_as needs a CPU (e.g. gloo) group, not an NCCL group")
    rank = dist.get_rank(group=pg)
    world = dist.get_world_size(group=pg)
    src = dist.get_process_group_ranks(pg)[source_rank]
    flags = torch.zeros(world, dtype=torch.int32)
    probe: ShmRingBuffer | None = None
    if rank == source_rank:
        probe = ShmRingBuffer(0, _PROBE_BYTES, 1)
        token = secrets.token_bytes(_PROBE_BYTES)
        with probe.get_data(0) as buf:
            buf[:] = token
        broadcast_object((probe.name, token), src, pg)
        flags[rank] = 1
    else:
        name, token = broadcast_object(None, src, pg)
        try:
            peer = ShmRingBuffer(0, _PROBE_BYTES, 1, name=name)
        except (AttachError, OSError):
            pass
        else:
            with peer.get_data(0) as buf:
                if bytes(buf) == token:
                    flags[rank] = 1
            peer.close()
    dist.barrier(group=pg)
    if probe is not None:
        probe.close()
    dist.all_reduce(flags, group=pg)
    return [bool(x) for x in flags.tolist()]
