"""demo_cuda's custom-op forwards, registered with ``CustomOp.register_oot_forward()``.

demo_cuda's ``get_dispatch_key_name()`` is ``"cuda"``: the diffusion runtime then reuses every
op's ``forward_cuda()`` kernel although the platform reports itself as out-of-tree, not as the
built-in CUDA platform. A function registered for an op's exact class under ``"cuda"`` wins over
that op's ``forward_cuda()``; it receives the op instance before the normal arguments.

``rms_norm_forward`` is demo_cuda's RMSNorm: torch's fused ``torch.nn.functional.rms_norm`` (one
CUDA kernel instead of ``forward_native()``'s four), computed in float32 and cast back, so it
agrees with ``forward_native()`` to float32 rounding. Each call is counted in
``evidence.EVIDENCE`` under the event ``forward``, keyed by the class of the op that called it
(cardcage's ``RMSNorm`` under cardcage's runtime; under SGLang, cardcage hands the registration to
SGLang's ``RMSNorm``, which then calls the function with its own op).

Imported only by ``DemoCudaPlatform.init_backend()``, in a worker, where torch and the diffusion
runtime are present: it imports both at module scope.
"""

from __future__ import annotations

from typing import Any

import torch

from cardcage.diffusion.runtime.layers.custom_op import CustomOp
from cardcage.diffusion.runtime.layers.dispatch import op_class_name as op_key
from cardcage.diffusion.runtime.layers.layernorm import RMSNorm

from .evidence import EVIDENCE
from .platform import DISPATCH_KEY

__all__ = ["DISPATCH_KEY", "RMS_NORM", "op_key", "register_custom_ops", "rms_norm_forward"]


#: The evidence key of RMSNorm's forward under cardcage's runtime (cardcage's op class).
RMS_NORM = op_key(RMSNorm)


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


def register_custom_ops() -> None:
    """Register every demo_cuda forward under ``DISPATCH_KEY`` (idempotent)."""
    CustomOp.register_oot_forward(RMSNorm, fn=rms_norm_forward, platform_key=DISPATCH_KEY)
