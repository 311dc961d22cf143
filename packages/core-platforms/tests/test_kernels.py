"""The kernel API: the op table, a platform's declared kernels, and what install() does with them.

The host's half (SGLang's SRT ops, vLLM's) is proven in the host's own venvs
(``tests_integration/sglang_engine``); here the host's room is the ``installer`` argument
``install()`` takes, and the subject is everything cardcage decides before and after a room is
asked: which kernels reach it, the one WARNING for each one no host op can take, once per
process, and the ``CARDCAGE_KERNELS`` switch.
"""

from __future__ import annotations

import logging
import subprocess
import sys
from typing import TYPE_CHECKING, Any

import pytest

from cardcage.hooks.testing import on_sys_path, write_distribution
from cardcage.platforms import kernels
from cardcage.platforms.device_mixin import PlatformEnum
from cardcage.platforms.interface import SRTPlatform
from cardcage.platforms.kernels import OPS, KernelInstall, install, installed_row

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from pathlib import Path

KERNELS_MODULE = """
def rms_norm(x, weight, eps):
    return ("rms_norm", x, weight, eps)


def silu_and_mul(x):
    return ("silu_and_mul", x)


def wrong_arity(x):
    return x
"""


@pytest.fixture
def vendor_site(tmp_path: Path) -> Path:
    write_distribution(tmp_path, "acme-kernels", modules={"acme_kernels": KERNELS_MODULE})
    return tmp_path


_made = iter(range(1_000_000))


def _platform(declared: Mapping[str, str]) -> type[SRTPlatform]:
    """A vendor class of its own name: install() keeps what it did per class, per process."""
    namespace = {
        "_enum": PlatformEnum.OOT,
        "device_name": "acme",
        "device_type": "acme",
        "kernels": declared,
        "__module__": __name__,
    }
    return type(f"AcmeSRTPlatform{next(_made)}", (SRTPlatform,), namespace)


class Room:
    """A host room's installer that takes every kernel it is given, one host op per op."""

    def __init__(self) -> None:
        self.given: dict[str, Callable[..., Any]] = {}

    def __call__(
        self, usable: dict[str, tuple[Callable[..., Any], KernelInstall]]
    ) -> list[KernelInstall]:
        self.given.update({op: fn for op, (fn, _) in usable.items()})
        return [
            installed_row(t, f"host.ops.{op}", "host.register") for op, (_, t) in usable.items()
        ]


def _rows(vendor: type) -> list[KernelInstall]:
    where = f"{vendor.__module__}.{vendor.__qualname__}"
    return [row for row in kernels.installed() if row.platform == where]


def test_the_op_table_fixes_each_op_s_signature_and_tolerances() -> None:
    assert OPS["rms_norm"].signature == "rms_norm(x, weight, eps) -> out"
    assert OPS["fused_add_rms_norm"].signature == (
        "fused_add_rms_norm(x, residual, weight, eps) -> (out, residual_out)"
    )
    assert OPS["silu_and_mul"].parameters == ("x",)
    assert {"layer_norm", "rotary_embedding"} <= set(OPS)
    for spec in OPS.values():
        assert set(spec.tolerances) == {"float32", "float16", "bfloat16"}


def test_declared_kernels_reach_the_room_as_functions_and_are_recorded(vendor_site: Path) -> None:
    vendor = _platform(
        {"rms_norm": "acme_kernels:rms_norm", "silu_and_mul": "acme_kernels.silu_and_mul"}
    )
    room = Room()
    with on_sys_path(vendor_site):
        install(vendor, "testhost", "1.0", room)

    assert room.given["rms_norm"](1, 2, 3) == ("rms_norm", 1, 2, 3)
    assert room.given["silu_and_mul"](1) == ("silu_and_mul", 1)
    rows = _rows(vendor)
    assert [(r.op, r.host_op, r.installed) for r in rows] == [
        ("rms_norm", "host.ops.rms_norm", True),
        ("silu_and_mul", "host.ops.silu_and_mul", True),
    ]
    assert {(r.host, r.release, r.kernel) for r in rows} >= {
        ("testhost", "1.0", "acme_kernels:rms_norm")
    }


def test_a_platform_s_kernels_are_installed_once_per_process_and_host(vendor_site: Path) -> None:
    vendor = _platform({"silu_and_mul": "acme_kernels:silu_and_mul"})
    first, second = Room(), Room()
    with on_sys_path(vendor_site):
        install(vendor, "testhost", "1.0", first)
        install(vendor, "testhost", "1.0", second)  # a second model runner, say

    assert list(first.given) == ["silu_and_mul"]
    assert second.given == {}
    assert len(_rows(vendor)) == 1


@pytest.mark.parametrize(
    ("declared", "said"),
    [
        (
            {"rms_nrom": "acme_kernels:rms_norm"},
            "cardcage knows no op 'rms_nrom'. Did you mean 'rms_norm'?",
        ),
        ({"rms_norm": "acme_kernels:no_such_kernel"}, "the kernel does not load: AttributeError"),
        ({"rms_norm": "acme_kernels:wrong_arity"}, "cannot be called as rms_norm(x, weight, eps)"),
    ],
    ids=["unknown-op", "missing-kernel", "wrong-signature"],
)
def test_a_kernel_no_host_op_can_take_gets_one_warning_and_reaches_no_room(
    vendor_site: Path, caplog: pytest.LogCaptureFixture, declared: dict[str, str], said: str
) -> None:
    vendor = _platform(declared)
    room = Room()
    with on_sys_path(vendor_site), caplog.at_level(logging.WARNING, "cardcage.platforms.kernels"):
        install(vendor, "testhost", "1.0", room)

    assert room.given == {}
    (row,) = _rows(vendor)
    assert not row.installed
    (warning,) = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    path = next(iter(declared.values()))
    op = next(iter(declared))
    assert warning.startswith(f"Kernel {path} for op {op!r} of ")
    assert "is not installed in testhost 1.0: " in warning
    assert said in warning


def test_cardcage_kernels_false_installs_nothing(
    vendor_site: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CARDCAGE_KERNELS", "0")
    vendor = _platform({"rms_norm": "acme_kernels:rms_norm"})
    room = Room()
    with on_sys_path(vendor_site):
        install(vendor, "testhost", "1.0", room)

    assert room.given == {}
    assert _rows(vendor) == []


def test_declaring_kernels_imports_nothing_of_them_nor_torch() -> None:
    code = (
        "import sys\n"
        "from cardcage.platforms.device_mixin import PlatformEnum\n"
        "from cardcage.platforms.interface import SRTPlatform\n"
        "from cardcage.platforms.kernels import declared_kernels\n"
        "class P(SRTPlatform):\n"
        "    _enum = PlatformEnum.OOT\n"
        "    device_name = device_type = 'acme'\n"
        "    kernels = {'rms_norm': 'acme_nowhere.kernels:rms_norm'}\n"
        "assert declared_kernels(P) == {'rms_norm': 'acme_nowhere.kernels:rms_norm'}\n"
        "assert not {'torch', 'acme_nowhere'} & set(sys.modules), sorted(sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("host", ["sglang", "vllm"])
def test_every_room_that_takes_kernels_answers_whether_they_are_in_effect(host: str) -> None:
    """``in_effect()`` asks the kernel's room; a room without the question answers False for
    every kernel, however the host dispatches. A row the room never installed is not in effect,
    and asking imports no host."""
    from cardcage.platforms.hosts import room

    check = getattr(room(host), "kernel_in_effect", None)
    assert callable(check)
    row = KernelInstall("rms_norm", "acme:rms_norm", "acme.Platform", host, "0", None, "")
    assert check(row) is False
    assert host not in sys.modules
