"""Op-table kernels in the diffusion ops: this runtime's half of ``cardcage.platforms.kernels``.

A diffusion platform declares its kernels as its SRT platform does, op name to dotted path
(``kernels = {"rms_norm": "acme.kernels:rms_norm", ...}``), in the op table's signatures. Right
after the platform's ``init_backend()`` (``Platform.install_kernels``, which this runtime's
``initialize_current_platform()`` and SGLang's diffusion start-up, through cardcage's adapter,
both call) each kernel becomes a forward of this runtime's op of that kind, registered with
``CustomOp.register_oot_forward`` under the platform's dispatch key: ``rms_norm`` and
``fused_add_rms_norm`` in ``RMSNorm`` (without and with a residual), ``silu_and_mul`` in
``SiluAndMul``. ``register_oot_forward`` hands each forward on to the host's op of the same name
when a host runs the platform (SGLang's diffusion ``RMSNorm`` and ``SiluAndMul``,
``cardcage.platforms.hosts.sglang.ops``), so one declaration reaches both runtimes' diffusion ops.

The rows (``cardcage.platforms.kernels.installed()``) say where each kernel went: this runtime's
op (host ``cardcage``) when cardcage's runtime runs the platform, SGLang's diffusion op (host
``sglang``) when SGLang does. An op with a forward registered by other means (the platform's own
``init_backend()`` calling ``register_oot_forward``) keeps it: the kernel is refused with a
WARNING instead of replacing it. ``layer_norm`` and ``rotary_embedding`` have no op here.
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
    refused_row,
)

__all__ = [
    "DIFFUSION_OPS",
    "HOST",
    "SGLANG_OPS",
    "install_for",
    "kernel_in_effect",
    "kernel_targets",
]

#: The rows' host when cardcage's own diffusion runtime runs the platform.
HOST = "cardcage"
MECHANISM = "cardcage.diffusion.runtime.layers.custom_op.CustomOp.register_oot_forward"
SGLANG_MECHANISM = "sglang.multimodal_gen.runtime.layers.custom_op.CustomOp.register_oot_forward"

#: cardcage op -> this runtime's op class that runs it ("module:Class").
DIFFUSION_OPS: dict[str, str] = {
    "rms_norm": "cardcage.diffusion.runtime.layers.layernorm:RMSNorm",
    "fused_add_rms_norm": "cardcage.diffusion.runtime.layers.layernorm:RMSNorm",
    "silu_and_mul": "cardcage.diffusion.runtime.layers.activation:SiluAndMul",
}

#: cardcage op -> SGLang's diffusion op class that cardcage's hand-off gives the forward to.
SGLANG_OPS: dict[str, str] = {
    "rms_norm": "sglang.multimodal_gen.runtime.layers.layernorm.RMSNorm",
    "fused_add_rms_norm": "sglang.multimodal_gen.runtime.layers.layernorm.RMSNorm",
    "silu_and_mul": "sglang.multimodal_gen.runtime.layers.activation.SiluAndMul",
}

#: (op class "module.Class", dispatch key) -> the forward registered for it in this process.
_FORWARDS: dict[tuple[str, str], Callable[..., Any]] = {}


def kernel_targets(op: str) -> list[dict[str, str]]:
    """Where a diffusion platform's kernel for ``op`` runs, per runtime (data only: neither
    torch nor SGLang is imported), as ``cardcage hooks`` and ``doctor`` list them."""
    target = DIFFUSION_OPS.get(op)
    if target is None:
        return []
    from cardcage.diffusion import __version__ as ours
    from cardcage.platforms.hosts.sglang.releases import RELEASES

    rows = [
        {
            "host": HOST,
            "releases": f"{ours} - {ours}",
            "host_op": target.replace(":", "."),
            "mechanism": MECHANISM,
        }
    ]
    versions = [release.version for release in RELEASES if release.diffusion_plugins]
    if versions:
        rows.append(
            {
                "host": "sglang",
                "releases": f"{versions[0]} - {versions[-1]}",
                "host_op": SGLANG_OPS[op],
                "mechanism": SGLANG_MECHANISM,
            }
        )
    return rows


def _declaring_class(platform: Any) -> type | None:
    """The class that declares ``platform``'s kernels: the vendor's, not an adapter above it."""
    for klass in type(platform).__mro__:
        if "kernels" in vars(klass):
            return klass if vars(klass)["kernels"] else None
    return None


def install_for(platform: Any) -> None:
    """Install the kernels ``platform``'s class declares into the diffusion ops; once per
    process and class."""
    vendor = _declaring_class(platform)
    if vendor is None:
        return
    from cardcage.platforms.hosts import announced

    key = str(platform.get_dispatch_key_name()).strip()
    under_sglang = announced() == "sglang"
    if under_sglang:
        from cardcage.platforms.hosts.sglang.releases import running_release

        release = running_release().version  # as the SRT rows name it
    else:
        from cardcage.diffusion import __version__ as release

    def installer(usable: Usable) -> list[KernelInstall]:
        return _install(usable, key, under_sglang)

    install(vendor, HOST, release, installer, in_effect=kernel_in_effect)


def _install(usable: Usable, key: str, under_sglang: bool) -> list[KernelInstall]:
    from cardcage.diffusion.runtime.layers.custom_op import CustomOp

    rows, by_class = by_host_op(usable, DIFFUSION_OPS, "The diffusion runtimes")
    for target, ops in by_class.items():
        module, _, name = target.partition(":")
        op_cls = getattr(importlib.import_module(module), name)
        host_op = target.replace(":", ".")
        present = CustomOp._oot_forward_registry.get((op_cls, key))
        if present is not None and present is not _FORWARDS.get((host_op, key)):
            problem = (
                f"{host_op} already has a forward under dispatch key {key!r} "
                f"({getattr(present, '__module__', '?')}."
                f"{getattr(present, '__qualname__', present)}), registered by other means: "
                "cardcage does not replace it. Register the op once: drop that "
                "register_oot_forward call or the kernel from the platform's kernels."
            )
            rows += [refused_row(t, problem, host_op) for _, t in ops.values()]
            continue
        rows += _register(CustomOp, op_cls, host_op, key, ops, under_sglang)
    return rows


def _register(
    custom_op: Any, op_cls: type, host_op: str, key: str, ops: Usable, under_sglang: bool
) -> list[KernelInstall]:
    """Register one forward for ``op_cls`` that runs ``ops``' kernels; under SGLang, the rows
    follow the forward to SGLang's op, where cardcage's hand-off took it (a hand-off that
    failed was reported by cardcage's SGLang room)."""
    kernels = {op: fn for op, (fn, _) in ops.items()}
    forward = _FORWARD_BUILDERS[op_cls.__name__](kernels)
    if not under_sglang:
        custom_op.register_oot_forward(op_cls, fn=forward, platform_key=key)
        _FORWARDS[(host_op, key)] = forward
        return [installed_row(t, host_op, MECHANISM) for _, t in ops.values()]
    from dataclasses import replace

    from cardcage.platforms.hosts.sglang.ops import MAPPINGS

    before = len(MAPPINGS)
    custom_op.register_oot_forward(op_cls, fn=forward, platform_key=key)
    _FORWARDS[(host_op, key)] = forward
    return [
        installed_row(replace(template, host="sglang"), mapping.host_op, SGLANG_MECHANISM)
        for mapping in MAPPINGS[before:]
        if mapping.host_op is not None
        for _, template in ops.values()
    ]


def _rms_norm_forward(kernels: dict[str, Callable[..., Any]]) -> Callable[..., Any]:
    """``RMSNorm``'s forward: ``rms_norm`` without a residual, ``fused_add_rms_norm`` with one;
    the op's own ``forward_native`` where the needed kernel is not declared."""
    rms_norm = kernels.get("rms_norm")
    fused = kernels.get("fused_add_rms_norm")

    def forward(op: Any, x: Any, residual: Any = None) -> Any:
        kernel = rms_norm if residual is None else fused
        if kernel is None:
            return op.forward_native(x, residual)
        if residual is None:
            return kernel(x, op.weight, op.variance_epsilon)
        return kernel(x, residual, op.weight, op.variance_epsilon)

    forward.__qualname__ = "cardcage_rms_norm_forward"
    return forward


def _silu_and_mul_forward(kernels: dict[str, Callable[..., Any]]) -> Callable[..., Any]:
    kernel = kernels["silu_and_mul"]

    def forward(op: Any, x: Any) -> Any:
        return kernel(x)

    forward.__qualname__ = "cardcage_silu_and_mul_forward"
    return forward


_FORWARD_BUILDERS: dict[str, Callable[[dict[str, Callable[..., Any]]], Callable[..., Any]]] = {
    "RMSNorm": _rms_norm_forward,
    "SiluAndMul": _silu_and_mul_forward,
}


def kernel_in_effect(row: KernelInstall) -> bool:
    """Whether this runtime's op ``row.host_op`` builds with cardcage's forward now, in this
    process: its registry still holds that forward for the class under the platform's key.
    (SGLang's diffusion ops are its room's question: ``cardcage.platforms.hosts.sglang.ops``.)"""
    if row.host_op is None:
        return False
    from cardcage.diffusion.runtime.layers.custom_op import CustomOp

    module, _, name = row.host_op.rpartition(".")
    op_cls = getattr(importlib.import_module(module), name)
    return any(
        CustomOp._oot_forward_registry.get((op_cls, key)) is forward
        for (host_op, key), forward in _FORWARDS.items()
        if host_op == row.host_op
    )
