"""``DemoCpuCommunicator``: the all-to-all communicator demo_cpu names, resolved by the real
runtime, exchanging over a real two-process gloo group and leaving ``all_to_all`` evidence."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from typing import TYPE_CHECKING

import cpu_diffusion_support  # noqa: F401  # sorts first: skips this module without torch
import pytest
import torch
from cpu_diffusion_support import clean_diffusion

from cardcage.diffusion.runtime.distributed import resolve_all_to_all_communicator_cls
from cardcage.diffusion.runtime.distributed.device_communicators import CpuCommunicator
from cardcage_demo_cpu.diffusion.communicator import DemoCpuCommunicator
from cardcage_demo_cpu.diffusion.evidence import EVIDENCE, read_evidence
from cardcage_demo_cpu.diffusion.platform import COMMUNICATOR_QUALNAME, DemoCpuPlatform

if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["clean_diffusion"]  # the autouse fixture, imported so pytest finds it

pytestmark = pytest.mark.torch


def test_the_platform_names_its_communicator_and_the_runtime_accepts_it() -> None:
    assert DemoCpuPlatform.get_all_to_all_communicator_cls() == COMMUNICATOR_QUALNAME
    assert (
        f"{DemoCpuCommunicator.__module__}.{DemoCpuCommunicator.__qualname__}"
    ) == COMMUNICATOR_QUALNAME
    cls = resolve_all_to_all_communicator_cls(DemoCpuPlatform())
    assert cls is DemoCpuCommunicator
    assert issubclass(cls, CpuCommunicator)


def test_one_rank_is_the_identity_and_still_leaves_evidence() -> None:
    EVIDENCE.reset()
    comm = DemoCpuCommunicator(None, unique_name="sp-rank0")
    x = torch.randn(1, 4, 2, 3)
    assert comm.all_to_all_4D(x, 2, 1) is x
    assert EVIDENCE.count("all_to_all", "sp-rank0") == 1


RANK_SCRIPT = """
import json
import os
import sys

import torch
import torch.distributed as dist

from cardcage_demo_cpu.diffusion.communicator import DemoCpuCommunicator
from cardcage_demo_cpu.diffusion.evidence import EVIDENCE

rank, store = int(sys.argv[1]), sys.argv[2]
dist.init_process_group("gloo", store=dist.FileStore(store, 2), rank=rank, world_size=2)
comm = DemoCpuCommunicator(dist.group.WORLD, unique_name=f"sp-rank{rank}")
full = torch.arange(1 * 4 * 2 * 3, dtype=torch.float32).reshape(1, 4, 2, 3)
by_heads = comm.all_to_all_4D(full.chunk(2, dim=1)[rank], 2, 1)
back = comm.all_to_all_4D(by_heads, 1, 2)
print(json.dumps({
    "by_heads": by_heads.tolist(),
    "back": back.tolist(),
    "count": EVIDENCE.count("all_to_all", f"sp-rank{rank}"),
}), flush=True)
# Both ranks are done with the group; leave without gloo's teardown, which can abort in C++
# ("terminate called without an active exception") when the peer is still closing.
dist.barrier()
os._exit(0)
"""


def test_two_gloo_ranks_exchange_through_it_and_each_records_evidence(tmp_path: Path) -> None:
    evidence = tmp_path / "evidence.jsonl"
    env = dict(os.environ, CARDCAGE_DEMO_CPU_EVIDENCE=str(evidence))
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", textwrap.dedent(RANK_SCRIPT), str(rank), str(tmp_path / "s")],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for rank in range(2)
    ]
    results = []
    try:
        for proc in procs:
            out, err = proc.communicate(timeout=120)
            assert proc.returncode == 0, err
            results.append(json.loads(out.strip().splitlines()[-1]))
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    full = torch.arange(1 * 4 * 2 * 3, dtype=torch.float32).reshape(1, 4, 2, 3)
    for rank, result in enumerate(results):
        assert torch.equal(torch.tensor(result["by_heads"]), full[:, :, rank : rank + 1])
        assert torch.equal(torch.tensor(result["back"]), full.chunk(2, dim=1)[rank])
        assert result["count"] == 2
    pids = {proc.pid for proc in procs}
    written = {(e["pid"], e["event"], e["key"]) for e in read_evidence(evidence)}
    assert {(pid, event) for pid, event, _ in written} == {(pid, "all_to_all") for pid in pids}
    assert {key for _, _, key in written} == {"sp-rank0", "sp-rank1"}
