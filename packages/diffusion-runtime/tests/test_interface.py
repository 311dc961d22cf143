"""The diffusion ``Platform`` contract: defaults, OOT errors, built-in identities, CPU for real."""

from __future__ import annotations

from pathlib import Path

import pytest
from diffusion_support import platform_dist

from cardcage.diffusion.runtime import platforms
from cardcage.diffusion.runtime.platforms.accelerators import (
    MpsPlatform,
    MusaPlatform,
    NpuPlatform,
    XpuPlatform,
)
from cardcage.diffusion.runtime.platforms.cpu import CpuPlatform
from cardcage.diffusion.runtime.platforms.cuda import CudaPlatform, RocmPlatform
from cardcage.diffusion.runtime.platforms.interface import (
    AttentionBackendEnum,
    Platform,
    PlatformEnum,
    UnspecifiedPlatform,
)
from cardcage.diffusion.runtime.platforms.registration import DIFFUSION_RUNTIME
from cardcage.diffusion.runtime.platforms.testing import set_current_platform
from cardcage.hooks.loader import runtime_platform_choice
from cardcage.hooks.testing import on_sys_path
from cardcage.platforms.errors import PlatformActivationError


class Vendor(Platform):
    _enum = PlatformEnum.OOT
    device_name = "vendor"
    device_type = "vendor"


@pytest.mark.parametrize(
    ("cls", "key", "enum"),
    [
        (CudaPlatform, "cuda", PlatformEnum.CUDA),
        (RocmPlatform, "hip", PlatformEnum.ROCM),
        (NpuPlatform, "npu", PlatformEnum.NPU),
        (XpuPlatform, "xpu", PlatformEnum.XPU),
        (MusaPlatform, "musa", PlatformEnum.MUSA),
        (CpuPlatform, "native", PlatformEnum.CPU),
        (MpsPlatform, "native", PlatformEnum.MPS),
    ],
)
def test_builtin_identity(cls: type[Platform], key: str, enum: PlatformEnum) -> None:
    platform = cls()
    assert platform.get_dispatch_key_name() == key
    assert platform._enum is enum
    assert not platform.is_out_of_tree()
    assert platform.dispatch_key


def test_torch_distributed_backends() -> None:
    assert CudaPlatform().get_torch_distributed_backend_str() == "nccl"
    assert NpuPlatform().get_torch_distributed_backend_str() == "hccl"
    assert MusaPlatform().get_torch_distributed_backend_str() == "mccl"
    assert XpuPlatform().get_torch_distributed_backend_str() == "xccl"
    assert CpuPlatform().get_torch_distributed_backend_str() == "gloo"
    assert CudaPlatform().supports_distributed_device_id()
    assert not CpuPlatform().supports_distributed_device_id()


@pytest.mark.parametrize(
    ("call", "named"),
    [
        (lambda p: p.get_device(0), "get_device()"),
        (lambda p: p.get_local_torch_device(), "get_local_torch_device()"),
        (lambda p: p.get_torch_distributed_backend_str(), "get_torch_distributed_backend_str()"),
        (lambda p: p.get_available_gpu_memory(), "get_available_gpu_memory()"),
        (lambda p: p.get_torch_library_dispatch_key(), "dispatch_key"),
        (lambda p: p.get_all_to_all_communicator_cls(), "get_all_to_all_communicator_cls()"),
    ],
)
def test_oot_defaults_say_what_to_implement(call: object, named: str) -> None:
    with pytest.raises(NotImplementedError, match="Out-of-tree diffusion platforms must") as info:
        call(Vendor())  # type: ignore[operator]
    assert named in str(info.value)


def test_base_defaults() -> None:
    platform = Vendor()
    platform.init_backend()
    platform.apply_server_args_defaults(object())
    assert platform.get_dispatch_key_name() == "native"
    assert platform.get_compile_backend() == "inductor"
    assert platform.get_compile_options(object()) is None
    assert platform.get_attn_backend_cls_str(None, 64, None) == ""
    vae = object()
    assert platform.optimize_vae(vae) is vae
    assert platform.enable_dit_layerwise_offload_by_default()
    assert not platform.device_shares_host_memory()
    assert not platform.has_device_capability((8, 0))


def test_attention_backends_and_the_unspecified_platform() -> None:
    assert str(AttentionBackendEnum.TORCH_SDPA) == "torch_sdpa"
    assert str(AttentionBackendEnum.FA2) == "fa2"
    assert AttentionBackendEnum.SLIDING_TILE_ATTN.is_sparse
    assert not AttentionBackendEnum.TORCH_SDPA.is_sparse
    assert not AttentionBackendEnum.NO_ATTENTION.is_sparse
    platform = UnspecifiedPlatform()
    assert platform._enum is PlatformEnum.UNSPECIFIED
    assert platform.device_type == ""
    assert not platform.is_out_of_tree()
    # Exported lazily from the import-light package.
    assert platforms.AttentionBackendEnum is AttentionBackendEnum
    assert platforms.UnspecifiedPlatform is UnspecifiedPlatform
    assert {"AttentionBackendEnum", "UnspecifiedPlatform"} <= set(platforms.__all__)


def test_cpu_platform_is_real() -> None:
    torch = pytest.importorskip("torch")
    platform = CpuPlatform()
    assert platform.get_device(3) == torch.device("cpu")
    assert platform.get_local_torch_device() == torch.device("cpu")
    assert platform.get_available_gpu_memory() > 0
    free, total = platform.get_available_memory()
    assert 0 < free <= total
    assert platform.get_torch_library_dispatch_key() == "CPU"
    assert not platform.enable_dit_layerwise_offload_by_default()
    with platform.inference_mode():
        assert torch.is_inference_mode_enabled()


def test_handoff_reports_the_selected_distribution(
    site: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    platform_dist(site, "vendor-a", "vendor_a", "di_handoff")
    monkeypatch.setenv("SGLANG_DIFFUSION_PLATFORM_OVERRIDE", "vendor_a")
    with on_sys_path(site):
        choice = runtime_platform_choice(DIFFUSION_RUNTIME)
    assert choice.entry_point == "vendor_a"
    assert choice.dist_name == "vendor-a"
    assert "SGLANG_DIFFUSION_PLATFORM_OVERRIDE" in choice.reason


def test_handoff_with_a_harness_platform() -> None:
    set_current_platform(CpuPlatform())
    choice = runtime_platform_choice(DIFFUSION_RUNTIME)
    assert choice.entry_point is None
    assert choice.dist_name is None


def test_activate_touching_current_platform_is_reported(
    site: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    body = (
        "from cardcage.diffusion.runtime import platforms\n"
        "    platforms.current_platform\n"
        "    return None"
    )
    platform_dist(site, "vendor-a", "vendor_a", "di_reenter", activate=body)
    monkeypatch.setenv("SGLANG_DIFFUSION_PLATFORM_OVERRIDE", "vendor_a")
    with on_sys_path(site), pytest.raises(PlatformActivationError, match="being resolved"):
        platforms.get_current_platform()


@pytest.mark.parametrize(
    ("member", "static"),
    [(PlatformEnum.CPU, (False, False)), (PlatformEnum.CUDA, (True, False)),
     (PlatformEnum.ROCM, (False, True))],
    ids=lambda v: getattr(v, "name", ""),
)  # fmt: skip
def test_a_declared_identity_answers_the_static_predicates_too(
    member: PlatformEnum, static: tuple[bool, bool]
) -> None:
    cls = type(
        "Declared",
        (Platform,),
        {"_enum": PlatformEnum.OOT, "behaves_as": member, "device_name": "d", "device_type": "d"},
    )
    assert (cls.is_cuda_static(), cls.is_rocm_static()) == static
    platform = cls()
    assert platform.is_out_of_tree()
    assert platform._enum is PlatformEnum.OOT
    assert platform.is_hip() is (member is PlatformEnum.ROCM)
    assert platform.is_cpu() is (member is PlatformEnum.CPU)
