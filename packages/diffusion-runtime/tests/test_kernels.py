"""A diffusion platform's declared kernels run in this runtime's ops after ``init_backend()``.

The platform names its kernels by op (``cardcage.platforms.kernels.OPS``), as an SRT platform
does; ``initialize_current_platform()`` runs its ``init_backend()`` and then installs them as
forwards of the runtime's ``RMSNorm`` and ``SiluAndMul``, through the real ``CustomOp`` dispatch
(SGLang's diffusion ops get them by the same registration: ``tests_integration/sglang``).
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Iterator
from importlib import metadata
from typing import Any, ClassVar

import kernel_support
import pytest
import torch

from cardcage.diffusion.runtime.layers.activation import SiluAndMul
from cardcage.diffusion.runtime.layers.custom_op import CustomOp
from cardcage.diffusion.runtime.layers.layernorm import RMSNorm
from cardcage.diffusion.runtime.platforms import Platform, PlatformEnum
from cardcage.diffusion.runtime.platforms.current import initialize_current_platform
from cardcage.diffusion.runtime.platforms.testing import (
    reset_current_platform,
    set_current_platform,
)
from cardcage.platforms import kernels

DECLARED = {
    op: f"kernel_support:{op}"
    for op in ("rms_norm", "fused_add_rms_norm", "silu_and_mul", "rotary_embedding")
}
KEY = "acme_dev"
ROOM = "cardcage.diffusion.runtime.layers"

_made = iter(range(1_000_000))


def _platform(declared: dict[str, str], init_backend: Any = None) -> Platform:
    """A vendor platform of a class of its own: kernels install once per process and class."""

    def get_dispatch_key_name(self: Platform) -> str:
        return KEY

    namespace: dict[str, Any] = {
        "_enum": PlatformEnum.OOT,
        "device_name": "acme",
        "device_type": "acme",
        "dispatch_key": "PrivateUse1",
        "kernels": declared,
        "get_dispatch_key_name": get_dispatch_key_name,
        "__module__": __name__,
    }
    if init_backend is not None:
        namespace["init_backend"] = init_backend
    cls = type(f"AcmeDiffusionPlatform{next(_made)}", (Platform,), namespace)
    platform: Platform = cls()
    return platform


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(CustomOp, "_oot_forward_registry", {})
    monkeypatch.setattr(CustomOp, "_constructed_classes", weakref.WeakSet())
    monkeypatch.delenv("CARDCAGE_KERNELS", raising=False)
    kernel_support.CALLS.clear()
    reset_current_platform()
    yield
    reset_current_platform()


def _rows(platform: Platform) -> list[dict[str, Any]]:
    cls = type(platform)
    where = f"{cls.__module__}.{cls.__qualname__}"
    return [row for row in kernels.in_effect() if row["platform"] == where]


def test_declared_kernels_run_in_the_ops_built_after_init_backend(
    caplog: pytest.LogCaptureFixture,
) -> None:
    platform = _platform(DECLARED)
    set_current_platform(platform)
    with caplog.at_level(logging.WARNING, logger="cardcage"):
        initialize_current_platform()

    norm, silu = RMSNorm(8), SiluAndMul()
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        norm.weight.copy_(torch.randn(8, generator=generator))
    x, residual = torch.randn(3, 8, generator=generator), torch.randn(3, 8, generator=generator)
    gate_up = torch.randn(3, 16, generator=generator)

    assert torch.allclose(norm(x), norm.forward_native(x))
    fused, summed = norm(x, residual)
    want_fused, want_summed = norm.forward_native(x, residual)
    assert torch.allclose(fused, want_fused)
    assert torch.allclose(summed, want_summed)
    assert torch.allclose(silu(gate_up), silu.forward_native(gate_up))
    assert kernel_support.CALLS == {"rms_norm": 1, "fused_add_rms_norm": 1, "silu_and_mul": 1}

    rows = {row["op"]: row for row in _rows(platform)}
    for op, host_op in (
        ("rms_norm", f"{ROOM}.layernorm.RMSNorm"),
        ("fused_add_rms_norm", f"{ROOM}.layernorm.RMSNorm"),
        ("silu_and_mul", f"{ROOM}.activation.SiluAndMul"),
    ):
        assert (rows[op]["host"], rows[op]["host_op"], rows[op]["in_effect"]) == (
            "cardcage",
            host_op,
            True,
        )
        assert rows[op]["mechanism"] == f"{ROOM}.custom_op.CustomOp.register_oot_forward"
    # No diffusion op is a rotary embedding: one WARNING, naming the kernel and the op.
    assert rows["rotary_embedding"]["problem"] is not None
    assert rows["rotary_embedding"]["in_effect"] is False
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, warnings
    assert "kernel_support:rotary_embedding" in warnings[0]
    assert "'rotary_embedding'" in warnings[0]


def test_a_forward_the_platform_registered_itself_is_kept_and_the_kernel_refused(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def own_forward(op: CustomOp, x: torch.Tensor, residual: Any = None) -> Any:
        return op.forward_native(x, residual)

    def init_backend(self: Platform) -> None:
        CustomOp.register_oot_forward(RMSNorm, fn=own_forward, platform_key=KEY)

    platform = _platform({"rms_norm": "kernel_support:rms_norm"}, init_backend)
    set_current_platform(platform)
    with caplog.at_level(logging.WARNING, logger="cardcage"):
        initialize_current_platform()

    norm = RMSNorm(8)
    norm(torch.ones(2, 8))
    assert kernel_support.CALLS["rms_norm"] == 0
    assert CustomOp._oot_forward_registry[(RMSNorm, KEY)] is own_forward
    (row,) = _rows(platform)
    assert row["in_effect"] is False
    assert "own_forward" in row["problem"]
    assert "Register the op once" in row["problem"]
    assert [r.levelno for r in caplog.records].count(logging.WARNING) == 1


def test_cardcage_kernels_false_leaves_the_ops_on_their_own_forwards(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CARDCAGE_KERNELS", "0")
    platform = _platform(DECLARED)
    set_current_platform(platform)
    initialize_current_platform()

    RMSNorm(8)(torch.ones(2, 8))
    assert kernel_support.CALLS == {}
    assert _rows(platform) == []


class _Plain(Platform):
    _enum = PlatformEnum.OOT
    device_name = "plain"
    device_type = "plain"
    kernels: ClassVar[dict[str, str]] = {}


def test_a_platform_without_kernels_registers_nothing() -> None:
    set_current_platform(_Plain())
    initialize_current_platform()
    assert CustomOp._oot_forward_registry == {}


class DeclaringPlatform(Platform):
    _enum = PlatformEnum.OOT
    device_name = "acme"
    device_type = "acme"
    kernels: ClassVar[dict[str, str]] = {"rms_norm": "kernel_support:rms_norm"}


def test_cardcage_hooks_lists_a_diffusion_kernel_with_the_diffusion_ops_it_is_meant_for() -> None:
    # What `cardcage hooks` and `doctor` print for a selected diffusion platform: the diffusion
    # ops of cardcage's runtime and SGLang's, never the SRT or vLLM ops of the same name.
    from cardcage.diffusion.runtime.layers import kernels as diffusion_kernels
    from cardcage.platforms.diagnostics.hooks import kernel_rows
    from cardcage.platforms.hosts.sglang.releases import RELEASES

    (row,) = kernel_rows(f"{__name__}:DeclaringPlatform")
    assert (row.op, row.status) == ("rms_norm", "registered")
    with_diffusion = [r.version for r in RELEASES if r.diffusion_plugins]
    assert [(t.host, t.host_op, t.mechanism) for t in row.targets] == [
        ("cardcage", f"{ROOM}.layernorm.RMSNorm", diffusion_kernels.MECHANISM),
        ("sglang", diffusion_kernels.SGLANG_OPS["rms_norm"], diffusion_kernels.SGLANG_MECHANISM),
    ]
    ours = metadata.version("cardcage-diffusion-runtime")
    assert row.targets[0].releases == f"{ours} - {ours}"
    assert row.targets[1].releases == f"{with_diffusion[0]} - {with_diffusion[-1]}"
