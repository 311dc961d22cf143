"""Errors of the diffusion runtime's processes, arguments and facade.

Each derives from ``cardcage.hooks.errors.CardcageError`` and from the builtin SGLang raises in
the same place (``TypeError`` for a bootstrap payload that holds the wrong thing, ``ValueError``
for a bad argument, ``RuntimeError`` for a worker that failed), carries the fields a caller
needs (rank, pid, exit code, the field name) and says what to do.

Import-safe: stdlib and ``cardcage.hooks.errors`` only; worker processes import it before their
platform is initialized.
"""

from __future__ import annotations

import signal

from cardcage.hooks.errors import CardcageError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Self

__all__ = [
    "WORKER_TRACEBACK_HEADER",
    "BootstrapPayloadError",
    "CommunicatorDeviceError",
    "CommunicatorError",
    "CommunicatorNotFoundError",
    "DiffusionError",
    "InvalidArgumentError",
    "InvalidCommunicatorError",
    "InvalidPipelineConfigError",
    "InvalidSamplingParamsError",
    "InvalidServerArgsError",
    "LauncherClosedError",
    "PipelineUnavailableError",
    "RequestCancelledError",
    "UnknownRequestError",
    "WorkerDiedError",
    "WrongRankError",
    "WorkerError",
    "WorkerRequestError",
    "WorkerFailedError",
    "WorkerTimeoutError",
    "describe_exit_code",
]


class DiffusionError(CardcageError):
    """Root of the errors raised by ``cardcage.diffusion`` outside platform selection."""


class BootstrapPayloadError(DiffusionError, TypeError):
    """A ``ServerArgsPayload`` was built from, or unpickled into, something else than ServerArgs."""


class InvalidArgumentError(DiffusionError, ValueError):
    """Base of the argument errors: names the offending field and the value it held."""

    owner = "arguments"

    def __init__(
        self, field: str, value: object, expected: str, *, message: str | None = None
    ) -> None:
        self.field = field
        self.value = value
        self.expected = expected
        super().__init__(
            message
            or f"{self.owner}.{field}={value!r} is not valid: expected {expected}. "
            f"Pass a valid {field}= or leave it at its default."
        )

    @classmethod
    def unknown_field(cls, field: str, value: object, known: Iterable[str]) -> Self:
        """The error for a key that names no field (a typo, or a version mismatch)."""
        names = ", ".join(sorted(known))
        return cls(
            field,
            value,
            f"one of the fields {names}",
            message=f"{cls.owner} has no field {field!r} (given {value!r}). Known fields: "
            f"{names}. Fix the name, or run the same cardcage version everywhere.",
        )


class InvalidServerArgsError(InvalidArgumentError):
    """A ``ServerArgs`` field holds a value the runtime cannot use."""

    owner = "ServerArgs"


class InvalidSamplingParamsError(InvalidArgumentError):
    """A ``SamplingParams`` field holds a value the pipeline rejects."""

    owner = "SamplingParams"


class InvalidPipelineConfigError(InvalidArgumentError):
    """A ``PipelineConfig`` field holds a value the pipeline rejects."""

    owner = "PipelineConfig"


class PipelineUnavailableError(DiffusionError, RuntimeError):
    """A worker was asked to generate but has no pipeline (e.g. a plugin REPLACEd
    ``GPUWorker.init_device_and_model`` without building one)."""


class UnknownRequestError(DiffusionError, ValueError):
    """A worker was asked for a request method it does not serve."""

    def __init__(self, method: str, known: tuple[str, ...]) -> None:
        self.method = method
        self.known = known
        super().__init__(
            f"Diffusion workers do not serve {method!r}; known methods: "
            + ", ".join(repr(m) for m in known)
            + "."
        )


class WrongRankError(DiffusionError, ValueError):
    """A request only rank 0 serves was sent to another rank."""

    def __init__(self, method: str, rank: int) -> None:
        self.method = method
        self.rank = rank
        super().__init__(
            f"Rank {rank} does not take {method!r} requests: it follows rank 0, which broadcasts "
            f"every request to the other ranks. Send {method!r} to rank 0."
        )


class CommunicatorError(DiffusionError):
    """Base of the errors about a platform's all-to-all communicator."""


class _PlatformCommunicatorError(CommunicatorError):
    """The communicator a platform names cannot be used; names the platform, its distribution
    (when it is out of tree) and the fix."""

    def __init__(
        self, problem: str, *, platform: str, dist_name: str | None, qualname: object
    ) -> None:
        self.platform = platform
        self.dist_name = dist_name
        self.qualname = qualname
        source = f" (distribution {dist_name})" if dist_name else ""
        super().__init__(
            f"The diffusion platform {platform}{source} names {qualname!r} as its all-to-all "
            f"communicator, but {problem}. Fix {platform}.get_all_to_all_communicator_cls() to "
            "return the qualified name ('package.module.Class') of a DeviceCommunicatorBase "
            "subclass, e.g. 'cardcage.diffusion.runtime.distributed.device_communicators."
            "cpu_communicator.CpuCommunicator' for a gloo group."
        )


class InvalidCommunicatorError(_PlatformCommunicatorError, TypeError):
    """A platform's all-to-all communicator is not a ``DeviceCommunicatorBase`` subclass (or its
    answer is not a qualified name)."""


class CommunicatorNotFoundError(_PlatformCommunicatorError, ImportError):
    """A platform's all-to-all communicator qualname does not import."""


class CommunicatorDeviceError(CommunicatorError, ValueError):
    """A communicator was built for, or given, a tensor on a device it cannot exchange."""


class LauncherClosedError(DiffusionError, RuntimeError):
    """A request was sent to a worker group after it was shut down."""


class RequestCancelledError(DiffusionError, RuntimeError):
    """A generation request was cancelled (``DiffGenerator.cancel``, a client that went away, a
    deadline) and every worker stopped it at its next denoising step; the workers keep serving.

    ``request_id`` is the id the request was sent with; ``step`` / ``total`` say where it
    stopped (``step`` is None when it was cancelled before its first step).
    """

    def __init__(
        self, request_id: str | None, *, step: int | None = None, total: int | None = None
    ) -> None:
        self.request_id = request_id
        self.step = step
        self.total = total
        where = "before its first step" if step is None else f"after step {step}/{total}"
        super().__init__(
            f"Request {request_id or '(no id)'} was cancelled {where}; the workers are free "
            "for the next request."
        )


def describe_exit_code(exitcode: int | None) -> str:
    """``exit code 1``, ``killed by signal SIGKILL`` or ``still running``."""
    if exitcode is None:
        return "still running"
    if exitcode < 0:
        try:
            return f"killed by signal {signal.Signals(-exitcode).name}"
        except ValueError:
            return f"killed by signal {-exitcode}"
    return f"exit code {exitcode}"


#: The line between a worker error's text and the worker's traceback, when the text has one.
WORKER_TRACEBACK_HEADER = "--- worker traceback ---"


class WorkerError(DiffusionError, RuntimeError):
    """Base of the errors about one worker process (its rank and pid are fields)."""

    def __init__(self, message: str, *, rank: int, pid: int | None) -> None:
        self.rank = rank
        self.pid = pid
        super().__init__(message)


class WorkerFailedError(WorkerError):
    """A worker process raised outside a request (bootstrap, worker initialization, its loop).

    Carries the phase, the original exception's type and text, and the worker's traceback. The
    message ends with that traceback, unless ``user_mistake``: the worker raised one of the
    runtime's errors about what the user passed (a model directory, an argument), whose text
    already names the fix and whose frames are only the runtime's own; it stays in
    ``traceback`` (the command line shows it with ``--log-level debug``).
    """

    def __init__(
        self,
        *,
        rank: int,
        pid: int | None,
        phase: str,
        error_type: str,
        error_message: str,
        traceback: str,
        user_mistake: bool = False,
    ) -> None:
        self.phase = phase
        self.error_type = error_type
        self.error_message = error_message
        self.traceback = traceback
        self.user_mistake = user_mistake
        failed = f"Diffusion worker rank {rank} (pid {pid}) failed during {phase}: "
        if user_mistake:
            message = (
                f"{failed}{error_type.rsplit('.', 1)[-1]}: {error_message.rstrip('.')}. Every "
                "worker was shut down; fix that and launch again."
            )
        else:
            message = (
                f"{failed}{error_type}: {error_message.rstrip('.')}. Every worker was shut down; "
                "fix the cause shown in the worker traceback below and launch again.\n"
                f"{WORKER_TRACEBACK_HEADER}\n{traceback.rstrip()}"
            )
        super().__init__(message, rank=rank, pid=pid)


class WorkerRequestError(WorkerError):
    """A worker raised while serving one request; the worker itself keeps serving.

    ``details`` holds the fields of an argument error raised in the worker (``category``,
    ``field``, ``value``, ``expected``), or None.
    """

    def __init__(
        self,
        *,
        rank: int,
        pid: int | None,
        method: str,
        error_type: str,
        error_message: str,
        traceback: str,
        details: dict[str, object] | None = None,
        user_mistake: bool = False,
    ) -> None:
        self.method = method
        self.error_type = error_type
        self.error_message = error_message
        self.traceback = traceback
        self.details = details
        self.user_mistake = user_mistake
        failed = f"Diffusion worker rank {rank} (pid {pid}) failed to serve {method!r}: "
        if user_mistake:  # as for WorkerFailedError: the text names the fix, no traceback
            message = f"{failed}{error_type.rsplit('.', 1)[-1]}: {error_message}"
        else:
            message = (
                f"{failed}{error_type}: {error_message}\n{WORKER_TRACEBACK_HEADER}\n"
                f"{traceback.rstrip()}"
            )
        super().__init__(message, rank=rank, pid=pid)


class WorkerDiedError(WorkerError):
    """A worker process exited while the launcher was waiting for it (startup or a request)."""

    def __init__(self, *, rank: int, pid: int | None, exitcode: int | None, during: str) -> None:
        self.exitcode = exitcode
        self.during = during
        super().__init__(
            f"Diffusion worker rank {rank} (pid {pid}) died during {during} "
            f"({describe_exit_code(exitcode)}). The worker group was shut down; check the "
            "worker's log above (an out-of-memory kill leaves no traceback) and launch again.",
            rank=rank,
            pid=pid,
        )


class WorkerTimeoutError(WorkerError, TimeoutError):
    """A worker did not answer within the timeout; the group is left running."""

    def __init__(self, *, rank: int, pid: int | None, during: str, timeout: float) -> None:
        self.during = during
        self.timeout = timeout
        super().__init__(
            f"Diffusion worker rank {rank} (pid {pid}) did not answer within {timeout:g} s "
            f"during {during}. Raise the timeout, or shut the group down and check the worker.",
            rank=rank,
            pid=pid,
        )
