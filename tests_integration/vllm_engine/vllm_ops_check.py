"""vLLM's own ``RMSNorm``, ``SiluAndMul``, ``LayerNorm`` and ``RotaryEmbedding`` on demo-cpu's
platform, as one JSON report.

Run by ``test_vllm_kernels.py`` in a fresh interpreter (``python vllm_ops_check.py``) with
``CARDCAGE_DEMO_CPU=1``, so vLLM's own selection picks demo-cpu's adapter; the script then does
what vLLM's worker does on that platform before it builds a model (cardcage's worker subclass
runs the vendor's ``init_backend()`` and installs its kernels: ``run_init_backend()``), builds
vLLM's real ops under a default ``VllmConfig`` and calls them. Per dtype it compares each call
with vLLM's own ``forward_native`` on the same inputs, within the op table's tolerance; it
reports demo-cpu's kernel counters and ``cardcage.platforms.kernels.in_effect()``. Nothing of
vLLM is stubbed or patched.
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
    from vllm.config import CompilationConfig, VllmConfig, set_current_vllm_config
    from vllm.platforms import current_platform

    from cardcage.platforms import kernels
    from cardcage.platforms.hosts.vllm.worker import run_init_backend
    from cardcage_demo_cpu.evidence import EVIDENCE

    run_init_backend()  # what the worker cardcage hands vLLM does first, in its init_device()
    report: dict[str, Any] = {"platform": type(current_platform).__qualname__, "close": {}}
    # Custom ops on, as in the engine's eager runs (a compiling config turns them off and every
    # op runs its forward_native, which no out-of-tree op replaces).
    config = VllmConfig(compilation_config=CompilationConfig(custom_ops=["all"]))
    with set_current_vllm_config(config):
        from vllm.model_executor.layers.activation import SiluAndMul
        from vllm.model_executor.layers.layernorm import LayerNorm, RMSNorm
        from vllm.model_executor.layers.rotary_embedding.base import RotaryEmbedding

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
            # vLLM's fused form may update its inputs in place: each call gets its own copies.
            out = norm(x.clone())
            fused, summed = norm(x.clone(), residual.clone())
            want = norm.forward_native(x.clone())
            want_fused, want_summed = norm.forward_native(x.clone(), residual.clone())
            report["close"][str(dtype)] = {
                "rms_norm": _close(out, want, "rms_norm", dtype),
                "fused_add_rms_norm": _close(fused, want_fused, "fused_add_rms_norm", dtype)
                and _close(summed, want_summed, "fused_add_rms_norm", dtype),
                "silu_and_mul": _close(
                    silu(gate_up), silu.forward_native(gate_up), "silu_and_mul", dtype
                ),
            }
            # vLLM's LayerNorm normalises in the wider of x's and its weight's dtypes: a
            # float32 weight makes a low-precision x go through float32 and back.
            layer = LayerNorm(HIDDEN, dtype=torch.float32)
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
                    all(
                        _close(g, w, "rotary_embedding", dtype)
                        for g, w in zip(got, want, strict=True)
                    )
                )
            report["close"][str(dtype)]["rotary_embedding"] = all(rotated)
            report.setdefault(
                "classes",
                {
                    name: f"{type(op).__module__}.{type(op).__qualname__}"
                    for name, op in (
                        ("norm", norm),
                        ("silu", silu),
                        ("layer", layer),
                        ("rope", rope),
                    )
                },
            )
    report["counts"] = {op: EVIDENCE.count("kernel", op) for op in OPS}
    report["in_effect"] = kernels.in_effect()
    return report


if __name__ == "__main__":
    json.dump(main(), sys.stdout)
