"""The environment variables cardcage.shm reads, in one typed registry.

Read live on every ``get()``; invalid values raise ``InvalidEnvVarError`` naming the variable.
Import-safe: stdlib and cardcage.hooks.envs only.
"""

from __future__ import annotations

import math

from cardcage.hooks.envs import EnvRegistry, EnvVar, parse_bool
from cardcage.hooks.errors import InvalidEnvVarError

__all__ = [
    "CARDCAGE_SHM_BUSY_US",
    "CARDCAGE_SHM_LATENCY_FIRST",
    "CARDCAGE_SHM_WARNING_INTERVAL",
    "ENV_VARS",
]


def parse_nonnegative_float(name: str, raw: str) -> float:
    """Parse a finite float >= 0."""
    try:
        value = float(raw.strip())
    except ValueError:
        raise InvalidEnvVarError(name, raw, "a number >= 0") from None
    if not math.isfinite(value) or value < 0:
        raise InvalidEnvVarError(name, raw, "a number >= 0")
    return value


ENV_VARS = EnvRegistry("cardcage-shm-broadcast")

CARDCAGE_SHM_WARNING_INTERVAL: EnvVar[float] = ENV_VARS.add(
    EnvVar(
        name="CARDCAGE_SHM_WARNING_INTERVAL",
        default=60.0,
        parser=parse_nonnegative_float,
        kind="seconds",
        description=(
            "While a writer or reader has waited this long, log a warning naming the lagging "
            "reader(s) (rank, pid, lag) or the writer; repeated every interval. 0 disables it."
        ),
    )
)

CARDCAGE_SHM_BUSY_US: EnvVar[float] = ENV_VARS.add(
    EnvVar(
        name="CARDCAGE_SHM_BUSY_US",
        default=1000.0,
        parser=parse_nonnegative_float,
        kind="microseconds",
        description=(
            "How long a waiting reader or writer spins and yields before it parks on a futex. "
            "Higher: lower latency for sparse traffic, more CPU. Idle processes always park."
        ),
    )
)

CARDCAGE_SHM_LATENCY_FIRST: EnvVar[bool] = ENV_VARS.add(
    EnvVar(
        name="CARDCAGE_SHM_LATENCY_FIRST",
        default=False,
        parser=parse_bool,
        kind="boolean",
        description=(
            "Default of MessageQueue(latency_first=...), read by the writer when it creates a "
            "queue: its local readers never park, they spin and yield until their timeout "
            "(CARDCAGE_SHM_BUSY_US without an end), trading a core per waiting reader for the "
            "first message after idle. Travels in the handle: readers' own setting is ignored."
        ),
    )
)
