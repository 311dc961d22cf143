"""One room per host: everything cardcage knows about a host runtime's platform selection.

A vendor's ``activate()`` is called by whichever runtime is starting: cardcage's selection, or a
host's (SGLang's), which resolves the returned name itself and insists on a subclass of *its*
base class. What that takes differs per host: the adapter class built on the host's base, the
conversions of cardcage's types into the host's, the answer to "did this host select my
platform?". Each host keeps all of it in one subpackage here (``hosts.sglang``, ``hosts.vllm``),
and offers the same small interface from that subpackage's ``__init__``:

* ``SELECTION_MODULES``: runtime name (``"srt"``, ``"diffusion"``; vLLM's one is ``"vllm"``) -> the
  host module that runs
  that runtime's selection; one of them in ``sys.modules`` means the host may be selecting;
* ``adapter_qualname(qualname) -> str``: the name the host resolves to the adapter of the vendor
  class ``qualname`` names;
* ``selected(qualname, runtime) -> bool``: whether the host's selection of ``runtime`` picked
  that class;
* optionally ``register_oot_forward(op_cls, *, fn, platform_key) -> bool``: hand a custom-op
  kernel registered with cardcage's ``CustomOp`` to the host's op of the same kind
  (``cardcage.platforms.host.register_host_forward`` asks the announced host's room).

A room whose host takes kernels (``cardcage.platforms.kernels``) offers
``kernel_targets(op)`` (where a kernel for the op runs, per release; data only) and
``kernel_in_effect(row)`` (asked in the host's own process).

A room may also hold a ``diagnosis`` module: what the ``cardcage`` commands say about that host
(``diagnosis(host)`` below). Its optional functions are ``release_findings`` and
``runtime_hosts`` (the installed release, read from metadata:
``cardcage.platforms.diagnostics.host_releases``), and, for a host that selects a runtime's
platform by its own rules (its policy's ``host``), the functions the commands call to explain
that runtime (``cardcage.platforms.diagnostics._common.hosted``).

``TRIGGERS`` lists, per host, the modules whose presence announces it, so the facade
(``cardcage.platforms.host``) can tell which host runs without importing any room; a room is
imported only for a host that has announced itself, and never imports the host on its own.
Adding a host is adding a subpackage and a line here.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from types import ModuleType

__all__ = ["ROOMS", "TRIGGERS", "announced", "diagnosis", "room"]

#: host name (``cardcage.hooks.host.Host`` value) -> the subpackage that holds its room.
ROOMS: dict[str, str] = {
    "sglang": "cardcage.platforms.hosts.sglang",
    "vllm": "cardcage.platforms.hosts.vllm",
}
#: host name -> its selection modules (SRT, diffusion); any of them imported announces the host.
TRIGGERS: dict[str, tuple[str, ...]] = {
    "sglang": ("sglang.srt.platforms", "sglang.multimodal_gen.runtime.platforms"),
    "vllm": ("vllm.platforms",),
}


def room(host: str) -> ModuleType:
    """The room of ``host`` (imported on first use)."""
    return importlib.import_module(ROOMS[host])


def diagnosis(host: str) -> ModuleType | None:
    """The ``diagnosis`` module of ``host``'s room, or None for a room without one.

    Imported for the ``cardcage`` commands only; a diagnosis reads metadata and imports no host.
    """
    name = f"{ROOMS[host]}.diagnosis"
    if importlib.util.find_spec(name) is None:
        return None
    return importlib.import_module(name)


def announced() -> str | None:
    """The first host whose selection modules are imported in this process, or None."""
    for host, modules in TRIGGERS.items():
        if any(name in sys.modules for name in modules):
            return host
    return None
