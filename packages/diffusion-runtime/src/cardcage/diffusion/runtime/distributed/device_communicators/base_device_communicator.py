"""``DeviceCommunicatorBase``: the sequence-parallel all-to-all over one process group.

A worker builds one communicator per sequence-parallel group, after ``torch.distributed`` is
initialized, with the class its platform names (``Platform.get_all_to_all_communicator_cls()``,
resolved by ``resolve_all_to_all_communicator_cls()``). The base class is a complete, portable
implementation: ``all_to_all_4D()`` stacks the scattered chunks, runs one
``torch.distributed.all_to_all_single`` and concatenates what came back. A vendor subclass may
replace ``all_to_all_4D()`` with its own collective (or wrap it, e.g. to count calls) and keeps
the layout contract below; everything else in a worker still talks to ``torch.distributed``.

Ulysses layout: with ``scatter_dim=2, gather_dim=1`` a rank's ``[B, S/N, H, D]`` (a slice of the
sequence, every head) becomes ``[B, S, H/N, D]`` (the whole sequence, a slice of the heads);
``scatter_dim=1, gather_dim=2`` is the inverse. Rank ``r`` ends up with chunk ``r`` of the
scattered dimension from every rank, in rank order along the gathered dimension.

A group of one rank (or ``None``, or torch.distributed not initialized) makes the exchange the
identity, so single-process code runs the same model without a process group.
"""

from __future__ import annotations

import logging
from typing import Any

import torch
import torch.distributed as dist

__all__ = ["DeviceCommunicatorBase", "check_all_to_all_layout", "group_rank", "group_size"]

logger = logging.getLogger(__name__)


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


def check_all_to_all_layout(x: torch.Tensor, scatter_dim: int, gather_dim: int) -> None:
    """Raise ``ValueError`` unless ``x`` is 4-D and the dims are 1 and 2 in either order."""
    if x.dim() != 4:
        raise ValueError(f"all_to_all_4D expects a 4-D tensor, got shape {tuple(x.shape)}")
    if scatter_dim not in (1, 2) or gather_dim not in (1, 2) or scatter_dim == gather_dim:
        raise ValueError(
            f"scatter_dim and gather_dim must be 1 and 2 in either order, got "
            f"{scatter_dim} and {gather_dim}"
        )


class DeviceCommunicatorBase:
    """The portable all-to-all communicator of one process group.

    ``group``: the torch.distributed group it serves (None: the default group, or one rank when
    torch.distributed is not initialized); ``device``: the device of the tensors it exchanges
    (default CPU); ``unique_name``: a label for logs (default: the class name).
    """

    def __init__(
        self,
        group: Any = None,
        device: torch.device | str | None = None,
        unique_name: str = "",
    ) -> None:
        self.group = group
        self.device = torch.device("cpu") if device is None else torch.device(device)
        self.unique_name = unique_name or type(self).__name__
        self.world_size = group_size(group)
        self.rank = group_rank(group)
        logger.debug(
            "%s: %s for rank %d/%d on %s",
            self.unique_name, type(self).__qualname__, self.rank, self.world_size, self.device,
        )  # fmt: skip

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(name={self.unique_name!r}, rank={self.rank}, "
            f"world_size={self.world_size}, device={self.device})"
        )

    def all_to_all_4D(  # noqa: N802 - the name used by SGLang and xDiT
        self, x: torch.Tensor, scatter_dim: int, gather_dim: int
    ) -> torch.Tensor:
        """Split ``x`` along ``scatter_dim`` across the ranks, concatenate along ``gather_dim``.

        Every rank of the group must call it with tensors of the same shape and dtype.
        """
        check_all_to_all_layout(x, scatter_dim, gather_dim)
        world = self.world_size
        if world == 1:
            return x
        if x.shape[scatter_dim] % world:
            raise ValueError(
                f"dimension {scatter_dim} of size {x.shape[scatter_dim]} cannot be split across "
                f"{world} ranks"
            )
        # Stack the chunks on a new leading dim: all_to_all_single sends slice j of dim 0 to
        # rank j and stores what rank j sent in slice j of the output.
        send = torch.stack([c.contiguous() for c in x.chunk(world, dim=scatter_dim)])
        recv = torch.empty_like(send)
        dist.all_to_all_single(recv, send, group=self.group)
        return torch.cat(recv.unbind(0), dim=gather_dim)
