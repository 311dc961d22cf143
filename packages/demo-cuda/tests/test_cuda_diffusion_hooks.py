"""The diffusion general plugin of demo-cuda: loaded only for demo_cuda, it records which forward
each custom op got."""

from __future__ import annotations

import cuda_diffusion_support  # noqa: F401 - sorts first; skips without torch or the runtime
import pytest
import torch
from cuda_diffusion_support import clean_diffusion
from gpu_support import needs_gpu

from cardcage.diffusion.runtime.layers.activation import SiluAndMul
from cardcage.diffusion.runtime.layers.layernorm import RMSNorm
from cardcage.diffusion.runtime.platforms import initialize_current_platform
from cardcage.diffusion.runtime.platforms.plugins import (
    HookRegistry,
    HookType,
    apply_plugin_hooks,
    load_plugins,
)
from cardcage.diffusion.runtime.platforms.testing import set_current_platform
from cardcage.hooks import HookRegistry as SRTHookRegistry
from cardcage.hooks import loader
from cardcage.hooks.profile import DIFFUSION_PROFILE
from cardcage_demo_cuda.diffusion import ENTRY_POINT_NAME
from cardcage_demo_cuda.diffusion.evidence import EVIDENCE
from cardcage_demo_cuda.diffusion.hooks import DISPATCH_FORWARD, record_dispatch, register
from cardcage_demo_cuda.diffusion.ops import RMS_NORM, register_custom_ops
from cardcage_demo_cuda.diffusion.platform import DemoCudaPlatform

__all__ = ["clean_diffusion"]  # the autouse fixture, imported so pytest finds it

pytestmark = pytest.mark.torch

SILU = f"{SiluAndMul.__module__}.{SiluAndMul.__qualname__}"
VENDOR_FORWARD = "cardcage_demo_cuda.diffusion.ops.rms_norm_forward"


def test_register_adds_one_around_hook_to_the_diffusion_registry_only() -> None:
    with SRTHookRegistry.sandbox():
        register()
        srt = SRTHookRegistry.registrations()
    found = {
        t: [(r.hook_type, r.hook) for r in rs] for t, rs in HookRegistry.registrations().items()
    }
    assert found == {DISPATCH_FORWARD: [(HookType.AROUND, record_dispatch)]}
    assert srt == {}


def test_the_loader_runs_the_plugin_for_demo_cuda_and_the_hook_records_dispatch() -> None:
    """On any machine: the real loader, told that demo_cuda's distribution was selected."""
    choice = loader.PlatformChoice(ENTRY_POINT_NAME, "cardcage-demo-cuda", reason="test")
    try:
        report = loader.load_plugins(DIFFUSION_PROFILE, HookRegistry, selection=choice)
        assert ENTRY_POINT_NAME in report.names("executed")
        set_current_platform(DemoCudaPlatform())
        register_custom_ops()
        RMSNorm(8)
        SiluAndMul()
    finally:
        loader.reset_plugin_state(DIFFUSION_PROFILE, HookRegistry)
    assert set(EVIDENCE.keys("dispatch")) == {
        f"{RMS_NORM} -> {VENDOR_FORWARD}",
        f"{SILU} -> forward_oot",
    }


@needs_gpu
def test_on_a_gpu_worker_start_up_applies_the_hook(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SGLANG_DIFFUSION_PLATFORM_OVERRIDE", ENTRY_POINT_NAME)
    initialize_current_platform()
    load_plugins()
    report = apply_plugin_hooks()
    assert ENTRY_POINT_NAME in report.names("executed")
    op = RMSNorm(8).cuda()
    op(torch.ones(1, 8, device="cuda"))
    assert EVIDENCE.count("dispatch", f"{RMS_NORM} -> {VENDOR_FORWARD}") == 1
    assert EVIDENCE.count("forward", RMS_NORM) == 1
