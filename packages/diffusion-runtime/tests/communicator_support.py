"""Communicator classes and platforms for the communicator tests (importable by qualname)."""

from __future__ import annotations

from typing import Any

from cardcage.diffusion.runtime.distributed.device_communicators.cpu_communicator import (
    CpuCommunicator,
)
from cardcage.diffusion.runtime.platforms.interface import Platform, PlatformEnum

HERE = __name__


class CountingCommunicator(CpuCommunicator):
    """A vendor-style communicator: the gloo exchange, counted."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.calls: list[tuple[tuple[int, ...], int, int]] = []

    def all_to_all_4D(self, x: Any, scatter_dim: int, gather_dim: int) -> Any:
        self.calls.append((tuple(x.shape), scatter_dim, gather_dim))
        return super().all_to_all_4D(x, scatter_dim, gather_dim)


class NotACommunicator:
    """Has the method, but is no ``DeviceCommunicatorBase``."""

    def all_to_all_4D(self, x: Any, scatter_dim: int, gather_dim: int) -> Any:
        return x


class BareOotPlatform(Platform):
    """Implements nothing of the communicator contract."""

    _enum = PlatformEnum.OOT
    device_name = "bare"
    device_type = "cpu"


class LegacyOotPlatform(BareOotPlatform):
    """An existing subclass that only overrides the compatibility hook."""

    @classmethod
    def get_device_communicator_cls(cls) -> str:
        return f"{HERE}.CountingCommunicator"


class ModernOotPlatform(BareOotPlatform):
    @classmethod
    def get_all_to_all_communicator_cls(cls) -> str:
        return f"{HERE}.CountingCommunicator"


class WrongClassPlatform(BareOotPlatform):
    @classmethod
    def get_all_to_all_communicator_cls(cls) -> str:
        return f"{HERE}.NotACommunicator"


class MissingModulePlatform(BareOotPlatform):
    @classmethod
    def get_all_to_all_communicator_cls(cls) -> str:
        return "no_such_vendor_module.Communicator"


class NotANamePlatform(BareOotPlatform):
    @classmethod
    def get_all_to_all_communicator_cls(cls) -> Any:
        return CountingCommunicator  # the class itself, not its qualified name
