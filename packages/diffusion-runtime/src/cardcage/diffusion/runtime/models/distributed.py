"""Sequence-parallel collectives of the built-in model: ``all_to_all_4D`` and the all-gather.

Ulysses-style sequence parallelism keeps each rank's slice of the image tokens through the whole
transformer and only changes the layout around attention: ``[B, S/N, H, D]`` (every head, a slice
of the sequence) becomes ``[B, S, H/N, D]`` (the whole sequence, a slice of the heads) so that each
rank attends over every token for its heads, and back. Both directions are one all-to-all, which
the model runs through its platform's communicator (``Attention.communicator``, a
``DeviceCommunicatorBase``); ``all_to_all_4D`` here is the portable algorithm over a bare group,
for code that has no communicator. The final all-gather of the sequence is not the
communicator's: it goes to ``torch.distributed`` directly.

A ``group`` of size 1 (or ``None`` outside an initialized process group) makes every function
here the identity, so single-process code runs the same module without a process group.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist

from cardcage.diffusion.runtime.distributed.device_communicators.base_device_communicator import (
    DeviceCommunicatorBase,
    group_rank,
    group_size,
)

__all__ = ["all_gather_sequence", "all_to_all_4D", "group_rank", "group_size"]


def all_to_all_4D(  # noqa: N802 - the name used by SGLang and xDiT
    x: torch.Tensor, scatter_dim: int, gather_dim: int, group: Any = None
) -> torch.Tensor:
    """Split ``x`` along ``scatter_dim`` across ``group``, concatenate along ``gather_dim``.

    The base communicator's exchange over ``group``; see ``DeviceCommunicatorBase``.
    """
    return DeviceCommunicatorBase(group, x.device).all_to_all_4D(x, scatter_dim, gather_dim)


def all_gather_sequence(x: torch.Tensor, dim: int, group: Any = None) -> torch.Tensor:
    """Concatenate every rank's ``x`` along ``dim`` in rank order (identity for one rank)."""
    world = group_size(group)
    if world == 1:
        return x
    parts = [torch.empty_like(x) for _ in range(world)]
    dist.all_gather(parts, x.contiguous(), group=group)
    return torch.cat(parts, dim=dim)
