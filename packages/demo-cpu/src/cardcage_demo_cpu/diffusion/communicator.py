"""``DemoCpuCommunicator``: demo_cpu's all-to-all communicator, the runtime's gloo one + evidence.

``DemoCpuPlatform.get_all_to_all_communicator_cls()`` names this class; each worker builds one
for its sequence-parallel group, and the transformer's self-attention exchanges its tokens with
``all_to_all_4D()`` through it. The exchange itself is ``CpuCommunicator``'s (gloo, host
tensors); this subclass only records an ``all_to_all`` evidence event (key: the communicator's
name, e.g. ``sp-rank0``) so a launcher can prove each worker went through the vendor's class.
A vendor with its own collective would replace the body of ``all_to_all_4D()`` instead, keeping
the layout contract: rank ``r`` gets chunk ``r`` of ``scatter_dim`` from every rank, in rank order
along ``gather_dim``.

The communicator controls this exchange only: the final sequence all-gather, the request
broadcast and memory all-reduces still go to ``torch.distributed`` directly.

Imports torch (through ``CpuCommunicator``): only the worker that resolves the qualified name
imports this module, after the diffusion runtime (which depends on torch) is running.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cardcage.diffusion.runtime.distributed.device_communicators.cpu_communicator import (
    CpuCommunicator,
)

from .evidence import EVIDENCE

if TYPE_CHECKING:
    import torch

__all__ = ["DemoCpuCommunicator"]


class DemoCpuCommunicator(CpuCommunicator):
    """The gloo all-to-all, counted as ``all_to_all`` evidence per call."""

    def all_to_all_4D(  # noqa: N802 - the runtime's method name
        self, x: torch.Tensor, scatter_dim: int, gather_dim: int
    ) -> torch.Tensor:
        out = super().all_to_all_4D(x, scatter_dim, gather_dim)
        EVIDENCE.record("all_to_all", self.unique_name)
        return out
