"""Runtime profiles: the names under which one inference runtime discovers its plugins.

cardcage's machinery is runtime-neutral; a profile binds it to one runtime's entry-point groups
and environment variables. The SRT profile is the seed's wire contract, unchanged, so existing
SGLang plugins work as published. Another engine can embed cardcage with a profile of its own.
"""

from __future__ import annotations

from .records import FrozenRecord

__all__ = ["DIFFUSION_PROFILE", "SGLANG_PROFILES", "SRT_PROFILE", "RuntimeProfile"]


class RuntimeProfile(FrozenRecord):
    """Where a runtime looks for platform and general plugins, and which variables steer it.

    A profile is names only. Everything else about a runtime (its selection policy, its
    ``current_platform``, its hook registry and variables) is in its ``Runtime`` record, which the
    runtime package registers in the ``cardcage.runtimes`` entry-point group
    (``cardcage.hooks.runtimes``).

    Immutable and hashable (the loader keys its per-profile state on it).
    """

    _fields = (
        "name",
        "platform_group",
        "plugin_group",
        "selector_env",
        "allowlist_env",
    )
    __slots__ = _fields

    name: str
    platform_group: str
    plugin_group: str
    selector_env: str
    allowlist_env: str

    def __init__(
        self,
        name: str,
        platform_group: str,
        plugin_group: str,
        selector_env: str,
        allowlist_env: str,
    ) -> None:
        init = object.__setattr__
        init(self, "name", name)
        init(self, "platform_group", platform_group)
        init(self, "plugin_group", plugin_group)
        init(self, "selector_env", selector_env)
        init(self, "allowlist_env", allowlist_env)


SRT_PROFILE = RuntimeProfile(
    name="srt",
    platform_group="sglang.srt.platforms",
    plugin_group="sglang.srt.plugins",
    selector_env="SGLANG_PLATFORM",
    allowlist_env="SGLANG_PLUGINS",
)

DIFFUSION_PROFILE = RuntimeProfile(
    name="diffusion",
    platform_group="sglang.multimodal_gen.platforms",
    plugin_group="sglang.multimodal_gen.plugins",
    selector_env="SGLANG_DIFFUSION_PLATFORM_OVERRIDE",
    allowlist_env="SGLANG_PLUGINS",
)

#: The profiles of SGLang's own two runtimes: the wire contract, whichever cardcage runtimes are
#: installed. Their groups are worth listing (and their allowlist names are not typos) even when
#: no installed runtime reads them, because SGLang itself may be the host.
SGLANG_PROFILES = (SRT_PROFILE, DIFFUSION_PROFILE)
