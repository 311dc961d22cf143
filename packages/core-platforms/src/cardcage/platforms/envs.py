"""Environment variables read by cardcage-core-platforms (typed, strict; see `cardcage env`)."""

from __future__ import annotations

from cardcage.hooks.envs import EnvRegistry, EnvVar, parse_bool, parse_str

__all__ = ["CARDCAGE_CACHE_DIR", "CARDCAGE_KERNELS", "ENV_VARS", "SGLANG_USE_CPU_ENGINE"]

ENV_VARS = EnvRegistry("cardcage-core-platforms")

SGLANG_USE_CPU_ENGINE: EnvVar[bool] = ENV_VARS.add(
    EnvVar(
        name="SGLANG_USE_CPU_ENGINE",
        default=False,
        parser=parse_bool,
        kind="boolean",
        description=(
            "When true and no platform plugin activates, the SRT fallback chain picks the CPU "
            "platform (on x86 and ARM hosts) before probing for accelerators."
        ),
    )
)

CARDCAGE_KERNELS: EnvVar[bool] = ENV_VARS.add(
    EnvVar(
        name="CARDCAGE_KERNELS",
        default=True,
        parser=parse_bool,
        kind="boolean",
        description=(
            "When false, no host installs the kernels a platform declares (its kernels "
            "attribute): every op runs the host's own forward. For bisecting a numerical "
            "difference down to a vendor kernel, in any host."
        ),
    )
)

CARDCAGE_CACHE_DIR: EnvVar[str] = ENV_VARS.add(
    EnvVar(
        name="CARDCAGE_CACHE_DIR",
        default="",
        parser=parse_str,
        kind="string",
        description=(
            "Where cardcage deps keeps the host wheels it fetched for --against NAME==VERSION "
            "(in its wheels/ folder); unset: ~/.cache/cardcage. A CI job caches this folder to "
            "check releases without a download."
        ),
    )
)
