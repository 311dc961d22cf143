"""vLLM's room in core-platforms: its selection module and its adapters.

* ``adapter``: the vLLM-native subclass of a vendor's cardcage platform class (an instance of
  ``vllm.platforms.interface.Platform`` with vLLM's ``PlatformEnum.OOT``), built when vLLM
  resolves the dotted name ``activate()`` returned;
* ``identity``: what a declared ``behaves_as`` means under vLLM (the built-in base class, the
  predicates);
* ``worker``: the worker subclass that runs the vendor's ``init_backend()`` in vLLM's worker;
* ``kernels``: the vendor's kernels in vLLM's ops (``CustomOp.register_oot``), installed right
  after ``init_backend()``;
* ``releases``: the vLLM releases cardcage supports and what differs between them, as data;
* ``rules``: vLLM's selection and loader rules as a predictor, for where vLLM is not running;
* ``diagnosis``: what the ``cardcage`` commands say about the vLLM runtime, by vLLM's rules.

vLLM runs one selection (``vllm.platforms``), fed by the ``vllm.platform_plugins`` group; the
vendor's SRT platform class is what it adapts, since the device layer is what the two contracts
share. Importing this package imports neither vLLM nor a vendor class.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

from cardcage.platforms.hosts import TRIGGERS

__all__ = [
    "SELECTION_MODULES",
    "adapter_qualname",
    "kernel_in_effect",
    "kernel_targets",
    "selected",
]

#: runtime name -> vLLM's module that runs its platform selection (vLLM has one).
SELECTION_MODULES: dict[str, str] = {"vllm": TRIGGERS["vllm"][0]}


def adapter_qualname(qualname: str) -> str:
    """The dotted name vLLM resolves to the adapter of the vendor class ``qualname`` names."""
    from .adapter import adapter_qualname as encode

    return encode(qualname)


def selected(qualname: str, runtime: str = "vllm") -> bool:
    """True when vLLM's selection picked the vendor class ``qualname`` (spelling ignored).

    Resolves vLLM's ``current_platform`` (vLLM resolves it on first use anyway), importing
    ``vllm.platforms`` if vLLM itself is imported but its selection module is not yet (vLLM's
    general-plugin loader runs before it); False in a process that never imported vLLM.
    """
    name = SELECTION_MODULES[runtime]
    module = sys.modules.get(name)
    if module is None:
        if "vllm" not in sys.modules:
            return False
        module = importlib.import_module(name)
    from .adapter import adapted_class

    vendor = adapted_class(type(module.current_platform))
    if vendor is None:
        return False
    wanted = qualname.strip().replace(":", ".")
    return f"{vendor.__module__}.{vendor.__qualname__}" == wanted


def kernel_targets(op: str) -> list[dict[str, str]]:
    """Where a kernel for cardcage's op ``op`` runs in vLLM (``kernels``); data only: vLLM is
    not imported, so ``cardcage hooks`` and ``doctor`` list it where no vLLM runs."""
    from .kernels import kernel_targets as targets

    return targets(op)


def kernel_in_effect(row: Any) -> bool:
    """Whether vLLM still builds an installed kernel's op as cardcage's replacement (``kernels``);
    asked in vLLM's own process by ``cardcage.platforms.kernels.in_effect()``."""
    from .kernels import kernel_in_effect as check

    return check(row)
