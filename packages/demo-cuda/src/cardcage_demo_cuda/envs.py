"""Environment variables read by cardcage-demo-cuda: one typed registry, parsed strictly.

Every knob of this plugin is declared here, with its type, default and meaning, so the README
table and the code cannot drift (a test checks the README lists each one). Names carry the
plugin's own prefix (``CARDCAGE_DEMO_CUDA``); booleans accept only ``0/1/true/false``.

Import-safe: stdlib and ``cardcage.hooks.envs`` only.
"""

from __future__ import annotations

from cardcage.hooks.envs import EnvRegistry, EnvVar, parse_bool, parse_str

__all__ = ["CARDCAGE_DEMO_CUDA_ALLOW_TF32", "CARDCAGE_DEMO_CUDA_EVIDENCE", "ENV_VARS"]

ENV_VARS = EnvRegistry("cardcage-demo-cuda")

CARDCAGE_DEMO_CUDA_ALLOW_TF32: EnvVar[bool] = ENV_VARS.add(
    EnvVar(
        name="CARDCAGE_DEMO_CUDA_ALLOW_TF32",
        default=False,
        parser=parse_bool,
        kind="boolean",
        description=(
            "When set, init_backend() turns TF32 tensor cores on (1) or off (0) for float32 "
            "matmuls and cuDNN convolutions (faster, about 10 mantissa bits). Unset: torch's "
            "defaults (off for matmuls, on for convolutions)."
        ),
    )
)

CARDCAGE_DEMO_CUDA_EVIDENCE: EnvVar[str] = ENV_VARS.add(
    EnvVar(
        name="CARDCAGE_DEMO_CUDA_EVIDENCE",
        default="",
        parser=parse_str,
        kind="file path",
        description=(
            "Diffusion half: append one JSON line per first occurrence, in each process, of "
            "init_backend(), the hook plugin's register(), a custom-op dispatch and a vendor "
            "forward call to this file (with the pid), so a launcher can check what its workers "
            "ran. Unset or empty: counters in memory only (cardcage_demo_cuda.diffusion.evidence)."
        ),
    )
)
