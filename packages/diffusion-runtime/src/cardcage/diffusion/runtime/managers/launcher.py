"""The launcher side: start one spawned worker per rank, wait until each is ready, talk, stop.

``launch_workers(server_args)``:

* applies the plugin hooks in this process first (registration and application; the platform is
  resolved here but its backend is never initialized);
* uses a local ``multiprocessing.get_context("spawn")``, whatever start method the embedding
  application chose globally: a forked worker would inherit this process's imported modules and
  applied patches, and the lifecycle order would mean nothing;
* when ``ServerArgs.master_port`` is None, binds the workers' ``torch.distributed`` rendezvous
  socket itself (``127.0.0.1``, a port the kernel picks), keeps it listening and hands it to
  rank 0, whose store serves on it: the port is never free between being chosen and being used
  (``_rendezvous_listener``);
* captures ``ServerArgs`` into one ``ServerArgsPayload`` shared by every rank;
* waits on every worker's pipe and process sentinel at once (``multiprocessing.connection.wait``,
  no polling): each must send ``Ready``; a ``WorkerFailure`` or a worker that exits first fails
  the launch at once with that worker's error (rank, phase, original exception and traceback),
  after shutting down every other worker.

``WorkerGroup.submit(method, payload)`` sends one request to a rank (rank 0 by default; rank 0
broadcasts ``generate`` to the others itself) and returns its answer; while waiting it also
watches every worker's sentinel, so a worker that dies fails the request with
``WorkerDiedError`` instead of hanging, and the group is shut down. When rank 0 reports that a
distributed request broke the group, the error names the rank that died or raised first.
``WorkerGroup.cancel(request_id)`` (any thread) sends rank 0 a ``Cancel`` for the running
request whose payload carries that ``request_id``; the ranks stop it at their next denoising step
and ``submit`` raises the worker's ``RequestCancelledError`` (as a ``WorkerRequestError``).
``WorkerGroup.shutdown()`` asks each worker to exit, then terminates, then kills whatever is
left, each step with a timeout, and reaps every process: nothing outlives it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import logging
import multiprocessing
import os
import socket
import threading
import time
import weakref
from dataclasses import dataclass, field
from multiprocessing.connection import wait
from typing import TYPE_CHECKING, Any

from cardcage.diffusion.errors import (
    LauncherClosedError,
    WorkerDiedError,
    WorkerError,
    WorkerFailedError,
    WorkerRequestError,
    WorkerTimeoutError,
)
from cardcage.diffusion.runtime.platforms.plugins import apply_plugin_hooks

from .protocol import Cancel, Progress, Ready, Request, Response, Shutdown, WorkerFailure
from .worker_bootstrap import (
    DEFAULT_HTTP_SERVER_ENTRY,
    SchedulerProcessSpec,
    ServerArgsPayload,
    bootstrap_http_server_process,
    bootstrap_scheduler_process,
)

if TYPE_CHECKING:
    from collections.abc import Callable
    from multiprocessing.connection import Connection
    from multiprocessing.process import BaseProcess

    from cardcage.diffusion.runtime.server_args import ServerArgs

__all__ = ["WorkerGroup", "WorkerHandle", "launch_workers", "spawn_context", "start_http_server"]

logger = logging.getLogger(__name__)

GRACEFUL_TIMEOUT = 10.0
TERMINATE_TIMEOUT = 2.0
KILL_TIMEOUT = 2.0
PEER_EXIT_GRACE = 2.0
"""How long a failed collective waits for the peer that caused it to be seen exiting."""


def spawn_context() -> multiprocessing.context.SpawnContext:
    """The context every cardcage diffusion child is started from, whatever the global one."""
    return multiprocessing.get_context("spawn")


@dataclass(eq=False)
class WorkerHandle:
    """One worker process, the launcher's end of its pipe, and what it reported when ready."""

    rank: int
    local_rank: int
    process: BaseProcess
    conn: Connection
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def pid(self) -> int | None:
        return self.process.pid

    @property
    def sentinel(self) -> int:
        return self.process.sentinel


def _failed(handle: WorkerHandle, failure: WorkerFailure) -> WorkerFailedError:
    return WorkerFailedError(
        rank=handle.rank,
        pid=failure.pid,
        phase=failure.phase,
        error_type=failure.error_type,
        error_message=failure.message,
        traceback=failure.traceback,
        user_mistake=failure.user_mistake,
    )


def _died(handle: WorkerHandle, during: str) -> WorkerDiedError:
    # The pipe closed or the sentinel fired: the process has exited or is about to; reap it so
    # the exit code is known (bounded: a process whose pipe closed is on its way out).
    handle.process.join(TERMINATE_TIMEOUT)
    return WorkerDiedError(
        rank=handle.rank, pid=handle.pid, exitcode=handle.process.exitcode, during=during
    )


def _exit_report(handle: WorkerHandle, during: str) -> WorkerError:
    """Why a worker exited: the ``WorkerFailure`` it sent last, if any, else how it died."""
    failure: WorkerFailure | None = None
    with contextlib.suppress(EOFError, OSError, ValueError):
        while handle.conn.poll():
            message = handle.conn.recv()
            if isinstance(message, WorkerFailure):
                failure = message
    return _failed(handle, failure) if failure is not None else _died(handle, during)


def _rendezvous_listener(world_size: int) -> socket.socket:
    """The workers' rendezvous socket: listening on ``127.0.0.1`` at a port the kernel picks.

    Why no other process can take the port: it is chosen by this ``bind()`` and stays bound
    until the group is gone. This process holds the socket until rank 0 has inherited it at
    spawn, and rank 0's ``TCPStore`` then serves on that same socket (``master_listen_fd``);
    the port is never closed and bound again. (Probing a free port, closing the probe and
    letting rank 0 bind it later left a window in which another process could take it, and
    one did: EADDRINUSE.) Ranks that connect before rank 0's store runs wait in the backlog.
    """
    return socket.create_server(("127.0.0.1", 0), backlog=world_size)


def _wait_exited(handles: list[WorkerHandle], timeout: float) -> list[WorkerHandle]:
    """Wait until every process has exited or ``timeout`` passed; return those still alive."""
    deadline = time.monotonic() + timeout
    alive = [h for h in handles if h.process.exitcode is None]
    while alive:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        wait([h.sentinel for h in alive], remaining)
        alive = [h for h in alive if h.process.exitcode is None]
    return alive


def _stop_processes(
    handles: list[WorkerHandle],
    graceful_timeout: float,
    terminate_timeout: float,
    kill_timeout: float,
    close_pipes: bool = True,
) -> None:
    """Shutdown message, then SIGTERM, then SIGKILL; reap everything; close the pipes."""
    for handle in handles:
        if handle.process.exitcode is None:
            # A closed or broken pipe means the process is going anyway.
            with contextlib.suppress(OSError, ValueError):
                handle.conn.send(Shutdown())
    alive = _wait_exited(handles, graceful_timeout)
    if alive:
        logger.warning(
            "Diffusion worker(s) %s did not exit within %g s of the shutdown request; terminating",
            ", ".join(f"rank {h.rank} (pid {h.pid})" for h in alive),
            graceful_timeout,
        )
        for handle in alive:
            handle.process.terminate()
        alive = _wait_exited(alive, terminate_timeout)
    if alive:
        logger.warning(
            "Diffusion worker(s) %s ignored SIGTERM; killing",
            ", ".join(f"rank {h.rank} (pid {h.pid})" for h in alive),
        )
        for handle in alive:
            handle.process.kill()
        alive = _wait_exited(alive, kill_timeout)
    for handle in handles:
        if handle.process.exitcode is not None:
            handle.process.join()  # reaps; returns at once
        if close_pipes:
            handle.conn.close()
    if alive:  # only a process stuck in the kernel survives SIGKILL this long
        logger.error(
            "Diffusion worker(s) %s are still running after SIGKILL",
            ", ".join(f"rank {h.rank} (pid {h.pid})" for h in alive),
        )


class WorkerGroup:
    """Running workers of one deployment. Use ``launch_workers()`` to create one.

    ``submit()`` is serialized (one request in flight per group); ``shutdown()`` may be called
    from any thread, any number of times, and also runs when the group is garbage collected or
    the interpreter exits.
    """

    def __init__(self, workers: list[WorkerHandle], server_args: ServerArgs) -> None:
        self._workers = list(workers)
        self.server_args = server_args
        # Reentrant: a request that finds a dead worker shuts the group down from inside submit().
        self._request_lock = threading.RLock()
        self._state_lock = threading.Lock()
        self._ids = itertools.count(1)
        self._closed = False
        self._broken: WorkerError | None = None
        # The latest request sent to rank 0: (launcher request id, the caller's request_id).
        self._running: tuple[int, str | None] | None = None
        self._cancelled: str | None = None  # the latest request_id cancel() was asked for
        self._send_lock = threading.Lock()  # submit() and cancel() share rank 0's pipe
        self._finalizer = weakref.finalize(
            self, _stop_processes, self._workers, GRACEFUL_TIMEOUT, TERMINATE_TIMEOUT, KILL_TIMEOUT
        )

    @property
    def workers(self) -> tuple[WorkerHandle, ...]:
        return tuple(self._workers)

    @property
    def closed(self) -> bool:
        return self._closed

    def __enter__(self) -> WorkerGroup:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.shutdown()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "running"
        pids = ", ".join(str(h.pid) for h in self._workers)
        return f"<WorkerGroup {state} ranks={len(self._workers)} pids=[{pids}]>"

    # -- startup --------------------------------------------------------------------------------
    def _await_ready(self, timeout: float | None) -> None:
        deadline = None if timeout is None else time.monotonic() + timeout
        waiting = {h.conn: h for h in self._workers}
        sentinels = {h.sentinel: h for h in self._workers}
        while waiting:
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready = wait([*waiting, *sentinels], remaining)
            if not ready:
                first = next(iter(waiting.values()))
                raise WorkerTimeoutError(
                    rank=first.rank, pid=first.pid, during="startup", timeout=timeout or 0.0
                )
            for obj in ready:
                handle = waiting.pop(obj, None)  # type: ignore[call-overload]
                if handle is not None:
                    try:
                        message = handle.conn.recv()
                    except EOFError:
                        raise _died(handle, "startup") from None
                    if isinstance(message, WorkerFailure):
                        raise _failed(handle, message)
                    if not isinstance(message, Ready):
                        raise WorkerFailedError(
                            rank=handle.rank, pid=handle.pid, phase="startup",
                            error_type="ProtocolError",
                            error_message=f"expected Ready, got {message!r}", traceback="",
                        )  # fmt: skip
                    handle.info = dict(message.info)
                    logger.debug("Diffusion worker rank %d is ready", handle.rank)
                    continue
                handle = sentinels.pop(obj)  # type: ignore[arg-type]
                if handle.conn in waiting and handle.conn.poll():
                    continue  # it wrote something before exiting: read it first
                raise _died(handle, "startup")

    # -- requests -------------------------------------------------------------------------------
    def _worker(self, rank: int) -> WorkerHandle:
        for handle in self._workers:
            if handle.rank == rank:
                return handle
        raise ValueError(f"No worker with rank {rank}; ranks: {[h.rank for h in self._workers]}")

    def _fail(self, error: WorkerError) -> WorkerError:
        """Remember why the group broke, stop every worker, return the error to raise."""
        with self._state_lock:
            if self._broken is None:
                self._broken = error
        self.shutdown(graceful_timeout=TERMINATE_TIMEOUT)
        return error

    def submit(
        self,
        method: str,
        payload: Any = None,
        *,
        rank: int = 0,
        timeout: float | None = None,
        on_progress: Callable[[int, int], None] | None = None,
    ) -> Any:
        """Send ``Request(method, payload)`` to ``rank``; return its answer.

        ``on_progress(step, total)`` is called, in this thread, for each ``Progress`` the worker
        reports while it serves the request (denoising steps of ``generate``).

        Raises ``WorkerRequestError`` if the worker raised while serving it (the group stays
        up), ``WorkerDiedError`` / ``WorkerFailedError`` if any worker died or failed meanwhile
        (the group is shut down), ``WorkerTimeoutError`` after ``timeout`` seconds, and
        ``LauncherClosedError`` once the group is shut down.
        """
        with self._request_lock:
            self._check_open()
            handle = self._worker(rank)
            request = Request(next(self._ids), method, payload)
            during = f"request {method!r}"
            for worker in self._workers:  # one that died while the group was idle
                if worker.process.exitcode is not None:
                    raise self._fail(_exit_report(worker, f"idle time before {during}"))
            try:
                with self._send_lock:
                    handle.conn.send(request)
                    # Kept after the answer: a late Cancel names a finished request (ignored).
                    self._running = (request.request_id, _tag_of(payload))
                    if self._running[1] is not None and self._running[1] == self._cancelled:
                        handle.conn.send(Cancel(request.request_id))  # cancelled before sent
            except (OSError, ValueError):
                raise self._fail(_died(handle, during)) from None
            deadline = None if timeout is None else time.monotonic() + timeout
            sentinels = {h.sentinel: h for h in self._workers}
            while True:
                remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
                ready = wait([handle.conn, *sentinels], remaining)
                if not ready:
                    raise WorkerTimeoutError(
                        rank=rank, pid=handle.pid, during=during, timeout=timeout or 0.0
                    )
                if handle.conn in ready:
                    try:
                        message = handle.conn.recv()
                    except (EOFError, OSError):
                        raise self._fail(_died(handle, during)) from None
                    if isinstance(message, Response) and message.request_id == request.request_id:
                        if message.failure is not None:
                            raise WorkerRequestError(
                                rank=rank, pid=message.failure.pid, method=method,
                                error_type=message.failure.error_type,
                                error_message=message.failure.message,
                                traceback=message.failure.traceback,
                                details=message.failure.details,
                                user_mistake=message.failure.user_mistake,
                            )  # fmt: skip
                        return message.value
                    if isinstance(message, WorkerFailure):
                        raise self._fail(self._root_cause(handle, message, during))
                    if (
                        isinstance(message, Progress)
                        and message.request_id == request.request_id
                        and on_progress is not None
                    ):
                        on_progress(message.step, message.total)
                    continue  # progress, or a stale answer to a request that timed out earlier
                dead = sentinels[next(obj for obj in ready if isinstance(obj, int))]
                if dead is handle and handle.conn.poll():
                    continue  # read what it sent before exiting first
                raise self._fail(_exit_report(dead, during))

    def _root_cause(self, handle: WorkerHandle, failure: WorkerFailure, during: str) -> WorkerError:
        """The error to report when ``handle`` says the group can no longer serve.

        A rank whose collective failed usually failed because a peer died or raised first: give
        the peers a moment to finish exiting (their pipes and sockets close together, but the
        launcher may hear of this rank's report first) and report such a peer if there is one.
        """
        peers = [h for h in self._workers if h is not handle]
        if peers:
            exited = wait([h.sentinel for h in peers], PEER_EXIT_GRACE)
            for peer in peers:
                if peer.sentinel in exited:
                    return _exit_report(peer, during)
        return _failed(handle, failure)

    def cancel(self, request_id: str) -> bool:
        """Ask rank 0 to stop the running request whose payload's ``request_id`` is this one.

        Returns at once: True when a ``Cancel`` was sent (rank 0 ignores one for a request that
        finished meanwhile), False when the latest request sent carries another id; a request
        sent later with this id is cancelled as soon as it is sent (ids should be unique). The
        ranks stop at their next denoising step and ``submit`` raises the worker's
        ``RequestCancelledError`` as a ``WorkerRequestError``.
        """
        with self._send_lock:
            # A request about to be sent with this id is cancelled by submit() right after it.
            self._cancelled = request_id
            running = self._running
            if running is None or running[1] != request_id or self._closed:
                return False
            try:
                self._worker(0).conn.send(Cancel(running[0]))
            except (OSError, ValueError):  # the worker is gone: submit() reports that
                return False
        return True

    def _check_open(self) -> None:
        if self._closed:
            cause = f": {self._broken}" if self._broken is not None else ""
            raise LauncherClosedError(
                f"This diffusion worker group is shut down{cause}. Launch a new one."
            )

    def ping(self, *, timeout: float | None = None) -> list[dict[str, Any]]:
        """Round-trip every rank (in rank order); each answers its rank and pid."""
        return [self.submit("ping", None, rank=h.rank, timeout=timeout) for h in self._workers]

    # -- shutdown -------------------------------------------------------------------------------
    def shutdown(
        self,
        *,
        graceful_timeout: float = GRACEFUL_TIMEOUT,
        terminate_timeout: float = TERMINATE_TIMEOUT,
        kill_timeout: float = KILL_TIMEOUT,
    ) -> None:
        """Stop every worker: shutdown request, then SIGTERM, then SIGKILL; reap them all."""
        with self._state_lock:
            if self._closed:
                return
            self._closed = True
        self._finalizer.detach()
        _stop_processes(
            self._workers, graceful_timeout, terminate_timeout, kill_timeout, close_pipes=False
        )
        # A request in flight on another thread sees the dead sentinels and returns at once;
        # close the pipes only once it has (closing a pipe under its wait() is not safe).
        if self._request_lock.acquire(timeout=GRACEFUL_TIMEOUT):
            try:
                for handle in self._workers:
                    handle.conn.close()
            finally:
                self._request_lock.release()


def _tag_of(payload: Any) -> str | None:
    tag = payload.get("request_id") if isinstance(payload, dict) else None
    return tag if isinstance(tag, str) else None


def launch_workers(
    server_args: ServerArgs, *, ready_timeout: float | None = None, apply_hooks: bool = True
) -> WorkerGroup:
    """Start ``server_args.num_gpus`` workers and return once every one reported ready.

    ``ready_timeout`` defaults to ``server_args.worker_start_timeout``. Any worker failing or
    dying before it is ready fails the launch with its error; the others are shut down first.
    """
    if apply_hooks:
        apply_plugin_hooks()
    listener: socket.socket | None = None
    if server_args.master_port is None:
        listener = _rendezvous_listener(server_args.num_gpus)
        port = listener.getsockname()[1]
        try:
            server_args = dataclasses.replace(server_args, master_port=port)
        except BaseException:
            listener.close()
            raise
    context = spawn_context()
    payload = ServerArgsPayload.capture(server_args)
    world_size = server_args.num_gpus
    workers: list[WorkerHandle] = []
    started = time.time()
    try:
        for local_rank in range(world_size):
            rank = local_rank  # one node: local rank and global rank coincide
            parent_end, child_end = context.Pipe(duplex=True)
            spec = SchedulerProcessSpec(
                local_rank=local_rank,
                rank=rank,
                world_size=world_size,
                server_args=payload,
                pipe_writer=child_end,
                parent_pid=os.getpid(),
                log_level=server_args.log_level,
                parent_death_signal=threading.current_thread() is threading.main_thread(),
                rendezvous_listener=listener if rank == 0 else None,
            )
            process = context.Process(
                target=bootstrap_scheduler_process,
                args=(spec,),
                name=f"cardcage-diffusion-worker-{rank}",
                daemon=True,
            )
            workers.append(WorkerHandle(rank, local_rank, process, parent_end))
            process.start()
            child_end.close()
    except BaseException:
        _stop_processes(
            [w for w in workers if w.process.pid is not None], 0.0, TERMINATE_TIMEOUT, KILL_TIMEOUT
        )
        raise
    finally:
        if listener is not None:
            listener.close()  # rank 0 holds its own descriptor of it from start() on
    group = WorkerGroup(workers, server_args)
    timeout = server_args.worker_start_timeout if ready_timeout is None else ready_timeout
    try:
        group._await_ready(timeout)
    except BaseException:
        group.shutdown(graceful_timeout=TERMINATE_TIMEOUT)
        raise
    for handle in workers:
        handle.info.setdefault("launch_started", started)
    logger.info(
        "%d diffusion worker(s) ready in %.2f s (pids %s)",
        world_size,
        time.time() - started,
        ", ".join(str(h.pid) for h in workers),
    )
    return group


def start_http_server(
    server_args: ServerArgs,
    server_entry: str = DEFAULT_HTTP_SERVER_ENTRY,
    *,
    name: str = "cardcage-diffusion-http",
) -> BaseProcess:
    """Start the HTTP child (same spawn context; it never initializes the backend).

    It applies plugin hooks before importing ``server_entry`` (``module:function``), which it
    calls with the materialized ``ServerArgs``. The caller owns the returned process.
    """
    context = spawn_context()
    process = context.Process(
        target=bootstrap_http_server_process,
        args=(ServerArgsPayload.capture(server_args), server_entry),
        kwargs={"parent_pid": os.getpid(), "log_level": server_args.log_level},
        name=name,
        daemon=True,
    )
    process.start()
    return process
