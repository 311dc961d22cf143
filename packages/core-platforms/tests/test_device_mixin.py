"""``cardcage.platforms.device_mixin``: enums, ``DeviceCapability`` and ``DeviceMixin`` defaults.

Reference §9 P1-P8 and §7 F, with our deliberate difference that ``DeviceCapability.to_int()``
raises ``ValueError`` (an ``assert`` would vanish under ``python -O``).
"""

from __future__ import annotations

import importlib.util
import random
import subprocess
import sys
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cardcage.platforms import device_mixin
from cardcage.platforms.device_mixin import (
    CpuArchEnum,
    DeviceCapability,
    DeviceMixin,
    PlatformEnum,
)
from cardcage.platforms.errors import TorchNotInstalledError

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

TORCH_INSTALLED = importlib.util.find_spec("torch") is not None

PREDICATES = {
    PlatformEnum.CUDA: "is_cuda",
    PlatformEnum.ROCM: "is_rocm",
    PlatformEnum.CPU: "is_cpu",
    PlatformEnum.XPU: "is_xpu",
    PlatformEnum.MUSA: "is_musa",
    PlatformEnum.NPU: "is_npu",
    PlatformEnum.TPU: "is_tpu",
    PlatformEnum.MPS: "is_mps",
}


def _mixin(enum: PlatformEnum) -> DeviceMixin:
    """An instance of a DeviceMixin subclass with identity ``enum``."""
    cls = type(f"{enum.name.title()}Mixin", (DeviceMixin,), {"_enum": enum})
    return cls()


@pytest.fixture
def saved_random_state() -> Iterator[None]:
    """Seeding touches the process-wide ``random`` state; put it back afterwards."""
    state = random.getstate()
    yield
    random.setstate(state)


# -- P1, P2: enums -------------------------------------------------------------------------------


def test_platform_enum_has_exactly_the_ten_seed_members_in_order() -> None:
    assert [member.name for member in PlatformEnum] == [
        "CUDA",
        "ROCM",
        "CPU",
        "XPU",
        "MUSA",
        "NPU",
        "TPU",
        "MPS",
        "OOT",
        "UNSPECIFIED",
    ]


def test_cpu_arch_enum_has_exactly_x86_arm_and_unspecified() -> None:
    assert [member.name for member in CpuArchEnum] == ["X86", "ARM", "UNSPECIFIED"]


# -- P3: DeviceCapability --------------------------------------------------------------------------


def test_device_capability_exposes_major_and_minor_fields() -> None:
    cap = DeviceCapability(9, 0)

    assert (cap.major, cap.minor) == (9, 0)


def test_device_capability_unpacks_as_a_pair() -> None:
    major, minor = DeviceCapability(8, 9)

    assert (major, minor) == (8, 9)


def test_device_capability_equals_the_plain_tuple() -> None:
    assert DeviceCapability(8, 6) == (8, 6)


@pytest.mark.parametrize(
    ("left", "op", "right", "expected"),
    [
        (DeviceCapability(9, 0), ">=", (8, 9), True),
        (DeviceCapability(8, 9), ">=", (9, 0), False),
        (DeviceCapability(8, 0), "<", (8, 6), True),
        (DeviceCapability(10, 0), ">", DeviceCapability(9, 9), True),
        (DeviceCapability(7, 5), "<=", (7, 5), True),
    ],
)
def test_device_capability_orders_like_a_tuple(
    left: DeviceCapability, op: str, right: tuple[int, int], expected: bool
) -> None:
    compare: dict[str, Callable[[Any, Any], bool]] = {
        ">=": lambda a, b: a >= b,
        "<": lambda a, b: a < b,
        ">": lambda a, b: a > b,
        "<=": lambda a, b: a <= b,
    }

    assert compare[op](left, right) is expected


def test_device_capability_hashes_like_the_plain_tuple() -> None:
    table = {(9, 0): "hopper"}

    assert hash(DeviceCapability(9, 0)) == hash((9, 0))
    assert table[DeviceCapability(9, 0)] == "hopper"


capabilities = st.tuples(st.integers(0, 20), st.integers(0, 9))


@given(capabilities, capabilities)
def test_device_capability_orders_exactly_like_plain_tuples(
    left: tuple[int, int], right: tuple[int, int]
) -> None:
    a, b = DeviceCapability(*left), DeviceCapability(*right)

    assert (a < b, a == b, a > b) == (left < right, left == right, left > right)


@given(capabilities, capabilities)
def test_to_int_preserves_the_order_of_one_digit_minors(
    left: tuple[int, int], right: tuple[int, int]
) -> None:
    a, b = DeviceCapability(*left), DeviceCapability(*right)

    assert (a.to_int() < b.to_int()) == (a < b)


@pytest.mark.parametrize(
    ("cap", "text"), [(DeviceCapability(9, 0), "9.0"), (DeviceCapability(8, 9), "8.9")]
)
def test_as_version_str_joins_major_and_minor_with_a_dot(cap: DeviceCapability, text: str) -> None:
    assert cap.as_version_str() == text


@pytest.mark.parametrize(
    ("cap", "value"),
    [(DeviceCapability(9, 0), 90), (DeviceCapability(8, 9), 89), (DeviceCapability(0, 0), 0)],
)
def test_to_int_encodes_major_times_ten_plus_minor(cap: DeviceCapability, value: int) -> None:
    assert cap.to_int() == value


@pytest.mark.parametrize("minor", [10, 12, -1])
def test_to_int_raises_value_error_for_a_minor_outside_zero_to_nine(minor: int) -> None:
    with pytest.raises(ValueError, match="minor"):
        DeviceCapability(9, minor).to_int()


def test_to_int_still_rejects_a_two_digit_minor_under_python_dash_o() -> None:
    code = (
        "from cardcage.platforms.device_mixin import DeviceCapability\n"
        "try:\n"
        "    DeviceCapability(9, 10).to_int()\n"
        "except ValueError:\n"
        "    print('rejected')\n"
        "else:\n"
        "    print('accepted')\n"
    )

    result = subprocess.run(
        [sys.executable, "-O", "-c", code], capture_output=True, text=True, check=True
    )

    assert result.stdout.strip() == "rejected"


# -- P4: class defaults and repr -----------------------------------------------------------------


def test_device_mixin_defaults_to_unspecified_unknown_cpu() -> None:
    mixin = DeviceMixin()

    assert (mixin._enum, mixin.device_name, mixin.device_type) == (
        PlatformEnum.UNSPECIFIED,
        "unknown",
        "cpu",
    )


def test_repr_shows_the_class_name_and_device_name() -> None:
    class VendorMixin(DeviceMixin):
        device_name = "vendor"

    assert repr(DeviceMixin()) == "DeviceMixin(device=unknown)"
    assert repr(VendorMixin()) == "VendorMixin(device=vendor)"


# -- P5, P6: identity --------------------------------------------------------------------------


@pytest.mark.parametrize("enum", list(PREDICATES))
def test_each_identity_predicate_is_true_only_for_its_own_enum(enum: PlatformEnum) -> None:
    mixin = _mixin(enum)

    answers = {name: getattr(mixin, name)() for name in PREDICATES.values()}

    assert answers == {name: name == PREDICATES[enum] for name in PREDICATES.values()}


@pytest.mark.parametrize("enum", [PlatformEnum.OOT, PlatformEnum.UNSPECIFIED])
def test_no_identity_predicate_is_true_for_oot_or_unspecified(enum: PlatformEnum) -> None:
    mixin = _mixin(enum)

    assert [name for name in PREDICATES.values() if getattr(mixin, name)()] == []


@pytest.mark.parametrize("enum", list(PlatformEnum))
def test_is_cuda_alike_is_true_exactly_for_cuda_rocm_and_musa(enum: PlatformEnum) -> None:
    expected = enum in {PlatformEnum.CUDA, PlatformEnum.ROCM, PlatformEnum.MUSA}

    assert _mixin(enum).is_cuda_alike() is expected


@pytest.mark.parametrize("enum", list(PlatformEnum))
def test_is_out_of_tree_is_true_exactly_for_oot(enum: PlatformEnum) -> None:
    assert _mixin(enum).is_out_of_tree() is (enum is PlatformEnum.OOT)


# -- P7: CPU architecture ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("machine", "arch"),
    [
        ("x86_64", CpuArchEnum.X86),
        ("amd64", CpuArchEnum.X86),
        ("i386", CpuArchEnum.X86),
        ("i686", CpuArchEnum.X86),
        ("X86_64", CpuArchEnum.X86),
        ("AMD64", CpuArchEnum.X86),
        ("arm64", CpuArchEnum.ARM),
        ("aarch64", CpuArchEnum.ARM),
        ("AARCH64", CpuArchEnum.ARM),
        ("riscv64", CpuArchEnum.UNSPECIFIED),
        ("ppc64le", CpuArchEnum.UNSPECIFIED),
        ("armv7l", CpuArchEnum.UNSPECIFIED),
        ("", CpuArchEnum.UNSPECIFIED),
    ],
)
def test_get_cpu_architecture_maps_the_machine_string_case_insensitively(
    monkeypatch: pytest.MonkeyPatch, machine: str, arch: CpuArchEnum
) -> None:
    monkeypatch.setattr(device_mixin._platform, "machine", lambda: machine)

    assert DeviceMixin.get_cpu_architecture() is arch


def test_get_cpu_architecture_is_callable_on_an_instance(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(device_mixin._platform, "machine", lambda: "aarch64")

    assert _mixin(PlatformEnum.OOT).get_cpu_architecture() is CpuArchEnum.ARM


# -- P8: Active and Planned operation defaults ----------------------------------------------------


@pytest.mark.parametrize(
    ("method", "args"),
    [
        ("get_device_total_memory", ()),
        ("get_current_memory_usage", ()),
        ("get_device", (0,)),
        ("set_device", ("dev0",)),
        ("get_device_name", ()),
        ("get_device_uuid", ()),
        ("get_device_capability", ()),
        ("get_available_memory", ()),
        ("get_torch_profiler_activity_str", ()),
        ("get_torch_profiler_activity", ()),
    ],
)
def test_unimplemented_device_operations_raise_not_implemented_error(
    method: str, args: tuple[object, ...]
) -> None:
    with pytest.raises(NotImplementedError):
        getattr(DeviceMixin(), method)(*args)


@pytest.mark.parametrize(
    ("method", "args"),
    [("empty_cache", ()), ("synchronize", ()), ("verify_quantization", ("fp8",))],
)
def test_planned_no_op_operations_return_none(method: str, args: tuple[object, ...]) -> None:
    assert getattr(DeviceMixin(), method)(*args) is None


def test_get_communicator_class_defaults_to_none() -> None:
    assert DeviceMixin().get_communicator_class() is None


def test_mixin_pin_memory_defaults_to_unavailable() -> None:
    assert DeviceMixin().is_pin_memory_available() is False


@pytest.mark.usefixtures("saved_random_state")
def test_seed_everything_none_leaves_the_random_state_untouched() -> None:
    before = random.getstate()

    DeviceMixin.seed_everything(None)

    assert random.getstate() == before


@pytest.mark.usefixtures("saved_random_state")
def test_seed_everything_makes_random_reproducible() -> None:
    DeviceMixin.seed_everything(1234)
    first = [random.random() for _ in range(5)]
    random.seed(99)  # disturb the state in between
    DeviceMixin.seed_everything(1234)
    second = [random.random() for _ in range(5)]

    assert first == second


@pytest.mark.usefixtures("saved_random_state")
def test_seed_everything_with_different_seeds_gives_different_sequences() -> None:
    DeviceMixin.seed_everything(1)
    first = random.random()
    DeviceMixin.seed_everything(2)

    assert random.random() != first


@pytest.mark.skipif(TORCH_INSTALLED, reason="checks the error raised when torch is absent")
def test_inference_mode_without_torch_raises_torch_not_installed_error() -> None:
    with pytest.raises(TorchNotInstalledError, match=r"cardcage-core-platforms\[torch\]"):
        DeviceMixin.inference_mode()
