"""One ``activate()`` for every host: the qualname a platform plugin returns, per host.

A vendor's ``activate()`` is called by whichever runtime is starting: cardcage's selection, or a
host's (SGLang's ``sglang.srt.platforms`` and ``sglang.multimodal_gen.runtime.platforms``), which
resolves the returned name itself and insists on a subclass of *its* base class. So the
template's ``activate()`` returns ``host_qualname(PLATFORM_QUALNAME)``:

* under cardcage (its selection is running the entry point) the name comes back unchanged;
* under a host it becomes the name of that host's adapter (for SGLang, in
  ``cardcage.platforms.hosts.sglang.adapter``; for vLLM, a dotted name in
  ``cardcage.platforms.hosts.vllm.adapter``, the only form vLLM resolves), a subclass of both
  the vendor's class and the host's base, built when the host resolves it;
* with no host running (a test calling ``activate()`` directly) it comes back unchanged.

Import-safe and cheap: it reads ``sys.modules`` and imports nothing, so ``activate()`` stays as
light as the loader needs it to be and a process that SGLang does not host never imports SGLang.
What is specific to one host lives in its room, ``cardcage.platforms.hosts.<host>``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from cardcage.hooks.host import Host, rehearsal

from .hosts import TRIGGERS, announced, room

__all__ = [
    "SGLANG_PLATFORM_MODULES",
    "VLLM_PLATFORM_MODULES",
    "host_qualname",
    "platform_host",
    "register_host_forward",
    "selected_by_sglang",
    "selected_by_vllm",
]

#: SGLang's selection modules; one of them is importing (or imported) when SGLang is the host.
SGLANG_PLATFORM_MODULES = TRIGGERS["sglang"]
#: vLLM's selection module; imported when vLLM is the host.
VLLM_PLATFORM_MODULES = TRIGGERS["vllm"]

_SELECTION_MODULE = "cardcage.platforms.selection"


def platform_host() -> Host | None:
    """Which host is calling the platform plugin code that runs now, if any.

    ``Host.CARDCAGE`` while cardcage's selection runs an entry point (``activate()``, resolving
    and constructing the class; ``cardcage doctor`` included); otherwise the host whose
    selection modules are imported (``Host.SGLANG``); otherwise None. Inside
    ``cardcage.hooks.host.rehearsing`` (``cardcage doctor`` predicting a host's rules), the
    rehearsed host.
    """
    rehearsed = rehearsal()
    if rehearsed is not None:
        return rehearsed.host
    selection = sys.modules.get(_SELECTION_MODULE)
    if selection is not None and selection.activating_plugin() is not None:
        return Host.CARDCAGE
    host = announced()
    return Host(host) if host is not None else None


def host_qualname(qualname: str) -> str:
    """The platform class name to return from ``activate()`` for the host that called it.

    ``qualname`` names the vendor's cardcage platform class (``pkg.mod:Class`` or
    ``pkg.mod.Class``). Under a host the result names its adapter instead (see the module
    docstring); the class itself is not imported until the host resolves the name.
    """
    host = platform_host()
    if host is None or host is Host.CARDCAGE:
        return qualname
    adapted: str = room(host.value).adapter_qualname(qualname)
    return adapted


def _dotted(qualname: str) -> str:
    return qualname.strip().replace(":", ".")


def _rehearsed_choice(chosen: str | None, qualname: str) -> bool:
    return chosen is not None and _dotted(chosen) == _dotted(qualname)


def selected_by_sglang(qualname: str, *, runtime: str = "srt") -> bool:
    """True when SGLang's ``runtime`` ("srt" or "diffusion") selected the class ``qualname``.

    For a general plugin running under SGLang: SGLang's SRT loader runs the general plugins of
    every platform distribution unless ``SGLANG_PLATFORM`` names one, so a plugin whose hooks
    assume its own hardware checks this first (cardcage's loader never runs them). Spelling
    (``a.b:C`` or ``a.b.C``) is ignored; False in a process SGLang does not host (``sglang``
    not imported: nothing is imported then). Under SGLang's SRT loader it answers on every
    release, also where SGLang has not imported its selection module yet (0.5.12). Inside a
    rehearsal of SGLang (``cardcage.hooks.host.rehearsing``), the class the rehearsal names.
    """
    rehearsed = rehearsal()
    if rehearsed is not None and rehearsed.host is Host.SGLANG:
        return _rehearsed_choice(rehearsed.selected, qualname)
    if "sglang" not in sys.modules:
        return False
    answer: bool = room(Host.SGLANG.value).selected(qualname, runtime)
    return answer


def selected_by_vllm(qualname: str) -> bool:
    """True when vLLM's selection picked the class ``qualname`` (its adapter).

    For a general plugin running under vLLM, whose loader runs the general plugins of every
    installed distribution: a plugin whose hooks assume its own hardware checks this first.
    Resolves vLLM's ``current_platform`` if vLLM has not yet; False in a process vLLM does not
    host. Inside a rehearsal of vLLM (``cardcage doctor``), the class doctor predicts vLLM selects.
    """
    rehearsed = rehearsal()
    if rehearsed is not None and rehearsed.host is Host.VLLM:
        return _rehearsed_choice(rehearsed.selected, qualname)
    if "vllm" not in sys.modules:
        return False
    answer: bool = room(Host.VLLM.value).selected(qualname, "vllm")
    return answer


def register_host_forward(op_cls: type, *, fn: Callable[..., Any], platform_key: str) -> bool:
    """Hand a custom-op forward (``CustomOp.register_oot_forward``) to the host's op, if any.

    cardcage's ``CustomOp.register_oot_forward`` calls this after recording the forward for its
    own op class. When a host's diffusion selection picked the platform whose ``init_backend()``
    registers (SGLang: ``cardcage.platforms.hosts.sglang.ops``), the host's op of the same kind
    gets ``fn`` under ``platform_key`` too, and True comes back; a forward the host has no op
    for is reported there with a WARNING. With no host running, or a host that selected some
    other platform, nothing happens (False). Imports nothing unless a host has announced itself.
    """
    host = announced()
    if host is None:
        return False
    register = getattr(room(host), "register_oot_forward", None)
    if register is None:
        return False
    return bool(register(op_cls, fn=fn, platform_key=platform_key))
