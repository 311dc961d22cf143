"""One ``activate()`` for two hosts: cardcage's side of ``host_qualname`` and the adapter names.

SGLang is not installed where these tests run. They check that under cardcage (its selection,
or no host at all) a plugin's ``activate()`` gets its own qualname back and SGLang is never
imported, and that adapter names encode the vendor's qualname losslessly. Building adapters
against SGLang's real base classes is proven by the ``scenario-sglang`` nox session.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import TYPE_CHECKING

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cardcage.hooks.host import Host
from cardcage.hooks.testing import on_sys_path, write_distribution
from cardcage.platforms.errors import InvalidPlatformClassError
from cardcage.platforms.host import host_qualname, platform_host, register_host_forward
from cardcage.platforms.hosts.sglang import adapter as sglang_adapters
from cardcage.platforms.probes import HardwareProbes
from cardcage.platforms.selection import select_platform
from cardcage.platforms.srt import srt_policy

if TYPE_CHECKING:
    from pathlib import Path

NO_HARDWARE = HardwareProbes(
    cpu_engine_requested=lambda: False, cuda=lambda: False, rocm=lambda: False, xpu=lambda: False
)

DUAL_HOST_PLUGIN = """
from cardcage.platforms.device_mixin import PlatformEnum
from cardcage.platforms.host import host_qualname, platform_host, register_host_forward
from cardcage.platforms.interface import SRTPlatform

HOSTS = []


class DualHostPlatform(SRTPlatform):
    _enum = PlatformEnum.OOT
    device_name = "dual"
    device_type = "cpu"


def activate():
    HOSTS.append(platform_host())
    return host_qualname("cchost_dual:DualHostPlatform")
"""


def test_no_host_gives_the_qualname_back_unchanged() -> None:
    assert platform_host() is None
    assert host_qualname("vendor.platform:VendorPlatform") == "vendor.platform:VendorPlatform"


def test_under_cardcage_selection_activate_sees_cardcage_and_its_own_class_is_selected(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SGLANG_PLATFORM", "dual")
    write_distribution(
        tmp_path,
        "cchost-dual",
        entry_points={"sglang.srt.platforms": {"dual": "cchost_dual:activate"}},
        modules={"cchost_dual": DUAL_HOST_PLUGIN},
    )
    with on_sys_path(tmp_path):
        platform, record = select_platform(srt_policy(NO_HARDWARE))
        module = sys.modules["cchost_dual"]

        assert module.HOSTS == [Host.CARDCAGE]
        assert type(platform) is module.DualHostPlatform
        assert record.qualname.replace(":", ".") == "cchost_dual.DualHostPlatform"
    assert "sglang" not in sys.modules


def test_activate_imports_neither_sglang_nor_the_selection_engine_nor_a_room() -> None:
    # The rooms' index (cardcage.platforms.hosts) comes along; SGLang's room does not.
    code = (
        "import json, sys; from cardcage.platforms.host import host_qualname; "
        "q = host_qualname('v.p:C'); "
        "print(json.dumps([q, sorted(m for m in sys.modules if m.startswith("
        "('sglang', 'cardcage.platforms.')))]))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout

    assert json.loads(out) == ["v.p:C", ["cardcage.platforms.host", "cardcage.platforms.hosts"]]


_identifier = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,12}", fullmatch=True)
_dotted = st.lists(_identifier, min_size=1, max_size=4).map(".".join)


@given(module=_dotted, attrs=_dotted, colon=st.booleans())
def test_an_adapter_name_encodes_the_vendor_qualname_losslessly(
    module: str, attrs: str, colon: bool
) -> None:
    qualname = f"{module}:{attrs}" if colon else f"{module}.{attrs}"
    name = sglang_adapters.adapter_qualname(qualname)
    owner, _, attribute = name.partition(":")

    assert owner == "cardcage.platforms.hosts.sglang.adapter"
    assert attribute.isidentifier()
    assert attribute.startswith(attrs.rsplit(".", 1)[-1])
    assert sglang_adapters.vendor_qualname(attribute) == qualname


def test_the_adapter_module_has_no_attribute_that_is_not_an_adapter_name() -> None:
    with pytest.raises(AttributeError):
        sglang_adapters.VendorPlatform


def test_a_class_that_is_no_cardcage_platform_has_no_adapter() -> None:
    class NotAPlatform:
        pass

    with pytest.raises(InvalidPlatformClassError, match="not a cardcage platform class"):
        sglang_adapters.build_adapter(NotAPlatform)


def test_a_custom_op_forward_reaches_no_host_when_none_runs() -> None:
    # cardcage's CustomOp.register_oot_forward calls this for every registration; with no host's
    # selection module imported it does nothing and imports no room.
    assert not any(m.startswith("sglang") for m in sys.modules)
    assert register_host_forward(object, fn=lambda op: op, platform_key="acme") is False
    assert "cardcage.platforms.hosts.sglang.ops" not in sys.modules
