"""Runtime profiles: the names under which one inference runtime discovers its plugins.

cardcage's machinery is runtime-neutral; a profile binds it to one runtime's entry-point groups
and environment variables. The SRT profile is the seed's wire contract, unchanged, so existing
SGLang plugins work as published. Another engine can embed cardcage with a profile of its own.

``RuntimeProfile`` is a plain class with ``__slots__`` that writes out its comparison, hash and
``repr``, not a dataclass: it is defined inside the start-up window that
``benchmarks/bench_platforms.py`` budgets (docs/reference/records.md says what it keeps).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import Self

__all__ = ["DIFFUSION_PROFILE", "SGLANG_PROFILES", "SRT_PROFILE", "VLLM_PROFILE", "RuntimeProfile"]


class RuntimeProfile:
    """Where a runtime looks for platform and general plugins, and which variables steer it.

    A profile is names only. Everything else about a runtime (its selection policy, its
    ``current_platform``, its hook registry and variables) is in its ``Runtime`` record, which the
    runtime package registers in the ``cardcage.runtimes`` entry-point group
    (``cardcage.hooks.runtimes``).

    Immutable and hashable (the loader keys its per-profile state on it).
    """

    __match_args__ = ("name", "platform_group", "plugin_group", "selector_env", "allowlist_env")
    __slots__ = __match_args__

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

    def _astuple(self) -> tuple[object, ...]:
        return (
            self.name,
            self.platform_group,
            self.plugin_group,
            self.selector_env,
            self.allowlist_env,
        )

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self._astuple() == other._astuple()

    def __hash__(self) -> int:
        return hash(self._astuple())

    def __repr__(self) -> str:
        values = zip(self.__match_args__, self._astuple(), strict=True)
        return f"{type(self).__qualname__}({', '.join(f'{n}={v!r}' for n, v in values)})"

    def __setattr__(self, name: str, value: object) -> None:
        from dataclasses import FrozenInstanceError  # the error path only

        raise FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        from dataclasses import FrozenInstanceError  # the error path only

        raise FrozenInstanceError(f"cannot delete field {name!r}")

    def __reduce__(self) -> tuple[type[Self], tuple[object, ...]]:
        return (type(self), self._astuple())


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

#: vLLM 0.33's names: the groups its loader and selection read, and its two variables. vLLM has
#: no selector variable; ``VLLM_TARGET_DEVICE`` stands in the selector's place because its one
#: selecting value, ``cpu``, picks vLLM's CPU built-in without loading any platform plugin (any
#: other value leaves vLLM's automatic selection alone). ``VLLM_PLUGINS`` filters general *and*
#: platform plugins. vLLM's rules are not cardcage's: its runtime record (core-platforms)
#: predicts and explains them (``cardcage.platforms.hosts.vllm.rules``).
VLLM_PROFILE = RuntimeProfile(
    name="vllm",
    platform_group="vllm.platform_plugins",
    plugin_group="vllm.general_plugins",
    selector_env="VLLM_TARGET_DEVICE",
    allowlist_env="VLLM_PLUGINS",
)
