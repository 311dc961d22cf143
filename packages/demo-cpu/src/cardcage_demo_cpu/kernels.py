"""demo_cpu's kernels, in the op table's signatures (``cardcage.platforms.kernels.OPS``).

``DemoCpuSRTPlatform.kernels`` names them by op; a host that selects the platform installs them
into its own ops right after ``init_backend()`` (SGLang: its SRT ``RMSNorm`` and
``SiluAndMul``). They receive tensors and scalars only, never a host's op object, so the same
functions serve every host.

* ``rms_norm`` / ``fused_add_rms_norm``: torch's fused ``rms_norm`` (one ATen kernel, no
  ``x**2`` temporary) in float32, cast back to the input's dtype, as the op table says;
* ``silu_and_mul``: the gate's SiLU multiplied by the other half in place, one output tensor;
* ``layer_norm``: torch's ``layer_norm`` in the dtype the host's room hands over;
* ``rotary_embedding``: the rotation computed in float32 from the position's cos/sin row, into
  new tensors, NeoX or GPT-J style.

Each call counts ``kernel`` evidence keyed by the op (``evidence.EVIDENCE``), in the process
that ran it. Imported only where a host installs the kernels, with torch present.
"""

from __future__ import annotations

from typing import Any

import torch

from .evidence import EVIDENCE

__all__ = ["fused_add_rms_norm", "layer_norm", "rms_norm", "rotary_embedding", "silu_and_mul"]


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


def layer_norm(x: Any, weight: Any, bias: Any, eps: float) -> Any:
    """``(x - mean) / sqrt(var + eps) * weight + bias`` over the last dimension."""
    EVIDENCE.record("kernel", "layer_norm")
    return torch.nn.functional.layer_norm(x, (x.shape[-1],), weight, bias, eps)


def rotary_embedding(
    positions: Any, query: Any, key: Any, cos_sin_cache: Any, head_size: int, is_neox_style: bool
) -> tuple[Any, Any]:
    """``query`` and ``key`` with the first ``cos_sin_cache.shape[-1]`` channels of every head
    rotated by their token's cos/sin row; new tensors, inputs untouched."""
    EVIDENCE.record("kernel", "rotary_embedding")
    cos, sin = cos_sin_cache.index_select(0, positions).to(torch.float32).chunk(2, dim=-1)
    # One row per token, broadcast over the heads.
    cos, sin = cos.unsqueeze(-2), sin.unsqueeze(-2)
    return (
        _rotate(query, cos, sin, head_size, is_neox_style),
        _rotate(key, cos, sin, head_size, is_neox_style),
    )


def _rotate(x: Any, cos: Any, sin: Any, head_size: int, is_neox_style: bool) -> Any:
    heads = x.reshape(x.shape[0], -1, head_size)
    rotary_dim = 2 * cos.shape[-1]
    turned = heads[..., :rotary_dim].to(torch.float32)
    if is_neox_style:
        first, second = turned.chunk(2, dim=-1)
    else:
        first, second = turned[..., 0::2], turned[..., 1::2]
    out_first = first * cos - second * sin
    out_second = second * cos + first * sin
    if is_neox_style:
        turned = torch.cat((out_first, out_second), dim=-1)
    else:
        turned = torch.stack((out_first, out_second), dim=-1).flatten(-2)
    return torch.cat((turned.to(x.dtype), heads[..., rotary_dim:]), dim=-1).reshape(x.shape)
