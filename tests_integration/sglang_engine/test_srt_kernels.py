"""demo-cpu's kernels run in SGLang's own SRT ops, through cardcage's kernel API (0.5.23, 0.5.20).

demo-cpu declares its kernels by op (``DemoCpuSRTPlatform.kernels``); when SGLang selects the
platform, cardcage's adapter installs them into SGLang's SRT ``RMSNorm``, ``SiluAndMul``,
``LayerNorm`` and ``RotaryEmbedding`` right after ``init_backend()``, through the release's own
``register_oot_forward`` (``BaseFusedOp`` on both releases here). ``srt_ops_check.py`` builds
SGLang's real ops in a fresh interpreter per case and compares each call with SGLang's
``forward_native``; the Engine proof (prefill and decode in SGLang's scheduler) is in
``test_sglang_engine.py``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from engine_scenario import env, release_site

CHECK = Path(__file__).with_name("srt_ops_check.py")
RELEASES = ("0.5.23", "0.5.20")
OPS = ("rms_norm", "fused_add_rms_norm", "silu_and_mul", "layer_norm", "rotary_embedding")
#: Kernel calls per dtype: the rotary kernel runs once per style (NeoX, GPT-J).
CALLS = {"rms_norm": 3, "fused_add_rms_norm": 3, "silu_and_mul": 3, "layer_norm": 3}


def _check(release: str, tmp_path: Path, **extra: str) -> dict[str, Any]:
    site = release_site(release)
    variables = {"SGLANG_PLATFORM": "demo_cpu", **extra}
    if site is not None:
        variables["PYTHONPATH"] = str(site)
    done = subprocess.run(
        [sys.executable, str(CHECK)],
        env=env(variables),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-6000:]
    report: dict[str, Any] = json.loads(done.stdout)
    report["stderr"] = done.stderr
    return report


@pytest.mark.parametrize("release", RELEASES, ids=lambda v: f"sglang-{v}")
def test_demo_cpu_s_kernels_run_in_sglang_s_srt_ops_and_agree_with_forward_native(
    release: str, tmp_path: Path
) -> None:
    report = _check(release, tmp_path)

    for dtype, ops in report["close"].items():
        assert ops == dict.fromkeys(OPS, True), (dtype, ops)
    # Each op's kernel ran once per dtype: SGLang's op called it, not its own forward.
    assert report["counts"] == {**CALLS, "rotary_embedding": 6}
    rows = {row["op"]: row for row in report["in_effect"]}
    assert set(rows) == set(OPS)
    for row in rows.values():
        assert row["problem"] is None
        assert row["in_effect"] is True
        assert (row["host"], row["release"]) == ("sglang", release)
        assert row["mechanism"] == "sglang.kernels.fused_op.BaseFusedOp.register_oot_forward"
    assert rows["rms_norm"]["host_op"] == "sglang.srt.layers.layernorm.RMSNorm"
    assert rows["silu_and_mul"]["host_op"] == "sglang.srt.layers.activation.SiluAndMul"
    assert rows["layer_norm"]["host_op"] == "sglang.srt.layers.layernorm.LayerNorm"
    assert rows["rotary_embedding"]["host_op"] == (
        "sglang.srt.layers.rotary_embedding.base.RotaryEmbedding"
    )


def test_sglang_s_forced_backend_outranks_the_kernels_and_in_effect_says_so(
    tmp_path: Path,
) -> None:
    # SGLang's own bisecting switch puts every fused op on its pure-torch forward_native.
    report = _check("0.5.23", tmp_path, SGLANG_FORCE_FUSED_OP_BACKEND="torch")

    assert report["counts"] == dict.fromkeys(OPS, 0)
    assert {row["op"]: row["in_effect"] for row in report["in_effect"]} == dict.fromkeys(OPS, False)


def test_cardcage_kernels_false_leaves_sglang_s_ops_on_their_own_forwards(
    tmp_path: Path,
) -> None:
    report = _check("0.5.23", tmp_path, CARDCAGE_KERNELS="0")

    assert report["counts"] == dict.fromkeys(OPS, 0)
    assert report["in_effect"] == []
