"""demo_cuda's custom ops under the key "cuda": its own RMSNorm wins, other ops reuse their
``forward_cuda()``; numerics equal ``forward_native()`` on the CPU, and on a GPU where one is."""

from __future__ import annotations

from typing import Any

import cuda_diffusion_support  # noqa: F401 - sorts first; skips without torch or the runtime
import pytest
import torch
from cuda_diffusion_support import clean_diffusion
from gpu_support import needs_gpu

from cardcage.diffusion.runtime.layers.activation import SiluAndMul
from cardcage.diffusion.runtime.layers.custom_op import CustomOp
from cardcage.diffusion.runtime.layers.layernorm import RMSNorm
from cardcage.diffusion.runtime.platforms import get_current_platform, initialize_current_platform
from cardcage.diffusion.runtime.platforms.testing import set_current_platform
from cardcage_demo_cuda.diffusion import ENTRY_POINT_NAME
from cardcage_demo_cuda.diffusion.evidence import EVIDENCE
from cardcage_demo_cuda.diffusion.ops import RMS_NORM, register_custom_ops, rms_norm_forward
from cardcage_demo_cuda.diffusion.platform import DemoCudaPlatform

__all__ = ["clean_diffusion"]  # the autouse fixture, imported so pytest finds it

pytestmark = pytest.mark.torch

TOLERANCE = {torch.float32: 1e-5, torch.bfloat16: 1e-2, torch.float16: 2e-3}


class CudaKernelOp(CustomOp):
    """An op with its own CUDA path, as most runtime ops have."""

    def forward_native(self, x: Any) -> Any:
        return x + 1

    def forward_cuda(self, x: Any) -> Any:
        return x + 2


@pytest.fixture
def registered() -> None:
    """demo_cuda is the platform and its forwards are registered, as after init_backend()."""
    set_current_platform(DemoCudaPlatform())
    register_custom_ops()


def _norm(hidden: int, device: str = "cpu") -> RMSNorm:
    op = RMSNorm(hidden).to(device)
    with torch.no_grad():
        op.weight.copy_(torch.linspace(0.5, 1.5, hidden))
    return op


@pytest.mark.usefixtures("registered")
def test_rmsnorm_dispatches_to_the_vendor_forward() -> None:
    op = _norm(16)
    assert getattr(op._forward_method, "func", None) is rms_norm_forward


@pytest.mark.usefixtures("registered")
def test_ops_with_a_cuda_kernel_reuse_it() -> None:
    op = CudaKernelOp()
    assert op._forward_method == op.forward_cuda
    assert op(torch.zeros(1)).item() == 2


@pytest.mark.usefixtures("registered")
def test_ops_without_a_cuda_kernel_fall_back_to_forward_oot() -> None:
    op = SiluAndMul()
    assert op._forward_method == op.forward_oot


@pytest.mark.usefixtures("registered")
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_the_vendor_forward_matches_forward_native(dtype: torch.dtype) -> None:
    op = _norm(64)
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(3, 64, generator=gen).to(dtype)
    residual = torch.randn(3, 64, generator=gen).to(dtype)
    tol = TOLERANCE[dtype]
    torch.testing.assert_close(op(x), op.forward_native(x), rtol=tol, atol=tol)
    out, new_residual = op(x, residual)
    want, want_residual = op.forward_native(x, residual)
    torch.testing.assert_close(out, want, rtol=tol, atol=tol)
    torch.testing.assert_close(new_residual, want_residual, rtol=0, atol=0)
    assert EVIDENCE.count("forward", RMS_NORM) == 2


@needs_gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_on_the_gpu_the_worker_path_matches_forward_native(
    monkeypatch: pytest.MonkeyPatch, dtype: torch.dtype
) -> None:
    monkeypatch.setenv("SGLANG_DIFFUSION_PLATFORM_OVERRIDE", ENTRY_POINT_NAME)
    initialize_current_platform()
    device = get_current_platform().get_local_torch_device()
    op = _norm(256, device=str(device))
    assert getattr(op._forward_method, "func", None) is rms_norm_forward
    x = torch.randn(4, 77, 256, device=device, dtype=dtype)
    out = op(x)
    assert out.device == x.device
    assert out.dtype == dtype
    tol = TOLERANCE[dtype]
    torch.testing.assert_close(out, op.forward_native(x), rtol=tol, atol=tol)
    assert EVIDENCE.count("forward", RMS_NORM) == 1
