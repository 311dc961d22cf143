"""cardcage's custom-op forwards, run by SGLang's diffusion ops of the same kind.

A vendor registers its kernels with cardcage's ``CustomOp.register_oot_forward(RMSNorm, fn=...,
platform_key=...)`` in ``init_backend()``, for cardcage's op classes. SGLang 0.5.23 builds its
own op classes (``sglang.multimodal_gen.runtime.layers``), and its ``CustomOp`` registry
(``{platform_key: {op_class: fn}}``, matched on the op's exact class when the op is built) never
sees cardcage's. So when SGLang's diffusion selection picked the vendor's platform (its
``current_platform`` is one of our adapters) and calls its ``init_backend()``, cardcage's
``register_oot_forward`` hands each forward here too (``cardcage.platforms.host
.register_host_forward``), and ``register_oot_forward`` below:

1. finds SGLang's op class of the same kind (``host_op``): by the op's registered name first
   (``@CustomOp.register("rms_norm")`` in both runtimes; SGLang fills its ``op_registry`` when
   the module that defines the op is imported, so the module ``HOMES`` names for that name is
   imported first), then by the class's ``__name__`` in SGLang's diffusion layer modules (those
   already imported, and for cardcage's own layers the SGLang module of the same name);
2. checks that SGLang's ``forward_native`` takes the arguments cardcage's does, and adapts the
   call where SGLang's op has options cardcage's lacks (``ARGUMENT_ADAPTERS``: an SGLang
   ``RMSNorm`` built with ``var_hidden_size`` or ``cast_x_before_out_mul`` runs SGLang's own
   ``forward_native``, since the kernel's contract, cardcage's ``RMSNorm``, has neither);
3. registers the forward with SGLang's ``CustomOp.register_oot_forward`` under the same key.
   SGLang then calls it as ``fn(op, *args, **kwargs)`` with its own op instance, which has the
   attributes cardcage's op has (``hidden_size``, ``variance_epsilon``, ``weight``).

A forward whose op SGLang lacks, or whose SGLang op has other arguments, is not registered and
is reported with one WARNING naming the kernel, the op, the plugin and its distribution, the
cause and the fix (often: SGLang's module for the op does not import with an out-of-tree
platform, which ``behaves_as`` fixes; see ``cardcage.platforms.identity``). ``MAPPINGS`` keeps
this process's outcomes. Importing this module imports neither SGLang nor torch; registering
imports SGLang's custom-op module and the module that defines the op.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import inspect
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cardcage.hooks.log import get_logger

__all__ = [
    "ARGUMENT_ADAPTERS",
    "HOMES",
    "MAPPINGS",
    "OpMapping",
    "host_op",
    "kernel_in_effect",
    "register_oot_forward",
    "selected_platform",
]

logger = get_logger(__name__)

LAYERS = "sglang.multimodal_gen.runtime.layers"
_CUSTOM_OP = f"{LAYERS}.custom_op"
_PLATFORMS = "sglang.multimodal_gen.runtime.platforms"

#: op name -> the module of SGLang's diffusion layers (under ``LAYERS``) that defines it in
#: SGLang 0.5.23; importing it fills SGLang's ``CustomOp.op_registry`` with the name.
HOMES: dict[str, str] = {
    "rms_norm": "layernorm",
    "rms_norm_no_weight": "layernorm",
    "layer_norm": "layernorm",
    "fp32_layer_norm": "layernorm",
    "silu_and_mul": "activation",
    "gelu_and_mul": "activation",
    "gelu_new": "activation",
    "quick_gelu": "activation",
    "rotary_embedding": "rotary_embedding",
    "fuse_layernorm_scale_shift_gate_select01": "fused_scale_shift_gate",
    "fuse_residual_layernorm_scale_shift_gate_select01": "fused_scale_shift_gate",
}


@dataclass(frozen=True)
class OpMapping:
    """What became of one forward handed to SGLang."""

    #: cardcage's op class, ``module.qualname``.
    op: str
    #: the vendor's function.
    kernel: str
    platform_key: str
    #: SGLang's op class that now runs the kernel, ``module.qualname``; None when none does.
    host_op: str | None
    #: why no SGLang op runs it, and what to do (None when one does).
    problem: str | None = None


#: This process's outcomes, in registration order.
MAPPINGS: list[OpMapping] = []
#: (SGLang op class "module.qualname", platform key) -> the function given to SGLang's registry.
_HANDED: dict[tuple[str, str], Callable[..., Any]] = {}
_lock = threading.Lock()


def kernel_in_effect(row: Any) -> bool:
    """Whether SGLang's diffusion op ``row.host_op`` still builds with what this process handed
    it (the forward, or the argument adapter around it), under the key it was handed with."""
    module, _, name = str(row.host_op).rpartition(".")
    op_cls = getattr(sys.modules.get(module), name, None)
    custom_op = sys.modules.get(_CUSTOM_OP)
    if op_cls is None or custom_op is None:
        return False
    registry = custom_op.CustomOp._oot_forward_registry
    with _lock:
        handed = [(key, fn) for (op, key), fn in _HANDED.items() if op == row.host_op]
    return any(registry.get(key, {}).get(op_cls) is fn for key, fn in handed)


def _qualified(obj: Any) -> str:
    return f"{getattr(obj, '__module__', '?')}.{getattr(obj, '__qualname__', repr(obj))}"


def selected_platform() -> Any | None:
    """SGLang's diffusion ``current_platform`` when it is one of our adapters, else None.

    Read without resolving it: SGLang publishes the instance before it calls ``init_backend()``,
    and a process where SGLang has not selected (or selected a platform of its own) gets None.
    """
    module = sys.modules.get(_PLATFORMS)
    if module is None:
        return None
    namespace = vars(module)
    platform = namespace.get("_current_platform") if "_current_platform" in namespace else None
    if platform is None:
        return None
    from .adapter import adapted_class

    return platform if adapted_class(type(platform)) is not None else None


def _rms_norm_arguments(fn: Callable[..., Any]) -> Callable[..., Any]:
    """SGLang's ``RMSNorm(x, residual=None)``: the kernel for what cardcage's op expresses.

    SGLang's op has two options cardcage's lacks: ``var_hidden_size`` (the variance over the
    first features only, stored as ``variance_size_override``) and ``cast_x_before_out_mul``
    (the weight applied after casting back). An op built with either runs SGLang's own
    ``forward_native``; every other call goes to the kernel with the same arguments.
    """

    @functools.wraps(fn)
    def forward(op: Any, x: Any, residual: Any = None) -> Any:
        if getattr(op, "variance_size_override", None) is not None or getattr(
            op, "cast_x_before_out_mul", False
        ):
            return op.forward_native(x, residual)
        return fn(op, x, residual)

    return forward


#: op name -> wraps a kernel so SGLang's op of that name can call it (see each adapter).
ARGUMENT_ADAPTERS: dict[str, Callable[[Callable[..., Any]], Callable[..., Any]]] = {
    "rms_norm": _rms_norm_arguments,
}


def _import_failure(module: str) -> str | None:
    """Import ``module``; the reason it failed, or None."""
    try:
        importlib.import_module(module)
    except Exception as exc:
        return f"{module} does not import ({type(exc).__name__}: {exc})"
    return None


def host_op(op_cls: type) -> tuple[type | None, list[str]]:
    """SGLang's op class of the same kind as cardcage's ``op_cls``, and why not when None.

    The second item lists SGLang modules that failed to import on the way (their ops are then
    out of reach). Imports SGLang's custom-op module, and the module that defines the op.
    """
    base = importlib.import_module(_CUSTOM_OP).CustomOp
    failures: list[str] = []
    name = getattr(op_cls, "name", None)
    if isinstance(name, str) and name:
        home = HOMES.get(name)
        if home is not None and name not in base.op_registry:
            failure = _import_failure(f"{LAYERS}.{home}")
            if failure is not None:
                failures.append(failure)
        found = base.op_registry.get(name)
        if isinstance(found, type):
            return found, failures
    # An op whose module carries the name of one of SGLang's layer modules (layernorm,
    # activation, ...; a runtime's layers usually mirror them) is looked for in that module.
    mirror = f"{LAYERS}.{op_cls.__module__.rpartition('.')[2]}"
    if (
        mirror != op_cls.__module__
        and mirror not in sys.modules
        and importlib.util.find_spec(mirror) is not None
    ):
        failure = _import_failure(mirror)
        if failure is not None and failure not in failures:
            failures.append(failure)
    for module_name in sorted(sys.modules):
        if module_name != LAYERS and not module_name.startswith(f"{LAYERS}."):
            continue
        candidate = getattr(sys.modules[module_name], op_cls.__name__, None)
        if (
            isinstance(candidate, type)
            and issubclass(candidate, base)
            and candidate.__module__ == module_name
        ):
            return candidate, failures
    return None, failures


def _positional(method: Any) -> list[str] | None:
    """The names of ``method``'s parameters after ``self``; None when it has none to read."""
    try:
        parameters = list(inspect.signature(method).parameters.values())
    except (TypeError, ValueError):
        return None
    names = [p.name for p in parameters if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    if len(names) != len(parameters):
        return None  # *args / **kwargs: nothing to compare
    return names[1:]


def _arguments_problem(op_cls: type, sglang_cls: type) -> str | None:
    ours = _positional(getattr(op_cls, "forward_native", None))
    theirs = _positional(getattr(sglang_cls, "forward_native", None))
    if ours is None or theirs is None or ours == theirs:
        return None
    return (
        f"SGLang's {_qualified(sglang_cls)}.forward_native takes ({', '.join(theirs)}), "
        f"cardcage's {_qualified(op_cls)}.forward_native takes ({', '.join(ours)}), so SGLang "
        "would call the kernel with arguments it was not written for."
    )


def _who(platform: Any) -> str:
    """``platform plugin 'name' (distribution dist)``, from SGLang's selection record."""
    module = sys.modules.get(_PLATFORMS)
    record = getattr(module, "_current_platform_selection", None)
    plugin = getattr(record, "plugin_name", None)
    distribution = getattr(record, "distribution_name", None)
    parts = [f"platform plugin {plugin!r}" if plugin else f"platform {type(platform).__name__}"]
    if distribution:
        parts.append(f"distribution {distribution}")
    return ", ".join(parts)


def _not_found(op_cls: type, failures: list[str]) -> str:
    name = getattr(op_cls, "name", None)
    if name:
        wanted = f"no op named {name!r} nor a class {op_cls.__name__}"
    else:
        wanted = f"no op class {op_cls.__name__} (the op has no registered name)"
    if failures:
        return (
            f"SGLang's diffusion runtime has {wanted} that it can import here: "
            f"{'; '.join(failures)}. SGLang's layer modules choose their kernels by the "
            "platform's identity when they are imported; if the device is CPU-like, CUDA-alike "
            "or ROCm-like, declare it on the platform class (behaves_as = PlatformEnum.CPU, CUDA "
            "or ROCM; docs/platforms/contract.md, Declared identity), otherwise that op of "
            "SGLang cannot run with this platform."
        )
    registered = sorted(importlib.import_module(_CUSTOM_OP).CustomOp.op_registry)
    return (
        f"SGLang's diffusion runtime has {wanted}; its named ops here are "
        f"{', '.join(registered) or 'none'}. The kernel runs under cardcage's runtime only: "
        "register it for the op class of the same kind (@CustomOp.register with SGLang's name), "
        "or leave it out under SGLang."
    )


def register_oot_forward(op_cls: type, *, fn: Callable[..., Any], platform_key: str) -> bool:
    """Register ``fn`` for SGLang's op of ``op_cls``'s kind; True when an SGLang op runs it.

    Does nothing (False) unless SGLang's diffusion selection picked one of our adapters; a
    forward SGLang cannot run is reported with a WARNING (see the module docstring).
    """
    platform = selected_platform()
    if platform is None:
        return False
    sglang_cls, failures = host_op(op_cls)
    name = getattr(op_cls, "name", None)
    adapt = ARGUMENT_ADAPTERS.get(name) if isinstance(name, str) else None
    if sglang_cls is None:
        problem: str | None = _not_found(op_cls, failures)
    elif adapt is None:
        problem = _arguments_problem(op_cls, sglang_cls)
    else:
        problem = None  # the adapter is written for SGLang's op of that name
    kernel = _qualified(fn)
    if sglang_cls is None or problem is not None:
        with _lock:
            MAPPINGS.append(OpMapping(_qualified(op_cls), kernel, platform_key, None, problem))
        logger.warning(
            "register_oot_forward: kernel %s for %s (%s) does not reach SGLang's ops: %s",
            kernel,
            _qualified(op_cls),
            _who(platform),
            problem,
        )
        return False
    forward = adapt(fn) if adapt is not None else fn
    base = importlib.import_module(_CUSTOM_OP).CustomOp
    base.register_oot_forward(sglang_cls, fn=forward, platform_key=platform_key)
    with _lock:
        MAPPINGS.append(OpMapping(_qualified(op_cls), kernel, platform_key, _qualified(sglang_cls)))
        _HANDED[(_qualified(sglang_cls), platform_key)] = forward
    logger.debug(
        "register_oot_forward: kernel %s runs in SGLang's %s under key %r (%s)",
        kernel,
        _qualified(sglang_cls),
        platform_key,
        _who(platform),
    )
    return True
