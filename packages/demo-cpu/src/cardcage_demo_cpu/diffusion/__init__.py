"""The diffusion half of cardcage-demo-cpu: the host CPU as an out-of-tree diffusion platform.

SRT and diffusion need separate platform classes and separate entry points. This module is what
the ``sglang.multimodal_gen.platforms`` entry point loads on every diffusion start-up, on every
machine where the distribution is installed, before any backend is initialised. So it stays
import-safe: it imports only the standard library, ``cardcage.hooks.profile``,
``cardcage.platforms.host`` and this package's ``envs`` (no torch, no diffusion runtime, no
platform module, no SGLang), and ``activate()`` only reads environment variables and asks which
host is calling it.

The opt-in rules are the SRT half's, with the diffusion selector in place of ``SGLANG_PLATFORM``:

* ``SGLANG_DIFFUSION_PLATFORM_OVERRIDE=demo_cpu`` selects it by name. The runtime then loads and
  calls only this entry point, and a None from ``activate()`` is a start-up error ("installed but
  activate() returned None"), so naming it is an opt-in;
* ``CARDCAGE_DEMO_CPU=1`` lets automatic selection pick it. In automatic mode the runtime calls
  every diffusion platform entry point and refuses to start when two accept, so without the
  opt-in this plugin declines and a real accelerator's plugin (or the built-in chain) wins.

``CARDCAGE_DEMO_CPU=0`` declines in both cases. ``SGLANG_PLATFORM`` is the SRT selector and is
ignored here: one process may run SRT on one device and diffusion on another.
"""

from __future__ import annotations

import logging
import os

from cardcage.hooks.profile import DIFFUSION_PROFILE
from cardcage.platforms.host import host_qualname
from cardcage_demo_cpu import ENTRY_POINT_NAME
from cardcage_demo_cpu.envs import CARDCAGE_DEMO_CPU

__all__ = ["ENTRY_POINT_NAME", "PLATFORM_QUALNAME", "activate"]

#: What ``activate()`` returns: the diffusion platform class, in ``module:Class`` form.
PLATFORM_QUALNAME = "cardcage_demo_cpu.diffusion.platform:DemoCpuPlatform"

logger = logging.getLogger(__name__)


def _named_by_the_override() -> bool:
    # Read exactly as the runtime reads it: stripped, case-sensitive (entry-point names are).
    return os.environ.get(DIFFUSION_PROFILE.selector_env, "").strip() == ENTRY_POINT_NAME


def activate() -> str | None:
    """Return the diffusion platform class's qualified name when asked to, else None.

    Asked means: ``CARDCAGE_DEMO_CPU`` is true, or it is unset and
    ``SGLANG_DIFFUSION_PLATFORM_OVERRIDE`` names this entry point. Cheap and free of side effects.
    A malformed ``CARDCAGE_DEMO_CPU`` raises ``InvalidEnvVarError`` naming the variable, which
    aborts start-up instead of silently picking other hardware. It never touches
    ``current_platform`` and never imports torch or the diffusion runtime.
    """
    if CARDCAGE_DEMO_CPU.is_set():
        wanted = CARDCAGE_DEMO_CPU.get()
        why = f"{CARDCAGE_DEMO_CPU.name}={CARDCAGE_DEMO_CPU.raw()}"
    else:
        wanted = _named_by_the_override()
        why = f"{DIFFUSION_PROFILE.selector_env} does not name {ENTRY_POINT_NAME!r}"
    if not wanted:
        logger.debug("diffusion platform %s declines (%s)", ENTRY_POINT_NAME, why)
        return None
    # Under SGLang 0.5.23's diffusion selection this names the SGLang-native adapter.
    return host_qualname(PLATFORM_QUALNAME)
