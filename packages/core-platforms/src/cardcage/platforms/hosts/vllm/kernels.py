"""cardcage kernels in vLLM's ops: the vLLM room's half of ``cardcage.platforms.kernels``.

vLLM replaces an op class when it is instantiated: ``CustomOp.__new__`` looks the class's
``__name__`` up in ``custom_op.op_registry_oot`` (filled by ``CustomOp.register_oot``, the same
code from 0.32 to 0.34) and builds the registered class instead. So the installer registers, per
vLLM op class, a subclass named like it whose ``forward_oot`` and ``forward_cpu`` (which one
vLLM dispatches to depends on whether the platform answers ``is_cpu()``) unpack vLLM's op into
the op table's signature and call the vendor's kernel. The name is the class name (``"RMSNorm"``):
the name vLLM registers the in-tree op under (``"rms_norm"``) is never looked up there, and a
second registration of one name is an ``AssertionError`` inside vLLM, which the installer never
lets happen (it refuses, with a WARNING, a name that already has a replacement). The subclass
keeps the in-tree op's ``name``, so vLLM's ``custom_ops`` switches (``-rms_norm``) still apply.

What maps where (``VLLM_OPS``): ``rms_norm`` and ``fused_add_rms_norm`` to ``RMSNorm``,
``silu_and_mul`` to ``SiluAndMul``, ``layer_norm`` to ``LayerNorm`` (called in the wider of ``x``'s
and the weight's dtypes and cast back, as its ``forward_native`` does), ``rotary_embedding`` to
``RotaryEmbedding`` (the plain one: each scaled variant is a class of its own, which vLLM builds
unreplaced). A call the kernels cannot express (a variance over part of the hidden size, no weight,
a rotary call without a key) runs vLLM's ``forward_native``. vLLM's hardware-agnostic layers
(``VLLM_USE_HW_AGNOSTIC``) keep a registry of their own and are not reached.

Imported only in a vLLM process whose platform is one of our adapters, from the adapter's
``init_backend()``, before vLLM builds the model.
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

__all__ = ["VLLM_OPS", "install_for", "kernel_in_effect", "kernel_targets"]

CUSTOM_OP = "vllm.model_executor.custom_op"
MECHANISM = "vllm.model_executor.custom_op.CustomOp.register_oot"

#: cardcage op -> the vLLM op class it runs in ("module:Class").
VLLM_OPS: dict[str, str] = {
    "rms_norm": "vllm.model_executor.layers.layernorm:RMSNorm",
    "fused_add_rms_norm": "vllm.model_executor.layers.layernorm:RMSNorm",
    "silu_and_mul": "vllm.model_executor.layers.activation:SiluAndMul",
    "layer_norm": "vllm.model_executor.layers.layernorm:LayerNorm",
    "rotary_embedding": "vllm.model_executor.layers.rotary_embedding.base:RotaryEmbedding",
}

#: vLLM op class ("module.Class") -> the replacement registered for it in this process.
_REPLACEMENTS: dict[str, type] = {}


def _resolve(path: str) -> Any:
    module, _, attr = path.partition(":")
    return getattr(importlib.import_module(module), attr)


def kernel_targets(op: str) -> list[dict[str, str]]:
    """Where a kernel for ``op`` runs in vLLM (data only: vLLM is not imported)."""
    from .releases import RELEASES

    target = VLLM_OPS.get(op)
    if target is None:
        return []
    versions = [release.version for release in RELEASES]
    return [
        {
            "host": "vllm",
            "releases": f"{versions[0]} - {versions[-1]}",
            "host_op": target.replace(":", "."),
            "mechanism": MECHANISM,
        }
    ]


def install_for(vendor: type) -> None:
    """Install ``vendor``'s declared kernels into vLLM's ops; once per process."""
    import sys

    from .releases import installed_version

    running = getattr(sys.modules.get("vllm"), "__version__", None)
    version = running if isinstance(running, str) else installed_version()
    install(vendor, "vllm", version or "unknown", _install)


def _install(usable: Usable) -> list[KernelInstall]:
    rows, by_class = by_host_op(usable, VLLM_OPS, "vLLM")
    registry = importlib.import_module(CUSTOM_OP).op_registry_oot
    for target, ops in by_class.items():
        rows += _install_class(registry, target, ops)
    return rows


def _install_class(registry: dict[str, type], target: str, ops: Usable) -> list[KernelInstall]:
    host_op = target.replace(":", ".")
    try:
        op_cls = _resolve(target)
    except Exception as exc:
        problem = f"vLLM's {host_op} does not import ({type(exc).__name__}: {exc})."
        return [refused_row(t, problem, host_op) for _, t in ops.values()]
    name = op_cls.__name__
    present = registry.get(name)
    if present is not None and present is not _REPLACEMENTS.get(host_op):
        problem = (
            f"vLLM already replaces {name} with {present.__module__}.{present.__qualname__} "
            "(CustomOp.register_oot): a second registration is an AssertionError inside vLLM, "
            "so cardcage does not make it. Register the op once, through the platform's kernels."
        )
        return [refused_row(t, problem, host_op) for _, t in ops.values()]
    if present is None:
        kernels = {op: fn for op, (fn, _) in ops.items()}
        forward = _FORWARD_BUILDERS[target](kernels)
        replacement = type(
            name,
            (op_cls,),
            {"forward_oot": forward, "forward_cpu": forward, "__module__": __name__},
        )
        in_tree_name = getattr(op_cls, "name", None)
        op_cls.register_oot(replacement, name=name)
        if in_tree_name is not None:  # vLLM's custom_ops switches name the in-tree op
            setattr(replacement, "name", in_tree_name)  # noqa: B010
        _REPLACEMENTS[host_op] = replacement
    return [installed_row(t, host_op, MECHANISM) for _, t in ops.values()]


def _rms_norm_forward(kernels: dict[str, Callable[..., Any]]) -> Callable[..., Any]:
    rms_norm = kernels.get("rms_norm")
    fused = kernels.get("fused_add_rms_norm")

    def forward(op: Any, x: Any, residual: Any = None) -> Any:
        kernel = rms_norm if residual is None else fused
        if kernel is None or op.variance_size_override is not None or not op.has_weight:
            return op.forward_native(x, residual)
        if residual is None:
            return kernel(x, op.weight, op.variance_epsilon)
        return kernel(x, residual, op.weight, op.variance_epsilon)

    return forward


def _silu_and_mul_forward(kernels: dict[str, Callable[..., Any]]) -> Callable[..., Any]:
    kernel = kernels["silu_and_mul"]

    def forward(op: Any, x: Any) -> Any:
        return kernel(x)

    return forward


def _layer_norm_forward(kernels: dict[str, Callable[..., Any]]) -> Callable[..., Any]:
    import torch

    kernel = kernels["layer_norm"]

    def forward(op: Any, x: Any) -> Any:
        weight, bias = op.weight, op.bias
        dtype = x.dtype if weight is None else torch.promote_types(x.dtype, weight.dtype)
        return layer_norm_in(dtype, kernel, x, weight, bias, op.eps)

    return forward


def _rotary_embedding_forward(kernels: dict[str, Callable[..., Any]]) -> Callable[..., Any]:
    kernel = kernels["rotary_embedding"]

    def forward(op: Any, positions: Any, query: Any, key: Any = None) -> Any:
        if key is None:  # cross-layer KV sharing: only the query turns
            return op.forward_native(positions, query, key)
        # vLLM's forward_native and its CUDA kernel both take the cache in query's dtype; vLLM
        # converts it once and keeps the converted buffer.
        cache = op._match_cos_sin_cache_dtype(query)
        return kernel(positions.flatten(), query, key, cache, op.head_size, op.is_neox_style)

    return forward


_FORWARD_BUILDERS: dict[str, Callable[[dict[str, Callable[..., Any]]], Callable[..., Any]]] = {
    "vllm.model_executor.layers.layernorm:RMSNorm": _rms_norm_forward,
    "vllm.model_executor.layers.activation:SiluAndMul": _silu_and_mul_forward,
    "vllm.model_executor.layers.layernorm:LayerNorm": _layer_norm_forward,
    "vllm.model_executor.layers.rotary_embedding.base:RotaryEmbedding": _rotary_embedding_forward,
}


def kernel_in_effect(row: KernelInstall) -> bool:
    """Whether vLLM builds ``row.host_op`` as cardcage's replacement now, in this process."""
    if row.host_op is None or row.host_op not in _REPLACEMENTS:
        return False
    name = row.host_op.rpartition(".")[2]
    registry = importlib.import_module(CUSTOM_OP).op_registry_oot
    return registry.get(name) is _REPLACEMENTS[row.host_op]
