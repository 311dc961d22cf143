"""demo-cpu's kernels run in vLLM's own ops, through cardcage's kernel API, in fp32, bf16 and fp16.

demo-cpu declares its kernels by op (``DemoCpuSRTPlatform.kernels``); when vLLM selects the
platform, cardcage's worker runs ``init_backend()`` and registers the kernels with vLLM's
``CustomOp.register_oot`` under vLLM's class names, so the ``RMSNorm``, ``SiluAndMul``,
``LayerNorm`` and ``RotaryEmbedding`` vLLM builds afterwards call them. ``vllm_ops_check.py`` builds
vLLM's real ops in a fresh interpreter and compares each call with vLLM's ``forward_native``; the
engine proof (the worker's ``generate()``) is in ``test_vllm_engine.py``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from vllm_engine_scenario import env

CHECK = Path(__file__).with_name("vllm_ops_check.py")
OPS = ("rms_norm", "fused_add_rms_norm", "silu_and_mul", "layer_norm", "rotary_embedding")
#: Kernel calls over the three dtypes: the rotary kernel runs once per style (NeoX, GPT-J).
CALLS = {"rms_norm": 3, "fused_add_rms_norm": 3, "silu_and_mul": 3, "layer_norm": 3}


def _check(tmp_path: Path, **extra: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, str(CHECK)],
        env=env({"CARDCAGE_DEMO_CPU": "1", **extra}),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-6000:]
    report: dict[str, Any] = json.loads(done.stdout)
    return report


def test_demo_cpus_kernels_run_in_vllms_ops_and_agree_with_forward_native(
    tmp_path: Path,
) -> None:
    report = _check(tmp_path)
    assert sorted(report["close"]) == ["torch.bfloat16", "torch.float16", "torch.float32"]
    for dtype, ops in report["close"].items():
        assert ops == dict.fromkeys(OPS, True), (dtype, ops)
    # vLLM's op ran the kernel for each call, once per dtype: not its own forward.
    assert report["counts"] == {**CALLS, "rotary_embedding": 6}
    # vLLM built cardcage's replacements, named like its own classes, in cardcage's vLLM room.
    room = "cardcage.platforms.hosts.vllm.kernels"
    assert report["classes"] == {
        "norm": f"{room}.RMSNorm",
        "silu": f"{room}.SiluAndMul",
        "layer": f"{room}.LayerNorm",
        "rope": f"{room}.RotaryEmbedding",
    }
    rows = {row["op"]: row for row in report["in_effect"]}
    assert set(rows) == set(OPS)
    for row in rows.values():
        assert (row["host"], row["problem"], row["in_effect"]) == ("vllm", None, True), row


def test_with_kernels_off_vllms_ops_run_their_own_forward(tmp_path: Path) -> None:
    report = _check(tmp_path, CARDCAGE_KERNELS="0")
    for ops in report["close"].values():
        assert ops == dict.fromkeys(OPS, True)
    assert report["counts"] == dict.fromkeys(OPS, 0)
