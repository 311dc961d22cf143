"""create_from_process_group over a real torch.distributed gloo group (needs torch)."""

from __future__ import annotations

import os
from multiprocessing.context import SpawnContext

import pytest
import shm_workers

pytestmark = pytest.mark.torch


@pytest.mark.parametrize(("world", "writer_rank"), [(3, 0), (4, 2)])
def test_every_rank_of_a_gloo_group_gets_a_working_queue(
    spawn: SpawnContext, tmp_path: os.PathLike[str], world: int, writer_rank: int
) -> None:
    pytest.importorskip("torch.distributed")
    init_file = os.path.join(str(tmp_path), "rendezvous")
    conns, procs = [], []
    for rank in range(world):
        parent, child = spawn.Pipe()
        p = spawn.Process(
            target=shm_workers.process_group_member,
            args=(rank, world, init_file, writer_rank, child),
        )
        p.start()
        conns.append(parent)
        procs.append(p)
    results = []
    for conn in conns:
        assert conn.poll(120), "a rank did not report back"
        results.append(conn.recv())
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    same_node, writer_view = results[writer_rank]
    assert same_node == [True] * world
    for same, got in results:
        assert same == same_node
        assert got == writer_view
