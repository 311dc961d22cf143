"""demo_cpu's kernels, in the op table's signatures (``cardcage.platforms.kernels.OPS``).

``DemoCpuSRTPlatform.kernels`` names them by op; a host that selects the platform installs them
into its own ops right after ``init_backend()`` (SGLang: its SRT ``RMSNorm`` and
``SiluAndMul``). They receive tensors and scalars only, never a host's op object, so the same
functions serve every host.

* ``rms_norm`` / ``fused_add_rms_norm``: torch's fused ``rms_norm`` (one ATen kernel, no
  ``x**2`` temporary) in float32, cast back to the input's dtype, as the op table says;
* ``silu_and_mul``: the gate's SiLU multiplied by the other half in place, one output tensor.

Each call counts ``kernel`` evidence keyed by the op (``evidence.EVIDENCE``), in the process
that ran it. Imported only where a host installs the kernels, with torch present.
"""

from __future__ import annotations

from typing import Any

import torch

from .evidence import EVIDENCE

__all__ = ["fused_add_rms_norm", "rms_norm", "silu_and_mul"]


def rms_norm(x: Any, weight: Any, eps: float) -> Any:
    """``x / sqrt(mean(x**2) + eps) * weight`` over the last dimension, in float32."""
    EVIDENCE.record("kernel", "rms_norm")
    out = torch.nn.functional.rms_norm(
        x.to(torch.float32), (x.shape[-1],), weight.to(torch.float32), eps
    )
    return out.to(x.dtype)


def fused_add_rms_norm(x: Any, residual: Any, weight: Any, eps: float) -> tuple[Any, Any]:
    """``(rms_norm(x + residual), x + residual)``, the sum taken in float32; inputs untouched."""
    EVIDENCE.record("kernel", "fused_add_rms_norm")
    summed = x.to(torch.float32) + residual.to(torch.float32)
    out = torch.nn.functional.rms_norm(summed, (x.shape[-1],), weight.to(torch.float32), eps)
    return out.to(x.dtype), summed.to(x.dtype)


def silu_and_mul(x: Any) -> Any:
    """``silu(x[..., :d]) * x[..., d:]`` into one new tensor, ``d`` half the last dimension."""
    EVIDENCE.record("kernel", "silu_and_mul")
    d = x.shape[-1] // 2
    # SiLU's backward reads its input, not its output: multiplying the output in place is safe.
    return torch.nn.functional.silu(x[..., :d]).mul_(x[..., d:])
