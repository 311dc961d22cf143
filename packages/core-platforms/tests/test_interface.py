"""``SRTPlatform`` defaults (P9) and the built-in platforms (P10, device operations).

The CPU built-in's memory queries read the OS, so they are checked without torch. Operations
that need torch are checked twice: without torch they raise ``TorchNotInstalledError`` (skipped
where torch is installed); with torch (``@pytest.mark.torch``, run by the nox session
``tests-core-platforms-torch``) they do the real thing on the CPU build.
"""

from __future__ import annotations

import importlib.util
import os
import platform as stdlib_platform
import random
from typing import TYPE_CHECKING, Any

import pytest

from cardcage.hooks.errors import CardcageError
from cardcage.platforms.cpu import CpuSRTPlatform
from cardcage.platforms.cuda import CudaSRTPlatform
from cardcage.platforms.device_mixin import DeviceMixin, PlatformEnum
from cardcage.platforms.errors import TorchNotInstalledError
from cardcage.platforms.interface import PlatformCapabilities, SRTPlatform
from cardcage.platforms.rocm import RocmSRTPlatform
from cardcage.platforms.xpu import XpuSRTPlatform

if TYPE_CHECKING:
    from collections.abc import Iterator

TORCH_INSTALLED = importlib.util.find_spec("torch") is not None

needs_torch = pytest.mark.skipif(not TORCH_INSTALLED, reason="needs PyTorch (torch extra)")
without_torch = pytest.mark.skipif(
    TORCH_INSTALLED, reason="checks the error raised when torch is absent"
)

# Factories whose default is "no platform opinion" (None): the runtime uses its own class.
NONE_FACTORIES = [
    "get_graph_runner_cls",
    "get_full_graph_backend_cls",
    "get_paged_allocator_cls",
    "get_piecewise_backend_cls",
    "get_speculative_cache_locs_fn",
]


@pytest.fixture
def saved_random_state() -> Iterator[None]:
    state = random.getstate()
    yield
    random.setstate(state)


# -- P9: SRTPlatform defaults ----------------------------------------------------------------------


@pytest.mark.parametrize("mode", [None, "npugraph_ex", "max-autotune"])
def test_compile_backend_defaults_to_inductor_for_any_mode(mode: str | None) -> None:
    assert SRTPlatform().get_compile_backend(mode=mode) == "inductor"


def test_compile_backend_accepts_no_argument() -> None:
    assert SRTPlatform().get_compile_backend() == "inductor"


def test_base_capabilities_are_conservative() -> None:
    assert SRTPlatform().capabilities == PlatformCapabilities()
    assert not any(SRTPlatform.capabilities.as_dict().values())


def test_base_pin_memory_is_the_device_mixin_default_false() -> None:
    # The seed lists is_pin_memory_available under DeviceMixin (default False), not among
    # SRTPlatform's flags; SGLang's canonical SRTPlatform answered True (reference P9).
    assert SRTPlatform().is_pin_memory_available() is False


def test_base_dispatch_key_is_native() -> None:
    assert SRTPlatform().get_dispatch_key_name() == "native"


def test_base_quantization_config_is_none_meaning_the_default() -> None:
    assert SRTPlatform().get_quantization_config("fp8") is None


def test_base_supports_no_quantization_by_default() -> None:
    assert tuple(SRTPlatform.supported_quantization) == ()


def test_apply_server_args_defaults_returns_none_and_leaves_the_args_alone() -> None:
    class Args:
        def __init__(self) -> None:
            self.attention_backend = "flashinfer"
            self.dtype = "auto"

    args = Args()

    assert SRTPlatform().apply_server_args_defaults(args) is None
    assert vars(args) == {"attention_backend": "flashinfer", "dtype": "auto"}


def test_init_backend_returns_none() -> None:
    assert SRTPlatform().init_backend() is None


def test_base_identity_is_unspecified_and_not_out_of_tree() -> None:
    base = SRTPlatform()

    assert (base._enum, base.is_out_of_tree()) == (PlatformEnum.UNSPECIFIED, False)


@pytest.mark.parametrize("factory", NONE_FACTORIES)
def test_base_factories_answer_none_meaning_the_runtimes_own(factory: str) -> None:
    assert getattr(SRTPlatform(), factory)() is None


def test_base_default_attention_backend_raises_not_implemented_error() -> None:
    with pytest.raises(NotImplementedError):
        SRTPlatform().get_default_attention_backend()


def test_compile_backend_override_receives_the_mode() -> None:
    class Vendor(SRTPlatform):
        def get_compile_backend(self, mode: str | None = None) -> str:
            return f"vendor-{mode}"

    assert Vendor().get_compile_backend(mode="npugraph_ex") == "vendor-npugraph_ex"


def test_dispatch_key_override_is_honoured() -> None:
    class Vendor(SRTPlatform):
        def get_dispatch_key_name(self) -> str:
            return "dummy"

    assert Vendor().get_dispatch_key_name() == "dummy"


class _VendorMixin(DeviceMixin):
    _enum = PlatformEnum.OOT
    device_name = "vendor"
    device_type = "vendor"

    def get_device_total_memory(self, device_id: int = 0) -> int:
        return 16 << 30

    def is_pin_memory_available(self, device: Any = None) -> bool:
        return device != "host-only"


@pytest.mark.parametrize(
    "bases",
    [(SRTPlatform, _VendorMixin), (_VendorMixin, SRTPlatform)],
    ids=["srt-first", "mixin-first"],
)
def test_vendor_mixin_works_in_either_base_order(bases: tuple[type, ...]) -> None:
    platform: Any = type("VendorPlatform", bases, {})()

    assert (platform.get_device_total_memory(), platform.is_out_of_tree(), repr(platform)) == (
        16 << 30,
        True,
        "VendorPlatform(device=vendor)",
    )


@pytest.mark.parametrize(
    "bases",
    [(SRTPlatform, _VendorMixin), (_VendorMixin, SRTPlatform)],
    ids=["srt-first", "mixin-first"],
)
def test_vendor_mixin_pin_memory_answer_wins_in_either_base_order(bases: tuple[type, ...]) -> None:
    platform: Any = type("VendorPlatform", bases, {})()

    assert (platform.is_pin_memory_available(), platform.is_pin_memory_available("host-only")) == (
        True,
        False,
    )


# -- P10: built-in flag matrix and identities ------------------------------------------------------


ALL_CAPABILITIES = PlatformCapabilities(
    supports_triton=True,
    graph_capture=True,
    piecewise_graph=True,
    hicache_device_kernels=True,
    supports_pynccl=True,
)


@pytest.mark.parametrize(
    ("cls", "capabilities"),
    [
        (CudaSRTPlatform, ALL_CAPABILITIES),
        (RocmSRTPlatform, ALL_CAPABILITIES),
        (CpuSRTPlatform, PlatformCapabilities(graph_capture=True)),
        (
            XpuSRTPlatform,
            PlatformCapabilities(supports_triton=True, graph_capture=True, piecewise_graph=True),
        ),
    ],
    ids=["cuda", "rocm", "cpu", "xpu"],
)
def test_builtin_capabilities_are_sglang_0_5_23s(
    cls: type[SRTPlatform], capabilities: PlatformCapabilities
) -> None:
    # As SGLang 0.5.23's CudaSRTPlatform, RocmSRTPlatform, CpuSRTPlatform and XpuSRTPlatform.
    assert (cls.capabilities, cls().capabilities) == (capabilities, capabilities)


@pytest.mark.filterwarnings("ignore::cardcage.platforms.errors.PlatformDeprecationWarning")
@pytest.mark.parametrize(
    ("cls", "flags"),
    [
        (CudaSRTPlatform, (True, True, True)),
        (RocmSRTPlatform, (False, True, True)),
        (CpuSRTPlatform, (False, True, False)),
        (XpuSRTPlatform, (False, True, True)),
    ],
    ids=["cuda", "rocm", "cpu", "xpu"],
)
def test_builtin_seed_flags_answer_from_the_capabilities(
    cls: type[SRTPlatform], flags: tuple[bool, ...]
) -> None:
    # The seed's names, deprecated: supports_fp8() keeps the seed's answer (True on CUDA only),
    # the graph flags read capabilities.graph_capture and capabilities.piecewise_graph.
    platform = cls()

    assert (
        platform.supports_fp8(),
        platform.support_cuda_graph(),
        platform.support_piecewise_cuda_graph(),
    ) == flags


@pytest.mark.parametrize(
    ("cls", "identity"),
    [
        (CudaSRTPlatform, (PlatformEnum.CUDA, "cuda", "cuda")),
        (RocmSRTPlatform, (PlatformEnum.ROCM, "rocm", "cuda")),
        (CpuSRTPlatform, (PlatformEnum.CPU, "cpu", "cpu")),
        (XpuSRTPlatform, (PlatformEnum.XPU, "xpu", "xpu")),
    ],
    ids=["cuda", "rocm", "cpu", "xpu"],
)
def test_builtin_enum_device_name_and_device_type(
    cls: type[SRTPlatform], identity: tuple[PlatformEnum, str, str]
) -> None:
    platform = cls()

    assert (platform._enum, platform.device_name, platform.device_type) == identity


@pytest.mark.parametrize("cls", [CudaSRTPlatform, RocmSRTPlatform, CpuSRTPlatform, XpuSRTPlatform])
def test_builtins_are_not_out_of_tree(cls: type[SRTPlatform]) -> None:
    assert cls().is_out_of_tree() is False


def test_rocm_is_cuda_alike_but_not_cuda() -> None:
    rocm = RocmSRTPlatform()

    assert (rocm.is_rocm(), rocm.is_cuda(), rocm.is_cuda_alike()) == (True, False, True)


def test_rocm_dispatches_to_hip_kernels() -> None:
    assert RocmSRTPlatform().get_dispatch_key_name() == "hip"


@pytest.mark.parametrize(
    ("cls", "backend"),
    [
        (CudaSRTPlatform, "nccl"),
        (RocmSRTPlatform, "nccl"),
        (CpuSRTPlatform, "gloo"),
        (XpuSRTPlatform, "xccl"),
    ],
    ids=["cuda", "rocm", "cpu", "xpu"],
)
def test_builtin_torch_distributed_backend(cls: type[SRTPlatform], backend: str) -> None:
    assert cls().get_torch_distributed_backend_str() == backend


def test_cuda_pin_memory_is_available_except_for_a_cpu_device() -> None:
    cuda = CudaSRTPlatform()

    assert (cuda.is_pin_memory_available(), cuda.is_pin_memory_available("cpu")) == (True, False)


def test_cpu_attention_backend_is_torch_native() -> None:
    assert CpuSRTPlatform().get_default_attention_backend() == "torch_native"


# -- CPU device operations that need no torch ------------------------------------------------------


def test_cpu_total_memory_is_the_physical_memory_reported_by_sysconf() -> None:
    expected = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")

    assert CpuSRTPlatform().get_device_total_memory() == expected


def test_cpu_current_memory_usage_is_positive() -> None:
    assert CpuSRTPlatform().get_current_memory_usage() > 0


def test_cpu_current_memory_usage_is_below_total_memory() -> None:
    cpu = CpuSRTPlatform()

    assert cpu.get_current_memory_usage() < cpu.get_device_total_memory()


def test_cpu_available_memory_is_positive_and_at_most_total() -> None:
    cpu = CpuSRTPlatform()

    free, total = cpu.get_available_memory()

    assert 0 < free <= total == cpu.get_device_total_memory()


def test_cpu_device_name_contains_the_machine() -> None:
    name = CpuSRTPlatform().get_device_name()

    assert name.startswith("cpu (")
    assert stdlib_platform.machine() in name


def test_cpu_device_uuid_is_the_machine() -> None:
    assert CpuSRTPlatform().get_device_uuid() == (stdlib_platform.machine() or "cpu")


def test_cpu_has_no_device_capability() -> None:
    assert CpuSRTPlatform().get_device_capability() is None


def test_cpu_pin_memory_is_unavailable() -> None:
    assert CpuSRTPlatform().is_pin_memory_available() is False


@pytest.mark.parametrize(
    ("method", "args"), [("set_device", ("cpu",)), ("empty_cache", ()), ("synchronize", ())]
)
def test_cpu_housekeeping_operations_succeed_without_torch(
    method: str, args: tuple[object, ...]
) -> None:
    assert getattr(CpuSRTPlatform(), method)(*args) is None


# -- without torch: a clear error naming the extra -------------------------------------------------


def test_torch_not_installed_error_is_an_import_error_naming_the_extra() -> None:
    error = TorchNotInstalledError("get_device()")

    assert isinstance(error, ImportError)
    assert isinstance(error, CardcageError)
    assert "get_device()" in str(error)
    assert "cardcage-core-platforms[torch]" in str(error)


@without_torch
@pytest.mark.parametrize("cls", [CudaSRTPlatform, RocmSRTPlatform, XpuSRTPlatform])
@pytest.mark.parametrize(
    ("method", "args"),
    [
        ("get_device_total_memory", ()),
        ("get_current_memory_usage", ()),
        ("get_device", (0,)),
        ("set_device", (0,)),
        ("get_device_name", ()),
        ("get_available_memory", ()),
        ("empty_cache", ()),
        ("synchronize", ()),
    ],
)
def test_accelerator_operations_without_torch_raise_torch_not_installed_error(
    cls: type[SRTPlatform], method: str, args: tuple[object, ...]
) -> None:
    with pytest.raises(TorchNotInstalledError, match=r"cardcage-core-platforms\[torch\]"):
        getattr(cls(), method)(*args)


@without_torch
def test_cuda_device_capability_without_torch_raises_torch_not_installed_error() -> None:
    with pytest.raises(TorchNotInstalledError):
        CudaSRTPlatform().get_device_capability()


@without_torch
def test_cpu_get_device_without_torch_raises_torch_not_installed_error() -> None:
    with pytest.raises(TorchNotInstalledError, match=r"cardcage-core-platforms\[torch\]"):
        CpuSRTPlatform().get_device(0)


@without_torch
def test_torch_not_installed_error_is_caught_by_except_import_error() -> None:
    with pytest.raises(ImportError):
        CudaSRTPlatform().get_device(0)


# -- with torch (CPU build) ----------------------------------------------------------------------


@pytest.mark.torch
@needs_torch
def test_cpu_get_device_is_the_torch_cpu_device() -> None:
    import torch

    assert CpuSRTPlatform().get_device(0) == torch.device("cpu")


@pytest.mark.torch
@needs_torch
def test_cpu_set_device_leaves_the_torch_default_device_unchanged() -> None:
    import torch

    before = torch.empty(1).device
    CpuSRTPlatform().set_device(torch.device("cpu"))

    assert torch.empty(1).device == before


@pytest.mark.torch
@needs_torch
def test_inference_mode_is_a_working_context_manager() -> None:
    import torch

    with CpuSRTPlatform.inference_mode():
        enabled = torch.is_inference_mode_enabled()
        tensor = torch.ones(2)

    assert (enabled, tensor.is_inference(), torch.is_inference_mode_enabled()) == (
        True,
        True,
        False,
    )


@pytest.mark.torch
@needs_torch
@pytest.mark.usefixtures("saved_random_state")
def test_seed_everything_makes_torch_rand_reproducible() -> None:
    import torch

    saved = torch.random.get_rng_state()
    try:
        CpuSRTPlatform.seed_everything(3)
        first = torch.rand(4)
        torch.manual_seed(12345)  # disturb the generator in between
        CpuSRTPlatform.seed_everything(3)
        second = torch.rand(4)
    finally:
        torch.random.set_rng_state(saved)

    assert torch.equal(first, second)


@pytest.mark.torch
@needs_torch
@pytest.mark.usefixtures("saved_random_state")
def test_cuda_seed_everything_seeds_torch_on_a_machine_without_gpus() -> None:
    import torch

    saved = torch.random.get_rng_state()
    try:
        CudaSRTPlatform.seed_everything(5)
        first = torch.rand(3)
        CudaSRTPlatform.seed_everything(5)
        second = torch.rand(3)
    finally:
        torch.random.set_rng_state(saved)

    assert torch.equal(first, second)


@pytest.mark.torch
@needs_torch
def test_cuda_get_device_builds_an_indexed_cuda_device_without_touching_a_gpu() -> None:
    import torch

    assert CudaSRTPlatform().get_device(1) == torch.device("cuda", 1)


@pytest.mark.torch
@needs_torch
def test_xpu_available_memory_is_zero_when_no_xpu_is_present() -> None:
    import torch

    if torch.xpu.device_count() != 0:
        pytest.skip("an XPU is present")

    assert XpuSRTPlatform().get_available_memory() == (0, 0)
