"""Segments left by dead creators are removed when the next queue is created, and only those."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
from multiprocessing.context import SpawnContext

import pytest
import shm_workers

from cardcage.shm import SHM_DIR, MessageQueue, sweep_stale

CHUNK = 512


def _killed_writer_segment(spawn: SpawnContext) -> str:
    """The path of the segment of a writer SIGKILLed before any reader attached."""
    parent, child = spawn.Pipe()
    writer = spawn.Process(target=shm_workers.writer_then_hang, args=(0, CHUNK, 2, child))
    writer.start()
    handle = shm_workers.recv(parent)
    parent.send("no")  # never ready: no reader ever attaches
    assert shm_workers.recv(parent) == "published"
    os.kill(writer.pid, signal.SIGKILL)  # type: ignore[arg-type]
    writer.join(10)
    assert handle.buffer_handle is not None
    return os.path.join(SHM_DIR, handle.buffer_handle[3])


def test_creating_a_queue_removes_the_segment_of_a_writer_killed_before_any_reader(
    spawn: SpawnContext,
) -> None:
    path = _killed_writer_segment(spawn)
    assert os.path.exists(path)  # nobody attached, so nobody unlinked it
    with MessageQueue(1, 1, max_chunk_bytes=CHUNK, max_chunks=2):
        assert not os.path.exists(path)


def test_creating_a_queue_leaves_the_segment_of_a_live_writer_alone(spawn: SpawnContext) -> None:
    parent, child = spawn.Pipe()
    writer = spawn.Process(target=shm_workers.writer_then_hang, args=(0, CHUNK, 2, child))
    writer.start()
    handle = shm_workers.recv(parent)
    assert handle.buffer_handle is not None
    path = os.path.join(SHM_DIR, handle.buffer_handle[3])
    try:
        with MessageQueue(1, 1, max_chunk_bytes=CHUNK, max_chunks=2):
            assert os.path.exists(path)
        # and the live writer's queue still works: a reader attaches and receives
        reader = MessageQueue.create_from_handle(handle, 0)
        parent.send("ready")
        reader.wait_until_ready(timeout=30)
        assert shm_workers.recv(parent) == "published"
        reader.close()
    finally:
        os.kill(writer.pid, signal.SIGKILL)  # type: ignore[arg-type]
        writer.join(10)


def test_the_sweep_examines_at_most_limit_segments_per_call(spawn: SpawnContext) -> None:
    parent, child = spawn.Pipe()
    dying = spawn.Process(target=shm_workers.segments_then_die, args=(3, child))
    dying.start()
    names = shm_workers.recv(parent)
    dying.join(10)
    paths = {os.path.join(SHM_DIR, n) for n in names}
    first = set(sweep_stale(limit=1))
    assert len(first) == 1
    assert first <= paths
    rest = set(sweep_stale())
    assert paths - first <= rest
    assert not any(os.path.exists(p) for p in paths)


def test_creating_a_queue_leaves_a_dead_creators_segment_of_another_pid_namespace_alone(
    tmp_path: os.PathLike[str],
) -> None:
    """A segment made in another pid namespace (a container sharing ``/dev/shm``) names a pid
    that means nothing here, so even once its creator is gone it is not ours to remove."""
    unshare = shutil.which("unshare")
    if unshare is None:
        pytest.skip("needs util-linux unshare")
    script = textwrap.dedent(
        """
        import os
        from cardcage.shm import ShmRingBuffer
        ring = ShmRingBuffer(1, 512, 2)
        print(ring.name, os.getpid(), flush=True)
        os._exit(0)  # no cleanup, like a kill (pid 1 of a namespace ignores its own SIGKILL)
        """
    )
    cmd = [unshare, "--user", "--map-root-user", "--pid", "--fork", "--mount-proc"]
    done = subprocess.run(
        [*cmd, sys.executable, "-c", script],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    if not done.stdout.strip():
        pytest.skip(f"cannot make a pid namespace here: {done.stderr.strip()[-200:]}")
    name, inner_pid = done.stdout.split()
    path = os.path.join(SHM_DIR, name)
    try:
        assert int(inner_pid) == 1  # its pid inside the namespace: some other process here
        assert os.path.exists(path)
        with MessageQueue(1, 1, max_chunk_bytes=CHUNK, max_chunks=2):
            assert os.path.exists(path)
        assert path not in sweep_stale()
        assert os.path.exists(path)
    finally:
        if os.path.exists(path):
            os.unlink(path)
