"""The messages a diffusion worker and its launcher exchange over the worker's pipe.

One duplex ``multiprocessing`` connection per worker carries, in order:

* worker -> launcher, once: ``Ready`` (bootstrap and worker initialization finished) or
  ``WorkerFailure`` (something raised before that; the worker then exits);
* launcher -> worker, any number of times: ``Request``; the worker answers each with one
  ``Response`` carrying the same ``request_id`` (a value, or a ``WorkerFailure``). Before it,
  rank 0 sends one ``Progress`` with that id after each denoising step of a ``generate``
  request (informational: a launcher may ignore them, a replaced worker need not send any);
* launcher -> rank 0, while a request runs: ``Cancel`` naming that request's id; rank 0 reads
  it between denoising steps and the ranks stop together (see ``gpu_worker``). A ``Cancel`` for
  a request that already finished is ignored;
* launcher -> worker, last: ``Shutdown``; the worker returns from ``run_scheduler_process``.
  End of file on the pipe (the launcher is gone) means the same.

A worker may also send a ``WorkerFailure`` after ``Ready``, outside any ``Response``: the group
can no longer serve (a rank died or raised in the middle of a distributed request) and the
launcher shuts every worker down.

A plugin that REPLACEs ``run_scheduler_process`` keeps this contract: send ``Ready`` once its
worker is usable, answer ``Request`` messages, return on ``Shutdown``.

Import-neutral: stdlib only. Workers unpickle these messages, and a spawned child imports this
module before its platform is initialized, so it must never import the runtime.
"""

from __future__ import annotations

import os
import traceback
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Cancel", "Progress", "Ready", "Request", "Response", "Shutdown", "WorkerFailure"]


@dataclass(frozen=True, slots=True)
class Ready:
    """The worker finished bootstrap and initialization; ``info`` is plain data for the launcher
    (pid, phase timings, whatever the worker wants to report)."""

    rank: int
    info: dict[str, Any] = field(default_factory=dict)


def _plain(value: object) -> object:
    """``value`` when it is a plain scalar, else its ``repr`` (details must unpickle anywhere)."""
    return value if isinstance(value, str | int | float | bool | type(None)) else repr(value)


@dataclass(frozen=True, slots=True)
class WorkerFailure:
    """An exception raised in a worker, as text: exceptions do not reliably survive pickling.

    ``details`` carries the fields of an argument error (``category``, ``field``, ``value``,
    ``expected``) as plain data, so the launcher side can raise the same typed error again.
    ``user_mistake`` says the exception is one the runtime raises for what the user passed (a
    model path or directory, an argument): its message names the fix and its traceback holds
    only the runtime's own frames, so the command line leaves the traceback to ``debug``.
    """

    rank: int
    pid: int
    phase: str
    error_type: str
    message: str
    traceback: str
    details: dict[str, Any] | None = None
    user_mistake: bool = False

    @classmethod
    def from_exception(cls, rank: int, phase: str, exc: BaseException) -> WorkerFailure:
        kind = type(exc)
        name = (
            kind.__qualname__
            if kind.__module__ == "builtins"
            else f"{kind.__module__}.{kind.__qualname__}"
        )
        return cls(
            rank=rank,
            pid=os.getpid(),
            phase=phase,
            error_type=name,
            message=str(exc),
            traceback="".join(traceback.format_exception(exc)),
            details=_argument_details(exc),
            user_mistake=_is_user_mistake(exc),
        )


def _is_user_mistake(exc: BaseException) -> bool:
    # Imported here for the reason _argument_details gives; both modules are import-safe.
    from cardcage.diffusion.errors import InvalidArgumentError
    from cardcage.diffusion.runtime.models.errors import ModelError

    return isinstance(exc, InvalidArgumentError | ModelError)


def _argument_details(exc: BaseException) -> dict[str, Any] | None:
    # Imported here, not at module scope: this module stays stdlib-only (see the docstring), and
    # a worker that raised an argument error has imported the errors module already.
    from cardcage.diffusion.errors import InvalidArgumentError, InvalidSamplingParamsError

    if not isinstance(exc, InvalidArgumentError):
        return None
    category = (
        "invalid_sampling_params"
        if isinstance(exc, InvalidSamplingParamsError)
        else "invalid_argument"
    )
    return {
        "category": category,
        "field": exc.field,
        "value": _plain(exc.value),
        "expected": exc.expected,
    }


@dataclass(frozen=True, slots=True)
class Request:
    """One call to the worker: ``method`` names what to do, ``payload`` is its argument."""

    request_id: int
    method: str
    payload: Any = None


@dataclass(frozen=True, slots=True)
class Response:
    """The answer to the ``Request`` with the same id: ``value``, or ``failure`` if it raised."""

    request_id: int
    value: Any = None
    failure: WorkerFailure | None = None


@dataclass(frozen=True, slots=True)
class Progress:
    """Rank 0 finished denoising step ``step`` of ``total`` (1-based) of the request in flight."""

    request_id: int
    step: int
    total: int


@dataclass(frozen=True, slots=True)
class Shutdown:
    """Ask the worker to return from its loop; it answers nothing and exits."""


@dataclass(frozen=True, slots=True)
class Cancel:
    """Stop the running ``Request`` with this ``request_id`` at its next denoising step; it is
    answered with a ``RequestCancelledError`` failure (the worker keeps serving)."""

    request_id: int
