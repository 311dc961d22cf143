"""The diffusion general plugin of cardcage-demo-cuda: which forward did each custom op get?

``register`` (the ``sglang.multimodal_gen.plugins`` entry point) puts one AROUND hook on
``CustomOp.dispatch_forward``, the diffusion runtime's or, when SGLang (0.5.22+) hosts the
plugin, SGLang's; ``hooks_plugin(..., runtime="diffusion")`` registers it on the diffusion
registry, only when this distribution supplied the selected diffusion platform. The hook records
``"<op class> -> <forward>"`` as ``dispatch`` evidence, e.g. ``...RMSNorm ->
cardcage_demo_cuda.diffusion.ops.rms_norm_forward`` when ``DemoCudaPlatform.init_backend()``
registered the kernel. Importing needs no diffusion runtime; nothing happens at import time.
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
