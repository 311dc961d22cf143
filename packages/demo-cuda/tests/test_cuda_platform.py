"""``DemoCudaSRTPlatform``: passes core-platforms' checks; answers follow the GPU's capability."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from types import SimpleNamespace

import pytest
from gpu_support import NVIDIA_GPU, needs_gpu

from cardcage.hooks.snapshot import PluginEntryPoint, entry_point_snapshot
from cardcage.platforms.device_mixin import DeviceCapability
from cardcage.platforms.errors import PlatformUnavailableError, TorchNotInstalledError
from cardcage.platforms.interface import KVPoolKind, PlatformCapabilities, SRTPlatform
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
    "get_full_graph_backend_cls",
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


def test_capabilities_claim_triton_and_pynccl_but_no_graphs() -> None:
    platform = DemoCudaSRTPlatform()
    assert platform.capabilities == PlatformCapabilities(supports_triton=True, supports_pynccl=True)
    # An out-of-tree platform that claims graphs must return its own runner and backend.
    assert not platform.capabilities.graph_capture
    assert platform.get_graph_runner_cls() is None
    assert platform.is_pin_memory_available()


def test_the_platform_uses_only_sglang_0_5_23_names() -> None:
    # A name of the seed's contract that SGLang 0.5.23 no longer reads (supports_fp8(),
    # support_cuda_graph(), ...) would warn when the class is defined: here that is an error.
    script = "import warnings; warnings.simplefilter('error')\nimport cardcage_demo_cuda.platform\n"
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize(
    ("capability", "fp8", "attention"),
    [((8, 0), False, "flashinfer"), ((8, 9), True, "flashinfer"), ((9, 0), True, "fa3")],
)
def test_fp8_and_attention_follow_the_compute_capability(
    capability: tuple[int, int], fp8: bool, attention: str
) -> None:
    platform = _with_capability(*capability)
    assert platform.has_fp8_tensor_cores() is fp8
    assert platform.get_default_attention_backend() == attention


def test_fp8_quantization_is_refused_below_sm_8_9_with_the_fix() -> None:
    with pytest.raises(ValueError, match=r"'fp8': fp8 needs compute capability 8\.9 or later"):
        _with_capability(8, 0).get_quantization_config("fp8")
    assert _with_capability(8, 0).get_quantization_config("awq") is None
    assert _with_capability(9, 0).get_quantization_config("fp8") is None


@pytest.mark.parametrize("mode", [None, "max-autotune"])
def test_compile_and_dispatch_use_the_cuda_paths(mode: str | None) -> None:
    platform = DemoCudaSRTPlatform()
    assert platform.get_compile_backend(mode) == "inductor"
    assert platform.get_dispatch_key_name() == "cuda"
    assert platform.get_torch_distributed_backend_str() == "nccl"


@pytest.mark.parametrize("factory", CLASS_FACTORIES)
def test_runtime_class_factories_are_left_to_the_runtime(factory: str) -> None:
    assert getattr(DemoCudaSRTPlatform(), factory)() is None


@pytest.mark.parametrize("kind", ["mha", "mla", "dsa"])
def test_every_kv_pool_is_the_runtimes_own(kind: KVPoolKind) -> None:
    assert DemoCudaSRTPlatform().get_kv_pool_cls(kind=kind) is None


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
    assert platform.has_fp8_tensor_cores() is (capability >= (8, 9))
    assert platform.get_default_attention_backend() in {"fa3", "flashinfer"}
