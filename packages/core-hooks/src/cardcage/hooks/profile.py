"""Runtime profiles: the names under which one inference runtime discovers its plugins.

cardcage's machinery is runtime-neutral; a profile binds it to one runtime's entry-point groups
and environment variables. The SRT profile is the seed's wire contract, unchanged, so existing
SGLang plugins work as published. Another engine can embed cardcage with a profile of its own.
"""

from __future__ import annotations

from ._records import FrozenRecord

__all__ = ["DIFFUSION_PROFILE", "SRT_PROFILE", "RuntimeProfile"]


class RuntimeProfile(FrozenRecord):
    """Where a runtime looks for platform and general plugins, and which variables steer it.

    ``selection_provider`` is an optional ``"module:function"`` path, resolved lazily, to a
    zero-argument function returning the ``cardcage.hooks.loader.PlatformChoice`` the runtime
    selected. It lets a platform package hand its selection (automatic mode included) to the
    general-plugin loader without this package ever importing it at module scope; when the
    module is not installed, the loader falls back to the selector variable.

    Immutable and hashable (the loader keys its per-profile state on it).
    """

    _fields = (
        "name",
        "platform_group",
        "plugin_group",
        "selector_env",
        "allowlist_env",
        "selection_provider",
    )
    __slots__ = _fields

    name: str
    platform_group: str
    plugin_group: str
    selector_env: str
    allowlist_env: str
    selection_provider: str | None

    def __init__(
        self,
        name: str,
        platform_group: str,
        plugin_group: str,
        selector_env: str,
        allowlist_env: str,
        selection_provider: str | None = None,
    ) -> None:
        init = object.__setattr__
        init(self, "name", name)
        init(self, "platform_group", platform_group)
        init(self, "plugin_group", plugin_group)
        init(self, "selector_env", selector_env)
        init(self, "allowlist_env", allowlist_env)
        init(self, "selection_provider", selection_provider)


SRT_PROFILE = RuntimeProfile(
    name="srt",
    platform_group="sglang.srt.platforms",
    plugin_group="sglang.srt.plugins",
    selector_env="SGLANG_PLATFORM",
    allowlist_env="SGLANG_PLUGINS",
    # Provided by cardcage-core-platforms when it is installed.
    selection_provider="cardcage.platforms.handoff:srt_platform_choice",
)

DIFFUSION_PROFILE = RuntimeProfile(
    name="diffusion",
    platform_group="sglang.multimodal_gen.platforms",
    plugin_group="sglang.multimodal_gen.plugins",
    selector_env="SGLANG_DIFFUSION_PLATFORM_OVERRIDE",
    allowlist_env="SGLANG_PLUGINS",
    # Provided by cardcage-diffusion-runtime when it is installed.
    selection_provider="cardcage.diffusion.runtime.platforms.handoff:diffusion_platform_choice",
)
