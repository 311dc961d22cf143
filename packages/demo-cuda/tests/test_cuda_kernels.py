"""demo_cuda's kernels: declared by op, loadable by cardcage, and computing what the op table says.

They run on the CPU here (torch's fused ops run on any device); on a GPU the same functions run
on CUDA tensors. Which host op calls them is the hosts' scenarios' business (demo-cpu's kernels
go through the same path there).
"""

from __future__ import annotations

import importlib.util

import pytest

from cardcage.platforms.kernels import OPS, declared_kernels, load_kernel
from cardcage_demo_cuda.platform import DemoCudaSRTPlatform

pytestmark = [
    pytest.mark.torch,
    pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs torch"),
]

DTYPES = ("float32", "bfloat16", "float16")


def test_every_declared_kernel_is_an_op_of_the_table_and_loads() -> None:
    declared = declared_kernels(DemoCudaSRTPlatform)
    assert set(declared) == {"rms_norm", "fused_add_rms_norm", "silu_and_mul"}
    assert set(declared) <= set(OPS)
    for path in declared.values():
        assert callable(load_kernel(path))


@pytest.mark.parametrize("dtype_name", DTYPES)
def test_the_kernels_compute_the_ops_reference_within_its_tolerance(dtype_name: str) -> None:
    import torch

    from cardcage_demo_cuda import kernels

    dtype = getattr(torch, dtype_name)
    generator = torch.Generator().manual_seed(0)
    x, residual = (torch.randn(4, 64, generator=generator).to(dtype) for _ in range(2))
    weight = torch.randn(64, generator=generator).to(dtype)
    gate_up = torch.randn(4, 128, generator=generator).to(dtype)

    def reference_norm(value: torch.Tensor) -> torch.Tensor:
        v = value.float()
        return (v * torch.rsqrt(v.pow(2).mean(-1, keepdim=True) + 1e-6) * weight.float()).to(dtype)

    def close(got: torch.Tensor, want: torch.Tensor, op: str) -> bool:
        atol, rtol = OPS[op].tolerances[dtype_name]
        return bool(torch.allclose(got.float(), want.float(), atol=atol, rtol=rtol))

    assert close(kernels.rms_norm(x, weight, 1e-6), reference_norm(x), "rms_norm")
    out, summed = kernels.fused_add_rms_norm(x, residual, weight, 1e-6)
    want_sum = (x.float() + residual.float()).to(dtype)
    assert close(summed, want_sum, "fused_add_rms_norm")
    assert close(out, reference_norm(x.float() + residual.float()), "fused_add_rms_norm")
    d = gate_up.shape[-1] // 2
    want_silu = torch.nn.functional.silu(gate_up[..., :d].float()) * gate_up[..., d:].float()
    assert close(kernels.silu_and_mul(gate_up), want_silu, "silu_and_mul")
