"""SGLang's own SRT ``RMSNorm``, ``SiluAndMul``, ``LayerNorm`` and ``RotaryEmbedding`` on
demo-cpu's platform, as one JSON report.

Run by ``test_srt_kernels.py`` in a fresh interpreter (``python srt_ops_check.py``) with
``SGLANG_PLATFORM=demo_cpu``, so SGLang selects the platform exactly as its scheduler does; the
script then does what SGLang's model runner does before it builds a model (calls the selected
platform's ``init_backend()``), builds SGLang's real ops and calls them. Per dtype it compares
each call with SGLang's own ``forward_native`` on the same inputs, within the op table's
tolerance; it reports demo-cpu's kernel counters and ``cardcage.platforms.kernels.in_effect()``.
Nothing of SGLang is stubbed or patched.
"""

from __future__ import annotations

import json
import sys
from typing import Any

HIDDEN = 64
ROWS = 5
HEAD_SIZE = 16
#: Rotary embeddings: NeoX style over whole heads, GPT-J style over half of each head.
ROTARY_STYLES = {"neox": (True, HEAD_SIZE), "gptj": (False, HEAD_SIZE // 2)}
OPS = ("rms_norm", "fused_add_rms_norm", "silu_and_mul", "layer_norm", "rotary_embedding")


def _close(got: Any, want: Any, op: str, dtype: Any) -> bool:
    import torch

    from cardcage.platforms.kernels import OPS

    atol, rtol = OPS[op].tolerances[str(dtype).removeprefix("torch.")]
    return bool(torch.allclose(got.float(), want.float(), atol=atol, rtol=rtol))


def main() -> dict[str, Any]:
    import torch
    from sglang.srt.platforms import current_platform

    current_platform.init_backend()  # what SGLang's model runner does before it builds a model
    from sglang.srt.layers.activation import SiluAndMul
    from sglang.srt.layers.layernorm import LayerNorm, RMSNorm
    from sglang.srt.layers.rotary_embedding.base import RotaryEmbedding

    from cardcage.platforms import kernels
    from cardcage_demo_cpu.evidence import EVIDENCE

    report: dict[str, Any] = {"close": {}}
    for dtype in (torch.float32, torch.bfloat16, torch.float16):
        generator = torch.Generator().manual_seed(0)
        norm = RMSNorm(HIDDEN, eps=1e-6)
        with torch.no_grad():
            norm.weight.copy_(torch.randn(HIDDEN, generator=generator))
        norm = norm.to(dtype)
        x = torch.randn(ROWS, HIDDEN, generator=generator).to(dtype)
        residual = torch.randn(ROWS, HIDDEN, generator=generator).to(dtype)
        gate_up = torch.randn(ROWS, 2 * HIDDEN, generator=generator).to(dtype)
        silu = SiluAndMul()
        out, (fused, summed) = norm(x), norm(x, residual)
        want, (want_fused, want_summed) = norm.forward_native(x), norm.forward_native(x, residual)
        report["close"][str(dtype)] = {
            "rms_norm": _close(out, want, "rms_norm", dtype),
            "fused_add_rms_norm": _close(fused, want_fused, "fused_add_rms_norm", dtype)
            and _close(summed, want_summed, "fused_add_rms_norm", dtype),
            "silu_and_mul": _close(
                silu(gate_up), silu.forward_native(gate_up), "silu_and_mul", dtype
            ),
        }
        # SGLang's LayerNorm normalises in its own dtype (float32 by default) whatever x's is.
        layer = LayerNorm(HIDDEN, eps=1e-5)
        with torch.no_grad():
            layer.weight.copy_(torch.randn(HIDDEN, generator=generator))
            layer.bias.copy_(torch.randn(HIDDEN, generator=generator))
        report["close"][str(dtype)]["layer_norm"] = _close(
            layer(x), layer.forward_native(x), "layer_norm", dtype
        )
        positions = torch.tensor([0, 3, 7, 1, 40])
        rotated = []
        for neox, rotary_dim in ROTARY_STYLES.values():
            rope = RotaryEmbedding(HEAD_SIZE, rotary_dim, 64, 10000, neox, dtype)
            query = torch.randn(ROWS, 4 * HEAD_SIZE, generator=generator).to(dtype)
            key = torch.randn(ROWS, 2 * HEAD_SIZE, generator=generator).to(dtype)
            got = rope(positions, query.clone(), key.clone())
            want = rope.forward_native(positions, query.clone(), key.clone())
            rotated.append(
                all(_close(g, w, "rotary_embedding", dtype) for g, w in zip(got, want, strict=True))
            )
        report["close"][str(dtype)]["rotary_embedding"] = all(rotated)
    report["counts"] = {op: EVIDENCE.count("kernel", op) for op in OPS}
    report["in_effect"] = kernels.in_effect()
    return report


if __name__ == "__main__":
    json.dump(main(), sys.stdout)
