"""The diffusion runtime's registration: the record ``cardcage.runtimes`` finds as ``diffusion``.

cardcage-diffusion-runtime registers it with an entry point (``diffusion =
"cardcage.diffusion.runtime.platforms.registration:DIFFUSION_RUNTIME"``); the general-plugin
loader (its platform hand-off and allowlist scope) and every ``cardcage`` command learn about
this runtime from it, so no core package names this package's modules. Import-safe and cheap:
the record holds paths, resolved on use; importing this module imports neither torch nor the
rest of the runtime.
"""

from __future__ import annotations

from cardcage.hooks.profile import DIFFUSION_PROFILE
from cardcage.hooks.runtimes import Runtime

__all__ = ["DIFFUSION_RUNTIME"]

_PKG = "cardcage.diffusion.runtime.platforms"

DIFFUSION_RUNTIME = Runtime(
    profile=DIFFUSION_PROFILE,
    display_name="Diffusion",
    distribution="cardcage-diffusion-runtime",
    policy=f"{_PKG}.policy:diffusion_policy",
    accessor=f"{_PKG}.current",
    hook_registry=f"{_PKG}.plugins:HookRegistry",
    # The runtime's workers broadcast through cardcage.shm, so its variables are listed here too.
    env_registries=("cardcage.shm.envs", "cardcage.diffusion.envs"),
)
