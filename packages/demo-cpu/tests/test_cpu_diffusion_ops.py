"""demo_cpu's RMSNorm and SiluAndMul forwards: chosen by real ``CustomOp`` dispatch after
``init_backend()``, equal to ``forward_native()``, and counted."""

from __future__ import annotations

import cpu_diffusion_support  # noqa: F401 - sorts first; skips without torch or the runtime
import pytest
import torch
from cpu_diffusion_support import clean_diffusion

from cardcage.diffusion.runtime.layers.activation import SiluAndMul
from cardcage.diffusion.runtime.layers.custom_op import CustomOp
from cardcage.diffusion.runtime.layers.layernorm import RMSNorm
from cardcage.diffusion.runtime.platforms import get_current_platform, initialize_current_platform
from cardcage.diffusion.runtime.platforms.testing import set_current_platform
from cardcage_demo_cpu.diffusion import ENTRY_POINT_NAME
from cardcage_demo_cpu.diffusion.evidence import EVIDENCE
from cardcage_demo_cpu.diffusion.ops import (
    RMS_NORM,
    SILU_AND_MUL,
    rms_norm_forward,
    silu_and_mul_forward,
)
from cardcage_demo_cpu.diffusion.platform import DemoCpuPlatform

__all__ = ["clean_diffusion"]  # the autouse fixture, imported so pytest finds it

pytestmark = pytest.mark.torch

#: float32 agrees to rounding; bfloat16 to one unit in its last place (8 mantissa bits).
TOLERANCE = {torch.float32: 1e-5, torch.bfloat16: 1e-2, torch.float16: 2e-3}


@pytest.fixture
def worker(monkeypatch: pytest.MonkeyPatch) -> DemoCpuPlatform:
    """A worker that selected demo_cpu through the override and ran its backend init."""
    monkeypatch.setenv("SGLANG_DIFFUSION_PLATFORM_OVERRIDE", ENTRY_POINT_NAME)
    initialize_current_platform()
    platform = get_current_platform()
    assert isinstance(platform, DemoCpuPlatform)
    return platform


def _norm(hidden: int, eps: float = 1e-6) -> RMSNorm:
    op = RMSNorm(hidden, eps=eps)
    with torch.no_grad():
        op.weight.copy_(torch.linspace(0.5, 1.5, hidden))
    return op


def test_ops_built_after_init_backend_dispatch_to_the_vendor_forward(
    worker: DemoCpuPlatform,
) -> None:
    op = _norm(64)
    chosen = op._forward_method
    assert getattr(chosen, "func", None) is rms_norm_forward
    assert chosen.args == (op,)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("shape", [(3, 64), (2, 5, 128), (1, 1, 1, 8)])
def test_the_vendor_forward_matches_forward_native(
    worker: DemoCpuPlatform, dtype: torch.dtype, shape: tuple[int, ...]
) -> None:
    op = _norm(shape[-1])
    x = torch.randn(shape, generator=torch.Generator().manual_seed(0)).to(dtype) * 3
    out = op(x)
    assert out.dtype == dtype
    tol = TOLERANCE[dtype]
    torch.testing.assert_close(out, op.forward_native(x), rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_the_residual_form_matches_forward_native(
    worker: DemoCpuPlatform, dtype: torch.dtype
) -> None:
    op = _norm(32, eps=1e-5)
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(4, 32, generator=gen).to(dtype)
    residual = torch.randn(4, 32, generator=gen).to(dtype)
    out, new_residual = op(x, residual)
    want, want_residual = op.forward_native(x, residual)
    tol = TOLERANCE[dtype]
    torch.testing.assert_close(out, want, rtol=tol, atol=tol)
    torch.testing.assert_close(new_residual, want_residual, rtol=0, atol=0)


def test_the_input_is_left_untouched(worker: DemoCpuPlatform) -> None:
    op = _norm(16)
    x = torch.randn(2, 16)
    before = x.clone()
    op(x)
    assert torch.equal(x, before)


def test_a_wrong_hidden_size_fails_as_forward_native_does(worker: DemoCpuPlatform) -> None:
    op = _norm(16)
    with pytest.raises(ValueError, match="Expected hidden_size to be 16, but found: 8"):
        op(torch.ones(2, 8))


def test_each_vendor_forward_call_is_counted(worker: DemoCpuPlatform) -> None:
    op = _norm(8)
    for _ in range(3):
        op(torch.ones(1, 8))
    assert EVIDENCE.count("forward", RMS_NORM) == 3
    assert EVIDENCE.count("init_backend", ENTRY_POINT_NAME) == 1


def test_the_vendor_forward_runs_under_inference_mode(worker: DemoCpuPlatform) -> None:
    op = _norm(8)
    with worker.inference_mode():
        out = op(torch.ones(2, 8))
    assert out.is_inference()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("shape", [(3, 16), (2, 5, 128)])
def test_silu_and_mul_dispatches_to_the_vendor_forward_and_equals_forward_native(
    worker: DemoCpuPlatform, dtype: torch.dtype, shape: tuple[int, ...]
) -> None:
    op = SiluAndMul()
    assert getattr(op._forward_method, "func", None) is silu_and_mul_forward
    x = (torch.randn(shape, generator=torch.Generator().manual_seed(2)) * 3).to(dtype)
    before = x.clone()
    out = op(x)
    # The same operations in the same order as forward_native(): equal, not just close.
    assert out.dtype == dtype
    assert out.shape == (*shape[:-1], shape[-1] // 2)
    assert torch.equal(out, op.forward_native(x))
    assert torch.equal(x, before)
    assert EVIDENCE.count("forward", SILU_AND_MUL) == 1


def test_silu_and_mul_keeps_forward_natives_contract(worker: DemoCpuPlatform) -> None:
    op = SiluAndMul()
    with pytest.raises(ValueError, match="needs an even last dimension, got 7"):
        op(torch.ones(2, 7))
    x = torch.randn(4, 8, requires_grad=True)
    op(x).sum().backward()  # in place on SiLU's output, which its backward does not read
    reference = x.detach().clone().requires_grad_(True)
    op.forward_native(reference).sum().backward()
    assert x.grad is not None
    torch.testing.assert_close(x.grad, reference.grad)


class Doubler(CustomOp):
    def forward_native(self, x: torch.Tensor) -> torch.Tensor:
        return x * 2


def test_ops_without_a_vendor_forward_fall_back_to_forward_oot(worker: DemoCpuPlatform) -> None:
    op = Doubler()
    x = torch.randn(3, 8)
    assert op._forward_method == op.forward_oot
    torch.testing.assert_close(op(x), op.forward_native(x))


def test_ops_built_before_init_backend_keep_the_portable_forward() -> None:
    # Dispatch is resolved at construction: registrations must come first, in init_backend().
    set_current_platform(DemoCpuPlatform())
    early = _norm(8)
    get_current_platform().init_backend()
    late = _norm(8)
    assert early._forward_method == early.forward_oot
    assert getattr(late._forward_method, "func", None) is rms_norm_forward
