"""The toy runtime's own profile and its registration in cardcage's runtime registry.

A runtime that embeds cardcage picks its own entry-point groups and variables (its profile) and
registers one ``Runtime`` record in the ``cardcage.runtimes`` entry-point group (see
``pyproject.toml``). From then on ``cardcage platform``, ``plugins list``, ``hooks``, ``env`` and
``doctor`` cover it, each with ``--runtime toy``. Import-safe: this module imports only
``cardcage.hooks`` records; everything else is named by path and imported on use.
"""

from __future__ import annotations

from cardcage.hooks.profile import RuntimeProfile
from cardcage.hooks.runtimes import Runtime

__all__ = ["TOY_PROFILE", "TOY_RUNTIME"]

TOY_PROFILE = RuntimeProfile(
    name="toy",
    platform_group="toy_runtime.platforms",
    plugin_group="toy_runtime.plugins",
    selector_env="TOY_PLATFORM",
    allowlist_env="TOY_PLUGINS",
)

TOY_RUNTIME = Runtime(
    profile=TOY_PROFILE,
    display_name="Toy",
    distribution="toy-runtime",
    policy="toy_runtime.platform:toy_policy",
    accessor="toy_runtime.current",
    hook_registry="toy_runtime.hooks:HookRegistry",
    env_registries=("toy_runtime.envs",),
)
