"""The launcher: ready handshake, failing and dying workers, requests, orderly shutdown.

Real spawned workers throughout. Where a test needs a request to be in flight, a plugin hook in
the worker connects to a local socket and waits there (``bootstrap_support.BlockingListener``),
so the test knows the state from an event, never from a sleep.
"""

from __future__ import annotations

import errno
import json
import multiprocessing
import os
import select
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from bootstrap_support import BlockingListener, pid_alive, write_vendor
from generation_support import MODEL, write_probe

from cardcage.diffusion.errors import (
    LauncherClosedError,
    WorkerDiedError,
    WorkerFailedError,
    WorkerRequestError,
)
from cardcage.diffusion.runtime.managers.launcher import WorkerGroup, launch_workers
from cardcage.diffusion.runtime.server_args import ServerArgs
from cardcage.hooks.testing import on_sys_path


@pytest.fixture(autouse=True)
def no_leftover_children() -> Iterator[None]:
    yield
    assert multiprocessing.active_children() == []  # also reaps: zombies count as left over


@pytest.fixture
def vendor_site(site: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    write_vendor(site)
    monkeypatch.setenv("PYTHONPATH", str(site))
    with on_sys_path(site):
        yield site


@pytest.fixture
def listener(monkeypatch: pytest.MonkeyPatch) -> Iterator[BlockingListener]:
    blocking = BlockingListener()
    monkeypatch.setenv("H5_BLOCK_PORT", str(blocking.port))
    yield blocking
    blocking.close()


@pytest.fixture
def probe_site(site: Path) -> Iterator[Path]:
    write_probe(site)
    with on_sys_path(site):  # spawned workers start with the launcher's sys.path
        yield site


def _pids(group: WorkerGroup) -> list[int]:
    return [h.pid for h in group.workers if h.pid is not None]


def test_workers_start_in_their_own_processes_and_answer_each_rank(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SGLANG_DIFFUSION_PLATFORM_OVERRIDE", "cpu")
    with launch_workers(ServerArgs(model_path=MODEL, num_gpus=2)) as group:
        answers = group.ping()
        pids = _pids(group)
        assert [a["rank"] for a in answers] == [0, 1]
        assert [a["pid"] for a in answers] == pids
        assert os.getpid() not in pids
        assert len(set(pids)) == 2
        assert group.submit("ping", {"echo": [1, 2]}, rank=1)["payload"] == {"echo": [1, 2]}
        for handle in group.workers:
            timings = handle.info["timings"]
            assert timings["bootstrap_started"] >= handle.info["launch_started"]
    assert not any(pid_alive(pid) for pid in pids)


def test_a_request_error_comes_back_typed_and_the_group_keeps_serving(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SGLANG_DIFFUSION_PLATFORM_OVERRIDE", "cpu")
    with launch_workers(ServerArgs(model_path=MODEL)) as group:
        with pytest.raises(WorkerRequestError) as info:
            group.submit("teleport")
        assert info.value.rank == 0
        assert info.value.error_type == "cardcage.diffusion.errors.UnknownRequestError"
        assert "'teleport'" in str(info.value)
        assert "Traceback" in info.value.traceback
        assert group.ping()[0]["rank"] == 0


def test_an_unknown_model_fails_the_launch_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SGLANG_DIFFUSION_PLATFORM_OVERRIDE", "cpu")
    with pytest.raises(WorkerFailedError, match="no-such/model") as info:
        launch_workers(ServerArgs(model_path="no-such/model"))
    assert info.value.phase == "worker initialization"
    assert info.value.error_type.endswith("ModelNotFoundError")
    assert MODEL in str(info.value)  # the message lists the built-in ids


def test_a_users_mistake_in_a_worker_keeps_its_traceback_out_of_the_message(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The worker's frames are the runtime's own: the text names the fix, the traceback is kept
    # for --log-level debug.
    monkeypatch.setenv("SGLANG_DIFFUSION_PLATFORM_OVERRIDE", "cpu")
    with pytest.raises(WorkerFailedError) as info:
        launch_workers(ServerArgs(model_path="no-such/model"))
    assert info.value.user_mistake
    assert "Traceback" not in str(info.value)
    assert str(info.value).endswith("Every worker was shut down; fix that and launch again.")
    assert "Traceback (most recent call last)" in info.value.traceback


def test_a_failing_init_backend_fails_the_launch_with_that_error(
    vendor_site: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("H5_FAIL_RANK", "1")
    with pytest.raises(WorkerFailedError) as info:
        launch_workers(ServerArgs(model_path=MODEL, num_gpus=2))
    error = info.value
    assert error.rank == 1
    assert error.phase == "platform backend initialization"
    assert error.error_type == "RuntimeError"
    assert error.error_message == "device on fire"
    assert "init_backend" in error.traceback
    assert "device on fire" in str(error)
    assert not error.user_mistake  # a vendor's crash: its traceback is part of the message
    assert f"--- worker traceback ---\n{error.traceback.rstrip()}" in str(error)
    assert error.pid is not None
    assert not pid_alive(error.pid)


def test_a_worker_that_exits_before_ready_fails_the_launch(
    vendor_site: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("H5_REPLACE", "exit")
    with pytest.raises(WorkerDiedError, match=r"died during startup \(exit code 0\)") as info:
        launch_workers(ServerArgs(model_path="tiny", num_gpus=2))
    assert info.value.exitcode == 0


def test_killing_a_worker_mid_request_fails_the_request_and_leaves_nothing(
    vendor_site: Path, listener: BlockingListener
) -> None:
    group = launch_workers(ServerArgs(model_path=MODEL, num_gpus=2))
    pids = _pids(group)

    def kill_when_in_flight() -> None:
        os.kill(listener.accept(), signal.SIGKILL)

    killer = threading.Thread(target=kill_when_in_flight)
    killer.start()
    with pytest.raises(WorkerDiedError, match="killed by signal SIGKILL") as info:
        group.submit("ping", "block")
    killer.join(60)
    assert info.value.rank == 0
    assert info.value.during == "request 'ping'"
    assert group.closed
    assert not any(pid_alive(pid) for pid in pids)
    with pytest.raises(LauncherClosedError, match="SIGKILL"):
        group.ping()


def test_shutdown_terminates_a_worker_that_does_not_answer(
    vendor_site: Path, listener: BlockingListener
) -> None:
    group = launch_workers(ServerArgs(model_path=MODEL, num_gpus=2))
    pids = _pids(group)
    outcome: list[BaseException] = []

    def blocked_request() -> None:
        try:
            group.submit("ping", "block")
        except BaseException as exc:
            outcome.append(exc)

    requester = threading.Thread(target=blocked_request)
    requester.start()
    listener.accept()  # rank 0 is now stuck inside the request and will not see Shutdown
    group.shutdown(graceful_timeout=0.2)
    requester.join(60)
    assert not any(pid_alive(pid) for pid in pids)
    (error,) = outcome
    assert isinstance(error, WorkerDiedError | LauncherClosedError)


def test_no_other_process_can_take_the_rendezvous_port_before_rank_0_serves_it(
    probe_site: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The window of the old race: the launcher has chosen master_port, rank 0 has not started
    # the rendezvous store yet. A hook holds rank 0 there while this process tries the port.
    monkeypatch.setenv("SGLANG_DIFFUSION_PLATFORM_OVERRIDE", "cpu")
    holder = BlockingListener()
    monkeypatch.setenv("H7_HOLD_RENDEZVOUS", str(holder.port))
    outcome: list[WorkerGroup | BaseException] = []

    def launch() -> None:
        try:
            outcome.append(launch_workers(ServerArgs(model_path=MODEL, num_gpus=2)))
        except BaseException as exc:
            outcome.append(exc)

    launcher = threading.Thread(target=launch)
    launcher.start()
    refusals: dict[str, int | None] = {}
    try:
        port = holder.accept()  # rank 0's master_port, sent from inside the window
        for host in ("127.0.0.1", "0.0.0.0"):
            with socket.socket() as intruder:
                try:
                    intruder.bind((host, port))
                    refusals[host] = None
                except OSError as exc:
                    refusals[host] = exc.errno
    finally:
        holder.close()  # lets rank 0 go on
        launcher.join(120)
    (group,) = outcome
    assert isinstance(group, WorkerGroup), group
    with group:
        assert refusals == {"127.0.0.1": errno.EADDRINUSE, "0.0.0.0": errno.EADDRINUSE}
        assert group.server_args.master_port == port
        assert [answer["rank"] for answer in group.ping()] == [0, 1]


def test_two_worker_groups_launched_at_the_same_moment_both_start(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SGLANG_DIFFUSION_PLATFORM_OVERRIDE", "cpu")
    start = threading.Barrier(2)
    outcome: dict[int, WorkerGroup | BaseException] = {}

    def launch(index: int) -> None:
        start.wait()
        try:
            outcome[index] = launch_workers(ServerArgs(model_path=MODEL, num_gpus=2))
        except BaseException as exc:
            outcome[index] = exc

    launchers = [threading.Thread(target=launch, args=(index,)) for index in (0, 1)]
    for thread in launchers:
        thread.start()
    for thread in launchers:
        thread.join(240)
    groups = [outcome[0], outcome[1]]
    try:
        assert all(isinstance(group, WorkerGroup) for group in groups), groups
        first, second = (group for group in groups if isinstance(group, WorkerGroup))
        assert first.server_args.master_port != second.server_args.master_port
        for group in (first, second):
            assert [answer["rank"] for answer in group.ping()] == [0, 1]
    finally:
        for group in groups:
            if isinstance(group, WorkerGroup):
                group.shutdown()


LAUNCHER_SCRIPT = """
from cardcage.diffusion import DiffGenerator

if __name__ == "__main__":
    import json
    import sys

    generator = DiffGenerator.from_pretrained(model_path="cardcage/tiny-dit", num_gpus=2)
    print(json.dumps([handle.pid for handle in generator.workers.workers]), flush=True)
    sys.stdin.read()
"""


def test_workers_do_not_outlive_a_killed_launcher(tmp_path: Path) -> None:
    script = tmp_path / "launcher.py"
    script.write_text(LAUNCHER_SCRIPT, encoding="utf-8")
    env = {**os.environ, "SGLANG_DIFFUSION_PLATFORM_OVERRIDE": "cpu"}
    with subprocess.Popen(
        [sys.executable, str(script)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
        text=True,
    ) as launcher:
        assert launcher.stdout is not None
        pids = json.loads(launcher.stdout.readline())
        handles = [os.pidfd_open(pid) for pid in pids]  # exit becomes a readable event
        launcher.kill()
    try:
        for handle, pid in zip(handles, pids, strict=True):
            readable, _, _ = select.select([handle], [], [], 60)
            assert readable, f"worker {pid} outlived its launcher"
    finally:
        for handle in handles:
            os.close(handle)
