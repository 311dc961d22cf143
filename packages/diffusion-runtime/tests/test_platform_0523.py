"""The names SGLang 0.5.23's diffusion ``Platform`` added, on the built-ins and a vendor's class.

The base answers are held to docs/diffusion/contract.md by test_conformance_0523.py; this file
tests what the built-ins and overriding subclasses do with them.
"""

from __future__ import annotations

import subprocess
import sys
import types
from typing import Any

import pytest

from cardcage.diffusion.runtime.platforms import cuda as cuda_module
from cardcage.diffusion.runtime.platforms.accelerators import (
    MpsPlatform,
    MusaPlatform,
    NpuPlatform,
    XpuPlatform,
)
from cardcage.diffusion.runtime.platforms.cpu import CpuPlatform
from cardcage.diffusion.runtime.platforms.cuda import (
    FP4_GEMM_BACKEND_ENV,
    CudaPlatform,
    RocmPlatform,
)
from cardcage.diffusion.runtime.platforms.interface import (
    AttentionBackendEnum,
    Platform,
    PlatformEnum,
)

BUILTINS = (CpuPlatform, CudaPlatform, RocmPlatform, MpsPlatform, NpuPlatform, MusaPlatform)


class Vendor(Platform):
    _enum = PlatformEnum.OOT
    device_name = "vendor"
    device_type = "vendor"

    def get_attn_backend_cls_str(
        self, selected_backend: AttentionBackendEnum | None, head_size: int, dtype: Any
    ) -> str:
        if selected_backend is AttentionBackendEnum.NO_ATTENTION:
            return ""
        return "collections:OrderedDict"


def test_amp_and_float64_as_0523_declares_them() -> None:
    assert not MpsPlatform.is_amp_supported()
    assert not MpsPlatform.is_float64_supported()
    for cls in (NpuPlatform, MusaPlatform):
        assert cls.is_amp_supported()
        assert not cls.is_float64_supported()
    for cls in (CpuPlatform, CudaPlatform, RocmPlatform, XpuPlatform):
        assert cls.is_amp_supported()
        assert cls.is_float64_supported()


def test_distributed_device_id_as_0523_answers_it() -> None:
    answers = {cls: cls().supports_distributed_device_id() for cls in (*BUILTINS, XpuPlatform)}
    assert {cls for cls, yes in answers.items() if yes} == {CudaPlatform, RocmPlatform}
    assert not Vendor().supports_distributed_device_id()


def test_identity_helpers() -> None:
    assert CudaPlatform.is_cuda_static()
    assert not CudaPlatform.is_rocm_static()
    assert RocmPlatform.is_rocm_static()
    assert RocmPlatform().is_hip()
    assert not CudaPlatform().is_hip()
    for cls in BUILTINS:
        assert not cls().is_hpu()
    assert CudaPlatform().is_device_type("cuda")
    assert RocmPlatform().is_device_type("cuda")  # torch names HIP devices "cuda"
    assert not CudaPlatform().is_device_type(None)
    assert Vendor().is_device_type("vendor")


def test_cuda_architecture_checks_read_the_capability(monkeypatch: pytest.MonkeyPatch) -> None:
    for capability, expected in (
        ((9, 0), (False, True, False)),
        ((10, 0), (True, False, False)),
        ((12, 1), (False, False, True)),
        ((8, 9), (False, False, False)),
    ):
        monkeypatch.setattr(
            CudaPlatform, "_cuda_capability", classmethod(lambda cls, c=capability: c)
        )
        answers = (CudaPlatform.is_blackwell(), CudaPlatform.is_hopper(), CudaPlatform.is_sm120())
        assert answers == expected, capability
    # Any other platform answers False without asking torch.
    for cls in (RocmPlatform, CpuPlatform, Vendor):
        assert (cls.is_blackwell(), cls.is_hopper(), cls.is_sm120()) == (False, False, False)
    assert not CpuPlatform.is_gfx1151()


def test_gfx1151_without_a_gpu() -> None:
    pytest.importorskip("torch")
    assert not RocmPlatform.is_gfx1151()  # the CPU torch of the test session sees no GPU


def _fake_flashinfer(monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    module = types.ModuleType("flashinfer")

    def fp4_quantize(*args: Any) -> None: ...

    def mm_fp4(*args: Any) -> None: ...

    module.fp4_quantize = fp4_quantize  # type: ignore[attr-defined]
    module.mm_fp4 = mm_fp4  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "flashinfer", module)
    return module


def test_cuda_fp4_ops_come_from_flashinfer(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(CudaPlatform, "is_sm120", classmethod(lambda cls: False))
    monkeypatch.delenv(FP4_GEMM_BACKEND_ENV, raising=False)
    flashinfer = _fake_flashinfer(monkeypatch)
    assert CudaPlatform.get_modelopt_fp4_quantize_op() is flashinfer.fp4_quantize
    assert CudaPlatform.get_modelopt_fp4_gemm_op() == (flashinfer.mm_fp4, "trtllm")
    # The other built-ins and a vendor that overrides nothing have no NVFP4 ops.
    for cls in (RocmPlatform, CpuPlatform, Vendor):
        assert cls.get_modelopt_fp4_quantize_op() is None
        assert cls.get_modelopt_fp4_gemm_op() == (None, None)
        assert cls.get_modelopt_flashinfer_fp4_backend() == "auto"


def test_cuda_fp4_ops_without_flashinfer(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "flashinfer", None)  # import flashinfer -> ImportError
    monkeypatch.setenv(FP4_GEMM_BACKEND_ENV, "cudnn")
    assert CudaPlatform.get_modelopt_fp4_quantize_op() is None
    assert CudaPlatform.get_modelopt_fp4_gemm_op() == (None, None)


@pytest.mark.parametrize(
    ("value", "sm120", "expected"),
    [
        (None, False, "trtllm"),
        (None, True, "auto"),
        ("", False, "trtllm"),
        ("FlashInfer_Cutlass", False, "cutlass"),
        ("flashinfer_trtllm", True, "trtllm"),
        ("cudnn", False, "cudnn"),
        ("auto", False, "auto"),
        ("nonsense", False, "trtllm"),
        ("nonsense", True, "auto"),
    ],
)
def test_cuda_fp4_gemm_backend_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, value: str | None, sm120: bool, expected: str
) -> None:
    monkeypatch.setattr(CudaPlatform, "is_sm120", classmethod(lambda cls: sm120))
    if value is None:
        monkeypatch.delenv(FP4_GEMM_BACKEND_ENV, raising=False)
    else:
        monkeypatch.setenv(FP4_GEMM_BACKEND_ENV, value)
    assert CudaPlatform.get_modelopt_flashinfer_fp4_backend() == expected


def test_an_unknown_fp4_backend_is_logged(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(CudaPlatform, "is_sm120", classmethod(lambda cls: False))
    monkeypatch.setenv(FP4_GEMM_BACKEND_ENV, "nonsense")
    with caplog.at_level("WARNING", logger=cuda_module.__name__):
        CudaPlatform.get_modelopt_flashinfer_fp4_backend()
    assert FP4_GEMM_BACKEND_ENV in caplog.text
    assert "'nonsense'" in caplog.text


def test_get_attn_backend_imports_what_the_platform_names() -> None:
    from collections import OrderedDict

    platform = Vendor()
    assert platform.get_attn_backend(AttentionBackendEnum.TORCH_SDPA, 64, None) is OrderedDict
    with pytest.raises(ValueError, match=r"Vendor\.get_attn_backend_cls_str\(\) answered ''"):
        platform.get_attn_backend(AttentionBackendEnum.NO_ATTENTION, 64, None)


def test_attention_backend_members_parse_from_their_server_argument_spelling() -> None:
    for member in AttentionBackendEnum:
        assert AttentionBackendEnum[str(member).upper()] is member
    assert AttentionBackendEnum.SPARSE_VIDEO_GEN_2_ATTN.is_sparse
    assert not AttentionBackendEnum.FP8_FA_SM120.is_sparse
    assert not AttentionBackendEnum.AITER_SAGE.is_sparse


def test_tensors_and_devices_with_torch() -> None:
    torch = pytest.importorskip("torch")
    platform = CpuPlatform()
    tensor = torch.zeros(1)
    assert platform.tensor_on_device(tensor)
    assert not Vendor().tensor_on_device(tensor)
    assert not CudaPlatform().tensor_on_device(tensor)
    Platform().set_device(torch.device("cpu"))  # the base: torch.cpu.set_device, a no-op
    with NpuPlatform.inference_mode():
        assert not torch.is_grad_enabled()
        assert not torch.is_inference_mode_enabled()  # no_grad, not inference_mode
    with CpuPlatform.inference_mode():
        assert torch.is_inference_mode_enabled()


def test_the_platform_modules_import_no_torch() -> None:
    code = (
        "import sys\n"
        "import cardcage.diffusion.runtime.platforms.interface as i\n"
        "import cardcage.diffusion.runtime.platforms.cuda as c\n"
        "import cardcage.diffusion.runtime.platforms.accelerators\n"
        "import cardcage.diffusion.runtime.platforms.cpu\n"
        "i.Platform.is_blackwell(); i.Platform().is_device_type('cpu')\n"
        "i.Platform.get_modelopt_fp4_gemm_op(); i.Platform.is_amp_supported()\n"
        "assert 'torch' not in sys.modules, 'torch was imported'\n"
        "assert 'numpy' not in sys.modules, 'numpy was imported'\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
