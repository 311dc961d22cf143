"""``DemoCudaSRTPlatform``: passes core-platforms' checks; answers follow the GPU's capability."""

from __future__ import annotations

import importlib.util
from types import SimpleNamespace

import pytest
from gpu_support import NVIDIA_GPU, needs_gpu

from cardcage.hooks.snapshot import PluginEntryPoint, entry_point_snapshot
from cardcage.platforms.device_mixin import DeviceCapability
from cardcage.platforms.errors import PlatformUnavailableError, TorchNotInstalledError
from cardcage.platforms.interface import SRTPlatform
from cardcage.platforms.selection import load_platform_class
from cardcage.platforms.srt import srt_policy
from cardcage_demo_cuda import ENTRY_POINT_NAME, PLATFORM_QUALNAME
from cardcage_demo_cuda.platform import DemoCudaSRTPlatform

TORCH_INSTALLED = importlib.util.find_spec("torch") is not None
without_torch = pytest.mark.skipif(
    TORCH_INSTALLED, reason="checks the error raised when torch is absent"
)
cpu_only_torch = pytest.mark.skipif(
    not TORCH_INSTALLED or NVIDIA_GPU, reason="needs torch on a machine without a usable GPU"
)

CLASS_FACTORIES = [
    "get_graph_runner_cls",
    "get_mha_kv_pool_cls",
    "get_mla_kv_pool_cls",
    "get_dsa_kv_pool_cls",
    "get_paged_allocator_cls",
    "get_piecewise_backend_cls",
]


def _installed_entry_point() -> PluginEntryPoint:
    group = srt_policy().profile.platform_group
    (ep,) = [ep for ep in entry_point_snapshot().group(group) if ep.name == ENTRY_POINT_NAME]
    return ep


def _with_capability(major: int, minor: int) -> DemoCudaSRTPlatform:
    """A platform whose GPU reports SM ``major.minor``, on any machine."""
    platform = DemoCudaSRTPlatform()
    platform.get_device_capability = lambda device_id=0: DeviceCapability(major, minor)  # type: ignore[method-assign]
    return platform


def test_the_platform_class_passes_core_platforms_validation() -> None:
    """Import-safe: the class loads and validates on a machine without a GPU or torch."""
    cls = load_platform_class(srt_policy(), PLATFORM_QUALNAME, _installed_entry_point())
    assert cls is DemoCudaSRTPlatform
    assert issubclass(cls, SRTPlatform)


def test_identity_is_out_of_tree_even_for_cuda_hardware() -> None:
    platform = DemoCudaSRTPlatform()
    assert platform.is_out_of_tree()
    assert not platform.is_cuda()
    assert (platform.device_name, platform.device_type) == ("demo_cuda", "cuda")


def test_graph_flags_are_on() -> None:
    platform = DemoCudaSRTPlatform()
    assert platform.support_cuda_graph()
    assert platform.support_piecewise_cuda_graph()
    assert platform.is_pin_memory_available()


@pytest.mark.parametrize(
    ("capability", "fp8", "attention"),
    [((8, 0), False, "flashinfer"), ((8, 9), True, "flashinfer"), ((9, 0), True, "fa3")],
)
def test_fp8_and_attention_follow_the_compute_capability(
    capability: tuple[int, int], fp8: bool, attention: str
) -> None:
    platform = _with_capability(*capability)
    assert platform.supports_fp8() is fp8
    assert platform.get_default_attention_backend() == attention


@pytest.mark.parametrize("mode", [None, "max-autotune"])
def test_compile_and_dispatch_use_the_cuda_paths(mode: str | None) -> None:
    platform = DemoCudaSRTPlatform()
    assert platform.get_compile_backend(mode) == "inductor"
    assert platform.get_dispatch_key_name() == "cuda"
    assert platform.get_quantization_config("fp8") is None
    assert platform.get_torch_distributed_backend_str() == "nccl"


@pytest.mark.parametrize("factory", CLASS_FACTORIES)
def test_runtime_class_factories_are_left_to_the_runtime(factory: str) -> None:
    with pytest.raises(NotImplementedError):
        getattr(DemoCudaSRTPlatform(), factory)()


def test_server_args_defaults_fill_what_is_unset() -> None:
    args = SimpleNamespace(attention_backend=None, device=None)
    _with_capability(9, 0).apply_server_args_defaults(args)
    assert vars(args) == {"attention_backend": "fa3", "device": "cuda"}


def test_server_args_defaults_keep_what_the_user_chose() -> None:
    args = SimpleNamespace(attention_backend="triton", device="cuda")
    DemoCudaSRTPlatform().apply_server_args_defaults(args)
    assert (args.attention_backend, args.device) == ("triton", "cuda")


@without_torch
def test_init_backend_without_torch_says_what_to_install() -> None:
    with pytest.raises(TorchNotInstalledError, match=r"init_backend\(\).*\[torch\]"):
        DemoCudaSRTPlatform().init_backend()


@pytest.mark.torch
@cpu_only_torch
def test_init_backend_fails_clearly_when_torch_sees_no_gpu() -> None:
    with pytest.raises(
        PlatformUnavailableError, match=r"cannot use a GPU.*SGLANG_PLATFORM"
    ) as info:
        DemoCudaSRTPlatform().init_backend()
    assert (info.value.plugin, info.value.distribution) == ("demo_cuda", "cardcage-demo-cuda")


@needs_gpu
@pytest.mark.parametrize(("allow_tf32", "precision"), [("0", "highest"), ("1", "high")])
def test_init_backend_binds_the_local_rank_and_sets_tf32(
    monkeypatch: pytest.MonkeyPatch, allow_tf32: str, precision: str
) -> None:
    import torch

    monkeypatch.setenv("LOCAL_RANK", "0")
    monkeypatch.setenv("CARDCAGE_DEMO_CUDA_ALLOW_TF32", allow_tf32)
    before = (torch.get_float32_matmul_precision(), torch.backends.cudnn.allow_tf32)
    try:
        DemoCudaSRTPlatform().init_backend()
        assert torch.cuda.current_device() == 0
        assert torch.get_float32_matmul_precision() == precision
        assert torch.backends.cudnn.allow_tf32 is (allow_tf32 == "1")
    finally:
        torch.set_float32_matmul_precision(before[0])
        torch.backends.cudnn.allow_tf32 = before[1]


@needs_gpu
def test_init_backend_leaves_torchs_tf32_defaults_alone_when_unset() -> None:
    import torch

    before = (torch.get_float32_matmul_precision(), torch.backends.cudnn.allow_tf32)
    DemoCudaSRTPlatform().init_backend()
    assert (torch.get_float32_matmul_precision(), torch.backends.cudnn.allow_tf32) == before


@needs_gpu
def test_capability_driven_answers_on_the_real_gpu() -> None:
    platform = DemoCudaSRTPlatform()
    capability = platform.get_device_capability()
    assert capability is not None
    assert capability >= (7, 0)
    assert platform.supports_fp8() is (capability >= (8, 9))
    assert platform.get_default_attention_backend() in {"fa3", "flashinfer"}
