"""The diffusion general plugin of cardcage-demo-cpu: which forward did each custom op get?

``register`` is the ``sglang.multimodal_gen.plugins`` entry point, declared with
``cardcage.platforms.plugin.hooks_plugin(..., runtime="diffusion")``: one AROUND hook on
``CustomOp.dispatch_forward``, where every op resolves its forward once, when it is constructed.
It records ``"<op class> -> <forward>"`` in ``evidence.EVIDENCE`` (event ``dispatch``) and logs
it at DEBUG, so "is my kernel used?" has an answer per op class and per worker. The hook goes on
the diffusion registry (never SRT's), only when this distribution supplied the selected
diffusion platform, and a failure aborts start-up: it is part of the platform's contract.

* Under cardcage's diffusion runtime, on ``CUSTOM_OP_DISPATCH``, applied after
  ``init_backend()`` and before any model is built, so every model op passes through it.
* Under SGLang (0.5.22+, its diffusion ``load_plugins()``), on SGLang's own op base
  (``SGLANG_CUSTOM_OP_DISPATCH``), which chooses a forward the same way; SGLang's rule applies:
  the selected platform's hooks must be applied or start-up fails.

The forwards themselves are registered in ``DemoCpuPlatform.init_backend()``. Import-safe:
importing needs only core-platforms (not the diffusion runtime, so ``cardcage doctor`` can check
it anywhere); nothing happens at import time.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from cardcage.hooks.host import Host
from cardcage.platforms.plugin import HookSpec, around, hooks_plugin

from . import PLATFORM_QUALNAME
from .evidence import EVIDENCE

__all__ = ["DISPATCH_FORWARD", "SGLANG_DISPATCH_FORWARD", "record_dispatch", "register"]

logger = logging.getLogger(__name__)

#: ``cardcage.diffusion.runtime.layers.dispatch.CUSTOM_OP_DISPATCH``, spelled out: this module
#: must import where the diffusion runtime is not installed.
DISPATCH_FORWARD = "cardcage.diffusion.runtime.layers.custom_op.CustomOp.dispatch_forward"
#: The hook target when SGLang hosts the plugin: SGLang's op base, same method.
SGLANG_DISPATCH_FORWARD = "sglang.multimodal_gen.runtime.layers.custom_op.CustomOp.dispatch_forward"


def record_dispatch(original: Callable[..., Any], op: Any, *args: Any, **kwargs: Any) -> Any:
    """AROUND ``CustomOp.dispatch_forward``: record which forward ``type(op)`` got."""
    from cardcage.diffusion.runtime.layers.dispatch import describe_dispatch

    forward = original(op, *args, **kwargs)
    key = describe_dispatch(op, forward)
    EVIDENCE.record("dispatch", key)
    logger.debug("custom op dispatch: %s", key)
    return forward


def _registered(host: Host, spec: HookSpec) -> None:
    EVIDENCE.record("register", spec.target)


register = hooks_plugin(
    PLATFORM_QUALNAME,
    runtime="diffusion",
    cardcage=[around(DISPATCH_FORWARD, record_dispatch)],
    sglang=[around(SGLANG_DISPATCH_FORWARD, record_dispatch)],
    on_registered=_registered,
)
