"""Environment variables read by cardcage-demo-cpu: one typed registry, parsed strictly.

Every knob of this plugin is declared here, with its type, default and meaning, so the README
table and the code cannot drift (a test checks the README lists each one). Names carry the
plugin's own prefix (``CARDCAGE_DEMO_CPU``); booleans accept only ``0/1/true/false``.

Import-safe: stdlib and ``cardcage.hooks.envs`` only.
"""

from __future__ import annotations

from cardcage.hooks.envs import EnvRegistry, EnvVar, parse_bool, parse_str

__all__ = [
    "CARDCAGE_DEMO_CPU",
    "CARDCAGE_DEMO_CPU_EVIDENCE",
    "CARDCAGE_DEMO_CPU_THREADS",
    "ENV_VARS",
    "parse_thread_count",
]

ENV_VARS = EnvRegistry("cardcage-demo-cpu")


def parse_thread_count(name: str, raw: str) -> int:
    """A thread count: ``0`` (or empty) means "every CPU this process may run on"; else >= 1."""
    value = raw.strip()
    if not value:
        return 0
    try:
        count = int(value, 10)
    except ValueError:
        count = -1
    if count < 0:
        # Imported here: SGLang imports this module whenever it scans platforms, and a valid
        # value never needs the error classes.
        from cardcage.hooks.errors import InvalidEnvVarError

        raise InvalidEnvVarError(name, raw, "a whole number >= 0 (0 means all usable CPUs)")
    return count


CARDCAGE_DEMO_CPU: EnvVar[bool] = ENV_VARS.add(
    EnvVar(
        name="CARDCAGE_DEMO_CPU",
        default=False,
        parser=parse_bool,
        kind="boolean",
        description=(
            "Opt in to the demo_cpu platform for automatic selection. Unset: demo_cpu activates "
            "only when SGLANG_PLATFORM=demo_cpu names it; 0: never. Installing the plugin alone "
            "never takes over a machine with a real accelerator."
        ),
    )
)

CARDCAGE_DEMO_CPU_THREADS: EnvVar[int] = ENV_VARS.add(
    EnvVar(
        name="CARDCAGE_DEMO_CPU_THREADS",
        default=0,
        parser=parse_thread_count,
        kind="integer >= 0",
        description=(
            "torch intra-op threads that init_backend() sets in each worker. 0 (the default) "
            "uses every CPU in this process's affinity mask (os.sched_getaffinity)."
        ),
    )
)

CARDCAGE_DEMO_CPU_EVIDENCE: EnvVar[str] = ENV_VARS.add(
    EnvVar(
        name="CARDCAGE_DEMO_CPU_EVIDENCE",
        default="",
        parser=parse_str,
        kind="file path",
        description=(
            "Append one JSON line per first occurrence, in each process, of what demo-cpu ran "
            "to this file (with the pid, and a value where there is one): both halves' "
            "init_backend(), the hook plugins' register() and, for SRT, the device-memory answer "
            "and SGLang's memory query through the hook; for diffusion, a custom-op dispatch, a "
            "vendor forward and an all-to-all. A launcher reads what its workers ran with "
            "read_evidence(). Unset or empty: nothing is written, counters in memory only "
            "(cardcage_demo_cpu.evidence)."
        ),
    )
)
