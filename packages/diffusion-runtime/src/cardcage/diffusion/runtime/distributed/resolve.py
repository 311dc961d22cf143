"""``resolve_all_to_all_communicator_cls(platform)``: the class behind a platform's qualname.

``Platform.get_all_to_all_communicator_cls()`` answers a qualified name, so the platforms
package never imports torch; a worker resolves it here, once, before it builds the communicator
of its sequence-parallel group. The built-in MPS, NPU and XPU platforms get ``CpuCommunicator``
whatever their compatibility hook says (their base answer has no collective of its own). A name
that does not import, or that is not a ``DeviceCommunicatorBase`` subclass, is a typed error
naming the platform, its distribution (out-of-tree platforms) and the fix: the selected vendor is
broken, so the worker must not start.
"""

from __future__ import annotations

import logging
import pkgutil
from typing import TYPE_CHECKING

from cardcage.diffusion.errors import CommunicatorNotFoundError, InvalidCommunicatorError
from cardcage.diffusion.runtime.platforms.interface import PlatformEnum

if TYPE_CHECKING:
    from cardcage.diffusion.runtime.platforms.interface import Platform

    from .device_communicators.base_device_communicator import DeviceCommunicatorBase

__all__ = ["CPU_COMMUNICATOR", "resolve_all_to_all_communicator_cls"]

logger = logging.getLogger(__name__)

_PACKAGE = "cardcage.diffusion.runtime.distributed.device_communicators"
CPU_COMMUNICATOR = f"{_PACKAGE}.cpu_communicator.CpuCommunicator"
"""What the built-in host-collective platforms use for the all-to-all."""

_HOST_ALL_TO_ALL = (PlatformEnum.MPS, PlatformEnum.NPU, PlatformEnum.XPU)


def _platform_dist(platform: Platform) -> str | None:
    """The distribution that supplied ``platform`` when it is the selected one (else None).

    Reads the selection record without resolving anything, so a platform object built by a
    test or a harness never triggers selection here.
    """
    from cardcage.diffusion.runtime.platforms.current import get_selection_record

    record = get_selection_record()
    cls = type(platform)
    if record is None or record.qualname != f"{cls.__module__}.{cls.__qualname__}":
        return None
    return record.dist_name


def resolve_all_to_all_communicator_cls(platform: Platform) -> type[DeviceCommunicatorBase]:
    """The communicator class ``platform`` uses for ``all_to_all_4D``.

    Raises ``NotImplementedError`` (from the platform) for an out-of-tree platform that names
    none, ``CommunicatorNotFoundError`` (an ``ImportError``) when the name does not import and
    ``InvalidCommunicatorError`` (a ``TypeError``) when it is not a ``DeviceCommunicatorBase``
    subclass.
    """
    from .device_communicators.base_device_communicator import DeviceCommunicatorBase

    cls = type(platform)
    label = f"{cls.__module__}.{cls.__qualname__}"
    if platform._enum in _HOST_ALL_TO_ALL:
        qualname: object = CPU_COMMUNICATOR
    else:
        qualname = platform.get_all_to_all_communicator_cls()
    if not isinstance(qualname, str) or "." not in qualname.strip(". "):
        raise InvalidCommunicatorError(
            "that is not a qualified name",
            platform=label,
            dist_name=_platform_dist(platform),
            qualname=qualname,
        )
    try:
        resolved = pkgutil.resolve_name(qualname)
    except (ImportError, AttributeError, ValueError) as exc:
        raise CommunicatorNotFoundError(
            f"it does not import ({type(exc).__name__}: {exc})",
            platform=label,
            dist_name=_platform_dist(platform),
            qualname=qualname,
        ) from exc
    if not (isinstance(resolved, type) and issubclass(resolved, DeviceCommunicatorBase)):
        raise InvalidCommunicatorError(
            f"it resolves to {resolved!r}, which is not a DeviceCommunicatorBase subclass",
            platform=label,
            dist_name=_platform_dist(platform),
            qualname=qualname,
        )
    logger.debug("All-to-all communicator of %s: %s", label, qualname)
    return resolved
