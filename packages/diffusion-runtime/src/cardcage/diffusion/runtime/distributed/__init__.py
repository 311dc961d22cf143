"""cardcage.diffusion.runtime.distributed: the collectives a platform may supply.

``device_communicators`` holds ``DeviceCommunicatorBase`` and the built-in ``CpuCommunicator``
(gloo) and ``CudaCommunicator`` (nccl); ``resolve_all_to_all_communicator_cls(platform)`` turns
the qualified name a platform answers from ``get_all_to_all_communicator_cls()`` into the class
the workers build for their sequence-parallel group.

Importing this package imports nothing (no torch); the names below load their submodule on
first access.
"""

from __future__ import annotations

import importlib

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .device_communicators.base_device_communicator import DeviceCommunicatorBase
    from .resolve import resolve_all_to_all_communicator_cls

_EXPORTS = {
    "DeviceCommunicatorBase": "device_communicators.base_device_communicator",
    "resolve_all_to_all_communicator_cls": "resolve",
}

__all__ = ["DeviceCommunicatorBase", "resolve_all_to_all_communicator_cls"]


def __getattr__(name: str) -> object:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
