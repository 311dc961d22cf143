"""``RMSNorm``: root-mean-square normalization as a ``CustomOp``."""

from __future__ import annotations

from typing import Any

import torch

from cardcage.diffusion.runtime.layers.custom_op import CustomOp

__all__ = ["RMSNorm"]


@CustomOp.register("rms_norm")
class RMSNorm(CustomOp):
    """``x * rsqrt(mean(x**2, -1) + eps) * weight``, computed in float32 and cast back.

    With ``residual``, ``x + residual`` is normalized and ``(normalized, x + residual)`` returned.
    """

    def __init__(self, hidden_size: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.hidden_size = hidden_size
        self.variance_epsilon = eps
        self.weight = torch.nn.Parameter(torch.ones(hidden_size))

    def forward_native(self, x: Any, residual: Any = None) -> Any:
        if x.shape[-1] != self.hidden_size:
            raise ValueError(
                f"Expected hidden_size to be {self.hidden_size}, but found: {x.shape[-1]}"
            )
        orig_dtype = x.dtype
        x32 = x.to(torch.float32)
        if residual is not None:
            x32 = x32 + residual.to(torch.float32)
            residual = x32.to(orig_dtype)
        variance = x32.pow(2).mean(dim=-1, keepdim=True)
        out = x32 * torch.rsqrt(variance + self.variance_epsilon) * self.weight.to(torch.float32)
        out = out.to(orig_dtype)
        return out if residual is None else (out, residual)

    def extra_repr(self) -> str:
        return f"hidden_size={self.hidden_size}, eps={self.variance_epsilon}"
