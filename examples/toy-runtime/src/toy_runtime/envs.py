"""The variables the toy runtime reads, in one typed registry (``cardcage env`` lists them)."""

from __future__ import annotations

from cardcage.hooks.envs import EnvRegistry, EnvVar, parse_allowlist, parse_str

__all__ = ["ENV_VARS", "TOY_PLATFORM", "TOY_PLUGINS"]

ENV_VARS = EnvRegistry("toy-runtime")

TOY_PLATFORM: EnvVar[str] = ENV_VARS.add(
    EnvVar(
        name="TOY_PLATFORM",
        default="",
        parser=parse_str,
        kind="entry-point name",
        description="Selects the toy runtime's platform by entry-point name or built-in alias.",
    )
)

TOY_PLUGINS: EnvVar[frozenset[str] | None] = ENV_VARS.add(
    EnvVar(
        name="TOY_PLUGINS",
        default=None,
        parser=parse_allowlist,
        kind="comma-separated names",
        description="Allowlist of the toy runtime's plugin entry-point names (unset: no filter).",
    )
)
