"""End to end: demo-cpu selected, two spawned CPU workers, a real image, evidence from each worker.

Run by the nox session ``scenario-diffusion`` (see test_diffusion_scenarios.py for the layout).
An offline script written as the seed prescribes (runtime imports and the launch under
``if __name__ == "__main__":``) launches ``DiffGenerator`` with ``num_gpus=2`` while only
demo-cpu's site is installed besides the core. Each process demo-cpu runs in appends what it did
to the evidence file named by ``CARDCAGE_DEMO_CPU_EVIDENCE``; the test reads it back and proves,
per worker pid, that the vendor's backend initialised, its hook plugin registered and dispatched,
its custom-op forward (not ``forward_native``) ran, and the sequence-parallel all-to-all went
through the vendor's communicator (``DemoCpuCommunicator``, named by the platform's
``get_all_to_all_communicator_cls()``), and that the launcher never initialised a backend.
"""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import textwrap
import zlib
from pathlib import Path
from typing import Any

import pytest

SITES = Path(os.environ.get("CC_SCENARIO_SITES", "/nonexistent")).resolve()

pytestmark = pytest.mark.skipif(
    not SITES.is_dir(), reason="run through `nox -s scenario-diffusion` (needs the fixture sites)"
)

OFFLINE_SCRIPT = """
import json
import os
import sys

from cardcage.diffusion import DiffGenerator  # a lazy proxy: safe at module scope


def main() -> None:
    from cardcage.diffusion import SamplingParams

    params = SamplingParams(height=64, width=64, num_inference_steps=4, seed=7)
    with DiffGenerator.from_pretrained(model_path="cardcage/tiny-dit", num_gpus=2) as generator:
        pids = [worker.pid for worker in generator.workers.workers]
        result = generator.generate(prompt="a red cube on a table", sampling_params=params)
        images = result if isinstance(result, list) else [result]
        images[0].save_png(sys.argv[1])
    print(json.dumps({"launcher": os.getpid(), "workers": pids, "images": len(images)}))


if __name__ == "__main__":
    main()
"""


def _png_size(path: Path) -> tuple[int, int]:
    """Width and height of a PNG after checking its signature, IHDR CRC and image data."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG signature"
    length, kind = struct.unpack(">I4s", data[8:16])
    assert kind == b"IHDR"
    body = data[16 : 16 + length]
    (crc,) = struct.unpack(">I", data[16 + length : 20 + length])
    assert crc == zlib.crc32(kind + body), "IHDR CRC mismatch"
    width, height = struct.unpack(">II", body[:8])
    idat = b""
    offset = 8
    while offset < len(data):
        length, kind = struct.unpack(">I4s", data[offset : offset + 8])
        if kind == b"IDAT":
            idat += data[offset + 8 : offset + 8 + length]
        offset += 12 + length
    rows = zlib.decompress(idat)
    assert len(rows) == height * (1 + width * 3), "IDAT does not hold an RGB8 image"
    return width, height


def _evidence(path: Path) -> dict[int, set[tuple[str, str]]]:
    by_pid: dict[int, set[tuple[str, str]]] = {}
    for line in path.read_text().splitlines():
        entry: dict[str, Any] = json.loads(line)
        by_pid.setdefault(entry["pid"], set()).add((entry["event"], entry["key"]))
    return by_pid


def test_two_cpu_workers_run_demo_cpus_backend_hooks_and_custom_op(tmp_path: Path) -> None:
    script = tmp_path / "generate_offline.py"
    script.write_text(textwrap.dedent(OFFLINE_SCRIPT))
    image = tmp_path / "out.png"
    evidence = tmp_path / "evidence.jsonl"
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("SGLANG_", "CARDCAGE_", "CC_DIFF_")) and k != "PYTHONPATH"
    }
    env.update(
        PYTHONPATH=str(SITES / "demo-cpu"),
        SGLANG_DIFFUSION_PLATFORM_OVERRIDE="demo_cpu",
        CARDCAGE_DEMO_CPU_EVIDENCE=str(evidence),
        CARDCAGE_DEMO_CPU_THREADS="1",  # two workers on a 2-core machine: no oversubscription
    )

    done = subprocess.run(
        [sys.executable, str(script), str(image)],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
        cwd=tmp_path,
    )

    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert "imported before this worker initialized" not in done.stderr  # the seed's rule
    assert _png_size(image) == (64, 64)
    by_pid = _evidence(evidence)
    workers = report["workers"]
    assert len(set(workers)) == 2
    for rank, pid in enumerate(workers):
        events = {event for event, _ in by_pid.get(pid, set())}
        assert events >= {"init_backend", "register", "dispatch", "forward", "all_to_all"}, (
            pid,
            by_pid,
        )
        forwards = {key for event, key in by_pid[pid] if event == "forward"}
        assert any(key.endswith("RMSNorm") for key in forwards), forwards
        exchanges = {key for event, key in by_pid[pid] if event == "all_to_all"}
        assert exchanges == {f"sp-rank{rank}"}, exchanges
    launcher_events = {event for event, _ in by_pid.get(report["launcher"], set())}
    assert "init_backend" not in launcher_events  # the launcher never initialises a backend
    assert "forward" not in launcher_events
    assert "all_to_all" not in launcher_events
