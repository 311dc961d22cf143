"""RMSNorm and SiluAndMul numerics against hand-written references."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch

from cardcage.diffusion.runtime.layers.activation import SiluAndMul
from cardcage.diffusion.runtime.layers.layernorm import RMSNorm
from cardcage.diffusion.runtime.platforms.cpu import CpuPlatform
from cardcage.diffusion.runtime.platforms.testing import (
    reset_current_platform,
    set_current_platform,
)


@pytest.fixture(autouse=True)
def _cpu_platform() -> Iterator[None]:
    reset_current_platform()
    set_current_platform(CpuPlatform())
    yield
    reset_current_platform()


def _rms_reference(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    xs = x.double()
    rows = []
    for row in xs.reshape(-1, xs.shape[-1]):
        rms = (sum(float(v) ** 2 for v in row) / row.numel() + eps) ** 0.5
        rows.append(row / rms * weight.double())
    return torch.stack(rows).reshape(x.shape)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_rmsnorm_matches_reference(dtype: torch.dtype) -> None:
    torch.manual_seed(0)
    norm = RMSNorm(16, eps=1e-5)
    with torch.no_grad():
        norm.weight.copy_(torch.randn(16))
    x = (torch.randn(2, 3, 16) * 4).to(dtype)
    out = norm(x)
    assert out.dtype == dtype
    assert out.shape == x.shape
    expected = _rms_reference(x, norm.weight.detach(), 1e-5).to(dtype)
    torch.testing.assert_close(out, expected)


def test_rmsnorm_defaults() -> None:
    norm = RMSNorm(8)
    assert norm.variance_epsilon == 1e-6
    torch.testing.assert_close(norm.weight.detach(), torch.ones(8))
    assert "hidden_size=8" in repr(norm)


def test_rmsnorm_with_residual() -> None:
    torch.manual_seed(1)
    norm = RMSNorm(8)
    x, residual = torch.randn(4, 8), torch.randn(4, 8)
    out, new_residual = norm(x, residual)
    torch.testing.assert_close(new_residual, x + residual)
    torch.testing.assert_close(
        out, _rms_reference(x + residual, norm.weight.detach(), 1e-6).float()
    )


def test_rmsnorm_rejects_the_wrong_hidden_size() -> None:
    with pytest.raises(ValueError, match="Expected hidden_size to be 8, but found: 4"):
        RMSNorm(8)(torch.randn(2, 4))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_silu_and_mul_matches_reference(dtype: torch.dtype) -> None:
    torch.manual_seed(2)
    x = torch.randn(2, 3, 10).to(dtype)
    out = SiluAndMul()(x)
    assert out.shape == (2, 3, 5)
    assert out.dtype == dtype
    a, b = x[..., :5].double(), x[..., 5:].double()
    expected = (a / (1 + torch.exp(-a)) * b).to(dtype)
    torch.testing.assert_close(out, expected)


def test_silu_and_mul_rejects_an_odd_last_dimension() -> None:
    with pytest.raises(ValueError, match="even last dimension"):
        SiluAndMul()(torch.randn(2, 5))
