"""cardcage-demo-cpu: the reference platform plugin, with the host CPU as an out-of-tree device.

This module is what the ``sglang.srt.platforms`` entry point loads on every start-up, on every
machine where the distribution is installed, before any backend is initialised. So it stays
import-safe: it imports only the standard library, ``cardcage.hooks.envs`` and
``cardcage.platforms.host`` (no torch, no platform module, no runtime, no SGLang), and
``activate()`` only reads environment variables and asks which host is calling it.

The platform is opt-in: a CPU is always present, so probing for one would make this plugin win
on every machine, including one with a real accelerator. It activates only when asked:

* ``SGLANG_PLATFORM=demo_cpu`` selects it by name (only this entry point is loaded), or
* ``CARDCAGE_DEMO_CPU=1`` lets automatic selection pick it.

``CARDCAGE_DEMO_CPU=0`` declines in both cases.
"""

from __future__ import annotations

import logging

from cardcage.hooks.envs import SGLANG_PLATFORM
from cardcage.platforms.host import host_qualname

from .envs import CARDCAGE_DEMO_CPU

__version__ = "0.1.0"

__all__ = ["ENTRY_POINT_NAME", "PLATFORM_QUALNAME", "activate"]

#: The entry-point name in pyproject.toml: what users put in ``SGLANG_PLATFORM``.
ENTRY_POINT_NAME = "demo_cpu"
#: What ``activate()`` returns: the platform class, in ``module:Class`` form.
PLATFORM_QUALNAME = "cardcage_demo_cpu.platform:DemoCpuSRTPlatform"

logger = logging.getLogger(__name__)


def activate() -> str | None:
    """Return the platform class's qualified name when asked to, else None.

    Asked means: ``CARDCAGE_DEMO_CPU`` is true, or it is unset and ``SGLANG_PLATFORM`` names
    this entry point. Cheap and free of side effects: it only reads those two variables.
    ``CARDCAGE_DEMO_CPU`` is a strict boolean, so a typo such as ``yes`` raises
    ``InvalidEnvVarError`` naming the variable, which aborts start-up instead of silently picking
    other hardware. It never touches ``current_platform`` and never imports torch.
    """
    if CARDCAGE_DEMO_CPU.is_set():
        wanted = CARDCAGE_DEMO_CPU.get()
        why = f"{CARDCAGE_DEMO_CPU.name}={CARDCAGE_DEMO_CPU.raw()}"
    else:
        wanted = SGLANG_PLATFORM.get() == ENTRY_POINT_NAME
        why = f"{SGLANG_PLATFORM.name} does not name {ENTRY_POINT_NAME!r}"
    if not wanted:
        logger.debug("%s declines (%s)", ENTRY_POINT_NAME, why)
        return None
    # The same entry point serves SGLang 0.5.23: there this names the SGLang-native adapter.
    return host_qualname(PLATFORM_QUALNAME)
