"""Collective construction over a ``torch.distributed`` process group (gloo on CPU).

torch is imported inside the functions only: ``import cardcage.shm`` never loads it.
"""

from __future__ import annotations

import pickle
import secrets
from typing import Any

from ._segment import ShmRingBuffer
from .errors import AttachError, ShmBroadcastError
from .queue import MessageQueue

__all__ = ["create_from_process_group", "in_the_same_node_as"]

_PROBE_BYTES = 32


def _broadcast_object(obj: Any, src: int, pg: Any) -> Any:
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
        _broadcast_object((probe.name, token), src, pg)
        flags[rank] = 1
    else:
        name, token = _broadcast_object(None, src, pg)
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


def create_from_process_group(
    pg: Any,
    max_chunk_bytes: int,
    max_chunks: int,
    writer_rank: int = 0,
    connect_ip: str | None = None,
) -> MessageQueue:
    """Every rank of ``pg`` calls this; ``writer_rank`` gets the writer, the others readers.

    Ranks on other nodes become remote readers, which needs ``connect_ip`` on the writer.
    """
    import torch.distributed as dist

    group_rank = dist.get_rank(group=pg)
    world = dist.get_world_size(group=pg)
    src = dist.get_process_group_ranks(pg)[writer_rank]
    same_node = in_the_same_node_as(pg, source_rank=writer_rank)
    local_ranks = [r for r, same in enumerate(same_node) if same and r != writer_rank]
    if group_rank == writer_rank:
        try:
            queue = MessageQueue(
                n_reader=world - 1,
                n_local_reader=len(local_ranks),
                local_reader_ranks=local_ranks,
                max_chunk_bytes=max_chunk_bytes,
                max_chunks=max_chunks,
                connect_ip=connect_ip,
            )
        except ShmBroadcastError as exc:
            _broadcast_object(repr(exc), src, pg)
            raise
        _broadcast_object(queue.export_handle(), src, pg)
    else:
        handle = _broadcast_object(None, src, pg)
        if isinstance(handle, str):
            raise ShmBroadcastError(f"the writer (group rank {writer_rank}) failed: {handle}")
        queue = MessageQueue.create_from_handle(handle, group_rank)
    queue.wait_until_ready()
    return queue
