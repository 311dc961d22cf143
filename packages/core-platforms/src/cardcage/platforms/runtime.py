"""The SRT runtime's registration: the record ``cardcage.runtimes`` finds as ``srt``.

cardcage-core-platforms registers it with an entry point (``srt =
"cardcage.platforms.runtime:SRT_RUNTIME"``), so the loader and the ``cardcage`` command learn
about SRT exactly as they learn about any other runtime. Import-safe and cheap: the record holds
paths, resolved on use; importing this module imports neither the selection engine nor torch.
"""

from __future__ import annotations

from cardcage.hooks.profile import SRT_PROFILE
from cardcage.hooks.runtimes import Runtime

__all__ = ["SRT_RUNTIME"]

SRT_RUNTIME = Runtime(
    profile=SRT_PROFILE,
    display_name="SRT",
    distribution="cardcage-core-platforms",
    policy="cardcage.platforms.srt:srt_policy",
    accessor="cardcage.platforms.current",
    hook_registry="cardcage.hooks.registry:HookRegistry",
    env_registries=("cardcage.platforms.envs",),
)
