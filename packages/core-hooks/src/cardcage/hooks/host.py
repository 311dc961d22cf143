"""Which runtime is hosting the plugin code that runs now: cardcage's, SGLang's or vLLM's.

A vendor distribution built on cardcage is a plugin for three hosts at once (DESIGN §8):
cardcage's own runtimes, SGLang, whose selection and loader call the same entry points, and
vLLM 0.33, whose loader calls the distribution's ``vllm.*`` entry points. The hosts announce
themselves differently, and this module reads every signal without importing
anything: cardcage's loader sets its plugin-source context variable around each plugin's import
and ``register()``; every other host is asked through its room in ``cardcage.hooks.hosts``, and
only once that host's own module is already in ``sys.modules``: a process that never imported
SGLang never pays for it.

Import-safe and stdlib-only, like the rest of core-hooks.
"""

from __future__ import annotations

import contextlib
import contextvars
import enum
from typing import TYPE_CHECKING, Any, NamedTuple

from ._model import _current_plugin_source
from .hosts import hosting_source

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from typing import TypeVar

    # Only the checker needs it: a TypeVar with a bound costs a compile() at import.
    _F = TypeVar("_F", bound=Callable[..., Any])


__all__ = [
    "Host",
    "Rehearsal",
    "general_plugin",
    "plugin_host",
    "rehearsal",
    "rehearsing",
    "sglang_plugin_source",
]


# cardcage's side of the signal is ``_model._current_plugin_source``, set by
# ``registry.plugin_source()`` around each plugin's import and callback.


class Host(enum.Enum):
    """The runtime whose loader or selection is calling plugin code."""

    CARDCAGE = "cardcage"
    SGLANG = "sglang"
    VLLM = "vllm"


class Rehearsal(NamedTuple):
    """``cardcage doctor`` calling plugin code as a host would, where that host is not running.

    ``selected`` is the platform class (``module:Class`` or dotted) the rehearsed host is
    predicted to select, or None; ``selected_by_vllm()`` and ``selected_by_sglang()`` (of
    ``cardcage.platforms.host``) answer from it when the rehearsed host is theirs. A named tuple.
    """

    host: Host
    selected: str | None = None


_rehearsal: contextvars.ContextVar[Rehearsal | None] = contextvars.ContextVar(
    "cardcage_host_rehearsal", default=None
)


@contextlib.contextmanager
def rehearsing(host: Host, *, selected: str | None = None) -> Iterator[Rehearsal]:
    """Inside the block, plugin code learns that ``host`` runs it (``plugin_host()``,
    ``cardcage.platforms.host.platform_host()``), although that host is not running.

    How doctor predicts what a host does with a plugin whose code branches on its host (vLLM's
    rules, without vLLM): ``activate()`` answers the name it gives that host, ``register()``
    registers the hooks it registers there. Hooks registered inside are kept with the source
    cardcage's ``plugin_source()`` gives them, and never handed to a host or applied.
    """
    rehearsed = Rehearsal(host, selected)
    token = _rehearsal.set(rehearsed)
    try:
        yield rehearsed
    finally:
        _rehearsal.reset(token)


def rehearsal() -> Rehearsal | None:
    """The host rehearsal running now (``rehearsing``), or None."""
    return _rehearsal.get()


def plugin_host() -> Host | None:
    """Which host's general-plugin loader is running the current plugin callback.

    ``Host.CARDCAGE`` inside cardcage's loader (``load_plugins``, ``register_plugins``),
    ``Host.SGLANG`` inside SGLang's (SRT ``load_plugins()`` or the diffusion one), ``Host.VLLM``
    inside vLLM's (``vllm.plugins.load_general_plugins()``), None when no
    loader is running a plugin (a test or a runtime registering hooks directly). A plugin's
    ``register()`` uses it to pick the targets of the host that runs it; ``HookRegistry.register``
    uses it to hand hooks to SGLang's registry when SGLang is the host. Inside ``rehearsing``
    (``cardcage doctor``), the rehearsed host.
    """
    rehearsed = _rehearsal.get()
    if rehearsed is not None:
        return rehearsed.host
    if _current_plugin_source.get() is not None:
        return Host.CARDCAGE
    hosting = hosting_source()
    return Host(hosting[0]) if hosting is not None else None


def sglang_plugin_source() -> Any | None:
    """The ``HookSource`` of the plugin SGLang's loader is running now, or None (see
    ``cardcage.hooks.hosts.sglang``); nothing is imported when SGLang is not."""
    hosting = hosting_source()
    return hosting[1] if hosting is not None and hosting[0] == Host.SGLANG.value else None


def general_plugin(register: _F) -> _F:
    """Give a general plugin's ``register()`` cardcage's failure policy under every host.

    cardcage's loader and SGLang's catch a raising ``register()`` themselves; vLLM's does not
    (start-up aborts, later plugins never run). Under a host whose room offers ``run_plugin``
    (vLLM, ``cardcage.hooks.hosts.vllm``) the decorated function runs through it: a third-party
    plugin's failure is logged and its hooks withdrawn, a failure of the selected platform's own
    plugin raises ``PluginLoadError``. Elsewhere the call goes straight through.
    """

    def run(*args: Any, **kwargs: Any) -> Any:
        if _current_plugin_source.get() is None:
            hosting = hosting_source()
            if hosting is not None:
                from .hosts import room

                runner = getattr(room(hosting[0]), "run_plugin", None)
                if runner is not None:
                    return runner(lambda: register(*args, **kwargs), hosting[1])
        return register(*args, **kwargs)

    for name in ("__module__", "__name__", "__qualname__", "__doc__"):
        setattr(run, name, getattr(register, name, None))
    run.__wrapped__ = register  # type: ignore[attr-defined]
    return run  # type: ignore[return-value]
