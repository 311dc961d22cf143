"""Sequence-parallel collectives: ``all_to_all_4D`` and the sequence all-gather.

Ulysses-style sequence parallelism keeps each rank's slice of the image tokens through the whole
transformer and only changes the layout around attention: ``[B, S/N, H, D]`` (every head, a slice
of the sequence) becomes ``[B, S, H/N, D]`` (the whole sequence, a slice of the heads) so that each
rank attends over every token for its heads, and back. Both directions are one all-to-all.

A ``group`` of size 1 (or ``None`` outside an initialized process group) makes every function
here the identity, so single-process code runs the same module without a process group.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist

__all__ = ["all_gather_sequence", "all_to_all_4D", "group_rank", "group_size"]


def group_size(group: Any = None) -> int:
    """Ranks in ``group``; 1 when torch.distributed is not initialized."""
    if not (dist.is_available() and dist.is_initialized()):
        return 1
    return int(dist.get_world_size(group))


def group_rank(group: Any = None) -> int:
    """This process's rank in ``group``; 0 when torch.distributed is not initialized."""
    if not (dist.is_available() and dist.is_initialized()):
        return 0
    return int(dist.get_rank(group))


def all_to_all_4D(  # noqa: N802 - the name used by SGLang and xDiT
    x: torch.Tensor, scatter_dim: int, gather_dim: int, group: Any = None
) -> torch.Tensor:
    """Split ``x`` along ``scatter_dim`` across the ranks, concatenate along ``gather_dim``.

    With ``scatter_dim=2, gather_dim=1``: ``[B, S/N, H, D]`` -> ``[B, S, H/N, D]``; with
    ``scatter_dim=1, gather_dim=2`` the inverse. Rank ``r`` ends up with chunk ``r`` of the
    scattered dimension from every rank, in rank order along the gathered dimension.
    """
    if x.dim() != 4:
        raise ValueError(f"all_to_all_4D expects a 4-D tensor, got shape {tuple(x.shape)}")
    if scatter_dim not in (1, 2) or gather_dim not in (1, 2) or scatter_dim == gather_dim:
        raise ValueError(
            f"scatter_dim and gather_dim must be 1 and 2 in either order, got "
            f"{scatter_dim} and {gather_dim}"
        )
    world = group_size(group)
    if world == 1:
        return x
    if x.shape[scatter_dim] % world:
        raise ValueError(
            f"dimension {scatter_dim} of size {x.shape[scatter_dim]} cannot be split across "
            f"{world} ranks"
        )
    # Stack the chunks on a new leading dim: all_to_all_single sends slice j of dim 0 to rank j
    # and stores what rank j sent in slice j of the output.
    send = torch.stack([c.contiguous() for c in x.chunk(world, dim=scatter_dim)])
    recv = torch.empty_like(send)
    dist.all_to_all_single(recv, send, group=group)
    return torch.cat(recv.unbind(0), dim=gather_dim)


def all_gather_sequence(x: torch.Tensor, dim: int, group: Any = None) -> torch.Tensor:
    """Concatenate every rank's ``x`` along ``dim`` in rank order (identity for one rank)."""
    world = group_size(group)
    if world == 1:
        return x
    parts = [torch.empty_like(x) for _ in range(world)]
    dist.all_gather(parts, x.contiguous(), group=group)
    return torch.cat(parts, dim=dim)
