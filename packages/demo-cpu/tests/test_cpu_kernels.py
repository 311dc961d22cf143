"""demo_cpu's kernels compute what the op table says, within its tolerances, without any host.

The references here are written apart from the kernels (the rotation as a complex product, the
norms from their definitions), so a kernel and its host's ``forward_native`` agreeing in the
hosts' scenarios is not the only check of the arithmetic. Which host op calls the kernels is the
hosts' scenarios' business (``scenario-sglang-engine``, ``scenario-vllm-engine``,
``scenario-sglang-releases``).
"""

from __future__ import annotations

import importlib.util
from typing import Any

import pytest

from cardcage.platforms.kernels import OPS, declared_kernels, load_kernel
from cardcage_demo_cpu.platform import DemoCpuSRTPlatform

pytestmark = [
    pytest.mark.torch,
    pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs torch"),
]

DTYPES = ("float32", "bfloat16", "float16")
HEAD_SIZE = 16


def _close(got: Any, want: Any, op: str, dtype_name: str) -> bool:
    import torch

    atol, rtol = OPS[op].tolerances[dtype_name]
    return got.dtype == want.dtype and bool(
        torch.allclose(got.float(), want.float(), atol=atol, rtol=rtol)
    )


def test_every_op_of_the_table_has_a_demo_cpu_kernel_that_loads() -> None:
    declared = declared_kernels(DemoCpuSRTPlatform)
    assert set(declared) == set(OPS)
    for path in declared.values():
        assert callable(load_kernel(path))


@pytest.mark.parametrize("dtype_name", DTYPES)
@pytest.mark.parametrize("affine", ["weight-and-bias", "weight-only", "neither"])
def test_layer_norm_normalises_the_last_dim_and_applies_what_it_is_given(
    dtype_name: str, affine: str
) -> None:
    import torch

    from cardcage_demo_cpu.kernels import layer_norm

    dtype = getattr(torch, dtype_name)
    generator = torch.Generator().manual_seed(1)
    x = (3 * torch.randn(5, 64, generator=generator) + 2).to(dtype)
    weight = torch.randn(64, generator=generator).to(dtype) if affine != "neither" else None
    bias = torch.randn(64, generator=generator).to(dtype) if affine == "weight-and-bias" else None
    before = x.clone()

    got = layer_norm(x, weight, bias, 1e-5)

    v = x.double()
    want = (v - v.mean(-1, keepdim=True)) / torch.sqrt(
        v.var(-1, unbiased=False, keepdim=True) + 1e-5
    )
    if weight is not None:
        want = want * weight.double()
    if bias is not None:
        want = want + bias.double()
    assert _close(got, want.to(dtype), "layer_norm", dtype_name)
    assert torch.equal(x, before)  # x is read only


def _rotated_reference(x: Any, positions: Any, rotary_dim: int, neox: bool) -> Any:
    """Each pair of channels turned by angle position * base**(-2i / rotary_dim), as a complex
    product: NeoX pairs channel i with i + rotary_dim / 2, GPT-J pairs 2i with 2i + 1."""
    import torch

    heads = x.double().reshape(x.shape[0], -1, HEAD_SIZE)
    turned, rest = heads[..., :rotary_dim], heads[..., rotary_dim:]
    half = rotary_dim // 2
    if neox:
        pairs = torch.complex(turned[..., :half], turned[..., half:])
    else:
        pairs = torch.complex(turned[..., 0::2], turned[..., 1::2])
    inv_freq = 10000.0 ** (-torch.arange(0, rotary_dim, 2, dtype=torch.float64) / rotary_dim)
    angles = positions.double()[:, None] * inv_freq[None, :]
    pairs = pairs * torch.polar(torch.ones_like(angles), angles)[:, None, :]
    if neox:
        turned = torch.cat((pairs.real, pairs.imag), dim=-1)
    else:
        turned = torch.stack((pairs.real, pairs.imag), dim=-1).flatten(-2)
    return torch.cat((turned, rest), dim=-1).reshape(x.shape).to(x.dtype)


@pytest.mark.parametrize("dtype_name", DTYPES)
@pytest.mark.parametrize(
    ("neox", "rotary_dim"), [(True, HEAD_SIZE), (False, HEAD_SIZE), (True, HEAD_SIZE // 2)]
)
def test_rotary_embedding_turns_each_pair_by_its_tokens_angle(
    dtype_name: str, neox: bool, rotary_dim: int
) -> None:
    import torch

    from cardcage_demo_cpu.kernels import rotary_embedding

    dtype = getattr(torch, dtype_name)
    generator = torch.Generator().manual_seed(2)
    # The cache as both hosts build it: rows of [cos | sin] per position, in the model's dtype.
    inv_freq = 10000.0 ** (-torch.arange(0, rotary_dim, 2, dtype=torch.float32) / rotary_dim)
    freqs = torch.arange(64, dtype=torch.float32)[:, None] * inv_freq[None, :]
    cache = torch.cat((freqs.cos(), freqs.sin()), dim=-1).to(dtype)
    positions = torch.tensor([0, 1, 7, 33, 63])
    query = torch.randn(5, 4 * HEAD_SIZE, generator=generator).to(dtype)
    key = torch.randn(5, 2 * HEAD_SIZE, generator=generator).to(dtype)
    before = (query.clone(), key.clone())

    got_query, got_key = rotary_embedding(positions, query, key, cache, HEAD_SIZE, neox)

    # The reference angles are exact; the kernel's come from a cache rounded to the dtype.
    assert _close(
        got_query,
        _rotated_reference(query, positions, rotary_dim, neox),
        "rotary_embedding",
        dtype_name,
    )
    assert _close(
        got_key,
        _rotated_reference(key, positions, rotary_dim, neox),
        "rotary_embedding",
        dtype_name,
    )
    assert torch.equal(query, before[0])
    assert torch.equal(key, before[1])
