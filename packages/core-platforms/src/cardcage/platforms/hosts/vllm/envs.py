"""The variables vLLM 0.33 reads to choose its plugins and platform, as vLLM parses them.

Declared so that ``cardcage env --runtime vllm`` lists them with their meaning; vLLM reads them
itself. Neither is stripped or validated by vLLM, so neither is here: a value vLLM would accept
never raises.
"""

from __future__ import annotations

from cardcage.hooks.envs import EnvRegistry, EnvVar

__all__ = ["ENV_VARS", "VLLM_PLUGINS", "VLLM_TARGET_DEVICE"]

ENV_VARS = EnvRegistry("vllm")


def _lower(name: str, raw: str) -> str:
    del name
    return raw.lower()


def _split(name: str, raw: str) -> tuple[str, ...]:
    del name
    return tuple(raw.split(","))


VLLM_TARGET_DEVICE: EnvVar[str] = ENV_VARS.add(
    EnvVar(
        name="VLLM_TARGET_DEVICE",
        default="cuda",
        parser=_lower,
        kind="string",
        description=(
            "vLLM's target device, lower-cased (not stripped). Only 'cpu' changes selection: "
            "vLLM's CPU built-in, and no vllm.platform_plugins entry point is loaded. vLLM has "
            "no selector variable: any other value leaves its automatic selection alone."
        ),
    )
)

VLLM_PLUGINS: EnvVar[tuple[str, ...] | None] = ENV_VARS.add(
    EnvVar(
        name="VLLM_PLUGINS",
        default=None,
        parser=_split,
        kind="comma-separated names",
        description=(
            "vLLM's plugin allowlist: unset loads every plugin; set, only the comma-split names "
            "(as written: no stripping; '' names nothing). It filters vllm.general_plugins and "
            "vllm.platform_plugins alike (a list without the platform's name drops it), and "
            "vllm.endpoint_plugins load only when named here."
        ),
    )
)
