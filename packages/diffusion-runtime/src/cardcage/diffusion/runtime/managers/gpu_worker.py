"""The worker side: ``run_scheduler_process`` (the loop a scheduler child runs) and ``GPUWorker``.

``worker_bootstrap`` imports this module only after the child's platform is initialized and its
plugin hooks are applied, and looks ``run_scheduler_process`` up on it at call time: a plugin
may REPLACE it (keeping the ``protocol`` contract) or hook ``GPUWorker`` methods.

A worker starts in this order (``run_scheduler_process``):

1. ``GPUWorker.init_device_and_model()``, the documented BEFORE/AROUND hook point for rank-aware
   set-up (``rank``, ``local_rank`` and ``world_size`` are attributes of the worker): the
   platform's local device, ``torch.distributed`` over ``world_size`` ranks with the platform's
   backend (gloo on CPU) and a rendezvous through rank 0's TCPStore on ``127.0.0.1:master_port``
   (see ``init_distributed`` for why the port cannot be taken meanwhile), the sequence-parallel
   group and its all-to-all communicator (the class the platform names in
   ``get_all_to_all_communicator_cls()``), and the pipeline built on the device with that
   communicator;
2. ``GPUWorker.init_request_broadcast()``: with more than one rank, a ``cardcage.shm`` queue
   built collectively over a CPU (gloo) group, rank 0 its writer and every other rank a reader;
3. ``Ready`` to the launcher, then the request loop.

The launcher talks to rank 0 only. Rank 0 vets each ``generate`` request (a bad one comes back
as an ``InvalidSamplingParamsError`` and reaches no other rank), broadcasts it through the
queue, and every rank runs the pipeline with the same request: the ranks split the image tokens
and exchange them with the communicator's ``all_to_all_4D`` around attention, and each ends with
the whole image.
Rank 0 answers with the images as raw RGB bytes; it logs each denoising step at DEBUG and
reports it to the launcher as a ``protocol.Progress`` (what ``generate``'s progress bar draws).

Cancellation: while rank 0 runs a request it owns no thread reading its pipe, so after every
denoising step it polls the pipe without blocking (``GPUWorker.cancel_requested``): a
``Cancel`` naming the running request (or a ``Shutdown``, or the pipe's end) means stop. The
decision must reach every rank at the same step, or the next step's collectives would pair a
rank that stopped with one that did not; so after each step rank 0 broadcasts one int over the
CPU group and every rank stops when it reads 1 (``GPUWorker.check_cancelled``). Each rank raises
``RequestCancelledError``; rank 0 answers the request with it and the followers go back to
waiting: the group stays in step and serves the next request at once.

The other ranks wait on the queue, and a thread of theirs watches the launcher's pipe: a
``Shutdown`` or the pipe's end cancels the wait. A rank that raises in the middle of a request
reports a ``WorkerFailure`` and exits; rank 0, whose collectives then fail, reports one too and
serves nothing more: the group is out of step and the launcher shuts it down.

No torch at module scope: the launcher imports this module when it resolves hook targets.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import threading
import time
from typing import TYPE_CHECKING, Any, NoReturn

from cardcage.diffusion.configs.sampling_params import MAX_IMAGES_PER_REQUEST, SamplingParams
from cardcage.diffusion.errors import (
    InvalidSamplingParamsError,
    InvalidServerArgsError,
    PipelineUnavailableError,
    RequestCancelledError,
    UnknownRequestError,
    WrongRankError,
)
from cardcage.diffusion.runtime.platforms.current import (
    get_current_platform,
    initialize_current_platform,
)

from .protocol import Cancel, Progress, Ready, Request, Response, Shutdown, WorkerFailure
from .worker_bootstrap import bootstrap_timings, take_rendezvous_listener

if TYPE_CHECKING:
    from collections.abc import Callable
    from multiprocessing.connection import Connection

    from cardcage.diffusion.runtime.distributed import DeviceCommunicatorBase
    from cardcage.diffusion.runtime.pipelines.tiny import GeneratedImage, TinyDiffusionPipeline
    from cardcage.diffusion.runtime.server_args import ServerArgs
    from cardcage.shm import MessageQueue

__all__ = [
    "BROADCAST_CHUNKS",
    "BROADCAST_CHUNK_BYTES",
    "DIST_TIMEOUT_S",
    "GPUWorker",
    "follow_rank0",
    "run_scheduler_process",
    "serve_requests",
]

logger = logging.getLogger(__name__)

DIST_TIMEOUT_S = 600.0
"""Rendezvous and collective timeout of the worker process group (seconds)."""

BROADCAST_CHUNK_BYTES = 1 << 20
BROADCAST_CHUNKS = 4
"""Geometry of the request queue: 4 MiB of ``/dev/shm``; requests are small, larger ones are
streamed through the ring by ``cardcage.shm``."""

FOLLOWER_WAIT_S = 30.0
"""How long one wait of a follower lasts before it waits again: an idle deployment is normal,
and re-arming keeps ``cardcage.shm``'s "still waiting" warning for real stalls."""

STOP_BROADCAST_TIMEOUT_S = 2.0

_GENERATE = "generate"
_STOP = "stop"


def _prepare(payload: Any, default_seed: int) -> tuple[list[str], SamplingParams]:
    """Check a ``generate`` payload; return the prompt of every image and the params.

    The payload is ``{"prompt": str | list[str], "sampling_params": dict | None}`` (plain data,
    so any client of the launcher can send it). ``num_images`` repeats each prompt; the seed
    defaults to ``ServerArgs.seed``.
    """
    if not isinstance(payload, dict):
        raise InvalidSamplingParamsError(
            "request", payload, 'a dict {"prompt": ..., "sampling_params": {...}}'
        )
    prompt = payload.get("prompt")
    prompts = [prompt] if isinstance(prompt, str) else prompt
    if (
        not isinstance(prompts, list | tuple)
        or not prompts
        or not all(isinstance(p, str) for p in prompts)
    ):
        raise InvalidSamplingParamsError("prompt", prompt, "a str or a non-empty list of str")
    raw = payload.get("sampling_params") or {}
    if not isinstance(raw, dict):
        raise InvalidSamplingParamsError("sampling_params", raw, "a dict of SamplingParams fields")
    params = SamplingParams.from_dict(raw)
    if params.seed is None:
        params = params.replace(seed=default_seed)
    total = len(prompts) * params.num_images
    if total > MAX_IMAGES_PER_REQUEST:
        raise InvalidSamplingParamsError(
            "num_images",
            params.num_images,
            f"at most {MAX_IMAGES_PER_REQUEST} images per request in all",
            message=f"{len(prompts)} prompt(s) x num_images={params.num_images} asks for {total} "
            f"images; one request makes at most {MAX_IMAGES_PER_REQUEST}. Split the request.",
        )
    return [p for p in prompts for _ in range(params.num_images)], params


class GPUWorker:
    """One rank's worker: its device, process group, pipeline and request queue.

    Attributes a hook can rely on: ``rank``, ``local_rank``, ``world_size``, ``server_args``,
    ``platform``; after ``init_device_and_model()`` also ``device``, ``backend``,
    ``world_group``, ``cpu_group``, ``sp_group`` (None with one rank), ``sp_communicator`` (the
    platform's all-to-all communicator for ``sp_group``) and ``pipeline``.
    """

    METHODS = ("generate", "ping")

    def __init__(
        self, local_rank: int, rank: int, server_args: ServerArgs, world_size: int | None = None
    ) -> None:
        self.local_rank = local_rank
        self.rank = rank
        self.world_size = server_args.num_gpus if world_size is None else world_size
        self.server_args = server_args
        self.platform = get_current_platform()
        self.device: Any = None
        self.backend: str | None = None
        self.world_group: Any = None
        self.cpu_group: Any = None
        self.sp_group: Any = None
        self.sp_communicator: DeviceCommunicatorBase | None = None
        self.pipeline: TinyDiffusionPipeline | None = None
        self.broadcast_queue: MessageQueue | None = None
        self.timings: dict[str, float] = {}
        #: Set when a distributed request failed after it was broadcast: the ranks are out of
        #: step, so this group serves nothing more.
        self.broken: BaseException | None = None
        #: Rank 0, while it serves a request: called with ``(step, total)`` after each
        #: denoising step (``serve_requests`` sends it to the launcher as ``Progress``).
        self.report_step: Callable[[int, int], None] | None = None
        self._requests = 0
        #: Rank 0: the launcher's pipe, polled between denoising steps for ``Cancel``.
        self.control: Connection | None = None
        #: Rank 0: the launcher's id of the request being served (what a ``Cancel`` names).
        self.running_request: int | None = None
        #: Rank 0: a ``Shutdown`` (or the pipe's end) arrived during a request.
        self.shutdown_requested = False
        #: Rank 0: the pipe ended during a request (nobody is left to answer).
        self.launcher_gone = False

    # -- initialization -------------------------------------------------------------------------
    def init_device_and_model(self) -> None:
        """Bind the device, join the process group, build the pipeline. Hook it (BEFORE/AROUND)
        for rank-aware set-up; a REPLACE must leave ``pipeline`` (and, with several ranks, the
        process group) set up for ``generate`` to work."""
        self.device = self.platform.get_local_torch_device()
        logger.debug(
            "Rank %d/%d initializing on %s (platform %s)",
            self.rank, self.world_size, self.device, type(self.platform).__qualname__,
        )  # fmt: skip
        self._share_cpu_cores()
        started = time.perf_counter()
        self.init_distributed()
        self.timings["init_distributed_s"] = time.perf_counter() - started
        started = time.perf_counter()
        self.pipeline = self.build_pipeline()
        self.timings["build_pipeline_s"] = time.perf_counter() - started

    def _share_cpu_cores(self) -> None:
        """CPU workers split the cores between them (unless ``OMP_NUM_THREADS`` says otherwise):
        every rank computes at the same time, and oversubscribed threads only slow all down."""
        if getattr(self.device, "type", None) != "cpu" or "OMP_NUM_THREADS" in os.environ:
            return
        import torch

        try:
            cores = len(os.sched_getaffinity(0))
        except AttributeError:  # not Linux
            cores = os.cpu_count() or 1
        torch.set_num_threads(max(1, cores // self.world_size))

    def init_distributed(self) -> None:
        """Join ``torch.distributed``: ``world_size`` ranks, the platform's backend, rendezvous
        through a TCPStore that rank 0 serves on ``127.0.0.1:master_port`` (``_rendezvous_store``).
        """
        import datetime

        import torch.distributed as dist

        if not dist.is_initialized():
            port = self.server_args.master_port
            if port is None:
                raise InvalidServerArgsError(
                    "master_port", port, "a TCP port for the workers' rendezvous",
                    message="ServerArgs.master_port is None in a worker: launch workers with "
                    "launch_workers() (it picks a free port), or set master_port=.",
                )  # fmt: skip
            backend = self.platform.get_torch_distributed_backend_str()
            options: dict[str, Any] = {}
            if self.platform.supports_distributed_device_id() and self.device is not None:
                options["device_id"] = self.device
            dist.init_process_group(
                backend=backend,
                store=self._rendezvous_store(port),
                rank=self.rank,
                world_size=self.world_size,
                timeout=datetime.timedelta(seconds=DIST_TIMEOUT_S),
                **options,
            )
        elif dist.get_world_size() != self.world_size:  # a hook joined a group of its own
            raise RuntimeError(
                f"torch.distributed is already initialized with {dist.get_world_size()} ranks, "
                f"but this deployment has num_gpus={self.world_size}"
            )
        self.backend = str(dist.get_backend())
        self.world_group = dist.group.WORLD
        # cardcage.shm builds its queue with CPU collectives: gloo, whatever the device uses.
        self.cpu_group = (
            self.world_group if self.backend == "gloo" else dist.new_group(backend="gloo")
        )
        self.sp_group = self.world_group if self.world_size > 1 else None
        self.sp_communicator = self.build_sp_communicator()

    def _rendezvous_store(self, port: int) -> Any:
        """The ``TCPStore`` every rank meets in: rank 0 serves it, the others connect to it.

        When the launcher chose the port (``master_port`` unset), it bound a socket to
        ``127.0.0.1:0`` itself, kept it listening and handed it to rank 0 through spawn
        (``take_rendezvous_listener()``); rank 0's store serves on that very socket. The port is
        bound from the moment the kernel picks it until the group is gone, so no other process
        can take it in between: the race of probing a free port, closing it and binding it
        again (which once ended in EADDRINUSE) cannot happen. Ranks that connect before rank 0's
        store runs wait in the socket's backlog. With an explicit ``master_port`` (or a worker
        started without a launcher), rank 0 binds the port the caller chose.
        Either way the store listens on the loopback interface only.
        """
        import datetime
        import socket

        import torch
        from torch.distributed import TCPStore

        timeout = datetime.timedelta(seconds=DIST_TIMEOUT_S)
        if self.rank != 0:
            return TCPStore("127.0.0.1", port, self.world_size, False, timeout)
        listener = take_rendezvous_listener()
        if listener is None:
            try:
                listener = socket.create_server(("127.0.0.1", port), backlog=self.world_size)
            except OSError as exc:
                raise InvalidServerArgsError(
                    "master_port",
                    port,
                    "a free TCP port on 127.0.0.1",
                    message=f"Rank 0 cannot listen on 127.0.0.1:{port} for the workers' "
                    f"rendezvous ({exc.strerror or exc}). Choose another ServerArgs.master_port, "
                    "or leave it unset so the launcher picks one that cannot be taken.",
                ) from exc
        fd = listener.detach()  # the store owns the socket from here and closes it
        try:
            return TCPStore(
                "127.0.0.1", port, self.world_size, True, timeout, wait_for_workers=False,
                master_listen_fd=fd,
                # libuv's server serves an inherited socket from torch 2.8 on (pytorch#150215).
                use_libuv=torch.__version__ >= "2.8",
            )  # fmt: skip
        except BaseException:
            os.close(fd)
            raise

    def build_sp_communicator(self) -> DeviceCommunicatorBase:
        """The platform's all-to-all communicator for ``sp_group`` on this rank's device.

        Resolved in every worker, one rank included, so a platform that names no usable
        communicator fails at start-up (with the fix in the message), not at its first
        multi-worker deployment. With one rank the exchange is the identity.
        """
        from cardcage.diffusion.runtime.distributed.resolve import (
            resolve_all_to_all_communicator_cls,
        )

        cls = resolve_all_to_all_communicator_cls(self.platform)
        return cls(self.sp_group, device=self.device, unique_name=f"sp-rank{self.rank}")

    def build_pipeline(self) -> TinyDiffusionPipeline:
        """The pipeline of ``server_args.model_path`` on this rank's device, sequence-parallel
        through ``sp_communicator``."""
        from cardcage.diffusion.runtime.pipelines.sampler import FlowMatchEulerSampler
        from cardcage.diffusion.runtime.pipelines.tiny import TinyDiffusionPipeline

        config = self.server_args.pipeline_config
        pipeline = TinyDiffusionPipeline.build(
            self.server_args.model_path,
            device=self.device,
            dtype=config.dtype,
            communicator=self.sp_communicator,
        )
        if config.flow_shift is not None:
            pipeline.sampler = FlowMatchEulerSampler(shift=config.flow_shift)
        if config.enable_torch_compile and self.rank == 0:
            logger.warning(
                "PipelineConfig.enable_torch_compile is set, but the built-in pipeline runs "
                "eagerly: it is not compiled."
            )
        return pipeline

    def init_request_broadcast(self) -> None:
        """With several ranks, build the request queue (rank 0 writes, the others read)."""
        if self.world_size == 1:
            return
        if self.cpu_group is None:
            raise RuntimeError(
                f"Rank {self.rank} has no process group: with num_gpus={self.world_size}, "
                "init_device_and_model() must join torch.distributed (a REPLACE hook on it "
                "must call self.init_distributed())"
            )
        from cardcage.shm import MessageQueue

        started = time.perf_counter()
        self.broadcast_queue = MessageQueue.create_from_process_group(
            self.cpu_group, BROADCAST_CHUNK_BYTES, BROADCAST_CHUNKS, writer_rank=0
        )
        self.timings["init_broadcast_s"] = time.perf_counter() - started

    def info(self) -> dict[str, Any]:
        """What ``Ready`` reports to the launcher (plain data)."""
        return {
            "pid": os.getpid(),
            "rank": self.rank,
            "world_size": self.world_size,
            "device": str(self.device),
            "backend": self.backend,
            "model_path": self.server_args.model_path,
            # What a request without num_inference_steps runs (the server's limits use it).
            "default_steps": getattr(
                getattr(getattr(self.pipeline, "model", None), "config", None),
                "default_steps",
                None,
            ),
        }

    # -- requests -------------------------------------------------------------------------------
    def handle_request(self, method: str, payload: Any) -> Any:
        """Serve one request from the launcher; raising sends the error back to it."""
        if method == "ping":
            return {"rank": self.rank, "pid": os.getpid(), "payload": payload}
        if method == "generate":
            if self.rank != 0:
                raise WrongRankError(method, self.rank)
            return self.generate(payload)
        raise UnknownRequestError(method, self.METHODS)

    def _require_pipeline(self) -> TinyDiffusionPipeline:
        if self.pipeline is None:
            raise PipelineUnavailableError(
                f"Rank {self.rank} has no pipeline: init_device_and_model() did not build one "
                "(a plugin REPLACEd it without calling build_pipeline()?)."
            )
        return self.pipeline

    def generate(self, payload: Any) -> dict[str, Any]:
        """Rank 0: vet the request, broadcast it, run it with every rank, return the images.

        The answer is plain data: ``{"images": [{"prompt", "seed", "width", "height", "rgb"}],
        "elapsed_s"}`` with ``rgb`` the row-major uint8 RGB bytes.
        """
        if self.broken is not None:
            raise RuntimeError(
                f"This worker group failed during an earlier request ({self.broken!r}) and "
                "cannot serve: launch a new one."
            )
        pipeline = self._require_pipeline()
        prompts, params = _prepare(payload, self.server_args.seed)
        request_id = _request_id_of(payload)
        pipeline.check_request(prompts, params)  # before any other rank sees it
        self._requests += 1
        number = self._requests
        label = request_id or f"#{number}"
        started = time.perf_counter()
        queue = self.broadcast_queue
        try:
            if queue is not None:
                queue.enqueue(
                    (_GENERATE, number, prompts, params.to_dict(), request_id), DIST_TIMEOUT_S
                )
            images = self.run_generate(number, prompts, params, request_id=request_id)
        except RequestCancelledError as exc:
            logger.info("Request %s cancelled after step %s/%s", label, exc.step, exc.total)
            raise
        except BaseException as exc:
            if queue is not None:
                self.broken = exc
            raise
        elapsed = time.perf_counter() - started
        logger.info(
            "Request %s: %d image(s) %dx%d in %.2f s",
            label, len(images), params.width, params.height, elapsed,
        )  # fmt: skip
        return {
            "images": [
                {
                    "prompt": image.prompt,
                    "seed": image.seed,
                    "width": image.width,
                    "height": image.height,
                    "rgb": image.rgb_bytes(),
                }
                for image in images
            ],
            "elapsed_s": elapsed,
        }

    def run_generate(
        self,
        number: int,
        prompts: list[str],
        params: SamplingParams,
        *,
        request_id: str | None = None,
    ) -> list[GeneratedImage]:
        """Every rank: run the pipeline on one request (the same call on every rank).

        Raises ``RequestCancelledError`` on every rank at the same step when rank 0 was asked
        to cancel it."""
        pipeline = self._require_pipeline()
        label = request_id or f"#{number}"
        report = self.report_step if self.rank == 0 else None

        def on_step(step: int, total: int) -> None:
            if self.rank == 0:
                logger.debug("Request %s: denoising step %d/%d", label, step, total)
            if report is not None:
                report(step, total)
            self.check_cancelled(label, step, total)

        return pipeline.generate(prompts, params, on_step=on_step)

    # -- cancellation ---------------------------------------------------------------------------
    def cancel_requested(self) -> bool:
        """Rank 0: read the launcher's pipe without blocking; True when it asks to stop the
        running request (a ``Cancel`` naming it, a ``Shutdown``, or the pipe's end)."""
        pipe = self.control
        if pipe is None:
            return False
        cancel = False
        try:
            while pipe.poll(0):
                message = pipe.recv()
                if isinstance(message, Cancel):
                    cancel = cancel or message.request_id == self.running_request
                elif isinstance(message, Shutdown):
                    self.shutdown_requested = cancel = True
        except (EOFError, OSError):  # the launcher is gone: nobody waits for this request
            self.control = None
            self.shutdown_requested = self.launcher_gone = cancel = True
        return cancel

    def check_cancelled(self, label: str, step: int, total: int) -> None:
        """Every rank, after each denoising step: raise ``RequestCancelledError`` together when
        rank 0 was asked to stop (rank 0's decision is broadcast over the CPU group)."""
        cancel = self.cancel_requested() if self.rank == 0 else False
        if self.world_size > 1 and self.cpu_group is not None:
            import torch
            import torch.distributed as dist

            flag = torch.tensor([1 if cancel else 0], dtype=torch.int32)
            dist.broadcast(flag, src=0, group=self.cpu_group)
            cancel = bool(flag.item())
        if cancel:
            raise RequestCancelledError(label, step=step, total=total)

    # -- teardown -------------------------------------------------------------------------------
    def close(self) -> None:
        """Tell the followers to stop (rank 0), release the queue, leave the process group."""
        queue = self.broadcast_queue
        self.broadcast_queue = None
        if queue is not None:
            from cardcage.shm import ShmBroadcastError

            if self.rank == 0 and self.broken is None:
                with contextlib.suppress(ShmBroadcastError):
                    queue.enqueue((_STOP,), STOP_BROADCAST_TIMEOUT_S)
            queue.close()
        if self.world_group is not None and self.broken is None:
            import torch.distributed as dist

            if dist.is_initialized():
                with contextlib.suppress(Exception):  # best effort: the process is leaving
                    dist.destroy_process_group()
        self.world_group = self.cpu_group = self.sp_group = None
        self.sp_communicator = None


def _request_id_of(payload: dict[str, Any]) -> str | None:
    """The caller's id for a request (logged on every side), or None."""
    value = payload.get("request_id")
    if value is not None and not isinstance(value, str):
        raise InvalidSamplingParamsError("request_id", value, "a str or None")
    return value


def _answer(worker: GPUWorker, request: Request) -> Response | WorkerFailure:
    """The reply to a request: a ``Response``, or a bare ``WorkerFailure`` once the group broke."""
    try:
        return Response(request.request_id, worker.handle_request(request.method, request.payload))
    except Exception as exc:
        failure = WorkerFailure.from_exception(worker.rank, f"request {request.method!r}", exc)
        if worker.broken is not None:
            logger.error(
                "Rank %d: request %r failed after it was broadcast; this worker group cannot "
                "serve any more: %s",
                worker.rank, request.method, exc,
            )  # fmt: skip
            return failure
        return Response(request.request_id, failure=failure)


def serve_requests(worker: GPUWorker, pipe: Connection) -> None:
    """Rank 0 (or a lone rank): answer ``Request`` messages until ``Shutdown`` or end of file.

    A ``Cancel`` read here names a request that already finished: it is ignored."""
    worker.control = pipe
    try:
        while True:
            try:
                message = pipe.recv()
            except EOFError:  # the launcher closed its end or died
                logger.info("Rank %d: launcher pipe closed, exiting", worker.rank)
                return
            if isinstance(message, Shutdown):
                logger.debug("Rank %d: shutdown requested", worker.rank)
                return
            if isinstance(message, Cancel):
                continue
            if not isinstance(message, Request):
                logger.warning("Rank %d ignored an unexpected message %r", worker.rank, message)
                continue
            worker.running_request = message.request_id
            worker.report_step = _progress_sender(pipe, message.request_id)
            try:
                reply = _answer(worker, message)
            finally:
                worker.running_request = None
                worker.report_step = None
            if worker.launcher_gone:  # the pipe ended during the request: nobody to answer
                logger.info("Rank %d: launcher pipe closed, exiting", worker.rank)
                return
            pipe.send(reply)
            if worker.shutdown_requested:
                logger.debug("Rank %d: shutdown requested during a request", worker.rank)
                return
    finally:
        worker.close()


def _progress_sender(pipe: Connection, request_id: int) -> Callable[[int, int], None]:
    """``report_step`` for one request: a ``Progress`` to the launcher (best effort: a pipe that
    broke fails the answer a moment later anyway, not the computation)."""

    def send(step: int, total: int) -> None:
        with contextlib.suppress(OSError, ValueError):
            pipe.send(Progress(request_id, step, total))

    return send


def _watch_pipe(
    worker: GPUWorker, pipe: Connection, send_lock: threading.Lock, stop: threading.Event
) -> None:
    """A follower's pipe thread: answer pings; on ``Shutdown`` or end of file, stop the loop."""
    try:
        while True:
            try:
                message = pipe.recv()
            except (EOFError, OSError):
                logger.info("Rank %d: launcher pipe closed, exiting", worker.rank)
                return
            if isinstance(message, Shutdown):
                logger.debug("Rank %d: shutdown requested", worker.rank)
                return
            if isinstance(message, Request):
                reply = _answer(worker, message)
                with send_lock:
                    pipe.send(reply)
    finally:
        stop.set()
        queue = worker.broadcast_queue
        if queue is not None:
            queue.shutdown()  # wakes the main thread's dequeue with CancelledError


def follow_rank0(worker: GPUWorker, pipe: Connection) -> None:
    """A rank other than 0: run every request rank 0 broadcasts, until told to stop."""
    from cardcage.shm import (
        CancelledError,
        QueueClosedError,
        QueueTimeoutError,
        WriterDiedError,
    )

    queue = worker.broadcast_queue
    assert queue is not None
    send_lock = threading.Lock()
    stop = threading.Event()
    watcher = threading.Thread(
        target=_watch_pipe,
        args=(worker, pipe, send_lock, stop),
        name=f"cardcage-diffusion-pipe-{worker.rank}",
        daemon=True,
    )
    watcher.start()
    try:
        while not stop.is_set():
            try:
                message = queue.dequeue(FOLLOWER_WAIT_S)
            except QueueTimeoutError:
                continue
            except (CancelledError, QueueClosedError):
                return
            except WriterDiedError as exc:
                worker.broken = exc
                logger.error("Rank %d: rank 0 died (%s); exiting", worker.rank, exc)
                raise SystemExit(1) from None
            if message[0] == _STOP:
                return
            _, number, prompts, params, request_id = message
            try:
                worker.run_generate(
                    number, prompts, SamplingParams.from_dict(params), request_id=request_id
                )
            except RequestCancelledError:
                continue  # every rank stopped at the same step: the group is still in step
            except Exception as exc:
                worker.broken = exc
                logger.exception("Rank %d failed during request #%d", worker.rank, number)
                with send_lock, contextlib.suppress(OSError, ValueError):
                    pipe.send(
                        WorkerFailure.from_exception(
                            worker.rank, f"request #{number} 'generate' (following rank 0)", exc
                        )
                    )
                raise SystemExit(1) from None
    finally:
        worker.close()


def run_scheduler_process(
    local_rank: int, rank: int, server_args: ServerArgs, pipe_writer: Connection
) -> None:
    """Worker main: initialize, report ``Ready`` (with timings), serve until shutdown."""
    initialize_current_platform()  # already done by the bootstrap: a no-op, kept as a guard
    started = time.perf_counter()
    try:
        worker = GPUWorker(local_rank, rank, server_args)
        worker.init_device_and_model()
        worker.init_request_broadcast()
    except Exception as exc:
        pipe_writer.send(WorkerFailure.from_exception(rank, "worker initialization", exc))
        raise SystemExit(1) from None
    timings = bootstrap_timings()
    timings.update(worker.timings)
    timings["init_device_and_model_s"] = time.perf_counter() - started
    pipe_writer.send(Ready(rank, {**worker.info(), "timings": timings}))
    logger.info("Diffusion worker rank %d ready", rank)
    if worker.broadcast_queue is None or rank == 0:
        serve_requests(worker, pipe_writer)
    else:
        follow_rank0(worker, pipe_writer)
    if worker.broken is None:  # a clean shutdown: close() released the queue and the group
        _leave_process()


def _leave_process() -> NoReturn:
    """End a worker that shut down cleanly without running C++ static destructors.

    By now ``close()`` has released everything this worker owns (its shm queue, its process
    group). What is left are process-wide objects of torch's (gloo and TCPStore threads) whose
    destructors, run at interpreter exit, sometimes abort with "terminate called without an
    active exception" after a perfectly clean shutdown, which reads like a crash to anyone
    watching the launcher's terminal. ``os._exit`` skips them; the Python-level state that
    still matters (log handlers, standard streams) is flushed first. Exit status 0.
    """
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(0)
