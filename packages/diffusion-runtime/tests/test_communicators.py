"""The all-to-all communicator contract: what platforms answer, how the runtime resolves it, and
that the sequence-parallel exchange really runs through the platform's communicator.

The two-rank checks run real processes in a gloo group (``model_support.run_ranks``); the
worker check launches a real two-worker ``DiffGenerator`` on a vendor platform whose communicator
writes what it exchanged from each worker.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from bootstrap_support import write_vendor
from communicator_support import (
    BareOotPlatform,
    CountingCommunicator,
    LegacyOotPlatform,
    MissingModulePlatform,
    ModernOotPlatform,
    NotANamePlatform,
    WrongClassPlatform,
)
from conftest import reset_diffusion
from model_support import attention_module, comm_inputs, run_ranks

from cardcage.diffusion.configs.sampling_params import SamplingParams
from cardcage.diffusion.errors import (
    CommunicatorDeviceError,
    CommunicatorNotFoundError,
    DiffusionError,
    InvalidCommunicatorError,
    WorkerFailedError,
)
from cardcage.diffusion.runtime.distributed import resolve_all_to_all_communicator_cls
from cardcage.diffusion.runtime.distributed.device_communicators import (
    CpuCommunicator,
    CudaCommunicator,
    DeviceCommunicatorBase,
)
from cardcage.diffusion.runtime.managers.diffusion_generator import DiffGenerator
from cardcage.diffusion.runtime.pipelines.tiny import TinyDiffusionPipeline
from cardcage.diffusion.runtime.platforms import get_current_platform
from cardcage.diffusion.runtime.platforms.accelerators import (
    MpsPlatform,
    MusaPlatform,
    NpuPlatform,
    XpuPlatform,
)
from cardcage.diffusion.runtime.platforms.cpu import CpuPlatform
from cardcage.diffusion.runtime.platforms.cuda import CudaPlatform, RocmPlatform
from cardcage.diffusion.runtime.platforms.interface import (
    BASE_DEVICE_COMMUNICATOR,
    Platform,
    UnspecifiedPlatform,
)
from cardcage.diffusion.runtime.platforms.testing import set_current_platform
from cardcage.hooks.testing import on_sys_path

PACKAGE = "cardcage.diffusion.runtime.distributed.device_communicators"
CPU = f"{PACKAGE}.cpu_communicator.CpuCommunicator"
CUDA = f"{PACKAGE}.cuda_communicator.CudaCommunicator"


def _qualname(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


# -- what platforms answer ----------------------------------------------------------------------
@pytest.mark.parametrize(
    ("cls", "device", "resolved"),
    [
        (UnspecifiedPlatform, BASE_DEVICE_COMMUNICATOR, DeviceCommunicatorBase),
        (CpuPlatform, CPU, CpuCommunicator),
        (CudaPlatform, CUDA, CudaCommunicator),
        (RocmPlatform, CUDA, CudaCommunicator),
        (MusaPlatform, BASE_DEVICE_COMMUNICATOR, DeviceCommunicatorBase),
        # Host-collective built-ins: base (or nothing) for the device, CPU for the all-to-all.
        (MpsPlatform, BASE_DEVICE_COMMUNICATOR, CpuCommunicator),
        (NpuPlatform, BASE_DEVICE_COMMUNICATOR, CpuCommunicator),
        (XpuPlatform, BASE_DEVICE_COMMUNICATOR, CpuCommunicator),
    ],
)
def test_builtin_answers(cls: type[Platform], device: str, resolved: type) -> None:
    assert cls.get_device_communicator_cls() == device
    assert cls.get_all_to_all_communicator_cls() == device  # the compat fallback
    assert resolve_all_to_all_communicator_cls(cls()) is resolved
    assert _qualname(resolved).endswith(resolved.__name__)


def test_base_qualname_is_the_base_class() -> None:
    assert _qualname(DeviceCommunicatorBase) == BASE_DEVICE_COMMUNICATOR
    assert _qualname(CpuCommunicator) == CPU
    assert _qualname(CudaCommunicator) == CUDA


def test_an_oot_platform_that_names_nothing_is_told_what_to_override() -> None:
    with pytest.raises(NotImplementedError) as info:
        BareOotPlatform.get_all_to_all_communicator_cls()
    message = str(info.value)
    assert "Out-of-tree diffusion platforms must implement get_all_to_all_communicator_cls()" in (
        message
    )
    assert _qualname(BareOotPlatform) in message
    assert "DeviceCommunicatorBase subclass" in message
    # The runtime surfaces the same error: the worker must not start.
    with pytest.raises(NotImplementedError, match="get_all_to_all_communicator_cls"):
        resolve_all_to_all_communicator_cls(BareOotPlatform())


def test_an_oot_platform_overriding_only_the_compat_hook_passes() -> None:
    expected = _qualname(CountingCommunicator)
    assert LegacyOotPlatform.get_all_to_all_communicator_cls() == expected
    assert resolve_all_to_all_communicator_cls(LegacyOotPlatform()) is CountingCommunicator
    assert resolve_all_to_all_communicator_cls(ModernOotPlatform()) is CountingCommunicator


@pytest.mark.parametrize(
    ("platform", "error", "fragment"),
    [
        (WrongClassPlatform, InvalidCommunicatorError, "not a DeviceCommunicatorBase subclass"),
        (NotANamePlatform, InvalidCommunicatorError, "not a qualified name"),
        (MissingModulePlatform, CommunicatorNotFoundError, "does not import"),
    ],
)
def test_an_unusable_communicator_is_a_typed_error_naming_the_fix(
    platform: type[Platform], error: type[Exception], fragment: str
) -> None:
    with pytest.raises(error) as info:
        resolve_all_to_all_communicator_cls(platform())
    assert isinstance(info.value, DiffusionError)
    message = str(info.value)
    assert fragment in message
    assert _qualname(platform) in message
    assert f"Fix {_qualname(platform)}.get_all_to_all_communicator_cls()" in message
    assert "DeviceCommunicatorBase subclass" in message
    assert info.value.dist_name is None  # type: ignore[attr-defined]  # not the selected one


def test_a_wrong_class_is_a_type_error_and_a_missing_module_an_import_error() -> None:
    assert issubclass(InvalidCommunicatorError, TypeError)
    assert issubclass(CommunicatorNotFoundError, ImportError)


def test_the_error_names_the_distribution_of_the_selected_platform(
    site: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_vendor(site)
    monkeypatch.setenv("SGLANG_DIFFUSION_PLATFORM_OVERRIDE", "h5")
    monkeypatch.setenv("H5_A2A", "bad")
    with on_sys_path(site):
        platform = get_current_platform()
        with pytest.raises(InvalidCommunicatorError) as info:
            resolve_all_to_all_communicator_cls(platform)
    assert info.value.dist_name == "h5-vendor"
    assert "h5_vendor_platform.H5Platform (distribution h5-vendor)" in str(info.value)
    assert info.value.qualname == "h5_vendor_comm.NotACommunicator"


# -- one process --------------------------------------------------------------------------------
def test_one_rank_is_the_identity_and_layouts_are_checked() -> None:
    comm = CpuCommunicator(None)
    assert (comm.rank, comm.world_size, comm.device) == (0, 1, torch.device("cpu"))
    x = torch.randn(2, 6, 4, 3)
    assert comm.all_to_all_4D(x, 2, 1) is x
    with pytest.raises(ValueError, match="1 and 2"):
        comm.all_to_all_4D(x, 2, 2)
    with pytest.raises(ValueError, match="4-D tensor"):
        comm.all_to_all_4D(x[0], 2, 1)


def test_the_cuda_communicator_refuses_a_host_device() -> None:
    with pytest.raises(CommunicatorDeviceError, match="CpuCommunicator for host tensors"):
        CudaCommunicator(None, device="cpu")


@pytest.fixture
def cpu_platform() -> Iterator[None]:
    set_current_platform(CpuPlatform())
    yield
    reset_diffusion()


def test_the_pipeline_takes_a_communicator_or_a_group_not_both(cpu_platform: None) -> None:
    counting = CountingCommunicator(None)
    pipeline = TinyDiffusionPipeline.build(communicator=counting)
    assert pipeline.model.transformer.communicator is counting
    assert all(block.attn.communicator is counting for block in pipeline.model.transformer.blocks)
    assert TinyDiffusionPipeline.build().model.transformer.communicator is None
    with pytest.raises(ValueError, match="not both"):
        TinyDiffusionPipeline(pipeline.model, sp_group=object(), communicator=counting)


# -- two real ranks -----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def comm_results(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    return run_ranks(tmp_path_factory.mktemp("comm"), 2, mode="comm")


@pytest.mark.parametrize("cls", ["DeviceCommunicatorBase", "CpuCommunicator"])
def test_two_rank_all_to_all_matches_the_single_process_layout(
    comm_results: list[dict[str, Any]], cls: str
) -> None:
    for rank, result in enumerate(comm_results):
        assert result[f"{cls}:world"] == (rank, 2)
        for name, full in comm_inputs().items():
            heads = full.shape[2] // 2
            seq = full.shape[1] // 2
            by_heads = result[f"{cls}:{name}:by_heads"]
            assert by_heads.dtype == full.dtype
            assert torch.equal(by_heads, full[:, :, heads * rank : heads * (rank + 1)])
            assert torch.equal(result[f"{cls}:{name}:back"], full[:, seq * rank : seq * (rank + 1)])


def test_two_rank_attention_through_a_vendor_communicator_matches_one_process(
    comm_results: list[dict[str, Any]],
) -> None:
    module, x = attention_module()
    with torch.inference_mode():
        expected = module(x)
    for rank, result in enumerate(comm_results):
        torch.testing.assert_close(result["attention"], expected.chunk(2, dim=1)[rank])
        # q, k and v to head slices, then the output back: four exchanges, all through it.
        assert [(s, g) for _, s, g in result["attention_calls"]] == [(2, 1)] * 3 + [(1, 2)]


# -- real workers -------------------------------------------------------------------------------
def test_two_workers_exchange_through_the_platforms_own_communicator(
    site: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_vendor(site)
    evidence = tmp_path / "a2a"
    evidence.mkdir()
    monkeypatch.setenv("SGLANG_DIFFUSION_PLATFORM_OVERRIDE", "h5")
    monkeypatch.setenv("H5_A2A_DIR", str(evidence))
    monkeypatch.setenv("PYTHONPATH", str(site))
    with on_sys_path(site):
        generator = DiffGenerator.from_pretrained(model_path="cardcage/tiny-dit", num_gpus=2)
    with generator:
        pids = [handle.pid for handle in generator.workers.workers]
        params = SamplingParams(height=32, width=32, num_inference_steps=1, seed=3)
        generator.generate(prompt="a blue square", sampling_params=params)
    for rank, pid in enumerate(pids):
        seen = json.loads((evidence / f"a2a-rank{rank}.json").read_text(encoding="utf-8"))
        assert (seen["pid"], seen["rank"], seen["world_size"]) == (pid, rank, 2)
        assert seen["pid"] != os.getpid()
        assert seen["name"] == f"sp-rank{rank}"
        assert seen["calls"] > 0
        assert seen["calls"] % 4 == 0  # q, k, v there and the output back, per attention


def test_a_worker_whose_platform_names_a_wrong_class_fails_the_launch(
    site: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_vendor(site)
    monkeypatch.setenv("SGLANG_DIFFUSION_PLATFORM_OVERRIDE", "h5")
    monkeypatch.setenv("H5_A2A", "bad")
    monkeypatch.setenv("PYTHONPATH", str(site))
    with on_sys_path(site), pytest.raises(WorkerFailedError) as info:
        DiffGenerator.from_pretrained(model_path="cardcage/tiny-dit", num_gpus=1)
    assert info.value.error_type.endswith("InvalidCommunicatorError")
    assert "DeviceCommunicatorBase subclass" in info.value.error_message
    assert "(distribution h5-vendor)" in info.value.error_message


def test_the_contract_and_the_distributed_package_import_without_torch() -> None:
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from cardcage.diffusion.runtime.platforms import AttentionBackendEnum, Platform\n"
        "from cardcage.diffusion.runtime.platforms.cpu import CpuPlatform\n"
        "import cardcage.diffusion.runtime.distributed\n"
        "import cardcage.diffusion.runtime.distributed.device_communicators\n"
        "assert CpuPlatform.get_all_to_all_communicator_cls().endswith('CpuCommunicator')\n"
        "print('torch' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.strip() == "False", done.stderr
