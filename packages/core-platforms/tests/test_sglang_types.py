"""SGLang's room converts the vendor's answers into the types SGLang's callers use.

SGLang is not installed here; the converters take the host's base classes as arguments, so a
stand-in base with its own ``DeviceCapability`` shows the conversion. The adapter built on
SGLang's real base is exercised by the ``scenario-sglang`` and ``scenario-sglang-engine``
sessions.
"""

from __future__ import annotations

import sys
import types
from typing import Any, NamedTuple

from cardcage.platforms.device_mixin import DeviceCapability
from cardcage.platforms.hosts.sglang import types as host_types


class _Device:
    """What ``str(torch.device("npu", 1))`` prints, without torch."""

    def __init__(self, kind: str, index: int | None) -> None:
        self.text = kind if index is None else f"{kind}:{index}"

    def __str__(self) -> str:
        return self.text


def _vendor_get_device(self: Any, local_rank: int) -> _Device:
    self.asked.append(local_rank)
    return _Device("npu", local_rank)


class _Platform:
    def __init__(self) -> None:
        self.asked: list[int] = []


def test_get_device_answers_a_device_string_with_the_index_sglang_asked_for() -> None:
    get_device = host_types.wrap("get_device", _vendor_get_device, ())
    platform = _Platform()

    assert get_device(platform, 3) == "npu:3"
    assert get_device(platform, device_id=0) == "npu:0"
    assert platform.asked == [3, 0]


def test_get_device_for_no_id_is_the_device_type_and_never_hands_the_vendor_none() -> None:
    # sglang.srt.utils.common.get_device(None) asks for "the device" and splits the answer on ":".
    get_device = host_types.wrap("get_device", _vendor_get_device, ())
    platform = _Platform()

    assert get_device(platform, None) == "npu"
    assert platform.asked == [0]


def test_the_wrapped_method_keeps_the_vendor_function_reachable() -> None:
    get_device = host_types.wrap("get_device", _vendor_get_device, ())

    assert get_device.__name__ == "get_device"
    assert get_device.__wrapped__ is _vendor_get_device  # type: ignore[attr-defined]


class _HostCapability(NamedTuple):
    major: int
    minor: int


def test_device_capability_becomes_the_hosts_named_tuple() -> None:
    module = types.ModuleType("fake_host_mixin")
    module.DeviceCapability = _HostCapability  # type: ignore[attr-defined]
    base = type("HostBase", (), {"__module__": "fake_host_mixin"})
    sys.modules["fake_host_mixin"] = module
    try:
        method = host_types.wrap(
            "get_device_capability", lambda self, device_id: DeviceCapability(9, 0), (base,)
        )
        answer = method(object(), 0)
        none = host_types.wrap("get_device_capability", lambda self, device_id: None, (base,))
        assert none(object(), 0) is None
    finally:
        del sys.modules["fake_host_mixin"]

    assert type(answer) is _HostCapability
    assert answer == (9, 0)
