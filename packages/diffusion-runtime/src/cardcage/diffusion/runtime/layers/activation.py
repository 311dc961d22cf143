"""``SiluAndMul``: the gated SiLU of SwiGLU feed-forwards as a ``CustomOp``."""

from __future__ import annotations

from typing import Any

import torch

from cardcage.diffusion.runtime.layers.custom_op import CustomOp

__all__ = ["SiluAndMul"]


@CustomOp.register("silu_and_mul")
class SiluAndMul(CustomOp):
    """``silu(x[..., :d]) * x[..., d:]`` where ``d = x.shape[-1] // 2``."""

    def forward_native(self, x: Any) -> Any:
        if x.shape[-1] % 2:
            raise ValueError(f"SiluAndMul needs an even last dimension, got {x.shape[-1]}")
        d = x.shape[-1] // 2
        return torch.nn.functional.silu(x[..., :d]) * x[..., d:]
