"""One room per host: everything cardcage knows about a host runtime's general-plugin loader.

A vendor distribution built on cardcage is a plugin for several hosts at once (DESIGN §8):
cardcage's own runtimes and SGLang, whose loader calls the same entry points. What differs per
host (how its loader announces the plugin it is running, where a hook registered from inside it
has to go) lives in one module per host under this package, behind the same two functions:

* ``plugin_source() -> object | None``: the host's own record of the plugin its loader is running
  now (SGLang's ``HookSource``), or None;
* ``register(registry_qualname, target, hook, hook_type_name, source)``: hand a hook to the host's
  registry, attributed to ``source``.

A host with no hook registry of its own (vLLM) sets ``KEEPS_HOOKS = True`` instead and offers:

* ``adopt(registry, source)``: cardcage keeps the hook in the registry it was registered with,
  attributed to ``source`` (a cardcage ``HookSource``), and the room applies it;
* ``run_plugin(register, source)``: optional; calls a ``register()`` decorated with
  ``cardcage.hooks.host.general_plugin`` under cardcage's failure policy, where the host has none.

A room is imported only once its host has announced itself: ``TRIGGERS`` names, per host, the
host module whose presence in ``sys.modules`` is the announcement, so a process that no host
runs never imports a room, let alone the host. Adding a host is adding a module here and a line
to ``TRIGGERS``. Stdlib only, like the rest of core-hooks.
"""

from __future__ import annotations

import importlib
import sys
from types import ModuleType
from typing import Any

__all__ = ["ROOMS", "TRIGGERS", "hosting_source", "room"]

#: host name (``cardcage.hooks.host.Host`` value) -> the module that holds its room.
ROOMS: dict[str, str] = {
    "sglang": "cardcage.hooks.hosts.sglang",
    "vllm": "cardcage.hooks.hosts.vllm",
}
#: host name -> the host's module whose presence in ``sys.modules`` means it may be loading plugins.
TRIGGERS: dict[str, str] = {
    "sglang": "sglang.srt.plugins.hook_registry",
    "vllm": "vllm.plugins",
}


def room(host: str) -> ModuleType:
    """The room module of ``host`` (imported on first use)."""
    return importlib.import_module(ROOMS[host])


def hosting_source() -> tuple[str, Any] | None:
    """``(host, its plugin source)`` for the host whose loader runs a plugin now, or None.

    Only hosts whose trigger module is already imported are asked; nothing is imported for a
    host that has not announced itself.
    """
    for host, trigger in TRIGGERS.items():
        if trigger not in sys.modules:
            continue
        source = room(host).plugin_source()
        if source is not None:
            return host, source
    return None
