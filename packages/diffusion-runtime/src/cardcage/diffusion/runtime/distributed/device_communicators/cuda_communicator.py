"""``CudaCommunicator``: the all-to-all over an NCCL group, for CUDA (and ROCm) tensors.

The same algorithm as the base, with the checks NCCL needs made up front, so a misplaced tensor
fails with a message naming the fix instead of an opaque NCCL error or a hang on the other
ranks: the communicator is built for a CUDA device, and every tensor it exchanges lives on it.
"""

from __future__ import annotations

from typing import Any

import torch

from cardcage.diffusion.errors import CommunicatorDeviceError

from .base_device_communicator import DeviceCommunicatorBase

__all__ = ["CudaCommunicator"]


class CudaCommunicator(DeviceCommunicatorBase):
    """``all_to_all_4D`` on this rank's CUDA device over the group (nccl)."""

    def __init__(
        self,
        group: Any = None,
        device: torch.device | str | None = None,
        unique_name: str = "",
    ) -> None:
        if device is None and torch.cuda.is_available():
            device = torch.device("cuda", torch.cuda.current_device())
        super().__init__(group, device, unique_name)
        if self.device.type != "cuda":
            raise CommunicatorDeviceError(
                f"{type(self).__name__} exchanges CUDA tensors over NCCL, but it was built for "
                f"device {self.device}: pass this rank's CUDA device (device=cuda:<local rank>), "
                "or use CpuCommunicator for host tensors."
            )

    def all_to_all_4D(  # noqa: N802 - the name used by SGLang and xDiT
        self, x: torch.Tensor, scatter_dim: int, gather_dim: int
    ) -> torch.Tensor:
        index = self.device.index
        if self.world_size > 1 and (
            x.device.type != "cuda" or (index is not None and x.device.index != index)
        ):
            raise CommunicatorDeviceError(
                f"{type(self).__name__} for {self.device} was given a tensor on {x.device}: "
                f"move it to {self.device} before the all-to-all (every rank exchanges tensors "
                "on its own CUDA device)."
            )
        return super().all_to_all_4D(x, scatter_dim, gather_dim)
