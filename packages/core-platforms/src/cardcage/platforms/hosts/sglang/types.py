"""Our answers in the types SGLang's callers use, where cardcage's contract answers otherwise.

cardcage's contract follows the seed (``get_device(local_rank) -> torch.device``, cardcage's own
``DeviceCapability``); SGLang's callers were written against SGLang's base. Where the two differ
and a caller in SGLang depends on the difference, the adapter wraps the vendor's method with a
converter from ``CONVERSIONS``, so the vendor writes its method once, in cardcage's terms:

* ``get_device``: SGLang's ``sglang.srt.utils.common.get_device(device_id=None)`` hands the
  platform's answer on as a device *string* and splits it on ``":"`` (a ``torch.device`` there
  raises ``AttributeError``), and asks with ``device_id=None`` for "the device type, no index".
  The adapter answers ``str(device)`` for an id, and the device's type alone for None (the
  vendor's method is asked for device 0, so it never sees a None it was not written for).
* ``get_device_capability``: SGLang's own ``DeviceCapability`` (a named tuple with the same
  fields), so an ``isinstance`` check or a comparison with SGLang's constants holds.

Only names the vendor's classes define are wrapped; a name the vendor left to cardcage's base
answers as SGLang's base does (see ``adapter``).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

__all__ = ["CONVERSIONS", "device_string", "wrap"]

Converter = Callable[[Callable[..., Any], tuple[type, ...]], Callable[..., Any]]


def device_string(device: Any, *, with_index: bool) -> str:
    """``device`` (a ``torch.device`` or its text) as SGLang's device string."""
    text = str(device)
    return text if with_index else text.partition(":")[0]


def _get_device(vendor: Callable[..., Any], _host_bases: tuple[type, ...]) -> Callable[..., Any]:
    def get_device(self: Any, device_id: int | None = 0) -> str:
        device = vendor(self, 0 if device_id is None else device_id)
        return device_string(device, with_index=device_id is not None)

    return get_device


def _host_capability_type(host_bases: tuple[type, ...]) -> type | None:
    for base in host_bases:
        module = importlib.import_module(base.__module__)
        found = getattr(module, "DeviceCapability", None)
        if isinstance(found, type):
            return found
    return None


def _get_device_capability(
    vendor: Callable[..., Any], host_bases: tuple[type, ...]
) -> Callable[..., Any]:
    host_type = _host_capability_type(host_bases)

    def get_device_capability(self: Any, device_id: int = 0) -> Any:
        value = vendor(self, device_id)
        if value is None or host_type is None or isinstance(value, host_type):
            return value
        return host_type(value.major, value.minor)

    return get_device_capability


#: method name -> converter(vendor function, SGLang base MRO) -> the adapter's method.
CONVERSIONS: dict[str, Converter] = {
    "get_device": _get_device,
    "get_device_capability": _get_device_capability,
}


def wrap(name: str, vendor: Callable[..., Any], host_bases: tuple[type, ...]) -> Callable[..., Any]:
    """The adapter's ``name``: the vendor's function with SGLang's types on the way out."""
    method = CONVERSIONS[name](vendor, host_bases)
    method.__name__ = name
    method.__qualname__ = f"{getattr(vendor, '__qualname__', name)} (as SGLang's type)"
    method.__doc__ = getattr(vendor, "__doc__", None)
    method.__wrapped__ = vendor  # type: ignore[attr-defined]
    return method
