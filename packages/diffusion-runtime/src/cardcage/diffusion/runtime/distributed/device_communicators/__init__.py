"""Device communicators: the object that runs ``all_to_all_4D`` for a sequence-parallel group.

A platform names one with ``Platform.get_all_to_all_communicator_cls()`` (a qualified name, so
the platforms package stays free of torch); a worker builds it once for its sequence-parallel
group and the transformer's self-attention calls ``communicator.all_to_all_4D()``. Only that
exchange goes through it: the other collectives (the final sequence all-gather, the request
broadcast, memory all-reduces), graph capture and synchronization use ``torch.distributed``
directly.

Importing this package imports nothing (no torch).
"""

from __future__ import annotations

import importlib

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .base_device_communicator import DeviceCommunicatorBase
    from .cpu_communicator import CpuCommunicator
    from .cuda_communicator import CudaCommunicator

_EXPORTS = {
    "DeviceCommunicatorBase": "base_device_communicator",
    "CpuCommunicator": "cpu_communicator",
    "CudaCommunicator": "cuda_communicator",
}

__all__ = ["CpuCommunicator", "CudaCommunicator", "DeviceCommunicatorBase"]


def __getattr__(name: str) -> object:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
