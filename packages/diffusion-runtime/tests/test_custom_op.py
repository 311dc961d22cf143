"""CustomOp dispatch: each rung of the chain, per-class registration, late registration, compile."""

from __future__ import annotations

import logging
import subprocess
import sys
import weakref
from collections.abc import Iterator
from typing import Any

import pytest
import torch

from cardcage.diffusion.runtime.layers.activation import SiluAndMul
from cardcage.diffusion.runtime.layers.custom_op import CustomOp
from cardcage.diffusion.runtime.layers.dispatch import (
    describe_dispatch,
    describe_forward,
    op_class_name,
)
from cardcage.diffusion.runtime.layers.layernorm import RMSNorm
from cardcage.diffusion.runtime.platforms import Platform, PlatformEnum
from cardcage.diffusion.runtime.platforms.accelerators import (
    MpsPlatform,
    MusaPlatform,
    NpuPlatform,
    XpuPlatform,
)
from cardcage.diffusion.runtime.platforms.cpu import CpuPlatform
from cardcage.diffusion.runtime.platforms.cuda import CudaPlatform, RocmPlatform
from cardcage.diffusion.runtime.platforms.testing import (
    reset_current_platform,
    set_current_platform,
)

LOGGER = "cardcage.diffusion.runtime.layers.custom_op"


class MyPlatform(Platform):
    _enum = PlatformEnum.OOT
    device_name = "my_device"
    device_type = "my_device"
    dispatch_key = "PrivateUse1"

    def __init__(self, key: Any = "my_device") -> None:
        super().__init__()
        self.key = key

    def get_dispatch_key_name(self) -> Any:
        return self.key


class NativeOp(CustomOp):
    def forward_native(self, x: torch.Tensor) -> torch.Tensor:
        return x + 1


class SubNativeOp(NativeOp):
    pass


class DeviceOp(NativeOp):
    def forward_my_device(self, x: torch.Tensor) -> torch.Tensor:
        return x + 2


class SubDeviceOp(DeviceOp):
    pass


class OotOp(NativeOp):
    def forward_oot(self, x: torch.Tensor) -> torch.Tensor:
        return x + 3


class CudaOp(NativeOp):
    def forward_cuda(self, x: torch.Tensor) -> torch.Tensor:
        return x * 2


class CudaAndOotOp(CudaOp):
    def forward_oot(self, x: torch.Tensor) -> torch.Tensor:
        return x + 3


class EveryForwardOp(CustomOp):
    def forward_native(self, x: torch.Tensor) -> torch.Tensor:
        return x + 100

    def forward_cuda(self, x: torch.Tensor) -> torch.Tensor:
        return x + 101

    def forward_hip(self, x: torch.Tensor) -> torch.Tensor:
        return x + 102

    def forward_npu(self, x: torch.Tensor) -> torch.Tensor:
        return x + 103

    def forward_xpu(self, x: torch.Tensor) -> torch.Tensor:
        return x + 104

    def forward_musa(self, x: torch.Tensor) -> torch.Tensor:
        return x + 105


class NoNativeOp(CustomOp):
    pass


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(CustomOp, "_oot_forward_registry", {})
    monkeypatch.setattr(CustomOp, "_constructed_classes", weakref.WeakSet())
    reset_current_platform()
    set_current_platform(MyPlatform())
    yield
    reset_current_platform()


@pytest.fixture
def x() -> torch.Tensor:
    return torch.arange(6, dtype=torch.float32).reshape(2, 3)


def _times_ten(op: CustomOp, x: torch.Tensor) -> torch.Tensor:
    return x * 10


# -- OOT chain ---------------------------------------------------------------------------------
def test_registered_forward_is_used_and_receives_the_op(x: torch.Tensor) -> None:
    calls: list[tuple[Any, ...]] = []

    def fn(op: CustomOp, arg: torch.Tensor, *, scale: float = 1.0) -> torch.Tensor:
        calls.append((op, arg, scale))
        return arg * 10 * scale

    CustomOp.register_oot_forward(NativeOp, fn=fn, platform_key="my_device")
    op = NativeOp()
    torch.testing.assert_close(op(x, scale=2.0), x * 20)
    assert len(calls) == 1
    assert calls[0][0] is op
    assert calls[0][1] is x


def test_registered_forward_beats_forward_key(x: torch.Tensor) -> None:
    CustomOp.register_oot_forward(DeviceOp, fn=_times_ten, platform_key="my_device")
    torch.testing.assert_close(DeviceOp()(x), x * 10)


def test_forward_key_defined_by_the_subclass(x: torch.Tensor) -> None:
    op = DeviceOp()
    assert op._forward_method == op.forward_my_device
    torch.testing.assert_close(op(x), x + 2)


def test_forward_key_inherited_from_an_intermediate_class(x: torch.Tensor) -> None:
    torch.testing.assert_close(SubDeviceOp()(x), x + 2)


def test_forward_oot_when_nothing_more_specific(x: torch.Tensor) -> None:
    op = OotOp()
    assert op._forward_method == op.forward_oot
    torch.testing.assert_close(op(x), x + 3)


def test_default_forward_oot_calls_forward_native(x: torch.Tensor) -> None:
    op = NativeOp()
    assert op._forward_method == op.forward_oot
    torch.testing.assert_close(op(x), x + 1)


def test_registration_under_another_key_is_ignored(x: torch.Tensor) -> None:
    CustomOp.register_oot_forward(NativeOp, fn=_times_ten, platform_key="other_device")
    torch.testing.assert_close(NativeOp()(x), x + 1)


def test_registration_is_per_exact_class(x: torch.Tensor) -> None:
    CustomOp.register_oot_forward(NativeOp, fn=_times_ten, platform_key="my_device")
    torch.testing.assert_close(NativeOp()(x), x * 10)
    torch.testing.assert_close(SubNativeOp()(x), x + 1)


def test_registration_key_is_stripped(x: torch.Tensor) -> None:
    CustomOp.register_oot_forward(NativeOp, fn=_times_ten, platform_key=" my_device ")
    set_current_platform(MyPlatform("my_device  "))
    torch.testing.assert_close(NativeOp()(x), x * 10)


def test_non_identifier_key_falls_back_to_forward_oot(x: torch.Tensor) -> None:
    set_current_platform(MyPlatform("my-device"))
    torch.testing.assert_close(OotOp()(x), x + 3)
    CustomOp.register_oot_forward(OotOp, fn=_times_ten, platform_key="my-device")
    torch.testing.assert_close(OotOp()(x), x * 10)


def test_oot_platform_can_reuse_forward_cuda(x: torch.Tensor) -> None:
    set_current_platform(MyPlatform("cuda"))
    torch.testing.assert_close(CudaOp()(x), x * 2)
    # without a forward_cuda of its own, the op goes to forward_oot, not the base default
    torch.testing.assert_close(OotOp()(x), x + 3)


def test_oot_platform_with_native_key_uses_forward_native(x: torch.Tensor) -> None:
    set_current_platform(MyPlatform("native"))
    op = OotOp()
    assert op._forward_method == op.forward_native
    torch.testing.assert_close(op(x), x + 1)


@pytest.mark.parametrize("key", ["", "   "])
def test_blank_dispatch_key_is_rejected(key: str) -> None:
    set_current_platform(MyPlatform(key))
    with pytest.raises(ValueError, match="non-empty"):
        NativeOp()


def test_non_string_dispatch_key_is_rejected() -> None:
    set_current_platform(MyPlatform(None))
    with pytest.raises(TypeError, match="must be a str"):
        NativeOp()


def test_missing_forward_native_raises(x: torch.Tensor) -> None:
    with pytest.raises(NotImplementedError, match="NoNativeOp must implement forward_native"):
        NoNativeOp()(x)


# -- built-in platforms ------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("platform", "offset"),
    [
        (CudaPlatform, 101),
        (RocmPlatform, 102),
        (NpuPlatform, 103),
        (XpuPlatform, 104),
        (MusaPlatform, 105),
        (CpuPlatform, 100),
        (MpsPlatform, 100),
    ],
)
def test_builtin_platform_selects_its_forward(
    platform: type[Platform], offset: int, x: torch.Tensor
) -> None:
    set_current_platform(platform())
    torch.testing.assert_close(EveryForwardOp()(x), x + offset)


@pytest.mark.parametrize(
    ("platform", "expected"),
    [
        (CudaPlatform, "cuda"),
        (RocmPlatform, "cuda"),  # forward_hip defaults to forward_cuda
        (MusaPlatform, "cuda"),  # forward_musa defaults to forward_cuda
        (NpuPlatform, "native"),
        (XpuPlatform, "native"),  # a forward_xpu default exists
        (CpuPlatform, "native"),
        (MpsPlatform, "native"),
    ],
)
def test_builtin_platform_defaults(
    platform: type[Platform], expected: str, x: torch.Tensor
) -> None:
    set_current_platform(platform())
    want = x * 2 if expected == "cuda" else x + 1
    torch.testing.assert_close(CudaOp()(x), want)
    torch.testing.assert_close(NativeOp()(x), x + 1)
    torch.testing.assert_close(CudaAndOotOp()(x), want)  # forward_oot is for OOT platforms only


def test_registered_forward_applies_to_builtin_keys_too(x: torch.Tensor) -> None:
    set_current_platform(CudaPlatform())
    CustomOp.register_oot_forward(CudaOp, fn=_times_ten, platform_key="cuda")
    torch.testing.assert_close(CudaOp()(x), x * 10)


# -- resolved once -----------------------------------------------------------------------------
def test_dispatch_is_resolved_once_at_construction(
    x: torch.Tensor, caplog: pytest.LogCaptureFixture
) -> None:
    op = NativeOp()
    method = op._forward_method
    set_current_platform(CudaPlatform())
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        CustomOp.register_oot_forward(NativeOp, fn=_times_ten, platform_key="my_device")
    assert op._forward_method == method
    torch.testing.assert_close(op(x), x + 1)
    records = [r for r in caplog.records if r.name == LOGGER]
    assert len(records) == 1
    assert records[0].levelno == logging.WARNING
    assert "existing instances keep their dispatch" in records[0].getMessage()
    assert "NativeOp" in records[0].getMessage()

    set_current_platform(MyPlatform())
    torch.testing.assert_close(NativeOp()(x), x * 10)


def test_no_warning_when_registering_before_construction(
    caplog: pytest.LogCaptureFixture,
) -> None:
    DeviceOp()  # another class was built: registering for NativeOp is still early
    with caplog.at_level(logging.DEBUG, logger=LOGGER):
        CustomOp.register_oot_forward(NativeOp, fn=_times_ten, platform_key="my_device")
    assert [r for r in caplog.records if r.name == LOGGER] == []


def test_replacing_a_registration_warns_and_last_wins(
    x: torch.Tensor, caplog: pytest.LogCaptureFixture
) -> None:
    CustomOp.register_oot_forward(NativeOp, fn=_times_ten, platform_key="my_device")
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        CustomOp.register_oot_forward(NativeOp, fn=lambda op, t: t - 1, platform_key="my_device")
    assert any("replacing" in r.getMessage() for r in caplog.records)
    torch.testing.assert_close(NativeOp()(x), x - 1)


def test_register_oot_forward_validates_its_arguments() -> None:
    with pytest.raises(TypeError, match="CustomOp subclass"):
        CustomOp.register_oot_forward(torch.nn.Linear, fn=_times_ten, platform_key="k")
    with pytest.raises(TypeError, match="callable"):
        CustomOp.register_oot_forward(NativeOp, fn="nope", platform_key="k")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="non-empty"):
        CustomOp.register_oot_forward(NativeOp, fn=_times_ten, platform_key=" ")
    assert CustomOp._oot_forward_registry == {}


# -- compile -----------------------------------------------------------------------------------
def _compile_counting(op: torch.nn.Module) -> tuple[Any, list[int]]:
    compiles: list[int] = []

    def backend(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
        compiles.append(1)
        return gm.forward

    return torch.compile(op, backend=backend, fullgraph=True), compiles


def test_compiled_ops_do_not_recompile_because_of_dispatch() -> None:
    torch._dynamo.reset()
    CustomOp.register_oot_forward(
        SiluAndMul, fn=lambda op, t: op.forward_native(t) * 2, platform_key="my_device"
    )
    silu = SiluAndMul()
    norm = RMSNorm(4)
    device = DeviceOp()
    methods = [silu._forward_method, norm._forward_method, device._forward_method]
    for op, width in [(silu, 8), (norm, 4), (device, 4)]:
        compiled, compiles = _compile_counting(op)
        for _ in range(3):
            t = torch.randn(3, width)
            torch.testing.assert_close(compiled(t), op(t))
        assert len(compiles) == 1
    assert [silu._forward_method, norm._forward_method, device._forward_method] == methods


def test_importing_layers_does_not_resolve_the_platform() -> None:
    code = (
        "import sys\n"
        "import cardcage.diffusion.runtime.layers.custom_op\n"
        "import cardcage.diffusion.runtime.layers.layernorm\n"
        "import cardcage.diffusion.runtime.layers.activation\n"
        "assert 'cardcage.diffusion.runtime.platforms.current' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# -- op names, and the hand-off to a host ------------------------------------------------------
def test_the_built_in_ops_carry_sglangs_names() -> None:
    assert (RMSNorm.name, SiluAndMul.name) == ("rms_norm", "silu_and_mul")
    assert CustomOp.op_registry["rms_norm"] is RMSNorm
    assert CustomOp.op_registry["silu_and_mul"] is SiluAndMul
    assert NativeOp.name is None  # never registered


def test_a_name_names_one_class() -> None:
    CustomOp.register("cc_test_unique_name")(NativeOp)
    try:
        CustomOp.register("cc_test_unique_name")(NativeOp)  # the same class again: fine
        with pytest.raises(ValueError, match="'cc_test_unique_name' is already registered"):
            CustomOp.register("cc_test_unique_name")(DeviceOp)
        with pytest.raises(ValueError, match="the op name must be a non-empty string"):
            CustomOp.register("  ")
        with pytest.raises(TypeError, match="decorates a CustomOp subclass"):
            CustomOp.register("cc_test_not_an_op")(int)  # type: ignore[type-var]
    finally:
        del CustomOp.op_registry["cc_test_unique_name"]
        del NativeOp.name


def test_under_cardcage_a_registration_reaches_no_host() -> None:
    # No host's selection module is imported: the hand-off does nothing, and dispatch is the
    # same as before (the rungs above).
    code = (
        "import sys\n"
        "from cardcage.diffusion.runtime.layers.custom_op import CustomOp\n"
        "from cardcage.diffusion.runtime.layers.layernorm import RMSNorm\n"
        "CustomOp.register_oot_forward(RMSNorm, fn=lambda op, x: x, platform_key='k')\n"
        "assert not [m for m in sys.modules if m.startswith('sglang')]\n"
        "assert 'cardcage.platforms.hosts.sglang' not in sys.modules\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr


# -- naming the dispatch (cardcage.diffusion.runtime.layers.dispatch) --------------------------
def test_a_registered_forward_is_described_by_its_qualified_name() -> None:
    CustomOp.register_oot_forward(NativeOp, fn=_times_ten, platform_key="my_device")
    op = NativeOp()
    assert describe_dispatch(op, op.dispatch_forward()) == (
        f"{__name__}.NativeOp -> {__name__}._times_ten"
    )


def test_a_method_forward_is_described_by_its_name() -> None:
    op = DeviceOp()
    assert describe_forward(op.dispatch_forward()) == "forward_my_device"
    assert op_class_name(DeviceOp) == op_class_name(op) == f"{__name__}.DeviceOp"


def test_the_dispatch_names_import_neither_torch_nor_the_layers() -> None:
    code = (
        "import sys; import cardcage.diffusion.runtime.layers.dispatch\n"
        "loaded = {'torch', 'cardcage.diffusion.runtime.layers.custom_op'} & set(sys.modules)\n"
        "assert not loaded, loaded\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
