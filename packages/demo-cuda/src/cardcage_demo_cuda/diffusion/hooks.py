"""The diffusion general plugin of cardcage-demo-cuda: which forward did each custom op get?

``register()`` is the ``sglang.multimodal_gen.plugins`` entry point. The diffusion runtime calls
it, in the launcher and in every worker, only when this distribution supplied the selected
diffusion platform (general plugins of other platform distributions are never imported), and a
failure in it, or a hook target it names that cannot be patched, aborts start-up: it is part of
the platform's contract. It registers one AROUND hook, on the diffusion registry
(``cardcage.diffusion.runtime.platforms.plugins.HookRegistry``, never SRT's):

* ``cardcage.diffusion.runtime.layers.custom_op.CustomOp.dispatch_forward``: every op resolves
  its forward there, once, when it is constructed. The hook records ``"<op class> -> <forward>"``
  in ``evidence.EVIDENCE`` (event ``dispatch``) and logs it at DEBUG, so "is my kernel used?"
  has an answer per op class and per worker, without a debugger. The runtime applies hooks
  after ``init_backend()`` and before any model is built, so every model op passes through it.

Under SGLang 0.5.23 (its diffusion ``load_plugins()`` runs ``register()``; DESIGN §8) the same
hook goes on SGLang's own op base,
``sglang.multimodal_gen.runtime.layers.custom_op.CustomOp.dispatch_forward``, which chooses a
forward the same way; the registry hands it to SGLang's diffusion registry, and SGLang's rule
applies: the selected platform's hooks must be applied or start-up fails.

Use hooks only for what the platform interface cannot express: the forwards themselves are
registered in ``DemoCudaPlatform.init_backend()``.

Import-safe: importing needs only cardcage-core-hooks (not even the diffusion runtime, so
``cardcage doctor`` can check it anywhere); registering imports the runtime's hook registry but
no torch and no layer; the target is resolved when ``apply_plugin_hooks()`` applies it. Nothing
happens at import time.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any

from cardcage.hooks.host import Host, plugin_host
from cardcage.hooks.registry import HookType

from .evidence import EVIDENCE

__all__ = [
    "DISPATCH_FORWARD",
    "SGLANG_DISPATCH_FORWARD",
    "describe_forward",
    "record_dispatch",
    "register",
]

logger = logging.getLogger(__name__)

DISPATCH_FORWARD = "cardcage.diffusion.runtime.layers.custom_op.CustomOp.dispatch_forward"
#: The hook target when SGLang 0.5.23 hosts the plugin: SGLang's op base, same method.
SGLANG_DISPATCH_FORWARD = "sglang.multimodal_gen.runtime.layers.custom_op.CustomOp.dispatch_forward"


def _qualname(obj: Any) -> str:
    module = getattr(obj, "__module__", None)
    name = getattr(obj, "__qualname__", None) or repr(obj)
    return f"{module}.{name}" if module else name


def describe_forward(forward: Callable[..., Any]) -> str:
    """What ``dispatch_forward()`` chose, in words a log reader can act on.

    A registered out-of-tree function (bound to the op with ``functools.partial``) is named by
    its qualified name, e.g. ``cardcage_demo_cuda.diffusion.ops.rms_norm_forward``; a method of
    the op by its name, e.g. ``forward_oot`` or ``forward_native``.
    """
    if isinstance(forward, functools.partial):
        return _qualname(forward.func)
    name = getattr(forward, "__name__", None)
    return name if isinstance(name, str) else repr(forward)


def record_dispatch(original: Callable[..., Any], op: Any, *args: Any, **kwargs: Any) -> Any:
    """AROUND ``CustomOp.dispatch_forward``: record which forward ``type(op)`` got."""
    forward = original(op, *args, **kwargs)
    key = f"{_qualname(type(op))} -> {describe_forward(forward)}"
    EVIDENCE.record("dispatch", key)
    logger.debug("custom op dispatch: %s", key)
    return forward


def register() -> None:
    """Register the hook on the diffusion registry (idempotent: a second call adds nothing)."""
    # Imported here, not at module scope: `cardcage doctor` imports this module to check it on
    # machines where the diffusion runtime (the diffusion extra) is not installed.
    from cardcage.diffusion.runtime.platforms.plugins import HookRegistry

    if plugin_host() is Host.SGLANG:
        # Handed to SGLang's diffusion registry; SGLang's loader runs this once per process.
        HookRegistry.register(SGLANG_DISPATCH_FORWARD, record_dispatch, HookType.AROUND)
        EVIDENCE.record("register", SGLANG_DISPATCH_FORWARD)
        return
    registered = HookRegistry.registrations().get(DISPATCH_FORWARD, ())
    if not any(record.hook is record_dispatch for record in registered):
        HookRegistry.register(DISPATCH_FORWARD, record_dispatch, HookType.AROUND)
    EVIDENCE.record("register", DISPATCH_FORWARD)
