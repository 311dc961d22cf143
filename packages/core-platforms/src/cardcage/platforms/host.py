"""One ``activate()`` for two hosts: the qualname a platform plugin returns, per host.

A vendor's ``activate()`` is called by whichever runtime is starting: cardcage's selection, or
SGLang 0.5.23's (``sglang.srt.platforms`` and ``sglang.multimodal_gen.runtime.platforms``), which
resolve the returned name themselves and insist on a subclass of *their* base class. So the
template's ``activate()`` returns ``host_qualname(PLATFORM_QUALNAME)``:

* under cardcage (its selection is running the entry point) the name comes back unchanged;
* under SGLang it becomes the name of a host-native adapter in
  ``cardcage.platforms.sglang_adapters``, a subclass of both the vendor's class and SGLang's base,
  built when SGLang resolves it;
* with no host running (a test calling ``activate()`` directly) it comes back unchanged.

Import-safe and cheap: it reads ``sys.modules`` and imports nothing, so ``activate()`` stays as
light as the loader needs it to be and a process that SGLang does not host never imports SGLang.
"""

from __future__ import annotations

import sys

from cardcage.hooks.host import Host

__all__ = ["SGLANG_PLATFORM_MODULES", "host_qualname", "platform_host", "selected_by_sglang"]

#: SGLang's selection modules; one of them is importing (or imported) when SGLang is the host.
SGLANG_PLATFORM_MODULES = ("sglang.srt.platforms", "sglang.multimodal_gen.runtime.platforms")
_SGLANG_RUNTIME_MODULES = dict(zip(("srt", "diffusion"), SGLANG_PLATFORM_MODULES, strict=True))

_SELECTION_MODULE = "cardcage.platforms.selection"


def platform_host() -> Host | None:
    """Which host is calling the platform plugin code that runs now, if any.

    ``Host.CARDCAGE`` while cardcage's selection runs an entry point (``activate()``, resolving
    and constructing the class; ``cardcage doctor`` included); otherwise ``Host.SGLANG`` when one
    of SGLang's selection modules is imported; otherwise None.
    """
    selection = sys.modules.get(_SELECTION_MODULE)
    if selection is not None and selection.activating_plugin() is not None:
        return Host.CARDCAGE
    if any(name in sys.modules for name in SGLANG_PLATFORM_MODULES):
        return Host.SGLANG
    return None


def host_qualname(qualname: str) -> str:
    """The platform class name to return from ``activate()`` for the host that called it.

    ``qualname`` names the vendor's cardcage platform class (``pkg.mod:Class`` or
    ``pkg.mod.Class``). Under SGLang the result names its adapter instead (see the module
    docstring); the class itself is not imported until the host resolves the name.
    """
    if platform_host() is not Host.SGLANG:
        return qualname
    from .sglang_adapters import adapter_qualname

    return adapter_qualname(qualname)


def selected_by_sglang(qualname: str, *, runtime: str = "srt") -> bool:
    """True when SGLang's ``runtime`` ("srt" or "diffusion") selected the class ``qualname``.

    For a general plugin running under SGLang: SGLang's SRT loader runs the general plugins of
    every platform distribution unless ``SGLANG_PLATFORM`` names one, so a plugin whose hooks
    assume its own hardware checks this first (cardcage's loader never runs them). Resolves
    SGLang's ``current_platform`` (SGLang has already done so by the time it loads plugins) and
    compares the vendor class behind its adapter; spelling (``a.b:C`` or ``a.b.C``) is ignored.
    """
    module_name = _SGLANG_RUNTIME_MODULES[runtime]
    if module_name not in sys.modules:
        return False
    platform = sys.modules[module_name].current_platform
    from .sglang_adapters import adapted_class

    vendor = adapted_class(type(platform))
    if vendor is None:
        return False
    wanted = qualname.strip().replace(":", ".")
    return f"{vendor.__module__}.{vendor.__qualname__}" == wanted
