"""``DemoCpuPlatform``: selected by the real diffusion runtime, and every Active-contract answer
the runtime asks for works on the CPU."""

from __future__ import annotations

import os
import platform as host
from types import SimpleNamespace
from typing import TYPE_CHECKING

import cpu_diffusion_support  # sorts first: skips this module without torch or the runtime
import pytest
import torch
from cpu_diffusion_support import clean_diffusion

from cardcage.diffusion.runtime.platforms import (
    Platform,
    get_current_platform,
    get_selected_platform_dist,
    get_selection_record,
    initialize_current_platform,
)
from cardcage.diffusion.runtime.platforms.policy import diffusion_policy
from cardcage.diffusion.runtime.platforms.probes import DiffusionProbes
from cardcage.diffusion.runtime.platforms.testing import use_probes
from cardcage.platforms.device_mixin import CpuArchEnum, PlatformEnum
from cardcage.platforms.errors import PlatformUnavailableError
from cardcage.platforms.selection import load_platform_class
from cardcage_demo_cpu.diffusion import ENTRY_POINT_NAME, PLATFORM_QUALNAME
from cardcage_demo_cpu.diffusion.platform import DemoCpuPlatform

if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["clean_diffusion"]  # the autouse fixture, imported so pytest finds it

pytestmark = pytest.mark.torch

OVERRIDE = "SGLANG_DIFFUSION_PLATFORM_OVERRIDE"
GIB = 1 << 30
PHYSICAL = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def _no() -> bool:
    return False


def _yes() -> bool:
    return True


#: Built-in probes for a machine with nothing but a CPU, so automatic selection is deterministic.
CPU_ONLY = DiffusionProbes(mps=_no, xpu=_no, rocm=_no, cuda=_no, npu=_no, musa=_no, cpu=_yes)


@pytest.fixture
def platform() -> DemoCpuPlatform:
    return DemoCpuPlatform()


# -- selection through the runtime ------------------------------------------------------------
def test_the_class_passes_the_diffusion_runtimes_validation() -> None:
    cls = load_platform_class(
        diffusion_policy(), PLATFORM_QUALNAME, cpu_diffusion_support.installed_entry_point()
    )
    assert cls is DemoCpuPlatform
    assert issubclass(cls, Platform)


def test_the_override_selects_demo_cpu_from_the_installed_distribution(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(OVERRIDE, ENTRY_POINT_NAME)
    assert type(get_current_platform()) is DemoCpuPlatform
    assert get_selected_platform_dist() == "cardcage-demo-cpu"
    record = get_selection_record()
    assert record is not None
    assert (record.mode, record.plugin_name) == ("explicit", ENTRY_POINT_NAME)


def test_opting_in_lets_automatic_selection_pick_demo_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CARDCAGE_DEMO_CPU", "1")
    use_probes(CPU_ONLY)
    assert type(get_current_platform()) is DemoCpuPlatform
    record = get_selection_record()
    assert record is not None
    assert record.mode == "automatic"


def test_without_the_opt_in_automatic_selection_passes_demo_cpu_by() -> None:
    use_probes(CPU_ONLY)
    assert type(get_current_platform()) is not DemoCpuPlatform
    record = get_selection_record()
    assert record is not None
    outcomes = {c.name: c.outcome for c in record.candidates}
    assert outcomes[ENTRY_POINT_NAME] == "declined"
    assert outcomes["cpu"] == "selected"


def test_opting_out_while_naming_demo_cpu_is_a_startup_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(OVERRIDE, ENTRY_POINT_NAME)
    monkeypatch.setenv("CARDCAGE_DEMO_CPU", "0")
    with pytest.raises(PlatformUnavailableError, match=r"activate\(\) returned None"):
        get_current_platform()


# -- the Active contract ----------------------------------------------------------------------
def test_identity_is_out_of_tree_with_the_cpu_dispatcher_key(platform: DemoCpuPlatform) -> None:
    assert platform.is_out_of_tree()
    assert platform._enum is PlatformEnum.OOT
    # CPU-like: the identity predicates answer as the built-in CPU platform's.
    assert DemoCpuPlatform.behaves_as is PlatformEnum.CPU
    assert platform.is_cpu()
    assert not (platform.is_cuda())
    assert not (platform.is_cuda_alike())
    assert not (platform.is_rocm())
    assert (platform.device_name, platform.device_type) == ("demo_cpu", "cpu")
    assert platform.get_torch_library_dispatch_key() == "CPU"
    assert platform.get_dispatch_key_name() == ENTRY_POINT_NAME


def test_every_rank_and_this_worker_use_the_cpu_device(platform: DemoCpuPlatform) -> None:
    cpu = torch.device("cpu")
    assert platform.get_device(0) == platform.get_device(3) == cpu
    assert platform.get_local_torch_device() == cpu
    platform.set_device(cpu)  # nothing to select, and no error
    assert torch.ones(2, device=platform.get_local_torch_device()).sum().item() == 2


def test_device_name_and_uuid_describe_the_host(platform: DemoCpuPlatform) -> None:
    assert platform.get_device_name().startswith("demo_cpu ")
    assert platform.get_device_uuid()


def test_memory_answers_are_consistent(platform: DemoCpuPlatform) -> None:
    total = platform.get_device_total_memory()
    assert 0 < total <= PHYSICAL
    free_gib = platform.get_available_gpu_memory()
    assert 0 < free_gib <= total / GIB
    assert platform.get_available_gpu_memory(device_id=5, empty_cache=False) > 0


def test_available_memory_is_reduced_over_a_real_gloo_group(
    platform: DemoCpuPlatform, tmp_path: Path
) -> None:
    import torch.distributed as dist

    dist.init_process_group(
        platform.get_torch_distributed_backend_str(),
        init_method=f"file://{tmp_path / 'store'}",
        rank=0,
        world_size=1,
    )
    try:
        free = platform.get_available_gpu_memory(distributed=True, cpu_group=dist.group.WORLD)
    finally:
        dist.destroy_process_group()
    assert 0 < free <= platform.get_device_total_memory() / GIB


def test_there_is_no_compute_capability(platform: DemoCpuPlatform) -> None:
    assert platform.get_device_capability() is None
    assert not platform.has_device_capability((7, 0))
    assert not platform.has_device_capability(70)


def test_distributed_answers_suit_gloo(platform: DemoCpuPlatform) -> None:
    assert platform.get_torch_distributed_backend_str() == "gloo"
    assert platform.supports_distributed_device_id() is False
    machine = host.machine().lower()
    expected = (
        CpuArchEnum.X86
        if machine in {"x86_64", "amd64", "i386", "i686"}
        else CpuArchEnum.ARM
        if machine in {"arm64", "aarch64"}
        else CpuArchEnum.UNSPECIFIED
    )
    assert platform.get_cpu_architecture() is expected


def test_models_run_unchanged(platform: DemoCpuPlatform) -> None:
    vae = torch.nn.Linear(2, 2)
    assert platform.get_attn_backend_cls_str(None, 64, torch.float32) == ""
    platform.verify_model_arch("FluxTransformer2DModel")  # accepted
    assert platform.optimize_vae(vae) is vae


def test_execution_answers(platform: DemoCpuPlatform) -> None:
    assert platform.get_compile_backend() == platform.get_compile_backend("max-autotune")
    assert platform.get_compile_backend() == "inductor"
    assert platform.get_compile_options(torch.nn.Linear(2, 2)) is None
    assert platform.enable_dit_layerwise_offload_by_default() is False
    assert platform.device_shares_host_memory() is True


def test_inference_mode_is_torchs(platform: DemoCpuPlatform) -> None:
    with platform.inference_mode():
        assert torch.is_inference_mode_enabled()
        assert torch.ones(1).is_inference()
    assert not torch.is_inference_mode_enabled()


def test_seed_everything_makes_torch_reproducible(platform: DemoCpuPlatform) -> None:
    platform.seed_everything(1234)
    first = torch.rand(4)
    platform.seed_everything(1234)
    assert torch.equal(first, torch.rand(4))


def test_server_args_defaults_fill_only_what_is_unset(platform: DemoCpuPlatform) -> None:
    unset = SimpleNamespace(attention_backend=None)
    chosen = SimpleNamespace(attention_backend="sage_attn")
    unrelated = SimpleNamespace(num_gpus=1)
    for args in (unset, chosen, unrelated):
        platform.apply_server_args_defaults(args)
    assert unset.attention_backend == "torch_sdpa"
    assert chosen.attention_backend == "sage_attn"
    assert vars(unrelated) == {"num_gpus": 1}


# -- init_backend -----------------------------------------------------------------------------
def test_init_backend_runs_once_per_process_and_sets_the_thread_count(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(OVERRIDE, ENTRY_POINT_NAME)
    monkeypatch.setenv("CARDCAGE_DEMO_CPU_THREADS", "1")
    before = torch.get_num_threads()
    try:
        initialize_current_platform()
        initialize_current_platform()  # a no-op the second time
        platform = get_current_platform()
        assert isinstance(platform, DemoCpuPlatform)
        assert platform.intra_op_threads == torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)
