"""``DemoCpuSRTPlatform``: passes core-platforms' checks, and every answer is the CPU's."""

from __future__ import annotations

import importlib.util
import logging
import os
import subprocess
import sys
from types import SimpleNamespace

import pytest

from cardcage.hooks.snapshot import PluginEntryPoint, entry_point_snapshot
from cardcage.platforms.interface import KVPoolKind, PlatformCapabilities, SRTPlatform
from cardcage.platforms.selection import load_platform_class, select_platform
from cardcage.platforms.srt import srt_policy
from cardcage_demo_cpu import ENTRY_POINT_NAME, PLATFORM_QUALNAME
from cardcage_demo_cpu.platform import DemoCpuSRTPlatform, usable_cpu_count

TORCH_INSTALLED = importlib.util.find_spec("torch") is not None
needs_torch = pytest.mark.skipif(not TORCH_INSTALLED, reason="needs PyTorch (the torch extra)")
without_torch = pytest.mark.skipif(
    TORCH_INSTALLED, reason="checks the behaviour when torch is absent"
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


def test_the_platform_class_passes_core_platforms_validation() -> None:
    cls = load_platform_class(srt_policy(), PLATFORM_QUALNAME, _installed_entry_point())
    assert cls is DemoCpuSRTPlatform
    assert issubclass(cls, SRTPlatform)


def test_selecting_by_name_publishes_the_demo_platform(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SGLANG_PLATFORM", ENTRY_POINT_NAME)
    platform, record = select_platform(srt_policy())
    assert isinstance(platform, DemoCpuSRTPlatform)
    assert (record.mode, record.plugin_name, record.dist_name) == (
        "explicit",
        ENTRY_POINT_NAME,
        "cardcage-demo-cpu",
    )


def test_opting_in_wins_automatic_selection(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CARDCAGE_DEMO_CPU", "1")
    monkeypatch.setenv("SGLANG_PLUGINS", ENTRY_POINT_NAME)  # ignore other installed vendors
    platform, record = select_platform(srt_policy())
    assert isinstance(platform, DemoCpuSRTPlatform)
    assert record.mode == "automatic"


def test_identity_is_out_of_tree_not_the_builtin_cpu() -> None:
    platform = DemoCpuSRTPlatform()
    assert platform.is_out_of_tree()
    assert not platform.is_cpu()
    assert not platform.is_cuda_alike()
    assert (platform.device_name, platform.device_type) == ("demo_cpu", "cpu")


def test_capabilities_are_all_off() -> None:
    platform = DemoCpuSRTPlatform()
    assert platform.capabilities == PlatformCapabilities()
    assert not any(platform.capabilities.as_dict().values())
    assert not platform.is_pin_memory_available()


def test_the_platform_uses_only_sglang_0_5_23_names() -> None:
    # A name of the seed's contract that SGLang 0.5.23 no longer reads (support_cuda_graph(),
    # get_mha_kv_pool_cls(), ...) would warn when the class is defined: here that is an error.
    script = "import warnings; warnings.simplefilter('error')\nimport cardcage_demo_cpu.platform\n"
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert "capabilities" in vars(DemoCpuSRTPlatform)


@pytest.mark.parametrize("kind", ["mha", "mla", "dsa"])
def test_every_kv_pool_is_the_runtimes_own(kind: KVPoolKind) -> None:
    assert DemoCpuSRTPlatform().get_kv_pool_cls(kind=kind) is None


@pytest.mark.parametrize("mode", [None, "default", "max-autotune"])
def test_factories_name_portable_torch_backends(mode: str | None) -> None:
    platform = DemoCpuSRTPlatform()
    assert platform.get_default_attention_backend() == "torch_native"
    assert platform.get_compile_backend(mode) == "inductor"
    assert platform.get_dispatch_key_name() == "native"


@pytest.mark.parametrize("factory", CLASS_FACTORIES)
def test_runtime_class_factories_are_left_to_the_runtime(factory: str) -> None:
    assert getattr(DemoCpuSRTPlatform(), factory)() is None


def test_quantization_is_refused_with_the_fix() -> None:
    platform = DemoCpuSRTPlatform()
    with pytest.raises(ValueError, match=r"'fp8' \(supported: none\).*SGLANG_PLATFORM"):
        platform.get_quantization_config("fp8")
    platform.verify_quantization("")  # no quantization asked for: fine


def test_server_args_defaults_fill_what_is_unset() -> None:
    args = SimpleNamespace(attention_backend=None, device=None, disable_cuda_graph=True)
    DemoCpuSRTPlatform().apply_server_args_defaults(args)
    assert vars(args) == {
        "attention_backend": "torch_native",
        "device": "cpu",
        "disable_cuda_graph": True,
    }


def test_server_args_defaults_keep_what_the_user_chose() -> None:
    args = SimpleNamespace(attention_backend="triton", device="cpu")
    DemoCpuSRTPlatform().apply_server_args_defaults(args)
    assert (args.attention_backend, args.device) == ("triton", "cpu")


def test_graph_capture_is_disabled_with_a_log_line(caplog: pytest.LogCaptureFixture) -> None:
    args = SimpleNamespace(attention_backend=None, device=None, disable_cuda_graph=False)
    with caplog.at_level(logging.INFO, logger="cardcage_demo_cpu"):
        DemoCpuSRTPlatform().apply_server_args_defaults(args)
    assert args.disable_cuda_graph is True
    assert "disable_cuda_graph=True" in caplog.text


def test_usable_cpu_count_follows_the_affinity_mask() -> None:
    assert usable_cpu_count() == len(os.sched_getaffinity(0))


@without_torch
def test_init_backend_without_torch_sets_nothing_up() -> None:
    platform = DemoCpuSRTPlatform()
    platform.init_backend()
    assert platform.intra_op_threads is None


@pytest.mark.torch
@needs_torch
@pytest.mark.parametrize("configured", ["", "1", "2"])
def test_init_backend_gives_torch_one_thread_per_usable_cpu(
    monkeypatch: pytest.MonkeyPatch, configured: str
) -> None:
    import torch

    if configured:
        monkeypatch.setenv("CARDCAGE_DEMO_CPU_THREADS", configured)
    expected = int(configured) if configured else usable_cpu_count()
    before = torch.get_num_threads()
    try:
        platform = DemoCpuSRTPlatform()
        platform.init_backend()
        assert platform.intra_op_threads == expected == torch.get_num_threads()
    finally:
        torch.set_num_threads(before)
