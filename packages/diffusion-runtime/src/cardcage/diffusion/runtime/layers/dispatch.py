"""Which forward did each custom op get? Names for ``CustomOp.dispatch_forward``'s answer.

Every op of the diffusion runtime chooses its forward once, at construction, in
``CustomOp.dispatch_forward()`` (``cardcage.diffusion.runtime.layers.custom_op``; SGLang's op base
chooses the same way). "Is my kernel used?" is the first question a vendor asks, so a general
plugin hooks that method (``CUSTOM_OP_DISPATCH``, or ``SGLANG_CUSTOM_OP_DISPATCH`` when SGLang
hosts it) with an AROUND hook that records ``describe_dispatch(op, forward)``, e.g.
``"cardcage.diffusion.runtime.layers.layernorm.RMSNorm -> vendor.ops.rms_norm_forward"``.

Import-safe: stdlib only, and nothing of the runtime's layers (importing this module imports
neither torch nor ``custom_op``), so a hook may import it wherever it runs.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = [
    "CUSTOM_OP_DISPATCH",
    "SGLANG_CUSTOM_OP_DISPATCH",
    "describe_dispatch",
    "describe_forward",
    "op_class_name",
]

#: The hook target under cardcage's diffusion runtime.
CUSTOM_OP_DISPATCH = "cardcage.diffusion.runtime.layers.custom_op.CustomOp.dispatch_forward"
#: The hook target under SGLang's diffusion runtime (0.5.22+): its op base, same method.
SGLANG_CUSTOM_OP_DISPATCH = (
    "sglang.multimodal_gen.runtime.layers.custom_op.CustomOp.dispatch_forward"
)


def _qualname(obj: Any) -> str:
    module = getattr(obj, "__module__", None)
    name = getattr(obj, "__qualname__", None) or repr(obj)
    return f"{module}.{name}" if module else name


def op_class_name(op: Any) -> str:
    """The op's class (or ``op`` itself, when it is a class) as ``module.qualname``."""
    return _qualname(op if isinstance(op, type) else type(op))


def describe_forward(forward: Callable[..., Any]) -> str:
    """What ``dispatch_forward()`` chose, in words a log reader can act on.

    A registered out-of-tree function (``CustomOp.register_oot_forward``, bound to the op with
    ``functools.partial``) is named by its qualified name, e.g. ``vendor.ops.rms_norm_forward``;
    a method of the op by its name, e.g. ``forward_oot`` or ``forward_native``.
    """
    if isinstance(forward, functools.partial):
        return _qualname(forward.func)
    name = getattr(forward, "__name__", None)
    return name if isinstance(name, str) else repr(forward)


def describe_dispatch(op: Any, forward: Callable[..., Any]) -> str:
    """``"<op class> -> <forward>"``: one op's dispatch, as one line of evidence or log."""
    return f"{op_class_name(op)} -> {describe_forward(forward)}"
