"""A declared identity under vLLM, and the worker that runs ``init_backend()``, without vLLM.

What is checked here needs no vLLM: which declaration vLLM's adapter honours (a vLLM section's
``behaves_as`` wins over the platform class's), that an impossible one in a section is the same
typed error as on a class, how the adapter's predicates answer from a host base's own predicate,
and the dotted name under which vLLM resolves the worker subclass. ``scenario-vllm`` and
``scenario-vllm-engine`` check the rest inside vLLM itself.
"""

from __future__ import annotations

import enum
from typing import Any

import pytest

from cardcage.platforms.device_mixin import PlatformEnum
from cardcage.platforms.errors import PlatformIdentityError
from cardcage.platforms.hosts.vllm import identity, worker
from cardcage.platforms.interface import SRTPlatform


class _Platform(SRTPlatform):
    _enum = PlatformEnum.OOT
    device_name = "acme"
    device_type = "cpu"


class _CudaLike(_Platform):
    behaves_as = PlatformEnum.CUDA


class _CpuSection:
    behaves_as = PlatformEnum.CPU


class _PlainSection:
    dispatch_key = "CPU"


def test_a_vllm_sections_declaration_wins_over_the_platform_classes() -> None:
    assert identity.declared_identity(_Platform, _CpuSection) is PlatformEnum.CPU
    assert identity.declared_identity(_CudaLike, _CpuSection) is PlatformEnum.CPU
    assert identity.declared_identity(_CudaLike, _PlainSection) is PlatformEnum.CUDA
    assert identity.declared_identity(_CudaLike, None) is PlatformEnum.CUDA
    assert identity.declared_identity(_Platform, _PlainSection) is None


def test_an_impossible_declaration_in_a_vllm_section_is_the_typed_identity_error() -> None:
    class BadSection:
        behaves_as = "cpu"

    with pytest.raises(PlatformIdentityError) as caught:
        identity.declared_identity(_Platform, BadSection)
    message = str(caught.value)
    assert "BadSection" in message
    assert "PlatformEnum.CPU" in message  # the fix names what may be declared


def test_only_a_cpu_like_platform_derives_from_a_vllm_built_in() -> None:
    # vLLM's CUDA and ROCm platforms query NVML and amdsmi, which a vendor device does not answer.
    assert identity.IDENTITY_BASES[PlatformEnum.CPU] == "vllm.platforms.cpu.CpuPlatform"
    assert identity.IDENTITY_BASES[PlatformEnum.CUDA] is None
    assert identity.IDENTITY_BASES[PlatformEnum.ROCM] is None


class _HostEnum(enum.Enum):
    CUDA = 1
    ROCM = 2
    CPU = 3
    OOT = 4


class _HostBase:
    """A host base shaped like vLLM's: predicates that read ``_enum``, one of them a classmethod."""

    _enum = _HostEnum.OOT

    def is_cpu(self) -> bool:
        return self._enum == _HostEnum.CPU

    def is_cuda_alike(self) -> bool:
        return self._enum in (_HostEnum.CUDA, _HostEnum.ROCM)

    def is_out_of_tree(self) -> bool:
        return self._enum == _HostEnum.OOT

    @classmethod
    def is_sleep_mode_available(cls) -> bool:
        return cls._enum in (_HostEnum.CUDA, _HostEnum.ROCM)


def _adapter(declared: PlatformEnum | None) -> Any:
    namespace = identity.identity_namespace(declared, _HostBase, _HostEnum, set())
    return type("Adapter", (_HostBase,), namespace)()


def test_the_host_predicates_answer_as_the_declared_built_in_and_out_of_tree_stays() -> None:
    cpu = _adapter(PlatformEnum.CPU)
    assert (cpu.is_cpu(), cpu.is_cuda_alike(), cpu.is_out_of_tree()) == (True, False, True)
    rocm = _adapter(PlatformEnum.ROCM)
    assert (rocm.is_cpu(), rocm.is_cuda_alike(), rocm.is_out_of_tree()) == (False, True, True)
    assert type(rocm).is_sleep_mode_available() is True  # the host's classmethod, as a class


def test_a_predicate_the_vendor_defines_stays_the_vendors() -> None:
    assert "is_cpu" not in identity.identity_namespace(
        PlatformEnum.CPU, _HostBase, _HostEnum, {"is_cpu"}
    )
    assert identity.identity_namespace(None, _HostBase, _HostEnum, set()) == {}


def test_vllm_resolves_the_init_backend_worker_by_a_dotted_name_that_names_the_chosen_one() -> None:
    chosen = "vllm.v1.worker.cpu_worker.CPUWorker"
    name = worker.worker_qualname(chosen)
    module, _, attribute = name.rpartition(".")  # how vLLM's resolve_obj_by_qualname splits it
    assert module == worker.__name__
    assert attribute.startswith("CPUWorker__Q")
    assert worker.is_wrapped(name)
    assert not worker.is_wrapped(chosen)
    assert not worker.is_wrapped("auto")
