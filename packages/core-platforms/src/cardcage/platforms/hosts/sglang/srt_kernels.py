"""cardcage kernels in SGLang's SRT ops: the SGLang room's half of ``cardcage.platforms.kernels``.

Every SGLang release with plugins has one registry of out-of-tree forwards for its SRT ops,
keyed by the platform's dispatch key and the op's exact class, and consulted only when an
out-of-tree platform is selected: ``MultiPlatformOp.register_oot_forward`` (0.5.12, 0.5.15;
the forward is chosen when the op is built) and ``sglang.kernels.fused_op.BaseFusedOp``'s
(0.5.18 on, where ``MultiPlatformOp`` is a deprecated alias; the forward is chosen on the op's
first call). The release table names the base per release (``Release.fused_op_base``). So no
release needs a hook on the op's forward: the installer registers one forward per SGLang op
class, which unpacks SGLang's op into the op table's signature and calls the vendor's kernel.

What maps where (``SRT_OPS``): ``rms_norm`` and ``fused_add_rms_norm`` to ``RMSNorm`` (the one
SGLang class serves both, with and without a residual), ``silu_and_mul`` to ``SiluAndMul``,
``layer_norm`` to ``LayerNorm`` (called in the op's own ``dtype``, float32 by default, and cast
back, as its ``forward_native`` does), ``rotary_embedding`` to ``RotaryEmbedding`` (the plain
rotary embedding: its scaled subclasses have classes, and registry entries, of their own).
Not ``GemmaRMSNorm``, whose weight is offset by one. A call the kernels cannot express (a
variance over part of the hidden size, an extra residual addition, float32 residuals, a cast
before the weight, a rotary call that also writes the KV cache) goes to SGLang's own
``forward_native``, so the op always computes what SGLang's native forward would. A
``quant_linear`` argument (the next projection, a hint for SGLang's CUDA forward) is ignored, as
``forward_native`` ignores it.

Imported only in a process where SGLang selected one of our adapters, from the adapter's
``init_backend()``; it imports SGLang's op modules then.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from cardcage.platforms.kernels import (
    KernelInstall,
    Usable,
    by_host_op,
    install,
    installed_row,
    layer_norm_in,
    refused_row,
)

__all__ = ["SRT_OPS", "install_for", "kernel_in_effect", "kernel_targets"]

#: cardcage op -> the SGLang SRT op class it runs in ("module:Class"), on every release.
SRT_OPS: dict[str, str] = {
    "rms_norm": "sglang.srt.layers.layernorm:RMSNorm",
    "fused_add_rms_norm": "sglang.srt.layers.layernorm:RMSNorm",
    "silu_and_mul": "sglang.srt.layers.activation:SiluAndMul",
    "layer_norm": "sglang.srt.layers.layernorm:LayerNorm",
    "rotary_embedding": "sglang.srt.layers.rotary_embedding.base:RotaryEmbedding",
}


#: SGLang op class ("module.Class") -> the forward registered for it in this process.
_FORWARDS: dict[str, Callable[..., Any]] = {}
#: The dispatch key the forwards were registered under in this process.
_KEY: list[str] = []


def kernel_targets(op: str) -> list[dict[str, str]]:
    """Where a kernel for ``op`` runs in SGLang, per range of releases (data only: SGLang is not
    imported): the op class and the mechanism, as ``cardcage hooks`` lists them."""
    from .releases import RELEASES

    target = SRT_OPS.get(op)
    if target is None:
        return []
    ranges: dict[str, list[str]] = {}
    for release in RELEASES:
        ranges.setdefault(release.fused_op_base, []).append(release.version)
    return [
        {
            "host": "sglang",
            "releases": f"{versions[0]} - {versions[-1]}",
            "host_op": target.replace(":", "."),
            "mechanism": f"{base.replace(':', '.')}.register_oot_forward",
        }
        for base, versions in ranges.items()
    ]


def _resolve(path: str) -> Any:
    module, _, attr = path.partition(":")
    return getattr(importlib.import_module(module), attr)


def install_for(platform: Any, vendor: type) -> None:
    """Install ``vendor``'s declared kernels into SGLang's SRT ops, for the selected
    ``platform`` (SGLang's instance of our adapter); once per process."""
    from .releases import running_release

    release = running_release()
    key = platform.get_dispatch_key_name()

    def installer(usable: Usable) -> list[KernelInstall]:
        return _install(usable, release.fused_op_base, key)

    install(vendor, "sglang", release.version, installer)


def _install(usable: Usable, base_path: str, key: str) -> list[KernelInstall]:
    rows, by_class = by_host_op(usable, SRT_OPS, "SGLang's SRT")
    mechanism = f"{base_path.replace(':', '.')}.register_oot_forward"
    try:
        base = _resolve(base_path)
    except Exception as exc:
        problem = f"SGLang's {base_path} does not import ({type(exc).__name__}: {exc})."
        return rows + [
            refused_row(t, problem) for ops in by_class.values() for _, t in ops.values()
        ]
    for target, ops in by_class.items():
        rows += _install_class(base, key, target, ops, mechanism)
    return rows


def _install_class(
    base: Any,
    key: str,
    target: str,
    ops: Usable,
    mechanism: str,
) -> list[KernelInstall]:
    """Register one forward for the SGLang op class ``target`` that runs ``ops``' kernels."""
    host_op = target.replace(":", ".")
    try:
        op_cls = _resolve(target)
    except Exception as exc:
        problem = f"SGLang's {host_op} does not import ({type(exc).__name__}: {exc})."
        return [refused_row(t, problem, host_op) for _, t in ops.values()]
    present = base._oot_forward_registry.get(key, {}).get(op_cls)
    if present is not None and present is not _FORWARDS.get(host_op):
        problem = (
            f"SGLang already has an out-of-tree forward for {host_op} under dispatch key "
            f"{key!r} ({getattr(present, '__module__', '?')}."
            f"{getattr(present, '__qualname__', present)}): cardcage does not replace it. "
            "Register the op once, through the platform's kernels."
        )
        return [refused_row(t, problem, host_op) for _, t in ops.values()]
    kernels = {op: fn for op, (fn, _) in ops.items()}
    forward = _FORWARD_BUILDERS[target](kernels)
    base.register_oot_forward(op_cls, forward, key)
    _FORWARDS[host_op] = forward
    _KEY[:] = [key]
    return [installed_row(t, host_op, mechanism) for _, t in ops.values()]


def _plain_rms_norm(op: Any) -> bool:
    """Whether SGLang's ``RMSNorm`` instance computes what the op table's kernels compute.

    Read from the instance's ``__dict__``, where ``nn.Module`` keeps plain attributes: a release
    without one of these options has no such attribute, and ``getattr`` with a default would go
    through ``nn.Module.__getattr__``, which raises and catches for every missing name, microseconds
    per call in the decode loop.
    """
    options = vars(op)
    return (
        options.get("variance_size_override") is None
        and not options.get("cast_x_before_out_mul", False)
        and not options.get("fp32_residual", False)
        and options.get("override_orig_dtype") is None
        and options.get("has_weight", True)
        and not options.get("x_pad_to_multiple", 0)
    )


def _rms_norm_forward(kernels: dict[str, Callable[..., Any]]) -> Callable[..., Any]:
    """``RMSNorm``'s forward: ``rms_norm`` without a residual, ``fused_add_rms_norm`` with one,
    SGLang's ``forward_native`` for a call or an instance they cannot express."""
    rms_norm = kernels.get("rms_norm")
    fused = kernels.get("fused_add_rms_norm")

    def forward(op: Any, x: Any, residual: Any = None, *rest: Any, **extra: Any) -> Any:
        if extra:
            # quant_linear (0.5.18 - 0.5.20's Llama passes the next projection) only lets SGLang's
            # CUDA forward fuse that projection's input quantization; forward_native ignores it,
            # and so do the kernels, which compute what forward_native computes.
            extra.pop("quant_linear", None)
        kernel = rms_norm if residual is None else fused
        if (
            kernel is None
            or rest
            or (extra and any(value is not None for value in extra.values()))
            or not _plain_rms_norm(op)
        ):
            return op.forward_native(x, residual, *rest, **extra)
        if residual is None:
            return kernel(x, op.weight, op.variance_epsilon)
        return kernel(x, residual, op.weight, op.variance_epsilon)

    forward.__qualname__ = "cardcage_rms_norm_forward"
    return forward


def _silu_and_mul_forward(kernels: dict[str, Callable[..., Any]]) -> Callable[..., Any]:
    """``SiluAndMul``'s forward: the ``silu_and_mul`` kernel on SGLang's one argument."""
    kernel = kernels["silu_and_mul"]

    def forward(op: Any, x: Any, *rest: Any, **extra: Any) -> Any:
        if rest or extra:
            return op.forward_native(x, *rest, **extra)
        return kernel(x)

    forward.__qualname__ = "cardcage_silu_and_mul_forward"
    return forward


def _layer_norm_forward(kernels: dict[str, Callable[..., Any]]) -> Callable[..., Any]:
    """``LayerNorm``'s forward: the ``layer_norm`` kernel in the op's ``dtype``, as
    ``forward_native`` normalises, the result in ``x``'s dtype."""
    kernel = kernels["layer_norm"]

    def forward(op: Any, x: Any, *rest: Any, **extra: Any) -> Any:
        if rest or extra:
            return op.forward_native(x, *rest, **extra)
        weight = op.weight if op.elementwise_affine else None
        bias = op.bias if op.use_bias else None
        return layer_norm_in(op.dtype, kernel, x, weight, bias, op.variance_epsilon)

    forward.__qualname__ = "cardcage_layer_norm_forward"
    return forward


def _rotary_embedding_forward(kernels: dict[str, Callable[..., Any]]) -> Callable[..., Any]:
    """``RotaryEmbedding``'s forward: positions (plus SGLang's ``offsets``) flattened, SGLang's
    cos/sin cache as it keeps it; a call that also writes the KV cache, or an op whose cos/sin
    rows were precomputed for its positions, runs ``forward_native``."""
    kernel = kernels["rotary_embedding"]

    def forward(
        op: Any,
        positions: Any,
        query: Any,
        key: Any = None,
        offsets: Any = None,
        fused_set_kv_buffer_arg: Any = None,
        *rest: Any,
        **extra: Any,
    ) -> Any:
        if (
            rest
            or extra
            or key is None
            or fused_set_kv_buffer_arg is not None
            or hasattr(op, "sin_cos_cache")
        ):
            return op.forward_native(
                positions, query, key, offsets, fused_set_kv_buffer_arg, *rest, **extra
            )
        if offsets is not None:
            positions = positions + offsets
        return kernel(
            positions.flatten(), query, key, op.cos_sin_cache, op.head_size, op.is_neox_style
        )

    forward.__qualname__ = "cardcage_rotary_embedding_forward"
    return forward


_FORWARD_BUILDERS: dict[str, Callable[[dict[str, Callable[..., Any]]], Callable[..., Any]]] = {
    "sglang.srt.layers.layernorm:RMSNorm": _rms_norm_forward,
    "sglang.srt.layers.activation:SiluAndMul": _silu_and_mul_forward,
    "sglang.srt.layers.layernorm:LayerNorm": _layer_norm_forward,
    "sglang.srt.layers.rotary_embedding.base:RotaryEmbedding": _rotary_embedding_forward,
}


def kernel_in_effect(row: KernelInstall) -> bool:
    """Whether SGLang's op ``row.host_op`` dispatches to cardcage's forward now, in this process:
    the forward is still registered under the platform's key, SGLang's selected platform is out
    of tree (the registry is consulted only then) and no fused-op backend is forced
    (``SGLANG_FORCE_FUSED_OP_BACKEND`` outranks the out-of-tree forward)."""
    if row.host_op is None or row.host_op not in _FORWARDS or not _KEY:
        return False
    from .releases import running_release

    base = _resolve(running_release().fused_op_base)
    module, _, name = row.host_op.rpartition(".")
    op_cls = getattr(importlib.import_module(module), name)
    if base._oot_forward_registry.get(_KEY[0], {}).get(op_cls) is not _FORWARDS[row.host_op]:
        return False
    platform = importlib.import_module("sglang.srt.platforms").current_platform
    if not platform.is_out_of_tree():
        return False
    forced = getattr(importlib.import_module(base.__module__), "get_fused_op_backend", None)
    return not (callable(forced) and forced() is not None)
