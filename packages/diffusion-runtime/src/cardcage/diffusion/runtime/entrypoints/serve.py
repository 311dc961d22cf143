"""``cardcage-diffusion serve``: the workers and the bridge here, the HTTP server in a child.

Process model (all children from the launcher's local spawn context)::

    launcher (this process)             HTTP child                        worker ranks
    DiffGenerator + WorkerGroup  <----  bridge (Unix socket, authkey) <-- POST /v1/images/...
         |  pipes (Request/Response)
         +----------------------------------------------------------> rank 0 .. N-1

1. install SIGTERM/SIGINT handlers (a signal raises ``ServeStopped`` in the main thread);
2. open the bridge and start the HTTP child (``launcher.start_http_server``: it applies plugin
   hooks, then imports ``http_server``), passing the bridge address in
   ``CARDCAGE_DIFFUSION_HTTP_BRIDGE``, set only while that child starts;
3. launch the workers (``DiffGenerator.from_pretrained``) while the child binds its port; until
   they are ready ``/health`` answers 503;
4. once the child reports its socket bound, print the URL and supervise: the HTTP child exiting
   ends the command with 1; a worker exiting is logged and turns ``/health`` to 503;
5. on a signal (or any failure): cancel every admitted request (the running one stops at its
   next denoising step on every worker; each is answered 503 through the HTTP child), stop the
   HTTP child (SIGTERM: it stops accepting, finishes sending those answers, exits; SIGKILL after
   ``HTTP_STOP_TIMEOUT``), close the bridge, shut the workers down (which reaps them and their
   shared memory). Nothing outlives it; the exit status is 0.

Generation requests run one at a time (``WorkerGroup`` serves one request per group); at most
``ServeLimits.max_queue`` wait behind the running one, and the next is refused at once with 503
and ``Retry-After`` (a bounded queue, never an unbounded one: a client learns at once that it
should come back). A request beyond ``ServeLimits`` is refused before it is queued; a request
whose client disconnects (the HTTP child sends ``cancel``) or whose deadline passes is stopped.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import signal
import socket
import threading
import time
from dataclasses import dataclass
from multiprocessing.connection import wait
from typing import TYPE_CHECKING, Any

from cardcage.diffusion.configs.sampling_params import SamplingParams
from cardcage.diffusion.envs import CARDCAGE_DIFFUSION_HTTP_BRIDGE
from cardcage.diffusion.errors import (
    WORKER_TRACEBACK_HEADER,
    InvalidArgumentError,
    LauncherClosedError,
    PipelineUnavailableError,
    RequestCancelledError,
    WorkerError,
    WorkerRequestError,
)
from cardcage.diffusion.runtime.managers.diffusion_generator import DiffGenerator
from cardcage.diffusion.runtime.managers.launcher import start_http_server
from cardcage.diffusion.runtime.models.resolve import resolve_model

from .bridge import BridgeServer, error_reply
from .errors import HttpServerError
from .limits import DEFAULT_MAX_QUEUE, ServeLimits
from .openai_api import ApiError, sampling_error

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from multiprocessing.process import BaseProcess
    from types import FrameType

    from cardcage.diffusion.runtime.models.config import TinyDiTConfig
    from cardcage.diffusion.runtime.server_args import ServerArgs

__all__ = ["DEFAULT_MAX_QUEUE", "ImageBackend", "ServeStopped", "serve"]

logger = logging.getLogger(__name__)

HTTP_START_TIMEOUT = 60.0
HTTP_STOP_TIMEOUT = 30.0
"""How long the HTTP child gets to drain: in-flight requests are cancelled first, so it is
answering them with 503 (each worker stops at its next denoising step) rather than waiting."""
WORKER_STOP_GRACE = 3.0
_PARAM_ERRORS = ("GenerationParamsError", "InvalidSamplingParamsError")
RETRY_AFTER_S = "1"

# Why a request stopped before it finished -> its answer.
_CANCELLED_REPLIES: dict[str, tuple[int, str, str]] = {
    "deadline": (
        504, "deadline_exceeded",
        "The request did not finish within this server's deadline of {timeout:g} s "
        "(serve --request-timeout) and was stopped; ask for fewer or smaller images or fewer "
        "steps.",
    ),
    "disconnected": (
        499, "client_closed_request", "The client closed the connection; the request was stopped.",
    ),
    "shutdown": (
        503, "server_shutting_down",
        "The server is shutting down; the request was stopped. Retry on a running server.",
    ),
}  # fmt: skip


class ServeStopped(BaseException):
    """Raised in the main thread by SIGTERM or SIGINT: stop everything in order."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


@dataclass
class _Job:
    """One admitted generation request (running or waiting for the slot)."""

    request_id: str
    cancelled: str | None = None  # a key of _CANCELLED_REPLIES once stopped
    running: bool = False


class ImageBackend:
    """Answers the bridge: generation through the ``DiffGenerator``, health, child reports.

    Admission: one request runs (the worker group serves one at a time); up to
    ``limits.max_queue`` more wait for the slot; beyond that a request is refused at once with
    503 and ``Retry-After``. ``cancel(request_id, reason)`` stops a waiting request at once and a
    running one at its next denoising step; each request gets a ``threading.Timer`` that cancels
    it with reason ``"deadline"`` after ``limits.request_timeout`` seconds.
    """

    def __init__(
        self,
        model_path: str,
        *,
        limits: ServeLimits,
        wake_fd: int,
        model_config: TinyDiTConfig | None = None,
    ) -> None:
        self.model_path = model_path
        self.limits = limits
        self.model_config = model_config  # its trained_size: what a request is warned about
        self._wake_fd = wake_fd
        self._generator: DiffGenerator | None = None
        self._slot = threading.Condition()  # guards _busy and _jobs
        self._busy = False
        self._jobs: dict[str, _Job] = {}
        self.http_url: str | None = None
        self.http_failure: str | None = None
        self.stopping = False

    def attach(self, generator: DiffGenerator) -> None:
        self._generator = generator

    def _wake(self) -> None:
        with contextlib.suppress(OSError):
            os.write(self._wake_fd, b"!")

    def _default_steps(self) -> int | None:
        generator = self._generator
        if generator is None or not generator.workers.workers:
            return None
        steps = generator.workers.workers[0].info.get("default_steps")
        return steps if isinstance(steps, int) else None

    # -- the bridge operations ------------------------------------------------------------------
    def handle(self, message: dict[str, Any]) -> dict[str, Any]:
        op = message["op"]
        if op == "generate":
            return self._generate(message)
        if op == "cancel":
            reason = str(message.get("reason", "disconnected"))
            return {"ok": True, "cancelled": self.cancel(str(message["request_id"]), reason)}
        if op == "health":
            return self._health()
        if op == "limits":  # the HTTP child declares them in /openapi.json
            return {"ok": True, "limits": self.limits.to_dict()}
        if op == "listening":
            self.http_url = str(message.get("url"))
            self._wake()
            return {"ok": True}
        if op == "failed":
            self.http_failure = str(message.get("message"))
            self._wake()
            return {"ok": True}
        return error_reply(500, f"unknown bridge operation {op!r}", error_type="server_error")

    def _health(self) -> dict[str, Any]:
        generator = self._generator
        if generator is None:
            state = "stopping" if self.stopping else "starting"
            return {"ok": True, "ready": False, "health": {"status": state, "workers": []}}
        handles = generator.workers.workers
        # A sentinel becomes readable when its process exits (no reaping, safe from any thread).
        exited = set(wait([h.sentinel for h in handles], 0))
        workers = [
            {"rank": h.rank, "pid": h.pid, "alive": h.sentinel not in exited} for h in handles
        ]
        ready = not generator.workers.closed and not exited and not self.stopping
        status = "ok" if ready else ("stopping" if self.stopping else "unavailable")
        health = {
            "status": status,
            "model": self.model_path,
            "workers": workers,
            "queued": len(self._jobs),
            "limits": self.limits.to_dict(),
        }
        return {"ok": True, "ready": ready, "health": health}

    def cancel(self, request_id: str, reason: str) -> bool:
        """Stop ``request_id`` (waiting: at once; running: at its next denoising step)."""
        with self._slot:
            job = self._jobs.get(request_id)
            if job is None:
                return False
            if job.cancelled is None:
                job.cancelled = reason
            running = job.running
            self._slot.notify_all()
        generator = self._generator
        if running and generator is not None:
            logger.info("Request %s: cancelling (%s)", request_id, reason)
            generator.cancel(request_id)
        return True

    def cancel_all(self, reason: str) -> None:
        with self._slot:
            ids = list(self._jobs)
        for request_id in ids:
            self.cancel(request_id, reason)

    def _generate(self, message: dict[str, Any]) -> dict[str, Any]:
        generator = self._generator
        request_id = str(message["request_id"])
        if generator is None or self.stopping:
            state = "stopping" if self.stopping else "still starting"
            return error_reply(
                503, f"The diffusion workers are {state}; retry shortly.",
                error_type="server_error", code="workers_unavailable",
            )  # fmt: skip
        try:
            params = SamplingParams.from_dict(dict(message["params"]))
            self.limits.check(params, default_steps=self._default_steps())
        except InvalidArgumentError as exc:
            fields = message["params"]
            return _api_reply(sampling_error(exc, width=fields["width"], height=fields["height"]))
        except ApiError as exc:
            logger.info("Request %s refused (%d): %s", request_id, exc.status, exc.message)
            return _api_reply(exc)
        with self._slot:
            if len(self._jobs) > self.limits.max_queue:
                return error_reply(
                    503,
                    f"The server is busy: {len(self._jobs)} image requests are running or "
                    f"queued (limit {self.limits.max_queue + 1}). Retry later.",
                    error_type="server_error",
                    code="server_busy",
                )
            job = self._jobs[request_id] = _Job(request_id)
        deadline = threading.Timer(
            self.limits.request_timeout, self.cancel, args=(request_id, "deadline")
        )
        deadline.daemon = True
        deadline.start()
        try:
            with self._slot:
                while self._busy and job.cancelled is None and not self.stopping:
                    self._slot.wait()
                reason = job.cancelled or ("shutdown" if self.stopping else None)
                if reason is not None:
                    job.cancelled = reason
                    return self._cancelled_reply(job)
                self._busy = job.running = True
            try:
                return self._run(generator, params, message, job)
            finally:
                with self._slot:
                    self._busy = job.running = False
                    self._slot.notify_all()
        finally:
            deadline.cancel()
            with self._slot:
                self._jobs.pop(request_id, None)

    def _cancelled_reply(self, job: _Job) -> dict[str, Any]:
        status, code, text = _CANCELLED_REPLIES[job.cancelled or "shutdown"]
        logger.info("Request %s stopped (%s)", job.request_id, job.cancelled)
        return error_reply(
            status, text.format(timeout=self.limits.request_timeout),
            error_type="server_error", code=code,
        )  # fmt: skip

    def _run(
        self, generator: DiffGenerator, params: SamplingParams, message: dict[str, Any], job: _Job
    ) -> dict[str, Any]:
        request_id = job.request_id
        started = time.perf_counter()
        try:
            answer = generator.generate_raw(message["prompt"], params, request_id=request_id)
        except RequestCancelledError:
            return self._cancelled_reply(job)
        except InvalidArgumentError as exc:  # the pipeline's own limits (a model's largest side)
            return _api_reply(sampling_error(exc, width=params.width, height=params.height))
        except WorkerRequestError as exc:
            if exc.error_type.rsplit(".", 1)[-1] in _PARAM_ERRORS:
                return error_reply(
                    400, exc.error_message, error_type="invalid_request_error", code="invalid_value"
                )
            logger.error("Request %s failed in a worker: %s", request_id, exc)
            return error_reply(
                500,
                f"Worker rank {exc.rank} failed: {exc.error_type}: {exc.error_message}",
                error_type="server_error",
                code="worker_error",
            )
        except (LauncherClosedError, PipelineUnavailableError) as exc:
            return error_reply(503, str(exc), error_type="server_error", code="workers_unavailable")
        except WorkerError as exc:  # a worker died or failed: the group is shut down
            if self.stopping:  # a signal to the whole process group reached the workers too
                job.cancelled = job.cancelled or "shutdown"
                return self._cancelled_reply(job)
            logger.error("Request %s: %s", request_id, exc)
            message_text = str(exc).split("\n" + WORKER_TRACEBACK_HEADER, 1)[0]
            return error_reply(500, message_text, error_type="server_error", code="worker_died")
        images = [
            {"rgb": item["rgb"], "width": item["width"], "height": item["height"],
             "seed": item.get("seed")}
            for item in answer["images"]
        ]  # fmt: skip
        logger.info(
            "Request %s: %d image(s) generated in %.2f s",
            request_id, len(images), time.perf_counter() - started,
        )  # fmt: skip
        reply: dict[str, Any] = {"ok": True, "images": images}
        warning = self._size_warning(request_id, params)
        if warning is not None:
            reply["warning"] = warning
        return reply

    def _size_warning(self, request_id: str, params: SamplingParams) -> str | None:
        """Say (in the log, and to the client in the answer's ``warning``) that the size asked
        for is not the one the model was trained at: the images are valid, but noise."""
        config = self.model_config
        warning = None if config is None else config.size_warning(params.width, params.height)
        if warning is None:
            return None
        text = f"{self.model_path}: {warning}"
        logger.warning("Request %s: %s", request_id, text)
        return text


def _api_reply(error: ApiError) -> dict[str, Any]:
    return error_reply(
        error.status, error.message, error_type=error.type, code=error.code, param=error.param
    )


@contextlib.contextmanager
def _stop_on_signals() -> Iterator[list[bool]]:
    """SIGTERM/SIGINT raise ``ServeStopped`` until the caller flips ``stopping[0]``."""
    stopping = [False]

    def handler(signum: int, frame: FrameType | None) -> None:
        if stopping[0]:
            logger.info("Already stopping (%s ignored)", signal.Signals(signum).name)
            return
        stopping[0] = True
        raise ServeStopped(signum)

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield stopping
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def _start_http_child(server_args: ServerArgs, bridge_address: str) -> BaseProcess:
    name = CARDCAGE_DIFFUSION_HTTP_BRIDGE.name
    before = os.environ.get(name)
    os.environ[name] = bridge_address  # only the HTTP child starts while it is set
    try:
        return start_http_server(server_args)
    finally:
        if before is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = before


def _check_port_free(host: str, port: int) -> None:
    """Fail in a moment, before any worker starts, when the address is already taken.

    The HTTP child binds for real later (and reports a failure then too, if another process
    took the port meanwhile); this only spares waiting for the workers in the common case.
    """
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise HttpServerError(f"Cannot listen on {host}:{port}: {exc.strerror}.") from None
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the HTTP child does
        try:
            probe.bind(address)
        except OSError as exc:
            raise HttpServerError(
                f"Cannot listen on {host}:{port}: {exc.strerror or exc}. Pass another --port "
                "(or --host), or stop the process using it."
            ) from None


def _drain(fd: int) -> None:
    with contextlib.suppress(BlockingIOError):
        os.read(fd, 4096)


def _wait_listening(http: BaseProcess, backend: ImageBackend, wake_fd: int) -> str:
    deadline = time.monotonic() + HTTP_START_TIMEOUT
    while backend.http_url is None:
        if backend.http_failure is not None:
            raise HttpServerError(backend.http_failure)
        if http.exitcode is not None:
            raise HttpServerError(
                f"The HTTP server process exited with code {http.exitcode} before listening; "
                "see its log above."
            )
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise HttpServerError(
                f"The HTTP server process did not start listening within {HTTP_START_TIMEOUT:g} s."
            )
        wait([http.sentinel, wake_fd], remaining)
        _drain(wake_fd)
    if backend.http_failure is not None:
        raise HttpServerError(backend.http_failure)
    return backend.http_url


def _supervise(http: BaseProcess, generator: DiffGenerator) -> int:
    """Block until the HTTP child exits (returns 1); log workers that exit meanwhile."""
    workers = {h.sentinel: h for h in generator.workers.workers}
    while True:
        ready = wait([http.sentinel, *workers])
        if http.sentinel in ready:
            http.join()
            logger.error(
                "The HTTP server process exited unexpectedly (exit code %s); stopping.",
                http.exitcode,
            )
            return 1
        for sentinel in ready:
            assert isinstance(sentinel, int)
            handle = workers.pop(sentinel)
            logger.error(
                "Diffusion worker rank %d (pid %s) exited; /health answers 503 and image "
                "requests fail until the server is restarted.",
                handle.rank,
                handle.pid,
            )


def _stop_http_child(http: BaseProcess) -> None:
    if http.exitcode is None:
        http.terminate()
        http.join(HTTP_STOP_TIMEOUT)
    if http.exitcode is None:
        logger.warning("The HTTP server process ignored SIGTERM; killing it")
        http.kill()
        http.join(HTTP_STOP_TIMEOUT)
    http.join(0)


def serve(
    server_args: ServerArgs,
    *,
    max_queue: int | None = None,
    limits: ServeLimits | None = None,
    on_ready: Callable[[str], None] | None = None,
) -> int:
    """Run the server until SIGTERM/SIGINT; return the exit status (0 after a signal).

    ``on_ready(url)`` runs once the workers are ready and the HTTP child listens (with the
    port it actually bound: ``server_args.port`` 0 picks a free one). ``limits`` bounds each
    request (``ServeLimits()`` by default); ``max_queue`` overrides ``limits.max_queue``.

    Raises ``ModelError`` (``ModelNotFoundError``, ``ModelConfigError``) before anything
    starts when ``server_args.model_path`` names no usable model, ``HttpServerError`` if the
    HTTP child cannot start, and the launcher's errors (``WorkerFailedError``...) if the workers
    cannot; everything started is stopped first.
    """
    # Checked here, in milliseconds, rather than by every worker after seconds of start-up;
    # its config.json also says the size the model was trained at, which requests are warned
    # about leaving.
    model = resolve_model(server_args.model_path)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    limits = limits or ServeLimits()
    if max_queue is not None:
        limits = dataclasses.replace(limits, max_queue=max_queue)
    backend = ImageBackend(
        server_args.model_path, limits=limits, wake_fd=wake_w, model_config=model.config
    )
    bridge: BridgeServer | None = None
    http: BaseProcess | None = None
    generator: DiffGenerator | None = None
    status = 0
    with _stop_on_signals() as stopping:
        try:
            if server_args.port != 0:
                _check_port_free(server_args.host, server_args.port)
            bridge = BridgeServer(backend)
            bridge.start()
            http = _start_http_child(server_args, bridge.address)
            generator = DiffGenerator.from_pretrained(server_args=server_args)
            backend.attach(generator)
            url = _wait_listening(http, backend, wake_r)
            if on_ready is not None:
                on_ready(url)
            status = _supervise(http, generator)
        except ServeStopped as stop:
            logger.info("Received %s: shutting down", stop)
        finally:
            stopping[0] = True
            backend.stopping = True
            started = time.perf_counter()
            # Running and waiting requests stop now (the workers at their next denoising step)
            # and are answered 503 through the HTTP child, which drains before it exits.
            backend.cancel_all("shutdown")
            if http is not None:
                _stop_http_child(http)
            if bridge is not None:
                bridge.close()
            if generator is not None:
                # A worker busy with a request reads the shutdown request only when done: do not
                # wait the launcher's full grace period before terminating it.
                generator.workers.shutdown(graceful_timeout=WORKER_STOP_GRACE)
            os.close(wake_r)
            os.close(wake_w)
            logger.info("Stopped in %.2f s", time.perf_counter() - started)
    return status
