"""The registrations of core-platforms: the records ``cardcage.runtimes`` finds (srt, vllm).

cardcage-core-platforms registers them with entry points (``srt =
"cardcage.platforms.runtime:SRT_RUNTIME"``, ``vllm = "...:VLLM_RUNTIME"``), so the loader and the
``cardcage`` command learn about SRT and vLLM exactly as they learn about any other runtime.
Import-safe and cheap: the records hold paths, resolved on use; importing this module imports
neither the selection engine, nor a host's room, nor torch.

The vLLM record is here because vLLM's room (``cardcage.platforms.hosts.vllm``: its adapter,
its rules, its accessor) is in this distribution: the record only points into that room. It is
a runtime cardcage explains, never one it starts: its policy marks it as the vLLM host's
(``rules.vllm_policy``), its accessor reports vLLM's own choice (``hosts.vllm.current``), and it
is ``present_if`` vLLM is installed, so commands without ``--runtime`` cover it only there;
``--runtime vllm`` predicts by vLLM's rules anywhere.
"""

from __future__ import annotations

from cardcage.hooks.profile import SRT_PROFILE, VLLM_PROFILE
from cardcage.hooks.runtimes import Runtime

__all__ = ["SRT_RUNTIME", "VLLM_RUNTIME"]

SRT_RUNTIME = Runtime(
    profile=SRT_PROFILE,
    display_name="SRT",
    distribution="cardcage-core-platforms",
    policy="cardcage.platforms.srt:srt_policy",
    accessor="cardcage.platforms.current",
    hook_registry="cardcage.hooks.registry:HookRegistry",
    env_registries=("cardcage.platforms.envs",),
)

VLLM_RUNTIME = Runtime(
    profile=VLLM_PROFILE,
    display_name="vLLM",
    distribution="cardcage-core-platforms",
    policy="cardcage.platforms.hosts.vllm.rules:vllm_policy",
    accessor="cardcage.platforms.hosts.vllm.current",
    hook_registry="cardcage.hooks.registry:HookRegistry",
    env_registries=("cardcage.platforms.hosts.vllm.envs",),
    present_if="cardcage.platforms.hosts.vllm.rules:installed",
)
