"""``CustomOp``: a torch module whose forward implementation is chosen per platform.

Each op resolves its implementation once, when it is constructed, from the current platform's
``get_dispatch_key_name()`` value ``key``:

1. a function registered with ``CustomOp.register_oot_forward(type(op), fn=..., platform_key=key)``
   for the op's exact class (a subclass does not inherit its parent's registration); it receives
   the op instance before the normal arguments;
2. a ``forward_<key>()`` method defined by the op's class (or a class between it and ``CustomOp``);
3. for the built-in keys ("cuda", "hip", "npu", "xpu", "musa", "native") on a built-in platform,
   ``CustomOp``'s default ``forward_<key>()``, which ends in ``forward_native()``;
4. otherwise ``forward_oot()`` on an out-of-tree platform (default: ``forward_native()``) and
   ``forward_native()`` on a built-in one.

Because the choice is stored at construction, ``forward()`` never consults the platform or the
registry again: a compiled op sees one stable callable, and registrations must happen before the
ops are built (in ``Platform.init_backend()``). Registering for a class that already has
instances logs a warning: those instances keep their dispatch.

Ops carry a name (``@CustomOp.register("rms_norm")``, kept in ``CustomOp.op_registry``), the same
names SGLang's diffusion runtime gives its ops. When a host runs the platform (SGLang selected it
and calls its ``init_backend()``), ``register_oot_forward`` also hands the forward to the host's op
of the same name (``cardcage.platforms.host.register_host_forward``), so the kernel runs in the
host's ops too; under cardcage's own runtime that hand-off does nothing.
"""

from __future__ import annotations

import functools
import logging
import threading
import weakref
from collections.abc import Callable
from typing import Any, ClassVar, TypeVar

import torch

__all__ = ["BUILTIN_DISPATCH_KEYS", "CustomOp"]

logger = logging.getLogger(__name__)

#: Keys whose ``forward_<key>()`` has a default on ``CustomOp``.
BUILTIN_DISPATCH_KEYS: frozenset[str] = frozenset({"cuda", "hip", "npu", "xpu", "musa", "native"})

_lock = threading.Lock()
_Op = TypeVar("_Op", bound="CustomOp")


def _normalize_key(key: object, *, what: str) -> str:
    if not isinstance(key, str):
        raise TypeError(f"{what} must be a str, got {type(key).__name__}")
    stripped = key.strip()
    if not stripped:
        raise ValueError(f"{what} must be a non-empty string")
    return stripped


class CustomOp(torch.nn.Module):  # type: ignore[misc]
    """Base class of ops with per-platform forward implementations."""

    _oot_forward_registry: ClassVar[dict[tuple[type[CustomOp], str], Callable[..., Any]]] = {}
    _constructed_classes: ClassVar[weakref.WeakSet[type[CustomOp]]] = weakref.WeakSet()
    #: Every named op class, by the name ``CustomOp.register(name)`` gave it.
    op_registry: ClassVar[dict[str, type[CustomOp]]] = {}
    #: The op's registered name ("rms_norm"); None for an op that was never registered.
    name: ClassVar[str | None] = None

    @classmethod
    def register(cls, name: str) -> Callable[[type[_Op]], type[_Op]]:
        """Class decorator: name an op class (``@CustomOp.register("silu_and_mul")``).

        The name is the op's identity across hosts: a forward registered for the class reaches
        the host's op of the same name. A name already given to another class is an error.
        """
        key = _normalize_key(name, what="the op name")

        def decorator(op_cls: type[_Op]) -> type[_Op]:
            if not (isinstance(op_cls, type) and issubclass(op_cls, CustomOp)):
                raise TypeError(f"CustomOp.register({key!r}) decorates a CustomOp subclass")
            with _lock:
                taken = CustomOp.op_registry.get(key)
                if taken is not None and taken is not op_cls:
                    raise ValueError(
                        f"op name {key!r} is already registered for {taken.__module__}."
                        f"{taken.__qualname__}; give {op_cls.__qualname__} another name"
                    )
                CustomOp.op_registry[key] = op_cls
            op_cls.name = key
            return op_cls

        return decorator

    def __init__(self) -> None:
        super().__init__()
        with _lock:
            CustomOp._constructed_classes.add(type(self))
        self._forward_method: Callable[..., Any] = self.dispatch_forward()

    # -- registration -----------------------------------------------------------------------
    @classmethod
    def register_oot_forward(
        cls,
        op_cls: type[CustomOp],
        *,
        fn: Callable[..., Any],
        platform_key: str,
    ) -> None:
        """Use ``fn(op, *args, **kwargs)`` as the forward of ``op_cls`` under ``platform_key``.

        Applies to instances of exactly ``op_cls`` constructed afterwards.
        """
        if not (isinstance(op_cls, type) and issubclass(op_cls, CustomOp)):
            raise TypeError(f"op_cls must be a CustomOp subclass, got {op_cls!r}")
        if not callable(fn):
            raise TypeError(f"fn must be callable, got {fn!r}")
        key = _normalize_key(platform_key, what="platform_key")
        with _lock:
            previous = CustomOp._oot_forward_registry.get((op_cls, key))
            CustomOp._oot_forward_registry[(op_cls, key)] = fn
            already_built = op_cls in CustomOp._constructed_classes
        name = f"{op_cls.__module__}.{op_cls.__qualname__}"
        if previous is not None and previous is not fn:
            logger.warning(
                "register_oot_forward: replacing the forward registered for %s under key %r",
                name,
                key,
            )
        if already_built:
            logger.warning(
                "register_oot_forward: instances of %s were already constructed; existing "
                "instances keep their dispatch, only ops constructed from now on use the "
                "forward registered under key %r (register in Platform.init_backend())",
                name,
                key,
            )
        from cardcage.platforms.host import register_host_forward

        register_host_forward(op_cls, fn=fn, platform_key=key)

    # -- dispatch -----------------------------------------------------------------------------
    def _defined_forward(self, name: str) -> Callable[..., Any] | None:
        """The bound ``name`` if a class below ``CustomOp`` in the MRO defines it, else None."""
        for klass in type(self).__mro__:
            if klass is CustomOp:
                return None
            if name in vars(klass):
                method: Callable[..., Any] = getattr(self, name)
                return method
        return None

    def dispatch_forward(self) -> Callable[..., Any]:
        """Choose this op's forward implementation for the current platform."""
        from cardcage.diffusion.runtime.platforms import get_current_platform

        platform = get_current_platform()
        key = _normalize_key(
            platform.get_dispatch_key_name(), what="the platform's get_dispatch_key_name()"
        )
        with _lock:
            registered = CustomOp._oot_forward_registry.get((type(self), key))
        if registered is not None:
            return functools.partial(registered, self)
        if key.isidentifier():
            defined = self._defined_forward(f"forward_{key}")
            if defined is not None:
                return defined
        if platform.is_out_of_tree():
            return self.forward_oot
        if key in BUILTIN_DISPATCH_KEYS:
            method: Callable[..., Any] = getattr(self, f"forward_{key}")
            return method
        return self.forward_native

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return self._forward_method(*args, **kwargs)

    # -- implementations ----------------------------------------------------------------------
    def forward_native(self, *args: Any, **kwargs: Any) -> Any:
        """The portable implementation (plain torch); every op must define it."""
        raise NotImplementedError(f"{type(self).__qualname__} must implement forward_native()")

    def forward_cuda(self, *args: Any, **kwargs: Any) -> Any:
        return self.forward_native(*args, **kwargs)

    def forward_hip(self, *args: Any, **kwargs: Any) -> Any:
        return self.forward_cuda(*args, **kwargs)

    def forward_musa(self, *args: Any, **kwargs: Any) -> Any:
        return self.forward_cuda(*args, **kwargs)

    def forward_npu(self, *args: Any, **kwargs: Any) -> Any:
        return self.forward_native(*args, **kwargs)

    def forward_xpu(self, *args: Any, **kwargs: Any) -> Any:
        return self.forward_native(*args, **kwargs)

    def forward_oot(self, *args: Any, **kwargs: Any) -> Any:
        """Out-of-tree platforms without a registered or ``forward_<key>`` implementation."""
        return self.forward_native(*args, **kwargs)
