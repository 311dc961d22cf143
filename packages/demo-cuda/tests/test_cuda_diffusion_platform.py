"""``DemoCudaPlatform``: passes the diffusion runtime's checks everywhere; fails clearly without a
GPU; selected and initialised for real where one is."""

from __future__ import annotations

from types import SimpleNamespace

import cuda_diffusion_support  # sorts first: skips this module without torch or the runtime
import pytest
import torch
from cuda_diffusion_support import clean_diffusion
from gpu_support import NVIDIA_GPU, needs_gpu, without_gpu

from cardcage.diffusion.runtime.distributed import resolve_all_to_all_communicator_cls
from cardcage.diffusion.runtime.distributed.device_communicators import CudaCommunicator
from cardcage.diffusion.runtime.layers.custom_op import CustomOp
from cardcage.diffusion.runtime.layers.layernorm import RMSNorm
from cardcage.diffusion.runtime.platforms import (
    Platform,
    get_current_platform,
    get_selected_platform_dist,
    initialize_current_platform,
)
from cardcage.diffusion.runtime.platforms.policy import diffusion_policy
from cardcage.platforms.errors import PlatformUnavailableError
from cardcage.platforms.selection import load_platform_class
from cardcage_demo_cuda.diffusion import ENTRY_POINT_NAME, PLATFORM_QUALNAME
from cardcage_demo_cuda.diffusion.platform import (
    COMMUNICATOR_QUALNAME,
    DISPATCH_KEY,
    DemoCudaPlatform,
)

__all__ = ["clean_diffusion"]  # the autouse fixture, imported so pytest finds it

pytestmark = pytest.mark.torch

OVERRIDE = "SGLANG_DIFFUSION_PLATFORM_OVERRIDE"
GIB = 1 << 30
cpu_only_torch = pytest.mark.skipif(NVIDIA_GPU, reason="checks a machine without a usable GPU")


@pytest.fixture
def platform() -> DemoCudaPlatform:
    return DemoCudaPlatform()


def test_the_class_passes_the_diffusion_runtimes_validation() -> None:
    """Import-safe: the class loads and validates on a machine without a GPU."""
    cls = load_platform_class(
        diffusion_policy(), PLATFORM_QUALNAME, cuda_diffusion_support.installed_entry_point()
    )
    assert cls is DemoCudaPlatform
    assert issubclass(cls, Platform)


def test_identity_is_out_of_tree_with_the_cuda_keys(platform: DemoCudaPlatform) -> None:
    assert platform.is_out_of_tree()
    assert not platform.is_cuda()
    assert (platform.device_name, platform.device_type) == ("demo_cuda", "cuda")
    assert platform.get_torch_library_dispatch_key() == "CUDA"
    assert platform.get_dispatch_key_name() == DISPATCH_KEY == "cuda"


def test_distributed_answers_suit_nccl(platform: DemoCudaPlatform) -> None:
    assert platform.get_torch_distributed_backend_str() == "nccl"
    assert platform.supports_distributed_device_id() is True
    # The sequence-parallel all-to-all: the runtime's NCCL communicator, resolvable without a GPU.
    assert platform.get_all_to_all_communicator_cls() == COMMUNICATOR_QUALNAME
    assert resolve_all_to_all_communicator_cls(platform) is CudaCommunicator


def test_model_and_execution_answers(platform: DemoCudaPlatform) -> None:
    vae = torch.nn.Linear(2, 2)
    assert platform.get_attn_backend_cls_str(None, 128, torch.bfloat16) == ""
    platform.verify_model_arch("FluxTransformer2DModel")
    assert platform.optimize_vae(vae) is vae
    assert platform.get_compile_backend() == "inductor"
    assert platform.get_compile_options(vae) is None
    assert platform.enable_dit_layerwise_offload_by_default() is True
    assert platform.device_shares_host_memory() is False
    with platform.inference_mode():
        assert torch.is_inference_mode_enabled()


def test_server_args_are_left_to_the_runtimes_cuda_defaults(platform: DemoCudaPlatform) -> None:
    args = SimpleNamespace(attention_backend=None, num_gpus=1)
    platform.apply_server_args_defaults(args)
    assert vars(args) == {"attention_backend": None, "num_gpus": 1}


# -- without a GPU: clear failures --------------------------------------------------------------
@without_gpu
def test_naming_demo_cuda_without_a_gpu_is_a_startup_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(OVERRIDE, ENTRY_POINT_NAME)
    with pytest.raises(PlatformUnavailableError, match=r"activate\(\) returned None") as info:
        get_current_platform()
    assert (info.value.plugin, info.value.distribution) == (ENTRY_POINT_NAME, "cardcage-demo-cuda")


@cpu_only_torch
def test_init_backend_fails_clearly_and_registers_nothing_without_a_gpu(
    platform: DemoCudaPlatform,
) -> None:
    with pytest.raises(
        PlatformUnavailableError, match=r"cannot use a GPU.*SGLANG_DIFFUSION_PLATFORM_OVERRIDE"
    ) as info:
        platform.init_backend()
    assert (info.value.plugin, info.value.distribution) == (ENTRY_POINT_NAME, "cardcage-demo-cuda")
    assert (RMSNorm, DISPATCH_KEY) not in CustomOp._oot_forward_registry


# -- with a GPU: the real thing -----------------------------------------------------------------
@needs_gpu
def test_the_override_selects_and_initialises_demo_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(OVERRIDE, ENTRY_POINT_NAME)
    monkeypatch.setenv("LOCAL_RANK", "0")
    initialize_current_platform()
    platform = get_current_platform()
    assert type(platform) is DemoCudaPlatform
    assert get_selected_platform_dist() == "cardcage-demo-cuda"
    assert platform.get_local_torch_device() == torch.device("cuda", 0)
    assert platform.get_device(0) == torch.device("cuda", 0)
    assert (RMSNorm, DISPATCH_KEY) in CustomOp._oot_forward_registry


@needs_gpu
def test_device_answers_on_the_real_gpu(platform: DemoCudaPlatform) -> None:
    total = platform.get_device_total_memory()
    assert total > GIB
    assert 0 < platform.get_available_gpu_memory() <= total / GIB
    assert platform.get_device_name()
    assert platform.get_device_uuid()
    capability = platform.get_device_capability()
    assert capability is not None
    assert platform.has_device_capability((7, 0))
    platform.seed_everything(7)
    first = torch.rand(3, device="cuda")
    platform.seed_everything(7)
    assert torch.equal(first, torch.rand(3, device="cuda"))


@needs_gpu
def test_the_communicator_builds_on_the_gpu_and_is_the_identity_for_one_rank() -> None:
    device = torch.device("cuda", 0)
    comm = CudaCommunicator(None, device=device, unique_name="sp-rank0")
    x = torch.randn(1, 4, 2, 3, device=device)
    assert comm.all_to_all_4D(x, 2, 1) is x
