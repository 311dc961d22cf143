"""create_from_process_group over a real torch.distributed gloo group (needs torch)."""

from __future__ import annotations

import os
from multiprocessing.context import SpawnContext

import pytest
import shm_workers

pytestmark = pytest.mark.torch


def _run_group(
    spawn: SpawnContext,
    tmp_path: os.PathLike[str],
    world: int,
    writer_rank: int,
    latency_first_on_writer: bool = False,
) -> list[tuple[list[bool], list[tuple[str, str]], bool]]:
    pytest.importorskip("torch.distributed")
    init_file = os.path.join(str(tmp_path), "rendezvous")
    conns, procs = [], []
    for rank in range(world):
        parent, child = spawn.Pipe()
        p = spawn.Process(
            target=shm_workers.process_group_member,
            args=(rank, world, init_file, writer_rank, child, latency_first_on_writer),
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
    return results


@pytest.mark.parametrize(("world", "writer_rank"), [(3, 0), (4, 2)])
def test_every_rank_of_a_gloo_group_gets_a_working_queue(
    spawn: SpawnContext, tmp_path: os.PathLike[str], world: int, writer_rank: int
) -> None:
    results = _run_group(spawn, tmp_path, world, writer_rank)
    same_node, writer_view, _ = results[writer_rank]
    assert same_node == [True] * world
    for same, got, latency_first in results:
        assert same == same_node
        assert got == writer_view
        assert not latency_first


def test_latency_first_asked_for_on_the_writer_rank_reaches_every_rank(
    spawn: SpawnContext, tmp_path: os.PathLike[str]
) -> None:
    results = _run_group(spawn, tmp_path, 3, 1, latency_first_on_writer=True)
    writer_view = results[1][1]
    for _, got, latency_first in results:
        assert got == writer_view
        assert latency_first  # the readers passed False: the writer's choice wins
