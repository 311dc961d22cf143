"""The declared identity (``behaves_as``): what the predicates answer, and the errors.

An out-of-tree class that declares ``behaves_as = PlatformEnum.CPU`` (or CUDA, or ROCM) answers
every identity predicate as that built-in does while ``is_out_of_tree()`` stays True and selection
still takes it for an external platform. A declaration that cannot hold fails while the class
statement runs, with ``PlatformIdentityError`` naming the class, its distribution and the fix.
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING, Any

import pytest

from cardcage.hooks.testing import on_sys_path, write_distribution
from cardcage.platforms.cpu import CpuSRTPlatform
from cardcage.platforms.device_mixin import DeviceMixin, PlatformEnum
from cardcage.platforms.errors import PlatformContractError, PlatformIdentityError
from cardcage.platforms.identity import BEHAVES_AS, declared_identity, identity_of
from cardcage.platforms.interface import SRTPlatform
from cardcage.platforms.probes import HardwareProbes
from cardcage.platforms.selection import select_platform
from cardcage.platforms.srt import srt_policy

if TYPE_CHECKING:
    from pathlib import Path

PREDICATES = (
    "is_cuda", "is_rocm", "is_cpu", "is_xpu", "is_musa", "is_npu", "is_tpu", "is_mps",
    "is_cuda_alike",
)  # fmt: skip


def _answers(platform: Any) -> dict[str, bool]:
    return {name: getattr(platform, name)() for name in PREDICATES}


def _platform(behaves_as: Any, enum_: PlatformEnum = PlatformEnum.OOT) -> type[SRTPlatform]:
    namespace = {"_enum": enum_, "device_name": "acme", "device_type": "acme"}
    if behaves_as is not None:
        namespace["behaves_as"] = behaves_as
    return type("AcmePlatform", (SRTPlatform,), namespace)


def _builtin(member: PlatformEnum) -> DeviceMixin:
    return type(f"{member.name}Builtin", (DeviceMixin,), {"_enum": member})()


def test_the_default_is_no_declaration_and_the_enum_answers() -> None:
    assert DeviceMixin.behaves_as is None
    oot = _platform(None)()
    assert declared_identity(oot) is None
    assert identity_of(oot) is PlatformEnum.OOT
    assert not any(_answers(oot).values())
    assert oot.is_out_of_tree()


@pytest.mark.parametrize("member", BEHAVES_AS, ids=lambda m: m.name)
def test_a_declared_identity_answers_as_that_builtin_while_out_of_tree(
    member: PlatformEnum,
) -> None:
    platform = _platform(member)()
    assert _answers(platform) == _answers(_builtin(member))
    assert platform.is_out_of_tree()
    assert platform._enum is PlatformEnum.OOT
    assert identity_of(platform) is member


def test_cpu_like_cuda_alike_and_rocm_like_in_detail() -> None:
    cpu, cuda, rocm = (_platform(m)() for m in BEHAVES_AS)
    assert (cpu.is_cpu(), cpu.is_cuda_alike()) == (True, False)
    assert (cuda.is_cuda(), cuda.is_cuda_alike(), cuda.is_rocm()) == (True, True, False)
    assert (rocm.is_rocm(), rocm.is_cuda_alike(), rocm.is_cuda()) == (True, True, False)


def test_a_mixin_may_declare_before_the_class_that_sets_the_enum() -> None:
    mixin = type("AcmeMixin", (DeviceMixin,), {"behaves_as": PlatformEnum.CPU})
    platform = type(
        "AcmePlatform",
        (mixin, SRTPlatform),
        {"_enum": PlatformEnum.OOT, "device_name": "acme", "device_type": "cpu"},
    )()
    assert platform.is_cpu()
    assert platform.is_out_of_tree()


def test_a_builtin_declaring_its_own_identity_is_allowed() -> None:
    assert _platform(PlatformEnum.CPU, PlatformEnum.CPU)().is_cpu()


def test_an_identity_that_contradicts_the_enum_fails_when_the_class_is_defined() -> None:
    with pytest.raises(PlatformIdentityError) as info:
        type("Confused", (CpuSRTPlatform,), {"behaves_as": PlatformEnum.ROCM})
    error = info.value
    assert isinstance(error, PlatformContractError)
    assert isinstance(error, TypeError)
    assert isinstance(error, ValueError)
    assert error.member == "behaves_as"
    assert error.platform_class.endswith(".Confused")
    message = str(error)
    assert "declares PlatformEnum.ROCM, but the class's _enum is PlatformEnum.CPU" in message
    assert "Set _enum = PlatformEnum.OOT" in message
    assert "keep behaves_as = PlatformEnum.ROCM" in message


class ForeignEnum(enum.Enum):
    CPU = 1


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("cpu", "is 'cpu', which is not a built-in platform a class can behave as"),
        (PlatformEnum.OOT, "is <PlatformEnum.OOT: 9>, which is not a built-in"),
        (PlatformEnum.TPU, "is <PlatformEnum.TPU: 7>, which is not a built-in"),
        (ForeignEnum.CPU, "test_identity.ForeignEnum.CPU, a member of another enum"),
    ],
    ids=["a string", "OOT", "TPU", "another enum"],
)
def test_an_unknown_identity_fails_when_the_class_is_defined(value: Any, problem: str) -> None:
    with pytest.raises(PlatformIdentityError) as info:
        _platform(value)
    message = str(info.value)
    assert problem in message
    assert "Declare one of PlatformEnum.CPU, PlatformEnum.CUDA, PlatformEnum.ROCM" in message


def test_the_error_names_the_class_that_declares_it_when_inherited() -> None:
    mixin = type("CudaLikeMixin", (DeviceMixin,), {"behaves_as": PlatformEnum.CUDA})
    with pytest.raises(PlatformIdentityError) as info:
        type("CpuButCudaLike", (mixin, CpuSRTPlatform), {})
    assert info.value.owner.endswith(".CudaLikeMixin")
    assert "(inherited by " in str(info.value)


VENDOR = """
from cardcage.platforms.device_mixin import PlatformEnum
from cardcage.platforms.interface import SRTPlatform


class AcmeCpuPlatform(SRTPlatform):
    _enum = PlatformEnum.@ENUM@
    behaves_as = PlatformEnum.CPU
    device_name = "acme_cpu"
    device_type = "cpu"


def activate():
    return "ccident_vendor:AcmeCpuPlatform"
"""


def _vendor_site(tmp_path: Path, enum_name: str) -> Path:
    site = tmp_path / "site"
    dist_info = write_distribution(
        site,
        "acme-cpu-platform",
        entry_points={"sglang.srt.platforms": {"acme_cpu": "ccident_vendor:activate"}},
        modules={"ccident_vendor": VENDOR.replace("@ENUM@", enum_name)},
    )
    # What an installer writes: the top-level package, so the module maps to its distribution.
    (dist_info / "top_level.txt").write_text("ccident_vendor\n", encoding="utf-8")
    return site


def test_the_error_names_the_distribution_that_ships_the_class(tmp_path: Path) -> None:
    with on_sys_path(_vendor_site(tmp_path, "ROCM")), pytest.raises(PlatformIdentityError) as info:
        import ccident_vendor  # noqa: F401
    assert info.value.distribution == "acme-cpu-platform"
    assert "in distribution acme-cpu-platform" in str(info.value)


def test_selection_still_takes_a_cpu_like_class_for_an_external_platform(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SGLANG_PLATFORM", "acme_cpu")
    never = HardwareProbes(
        cpu_engine_requested=lambda: False,
        cuda=lambda: False,
        rocm=lambda: False,
        xpu=lambda: False,
    )
    with on_sys_path(_vendor_site(tmp_path, "OOT")):
        platform, record = select_platform(srt_policy(never))
        assert type(platform).__name__ == "AcmeCpuPlatform"
        assert platform.is_cpu()
        assert platform.is_out_of_tree()
        assert (record.dist_name, record.builtin) == ("acme-cpu-platform", None)
