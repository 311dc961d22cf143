"""SGLang's room in core-platforms: its selection modules, its adapters, its types.

* ``adapter``: the SGLang-native subclass of a vendor's cardcage platform class, built when
  SGLang resolves the name ``activate()`` returned;
* ``types``: the answers SGLang's callers expect in SGLang's own types (a device string where
  cardcage's contract returns a ``torch.device``, SGLang's ``DeviceCapability``);
* ``identity``: SGLang's identity predicates answered as the built-in a vendor declares it
  behaves as (``behaves_as``), while the adapter stays out of tree;
* ``ops``: custom-op forwards registered with cardcage's ``CustomOp.register_oot_forward``,
  handed to SGLang's diffusion ops of the same kind (``register_oot_forward`` below);
* ``diagnosis``: what ``cardcage doctor`` and ``cardcage platform`` say about the installed
  SGLang release (``releases``), read from metadata.

Importing this package imports neither SGLang nor a vendor class.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from typing import Any

from cardcage.platforms.hosts import TRIGGERS

__all__ = [
    "LOADER_MODULES",
    "SELECTION_MODULES",
    "adapter_qualname",
    "kernel_in_effect",
    "kernel_targets",
    "register_oot_forward",
    "selected",
]

#: runtime name -> SGLang's module that runs its platform selection.
SELECTION_MODULES: dict[str, str] = dict(zip(("srt", "diffusion"), TRIGGERS["sglang"], strict=True))
#: runtime name -> SGLang's general-plugin loader that may run before the runtime's selection
#: module is imported (0.5.12's ``import sglang`` leaves ``sglang.srt.platforms`` for later). The
#: diffusion loader lives inside its selection package, so it never does.
LOADER_MODULES: dict[str, str] = {"srt": "sglang.srt.plugins"}


def adapter_qualname(qualname: str) -> str:
    """The name SGLang resolves to the adapter of the vendor class ``qualname`` names."""
    from .adapter import adapter_qualname as encode

    return encode(qualname)


def selected(qualname: str, runtime: str) -> bool:
    """True when SGLang's ``runtime`` selection picked the vendor class ``qualname``.

    Resolves SGLang's ``current_platform`` (SGLang has done so by the time it loads plugins) and
    compares the vendor class behind its adapter; spelling (``a.b:C`` or ``a.b.C``) is ignored.
    False while SGLang's selection module for ``runtime`` is not imported, unless SGLang's loader
    for ``runtime`` is: SGLang is then loading plugins and selects its platform anyway, so its
    selection module is imported here (SGLang 0.5.12 runs general plugins before that).
    """
    module = sys.modules.get(SELECTION_MODULES[runtime])
    if module is None:
        loader = LOADER_MODULES.get(runtime)
        if loader is None or loader not in sys.modules:
            return False
        module = importlib.import_module(SELECTION_MODULES[runtime])
    from .adapter import adapted_class

    vendor = adapted_class(type(module.current_platform))
    if vendor is None:
        return False
    wanted = qualname.strip().replace(":", ".")
    return f"{vendor.__module__}.{vendor.__qualname__}" == wanted


def kernel_targets(op: str) -> list[dict[str, str]]:
    """Where a kernel for cardcage's op ``op`` runs in SGLang (``srt_kernels``); data only."""
    from .srt_kernels import kernel_targets as targets

    return targets(op)


def kernel_in_effect(row: Any) -> bool:
    """Whether SGLang's op still dispatches to an installed kernel (an SRT op: ``srt_kernels``;
    a diffusion op: ``ops``); asked in SGLang's own process by
    ``cardcage.platforms.kernels.in_effect()``."""
    if str(row.host_op).startswith("sglang.multimodal_gen."):
        from .ops import kernel_in_effect as diffusion_check

        return diffusion_check(row)
    from .srt_kernels import kernel_in_effect as check

    return check(row)


def register_oot_forward(op_cls: type, *, fn: Callable[..., Any], platform_key: str) -> bool:
    """Hand a cardcage custom-op forward to SGLang's diffusion op of the same kind.

    True when SGLang's diffusion selection picked one of our adapters and its op of that kind
    now runs ``fn``; False otherwise (a forward SGLang cannot run is reported; see ``ops``).
    """
    from .ops import register_oot_forward as register

    return register(op_cls, fn=fn, platform_key=platform_key)
