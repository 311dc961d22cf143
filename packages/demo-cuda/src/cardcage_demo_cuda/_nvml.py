"""A minimal NVML binding through ctypes: count GPUs and read their memory without CUDA.

NVML is the driver's management library. Unlike the CUDA runtime it creates no device context,
so a parent process can call it and still fork workers safely, and it needs neither torch nor a
Python binding: ``libnvidia-ml.so.1`` ships with the driver. Every function returns None when the
library or the driver is missing, instead of raising; ``activate()`` must never raise for
"no GPU here".

Import-safe: stdlib only; the library is loaded on first use.
"""

from __future__ import annotations

import ctypes
import functools
import logging
import os
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

__all__ = [
    "device_count",
    "device_nodes",
    "driver_present",
    "memory_info",
    "nvml_index",
    "visible_devices",
]

logger = logging.getLogger(__name__)

_LIBRARY = "libnvidia-ml.so.1"
_SUCCESS = 0
_T = TypeVar("_T")


class _Memory(ctypes.Structure):
    _fields_ = (
        ("total", ctypes.c_ulonglong),
        ("free", ctypes.c_ulonglong),
        ("used", ctypes.c_ulonglong),
    )


def driver_present() -> bool:
    """The kernel shows an NVIDIA driver: a few ``stat`` calls, no library loaded."""
    return os.path.exists("/proc/driver/nvidia/version") or os.path.exists("/dev/nvidiactl")


_DEVICE_NODE = re.compile(r"nvidia[0-9]+")


def device_nodes(dev: str = "/dev") -> int:
    """GPUs by their device nodes (``/dev/nvidia0``, ...): the fallback when NVML is missing."""
    try:
        return sum(1 for name in os.listdir(dev) if _DEVICE_NODE.fullmatch(name))
    except OSError:
        return 0


@functools.cache
def _library() -> ctypes.CDLL | None:
    try:
        return ctypes.CDLL(_LIBRARY)
    except OSError as exc:
        logger.debug("NVML is not available (%s): %s", _LIBRARY, exc)
        return None


@contextmanager
def _session(lib: ctypes.CDLL) -> Iterator[bool]:
    """nvmlInit / nvmlShutdown around one query; yields whether init succeeded."""
    status = lib.nvmlInit_v2()
    if status != _SUCCESS:
        logger.debug("nvmlInit_v2 failed with NVML status %d", status)
        yield False
        return
    try:
        yield True
    finally:
        lib.nvmlShutdown()


def _query(work: Callable[[ctypes.CDLL], _T | None]) -> _T | None:
    if not driver_present():
        return None
    lib = _library()
    if lib is None:
        return None
    with _session(lib) as ok:
        return work(lib) if ok else None


def device_count() -> int | None:
    """GPUs the driver sees (ignoring CUDA_VISIBLE_DEVICES), or None if NVML cannot tell."""

    def work(lib: ctypes.CDLL) -> int | None:
        count = ctypes.c_uint(0)
        status = lib.nvmlDeviceGetCount_v2(ctypes.byref(count))
        return int(count.value) if status == _SUCCESS else None

    return _query(work)


def memory_info(index: int) -> tuple[int, int] | None:
    """``(free, total)`` bytes of the GPU with NVML index ``index``, or None."""

    def work(lib: ctypes.CDLL) -> tuple[int, int] | None:
        handle = ctypes.c_void_p()
        if lib.nvmlDeviceGetHandleByIndex_v2(ctypes.c_uint(index), ctypes.byref(handle)):
            return None
        memory = _Memory()
        if lib.nvmlDeviceGetMemoryInfo(handle, ctypes.byref(memory)):
            return None
        return int(memory.free), int(memory.total)

    return _query(work)


def visible_devices() -> list[str] | None:
    """``CUDA_VISIBLE_DEVICES`` as a list (empty: no GPU visible), or None when unset.

    CUDA stops at the first entry it cannot parse, and ``-1`` hides everything, so the list ends
    there.
    """
    raw = os.environ.get("CUDA_VISIBLE_DEVICES")
    if raw is None:
        return None
    visible: list[str] = []
    for item in raw.split(","):
        entry = item.strip()
        if not entry or entry.startswith("-"):
            break
        visible.append(entry)
    return visible


def nvml_index(device_id: int) -> int | None:
    """The NVML index of CUDA device ``device_id``, where the mapping is unambiguous, else None.

    NVML numbers GPUs in PCI bus order; CUDA does too only with ``CUDA_DEVICE_ORDER=PCI_BUS_ID``
    (its default puts the fastest first) or when there is a single GPU. ``CUDA_VISIBLE_DEVICES``
    must list plain indices (UUIDs and MIG names cannot be mapped without CUDA).
    """
    if device_id < 0:
        return None
    same_order = os.environ.get("CUDA_DEVICE_ORDER") == "PCI_BUS_ID" or device_count() == 1
    if not same_order:
        return None
    visible = visible_devices()
    if visible is None:
        return device_id
    if device_id >= len(visible) or not visible[device_id].isdigit():
        return None
    return int(visible[device_id])
