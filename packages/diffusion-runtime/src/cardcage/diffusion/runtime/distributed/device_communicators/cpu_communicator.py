"""``CpuCommunicator``: the all-to-all over a gloo group, for host tensors.

The communicator of the CPU platform, and the one the runtime gives the built-in MPS, NPU and
XPU platforms for the sequence-parallel all-to-all. Gloo exchanges CPU tensors only, so a tensor
that lives elsewhere is copied to the host for the exchange and the result copied back to its
device; on CPU it is the base algorithm, unchanged.
"""

from __future__ import annotations

import torch

from .base_device_communicator import DeviceCommunicatorBase

__all__ = ["CpuCommunicator"]

_HOST = torch.device("cpu")


class CpuCommunicator(DeviceCommunicatorBase):
    """``all_to_all_4D`` on host memory over the group (gloo)."""

    def all_to_all_4D(  # noqa: N802 - the name used by SGLang and xDiT
        self, x: torch.Tensor, scatter_dim: int, gather_dim: int
    ) -> torch.Tensor:
        if self.world_size == 1 or x.device.type == "cpu":
            return super().all_to_all_4D(x, scatter_dim, gather_dim)
        out = super().all_to_all_4D(x.to(_HOST), scatter_dim, gather_dim)
        return out.to(x.device)
