"""demo_cpu's custom-op forwards, registered with ``CustomOp.register_oot_forward()``.

The diffusion runtime builds its layers from ``CustomOp`` subclasses, each of which picks its
forward once, at construction, from the current platform's ``get_dispatch_key_name()``. A
function registered for the op's exact class under that key wins over every ``forward_<key>()``
method; it receives the op instance before the normal arguments.

* ``rms_norm_forward``, for ``RMSNorm``: torch's fused ``torch.nn.functional.rms_norm`` (one ATen
  kernel, no ``x**2`` temporary) instead of the runtime's four-step ``forward_native()``. It
  computes in float32 and casts back, like ``forward_native()``, so the two agree to float32
  rounding.
* ``silu_and_mul_forward``, for ``SiluAndMul``: the gate's SiLU multiplied by the other half in
  place, one output tensor where ``forward_native()`` allocates two; the same operations in the
  same order, so the results are equal.

``tests/test_cpu_diffusion_ops.py`` checks both against ``forward_native()``. Each call is
counted in ``evidence.EVIDENCE`` under the event ``forward``, keyed by the class of the op that
called it: cardcage's op under cardcage's runtime. When SGLang hosts the platform, cardcage hands
each registration to SGLang's op of the same kind (``rms_norm``, ``silu_and_mul``), which then
calls these functions with its own op instance, so the key names SGLang's class.

Imported only by ``DemoCpuPlatform.init_backend()``, in a worker, where torch and the diffusion
runtime are present: it imports both at module scope.
"""

from __future__ import annotations

from typing import Any

import torch

from cardcage.diffusion.runtime.layers.activation import SiluAndMul
from cardcage.diffusion.runtime.layers.custom_op import CustomOp
from cardcage.diffusion.runtime.layers.dispatch import op_class_name as op_key
from cardcage.diffusion.runtime.layers.layernorm import RMSNorm

from .evidence import EVIDENCE
from .platform import DISPATCH_KEY

__all__ = [
    "DISPATCH_KEY",
    "RMS_NORM",
    "SILU_AND_MUL",
    "op_key",
    "register_custom_ops",
    "rms_norm_forward",
    "silu_and_mul_forward",
]


#: The evidence keys of the forwards under cardcage's runtime (cardcage's op classes).
RMS_NORM = op_key(RMSNorm)
SILU_AND_MUL = op_key(SiluAndMul)


def rms_norm_forward(op: RMSNorm, x: Any, residual: Any = None) -> Any:
    """``RMSNorm`` through torch's fused kernel; the same contract as ``forward_native()``.

    With ``residual``, ``x + residual`` (summed in float32) is normalized and
    ``(normalized, x + residual)`` returned, both in ``x``'s dtype.
    """
    EVIDENCE.record("forward", op_key(op))
    if x.shape[-1] != op.hidden_size:
        raise ValueError(f"Expected hidden_size to be {op.hidden_size}, but found: {x.shape[-1]}")
    orig_dtype = x.dtype
    x32 = x.to(torch.float32)
    if residual is not None:
        x32 = x32 + residual.to(torch.float32)
        residual = x32.to(orig_dtype)
    out = torch.nn.functional.rms_norm(
        x32, (op.hidden_size,), op.weight.to(torch.float32), op.variance_epsilon
    ).to(orig_dtype)
    return out if residual is None else (out, residual)


def silu_and_mul_forward(op: SiluAndMul, x: Any) -> Any:
    """``SiluAndMul``: ``silu(x[..., :d]) * x[..., d:]`` into one new tensor, ``d`` half the last
    dimension; an odd last dimension fails as ``forward_native()`` does."""
    EVIDENCE.record("forward", op_key(op))
    if x.shape[-1] % 2:
        raise ValueError(f"SiluAndMul needs an even last dimension, got {x.shape[-1]}")
    d = x.shape[-1] // 2
    # SiLU's backward reads its input, not its output, so multiplying the output in place is
    # safe under autograd too.
    return torch.nn.functional.silu(x[..., :d]).mul_(x[..., d:])


def register_custom_ops() -> None:
    """Register every demo_cpu forward under ``DISPATCH_KEY`` (idempotent).

    Under SGLang each registration also reaches SGLang's op of the same kind; one SGLang lacks
    is reported with a WARNING naming the kernel and the fix.
    """
    CustomOp.register_oot_forward(RMSNorm, fn=rms_norm_forward, platform_key=DISPATCH_KEY)
    CustomOp.register_oot_forward(SiluAndMul, fn=silu_and_mul_forward, platform_key=DISPATCH_KEY)
