"""Environment variables cardcage-diffusion-runtime declares: one typed registry per package.

``cardcage env`` and the docs' environment table read ``ENV_VARS`` from here (the selector
``SGLANG_DIFFUSION_PLATFORM_OVERRIDE`` and the allowlist belong to ``cardcage.hooks.envs``).

``CARDCAGE_DIFFUSION_HTTP_BRIDGE`` is how ``cardcage-diffusion serve`` tells its HTTP child
where the launcher's request channel listens. The launcher sets it only while it starts that
child (the workers never see it); a user does not set it.

Import-safe: stdlib and ``cardcage.hooks.envs`` only.
"""

from __future__ import annotations

from cardcage.hooks.envs import EnvRegistry, EnvVar, parse_str

__all__ = ["CARDCAGE_DIFFUSION_HTTP_BRIDGE", "ENV_VARS"]

ENV_VARS = EnvRegistry("cardcage-diffusion-runtime")

CARDCAGE_DIFFUSION_HTTP_BRIDGE: EnvVar[str] = ENV_VARS.add(
    EnvVar(
        name="CARDCAGE_DIFFUSION_HTTP_BRIDGE",
        default="",
        parser=parse_str,
        kind="Unix socket path",
        description=(
            "Set by `cardcage-diffusion serve` for its HTTP child only: the Unix socket on which "
            "the launcher forwards image requests to the workers (authenticated with the "
            "process's multiprocessing authkey, which spawned children inherit). Not a user "
            "setting: the HTTP server refuses to start without it."
        ),
    )
)
