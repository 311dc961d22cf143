"""The first code a spawned diffusion worker (or HTTP child) runs, in the seed's order.

Import-neutral: stdlib only at module scope, never the diffusion runtime. This module is the
``multiprocessing`` target, so a spawned child imports it (and unpickles its argument) before
anything else runs; whatever it imported here would be built before the child's platform is
initialized and before plugin hooks are applied, out of reach of both. For the same reason
``ServerArgs`` crosses the process boundary as a ``ServerArgsPayload`` of plain data: unpickling
it imports nothing, and it becomes a ``ServerArgs`` only after the lifecycle below.

A scheduler child runs, in order (``bootstrap_scheduler_process``):

1. arm the parent-death signal (before any vendor code, since everything after may block);
2. rank 0 only: warn about diffusion runtime modules the launching script imported at module
   scope (spawn re-executes that scope in every child, before this function runs);
3. ``initialize_current_platform()``: the platform's ``init_backend()``, the first extensible
   action, ahead of plugin callbacks and hook targets (both may import runtime modules);
4. ``load_plugins()`` (callbacks register hooks), 5. ``apply_plugin_hooks()`` (targets resolved);
6. materialize ``ServerArgs`` (its ``__post_init__`` applies the platform's defaults);
7. look ``run_scheduler_process`` up on its module *now* and call it, so a REPLACE hook applied
   in step 5 is what runs (a ``from`` binding made earlier would keep the original).

An HTTP child (``bootstrap_http_server_process``) skips step 3 (it never touches the device) and
finishes 4 and 5 before importing the server module. Any failure before the worker loop is sent
to the launcher as a ``protocol.WorkerFailure`` naming the phase, and the child exits with 1.
"""

from __future__ import annotations

import importlib
import logging
import os
import pickle
import sys
import time
from dataclasses import dataclass, field

TYPE_CHECKING = False
if TYPE_CHECKING:
    import socket
    from collections.abc import Mapping
    from multiprocessing.connection import Connection
    from typing import Any, NoReturn

    from cardcage.diffusion.runtime.server_args import ServerArgs

__all__ = [
    "DEFAULT_HTTP_SERVER_ENTRY",
    "PRE_ACTIVATION_MODULES",
    "SCHEDULER_ENTRY_MODULE",
    "SchedulerProcessSpec",
    "ServerArgsPayload",
    "bootstrap_http_server_process",
    "bootstrap_scheduler_process",
    "bootstrap_timings",
    "quiet_torch_numpy_warning",
    "runtime_modules_imported_early",
    "take_rendezvous_listener",
    "warn_if_runtime_imported_early",
]

logger = logging.getLogger(__name__)

SCHEDULER_ENTRY_MODULE = "cardcage.diffusion.runtime.managers.gpu_worker"
"""The module whose ``run_scheduler_process`` a scheduler child calls (looked up at call time)."""

DEFAULT_HTTP_SERVER_ENTRY = (
    "cardcage.diffusion.runtime.entrypoints.http_server:launch_http_server_only"
)
"""``module:function`` an HTTP child imports after hook application and calls with ServerArgs."""

_RUNTIME_PREFIX = "cardcage.diffusion."

_RUNTIME_NAMESPACES = frozenset(
    {
        "cardcage.diffusion.configs",
        "cardcage.diffusion.runtime",
        "cardcage.diffusion.runtime.entrypoints",
        "cardcage.diffusion.runtime.managers",
    }
)
"""Package ``__init__`` modules that import nothing: importing them builds nothing early."""

PRE_ACTIVATION_MODULES = (
    "cardcage.diffusion.envs",
    "cardcage.diffusion.errors",
    # The console script's module: spawn re-imports it in every child; its scope is stdlib only.
    "cardcage.diffusion.runtime.entrypoints.cli",
    "cardcage.diffusion.runtime.platforms",
    "cardcage.diffusion.runtime.utils",
    "cardcage.diffusion.runtime.managers.protocol",
    "cardcage.diffusion.runtime.managers.worker_bootstrap",
)
"""Modules (and their submodules) a script or plugin may import at module scope: they stay
import-safe, so a plugin can subclass ``Platform`` and register hooks before backend init."""

_PAYLOAD_KIND = "cardcage.diffusion.ServerArgs"
_PAYLOAD_VERSION = 1
_PLAIN_SCALARS = (str, int, float, bool, type(None))

_timings: dict[str, float] = {}
_rendezvous: list[socket.socket] = []  # at most one: the listener this rank was handed


def bootstrap_timings() -> dict[str, float]:
    """This process's bootstrap timestamps and phase durations (seconds), for the launcher."""
    return dict(_timings)


def take_rendezvous_listener() -> socket.socket | None:
    """The listening socket the launcher handed this rank for the ``torch.distributed``
    rendezvous (``SchedulerProcessSpec.rendezvous_listener``), or None. Once: the caller owns it.
    """
    return _rendezvous.pop() if _rendezvous else None


# -- the payload -------------------------------------------------------------------------------


def _check_plain(value: object, path: str) -> None:
    """Raise ``BootstrapPayloadError`` unless ``value`` is built from plain builtin data."""
    if isinstance(value, _PLAIN_SCALARS):
        return
    if isinstance(value, list | tuple):
        for index, item in enumerate(value):
            _check_plain(item, f"{path}[{index}]")
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                _payload_error(f"{path} has a non-str key {key!r}")
            _check_plain(item, f"{path}[{key!r}]")
        return
    _payload_error(
        f"{path} holds a {type(value).__module__}.{type(value).__qualname__}; a bootstrap "
        "payload carries only str, int, float, bool, None, lists, tuples and str-keyed dicts"
    )


def _payload_error(detail: str) -> NoReturn:
    from cardcage.diffusion.errors import BootstrapPayloadError

    raise BootstrapPayloadError(
        f"Bootstrap payload did not contain diffusion ServerArgs: {detail}."
    )


class _PlainUnpickler(pickle.Unpickler):
    """Unpickles builtin data only: a payload can never import a module while it is read."""

    def find_class(self, module: str, name: str) -> Any:
        _payload_error(f"it references {module}.{name}")


@dataclass(frozen=True, slots=True)
class ServerArgsPayload:
    """``ServerArgs`` as opaque bytes of plain data, captured once in the launcher.

    ``capture`` runs in the parent; ``materialize`` only after the child's lifecycle phases.
    Reading the bytes imports nothing, and anything but ServerArgs data is a
    ``BootstrapPayloadError`` (a ``TypeError``).
    """

    _pickle: bytes = field(repr=False)

    @classmethod
    def capture(cls, server_args: ServerArgs) -> ServerArgsPayload:
        from cardcage.diffusion.runtime.server_args import ServerArgs

        if not isinstance(server_args, ServerArgs):
            _payload_error(f"capture() was given a {type(server_args).__qualname__}")
        fields = server_args.to_payload()
        _check_plain(fields, "ServerArgs")
        data = {"kind": _PAYLOAD_KIND, "version": _PAYLOAD_VERSION, "fields": fields}
        return cls(pickle.dumps(data, protocol=pickle.HIGHEST_PROTOCOL))

    def read(self) -> dict[str, Any]:
        """The captured fields, without importing anything (for inspection and tests)."""
        import io

        try:
            data = _PlainUnpickler(io.BytesIO(self._pickle)).load()
        except (pickle.UnpicklingError, EOFError, ValueError) as exc:
            _payload_error(f"its bytes do not unpickle ({exc})")
        if not (
            isinstance(data, dict)
            and data.get("kind") == _PAYLOAD_KIND
            and data.get("version") == _PAYLOAD_VERSION
            and isinstance(data.get("fields"), dict)
        ):
            _payload_error(f"it holds a {type(data).__qualname__} of another kind")
        fields: dict[str, Any] = data["fields"]
        return fields

    def materialize(self) -> ServerArgs:
        """Build ``ServerArgs`` (imports its module): call only after the lifecycle phases."""
        fields = self.read()
        from cardcage.diffusion.runtime.server_args import ServerArgs

        return ServerArgs.from_payload(fields)


@dataclass(frozen=True, slots=True)
class SchedulerProcessSpec:
    """Everything a scheduler child needs, as stdlib types plus the opaque payload.

    ``pipe_writer`` is the worker's end of a duplex pipe (the seed's name): it sends ``Ready``
    or a ``WorkerFailure`` and then serves requests (see ``protocol``). ``parent_death_signal``
    is False when the launching thread is not the main thread: Linux sends the signal when the
    *thread* that started the child exits, which would kill workers launched from a short-lived
    thread; such workers still exit when the launcher's end of the pipe closes.
    ``rendezvous_listener`` (rank 0 only, when the launcher chose ``master_port``) is the socket
    already listening on that port, which rank 0's rendezvous store serves on (see
    ``GPUWorker._rendezvous_store``); spawn passes it as an inherited file descriptor.
    """

    local_rank: int
    rank: int
    world_size: int
    server_args: ServerArgsPayload
    pipe_writer: Connection
    parent_pid: int
    log_level: str = "info"
    parent_death_signal: bool = True
    rendezvous_listener: socket.socket | None = None


# -- the early-import warning -------------------------------------------------------------------


def _allowed(name: str) -> bool:
    if name in _RUNTIME_NAMESPACES:
        return True
    return any(name == p or name.startswith(p + ".") for p in PRE_ACTIVATION_MODULES)


def _is_namespace_package(module: object) -> bool:
    spec = getattr(module, "__spec__", None)
    return spec is not None and spec.origin is None and spec.submodule_search_locations is not None


def runtime_modules_imported_early(modules: Mapping[str, object] | None = None) -> list[str]:
    """Sorted names of diffusion runtime modules already imported that should not be yet."""
    table = sys.modules if modules is None else modules
    return sorted(
        name
        for name, module in list(table.items())
        if name.startswith(_RUNTIME_PREFIX)
        and not _allowed(name)
        and not _is_namespace_package(module)
    )


def _launching_script() -> str:
    main = sys.modules.get("__main__")
    script = getattr(main, "__file__", None)
    return str(script) if script else "the launching script"


def warn_if_runtime_imported_early() -> list[str]:
    """Log one WARNING naming (at most five of) the runtime modules imported too early.

    Reports, does not fix: hooks applied later can still patch those modules, but classes and
    registrations made while they were imported are already out of reach. Returns the names.
    """
    names = runtime_modules_imported_early()
    if names:
        shown = ", ".join(names[:5])
        if len(names) > 5:
            shown += f" (+{len(names) - 5} more)"
        logger.warning(
            "Diffusion runtime modules were imported before this worker initialized its "
            "platform: %s. spawn re-executes %s at module scope in every child, so these "
            "modules were built before platform initialization and hook application, and the "
            "classes and registrations they made are out of reach of both. Bind only the "
            "DiffGenerator proxy at module scope; move other imports under "
            'if __name__ == "__main__": or into the function that uses them.',
            shown,
            _launching_script(),
        )
    return names


# -- process set-up -----------------------------------------------------------------------------


def _arm_parent_death_signal(parent_pid: int | None) -> None:
    """Ask Linux to SIGKILL this process when its parent dies (``prctl(PR_SET_PDEATHSIG)``)."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes
    import signal

    pr_set_pdeathsig = 1
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(pr_set_pdeathsig, int(signal.SIGKILL), 0, 0, 0) != 0:
        logger.warning(
            "Could not arm the parent-death signal (errno %d); this worker may outlive its "
            "launcher if the launcher is killed.",
            ctypes.get_errno(),
        )
    if parent_pid is not None and os.getppid() != parent_pid:
        # The launcher died before the signal was armed: nobody will ever talk to us.
        raise SystemExit(1)


def _configure_logging(level: str, label: str) -> None:
    """A spawned child starts without logging configuration: give it one (if none is set)."""
    root = logging.getLogger()
    if root.handlers:
        return
    logging.basicConfig(
        level=level.upper(),
        format=f"[%(asctime)s {label}] %(levelname)s %(name)s: %(message)s",
    )


class _Phases:
    """Times each bootstrap phase and remembers the one running (for the failure report)."""

    def __init__(self) -> None:
        self.current = "bootstrap"
        _timings.clear()
        _timings["bootstrap_started"] = time.time()

    def run(self, key: str, phase: str, work: Any) -> Any:
        self.current = phase
        started = time.perf_counter()
        result = work()
        _timings[f"{key}_s"] = time.perf_counter() - started
        return result


def _report_failure(spec: SchedulerProcessSpec, phase: str, exc: BaseException) -> None:
    from .protocol import WorkerFailure

    logger.error("Diffusion worker rank %d failed during %s: %s", spec.rank, phase, exc)
    try:
        spec.pipe_writer.send(WorkerFailure.from_exception(spec.rank, phase, exc))
    except Exception:  # the launcher is gone or the pipe is broken: exit code tells it
        logger.debug("Could not report the failure to the launcher", exc_info=True)


def quiet_torch_numpy_warning() -> None:
    """Leave out torch's "Failed to initialize NumPy" warning, in the processes the runtime owns.

    torch warns once per process at import when numpy is not installed. The runtime does not use
    numpy (images travel as raw RGB bytes and are encoded with Pillow; weights load with
    safetensors' torch API), so on an install without it the line says nothing actionable, and a
    ``generate`` with two workers printed it three times before its image. Only that one warning
    is filtered, and only in processes that run nothing but the runtime: the console scripts and
    the spawned workers. A program embedding the runtime keeps its own warning filters.
    """
    import warnings

    warnings.filterwarnings("ignore", message=r"Failed to initialize NumPy", category=UserWarning)


def bootstrap_scheduler_process(spec: SchedulerProcessSpec) -> None:
    """``multiprocessing`` target of a scheduler child: the lifecycle, then the worker loop."""
    quiet_torch_numpy_warning()
    phases = _Phases()
    _rendezvous.clear()
    if spec.rendezvous_listener is not None:
        _rendezvous.append(spec.rendezvous_listener)
    try:
        if spec.parent_death_signal:
            _arm_parent_death_signal(spec.parent_pid)
        # torch.distributed's conventions, set before the platform initializes its backend.
        os.environ["RANK"] = str(spec.rank)
        os.environ["LOCAL_RANK"] = str(spec.local_rank)
        os.environ["WORLD_SIZE"] = str(spec.world_size)
        _configure_logging(spec.log_level, f"rank {spec.rank}")
        if spec.rank == 0:  # every rank re-ran the same script: one report is enough
            warn_if_runtime_imported_early()

        from cardcage.diffusion.runtime.platforms.current import initialize_current_platform
        from cardcage.diffusion.runtime.platforms.plugins import apply_plugin_hooks, load_plugins

        phases.run("platform_init", "platform backend initialization", initialize_current_platform)
        phases.run("load_plugins", "plugin registration", load_plugins)
        phases.run("apply_hooks", "hook application", apply_plugin_hooks)
        server_args = phases.run(
            "materialize", "ServerArgs materialization", spec.server_args.materialize
        )
        phases.current = "worker entry lookup"
        entry = importlib.import_module(SCHEDULER_ENTRY_MODULE).run_scheduler_process
    except SystemExit:
        raise
    except BaseException as exc:
        _report_failure(spec, phases.current, exc)
        raise SystemExit(1) from None
    try:
        entry(
            local_rank=spec.local_rank,
            rank=spec.rank,
            server_args=server_args,
            pipe_writer=spec.pipe_writer,
        )
    except SystemExit:
        raise
    except KeyboardInterrupt:
        raise SystemExit(130) from None
    except BaseException as exc:
        _report_failure(spec, "the scheduler process", exc)
        raise SystemExit(1) from None


def _resolve_entry(entry: str) -> Any:
    module, _, attr = entry.partition(":")
    if not attr:
        module, _, attr = entry.rpartition(".")
    return getattr(importlib.import_module(module), attr)


def bootstrap_http_server_process(
    server_args: ServerArgsPayload,
    server_entry: str = DEFAULT_HTTP_SERVER_ENTRY,
    *,
    parent_pid: int | None = None,
    log_level: str = "info",
) -> None:
    """``multiprocessing`` target of the HTTP child: hooks first, then the server module.

    Never initializes the platform backend (it serves HTTP, not the device). ``server_entry`` is
    ``module:function``; the function is called with the materialized ``ServerArgs``.
    """
    try:
        _arm_parent_death_signal(parent_pid)
        _configure_logging(log_level, "http")
        warn_if_runtime_imported_early()

        from cardcage.diffusion.runtime.platforms.plugins import apply_plugin_hooks, load_plugins

        load_plugins()
        apply_plugin_hooks()
        serve = _resolve_entry(server_entry)
        args = server_args.materialize()
    except SystemExit:
        raise
    except BaseException:
        logger.exception("The diffusion HTTP server process failed to start")
        raise SystemExit(1) from None
    serve(args)
