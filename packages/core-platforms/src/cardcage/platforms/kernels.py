"""One kernel API for every host's ops: a vendor names a kernel once, by the op it implements.

A platform class declares its kernels as data, op name to the kernel's dotted path::

    class AcmeNpuSRTPlatform(SRTPlatform):
        kernels = {
            "rms_norm": "acme_npu_plugin.kernels:rms_norm",
            "fused_add_rms_norm": "acme_npu_plugin.kernels:fused_add_rms_norm",
            "silu_and_mul": "acme_npu_plugin.kernels:silu_and_mul",
        }

Each op name fixes the kernel's signature in tensors and scalars (``OPS`` below), so a vendor's
kernel library never sees a host class: the host's room unpacks the host's op object into that
signature. Where a host selects the platform, its room installs the kernels into the host's own
op mechanism in each process that builds ops, right after the platform's ``init_backend()``:
SGLang's SRT fused ops (``cardcage.platforms.hosts.sglang.srt_kernels``) on every SGLang release
with plugins, vLLM's ``CustomOp`` replacements (``cardcage.platforms.hosts.vllm.kernels``).
What was installed, refused or left out, and why, is this process's
``installed()``; ``in_effect()`` asks the host, in its own process, whether its ops still
dispatch to them.

Import-safe: stdlib only. The kernels themselves, torch and the host are imported only by
``install()``, in the host's process.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

__all__ = [
    "OPS",
    "Installer",
    "KernelInstall",
    "OpSpec",
    "Usable",
    "by_host_op",
    "declared_kernels",
    "in_effect",
    "install",
    "installed",
    "installed_row",
    "layer_norm_in",
    "load_kernel",
    "refusal",
    "refused_row",
]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class OpSpec:
    """One op a kernel can implement: its signature, what it computes, how close is equal."""

    name: str
    #: The positional parameters the kernel is called with, in order.
    parameters: tuple[str, ...]
    #: What it returns.
    returns: str
    #: What it computes, and what it may and may not do to its inputs.
    semantics: str
    #: dtype name -> (atol, rtol) within which the kernel must agree with the reference.
    tolerances: Mapping[str, tuple[float, float]]

    @property
    def signature(self) -> str:
        return f"{self.name}({', '.join(self.parameters)}) -> {self.returns}"


_FLOAT_TOLERANCES: Mapping[str, tuple[float, float]] = MappingProxyType(
    {"float32": (1e-5, 1e-5), "float16": (1e-3, 1e-3), "bfloat16": (1.6e-2, 1.6e-2)}
)

#: Every op cardcage knows, by name.
OPS: Mapping[str, OpSpec] = MappingProxyType(
    {
        spec.name: spec
        for spec in (
            OpSpec(
                "rms_norm",
                ("x", "weight", "eps"),
                "out",
                "out = x / sqrt(mean(x**2, last dim) + eps) * weight, computed in float32 and "
                "returned in x's dtype; x and weight are read only.",
                _FLOAT_TOLERANCES,
            ),
            OpSpec(
                "fused_add_rms_norm",
                ("x", "residual", "weight", "eps"),
                "(out, residual_out)",
                "residual_out = x + residual (summed in float32, returned in x's dtype), "
                "out = rms_norm(residual_out, weight, eps); x and residual are read only, so "
                "a kernel that works in place copies first.",
                _FLOAT_TOLERANCES,
            ),
            OpSpec(
                "silu_and_mul",
                ("x",),
                "out",
                "with d = x.shape[-1] // 2: out = silu(x[..., :d]) * x[..., d:]; x is read only.",
                _FLOAT_TOLERANCES,
            ),
            OpSpec(
                "layer_norm",
                ("x", "weight", "bias", "eps"),
                "out",
                "out = (x - mean(x)) / sqrt(var(x) + eps) * weight + bias over the last dim, "
                "biased variance, as torch.nn.functional.layer_norm; weight and bias may each "
                "be None (no scale, no shift). x, weight and bias arrive in one dtype, the "
                "host op's compute dtype: the host's room casts x to it and the result back. "
                "x is read only.",
                _FLOAT_TOLERANCES,
            ),
            OpSpec(
                "rotary_embedding",
                ("positions", "query", "key", "cos_sin_cache", "head_size", "is_neox_style"),
                "(query, key)",
                "positions: (tokens,) integers; query, key: (tokens, heads * head_size); "
                "cos_sin_cache: (positions, rotary_dim), each row [cos | sin] of one position, in "
                "query's dtype or float32 (the host's choice). Rotates the first rotary_dim = "
                "cos_sin_cache.shape[-1] channels of every head by its token's row, NeoX style "
                "(the two halves) or GPT-J style (even and odd channels); the other channels pass "
                "through. Returns the rotated (query, key); the kernel may rotate in place and "
                "return its inputs, since every host uses the returned tensors.",
                _FLOAT_TOLERANCES,
            ),
        )
    }
)


@dataclass(frozen=True)
class KernelInstall:
    """What became of one declared kernel in one host's op, in this process."""

    op: str
    #: The kernel's dotted path, as declared.
    kernel: str
    #: The platform class that declared it, ``module.qualname``.
    platform: str
    host: str
    release: str
    #: The host's op class that now runs the kernel, ``module.qualname`` (None: none does).
    host_op: str | None
    #: How the host was given it (``BaseFusedOp.register_oot_forward``, ...); "" when refused.
    mechanism: str
    #: Why no host op runs it, and the fix; None once installed.
    problem: str | None = None

    @property
    def installed(self) -> bool:
        return self.problem is None


_lock = threading.Lock()
_installs: list[KernelInstall] = []
_installed_for: set[tuple[type, str]] = set()  # (platform class, host) already installed
#: host -> whether a row's kernel is in effect now, for a host that is not a room of
#: ``cardcage.platforms.hosts`` (cardcage's own runtimes, which core-platforms never imports).
_checkers: dict[str, Callable[[KernelInstall], bool]] = {}


def declared_kernels(cls: type) -> dict[str, str]:
    """The kernels ``cls`` declares (its ``kernels`` attribute), op name -> dotted path."""
    declared = getattr(cls, "kernels", None)
    return dict(declared) if isinstance(declared, Mapping) else {}


def load_kernel(path: str) -> Callable[..., Any]:
    """Import the kernel ``path`` names (``module:function`` or ``module.function``)."""
    import importlib

    module, colon, attr = path.strip().partition(":")
    if not colon:
        module, _, attr = module.rpartition(".")
    obj: Any = importlib.import_module(module)
    for part in attr.split("."):
        obj = getattr(obj, part)
    if not callable(obj):
        raise TypeError(f"{path} is not callable")
    return obj  # type: ignore[no-any-return]


#: The kernels that load and fit, as ``install`` hands them to a room: op -> (function, the row
#: to fill in).
Usable = dict[str, tuple[Callable[..., Any], KernelInstall]]
#: What a host's room gives ``install``: it takes the usable kernels and returns one row per
#: (op, host op) it tried.
Installer = Callable[[Usable], list[KernelInstall]]


def by_host_op(
    usable: Usable, targets: Mapping[str, str], host: str
) -> tuple[list[KernelInstall], dict[str, Usable]]:
    """``usable`` split by the host op class ``targets`` maps each op to ("module:Class"), and
    a refused row for each op the host has no class for (``host`` names it in the message)."""
    refused: list[KernelInstall] = []
    by_class: dict[str, Usable] = {}
    for op, entry in usable.items():
        target = targets.get(op)
        if target is None:
            refused.append(
                refused_row(
                    entry[1],
                    f"{host} has no op cardcage maps it to (cardcage maps "
                    f"{', '.join(sorted(targets))}). It still runs wherever another host maps "
                    "it; nothing to fix there.",
                )
            )
        else:
            by_class.setdefault(target, {})[op] = entry
    return refused, by_class


def install(
    vendor: type,
    host: str,
    release: str,
    installer: Installer,
    *,
    in_effect: Callable[[KernelInstall], bool] | None = None,
) -> None:
    """Install the kernels the platform class ``vendor`` declares into ``host``'s ops, once per
    process and class.

    Called by the host's room right after the platform's ``init_backend()``, with the room's
    ``installer``; a runtime that is no room of ``cardcage.platforms.hosts`` (cardcage's own) passes
    ``in_effect``, which ``in_effect()`` then asks for its rows. An op cardcage does not know, or a
    kernel that does not import or cannot take the op's parameters, gets one WARNING naming kernel,
    op, host, platform, distribution and fix, and reaches no host op; so does a kernel the installer
    refuses.
    """
    with _lock:
        if in_effect is not None:
            _checkers[host] = in_effect
        if (vendor, host) in _installed_for:
            return
        _installed_for.add((vendor, host))
    where = f"{vendor.__module__}.{vendor.__qualname__}"
    from cardcage.platforms.envs import CARDCAGE_KERNELS

    if not CARDCAGE_KERNELS.get():
        logger.info("%s's kernels are not installed in %s: CARDCAGE_KERNELS is false", where, host)
        return
    rows: list[KernelInstall] = []
    usable: dict[str, tuple[Callable[..., Any], KernelInstall]] = {}
    for op, path in declared_kernels(vendor).items():
        template = KernelInstall(op, path, where, host, release, None, "")
        problem, fn = _checked(op, path)
        if fn is None:
            rows.append(_refused(template, problem))
        else:
            usable[op] = (fn, template)
    if usable:
        rows += installer(usable)
    with _lock:
        _installs.extend(rows)
    for row in rows:
        if row.problem is not None:
            logger.warning("%s", row.problem)
        else:
            logger.debug("kernel %s installed in %s (%s)", row.kernel, row.host_op, row.mechanism)


def _checked(op: str, path: str) -> tuple[str, Callable[..., Any] | None]:
    """``("", kernel)`` when ``path`` imports and fits ``op``; else (the problem, None)."""
    import inspect

    spec = OPS.get(op)
    if spec is None:
        from cardcage.hooks.spelling import closest

        close = closest(op, sorted(OPS))
        hint = f" Did you mean {close!r}?" if close else ""
        return (
            f"cardcage knows no op {op!r}.{hint} Known ops: {', '.join(sorted(OPS))}. "
            "Fix the op name in the platform's kernels.",
            None,
        )
    try:
        fn = load_kernel(path)
    except Exception as exc:
        return f"the kernel does not load: {type(exc).__name__}: {exc}. Fix its path.", None
    try:
        inspect.signature(fn).bind(*spec.parameters)
    except TypeError:
        return (
            f"the kernel cannot be called as {spec.signature}. Give it those parameters, in "
            "that order.",
            None,
        )
    except ValueError:  # a builtin or extension function without a signature: take it
        pass
    return "", fn


def layer_norm_in(
    dtype: Any, kernel: Callable[..., Any], x: Any, weight: Any, bias: Any, eps: float
) -> Any:
    """Call a ``layer_norm`` kernel in the host op's compute ``dtype``, the result in ``x``'s.

    Both hosts normalise in a dtype of the op's choosing (SGLang: the op's ``dtype``, float32 by
    default; vLLM: the wider of ``x``'s and the weight's) and cast back; the op table hands the
    kernel ``x``, ``weight`` and ``bias`` in one dtype, so the rooms adapt here, once.
    """
    if (
        x.dtype == dtype
        and (weight is None or weight.dtype == dtype)
        and (bias is None or bias.dtype == dtype)
    ):
        return kernel(x, weight, bias, eps)
    weight = None if weight is None else weight.to(dtype)
    bias = None if bias is None else bias.to(dtype)
    return kernel(x.to(dtype), weight, bias, eps).to(x.dtype)


def _refused(template: KernelInstall, problem: str) -> KernelInstall:
    from dataclasses import replace

    return replace(template, problem=refusal(template, problem))


def installed_row(template: KernelInstall, host_op: str, mechanism: str) -> KernelInstall:
    """``template`` filled in for a kernel the host's op ``host_op`` now runs."""
    from dataclasses import replace

    return replace(template, host_op=host_op, mechanism=mechanism)


def refused_row(template: KernelInstall, problem: str, host_op: str | None = None) -> KernelInstall:
    """``template`` filled in for a kernel the host cannot take: ``problem`` says why and how
    to fix it; the row's message names everything else (``refusal``)."""
    from dataclasses import replace

    return replace(template, host_op=host_op, problem=refusal(template, problem))


def refusal(template: KernelInstall, problem: str) -> str:
    """The one WARNING line for a kernel a host cannot take: kernel, op, host, release,
    platform, its distribution, what went wrong and the fix."""
    dist = _distribution_of(template.platform)
    return (
        f"Kernel {template.kernel} for op {template.op!r} of {template.platform} ({dist}) is "
        f"not installed in {template.host} {template.release}: {problem}"
    )


def _distribution_of(qualname: str) -> str:
    from importlib import metadata

    top = qualname.partition(".")[0]
    dists = metadata.packages_distributions().get(top)
    return dists[0] if dists else "distribution unknown"


def installed() -> tuple[KernelInstall, ...]:
    """Every kernel this process installed or refused, in order."""
    with _lock:
        return tuple(_installs)


def in_effect() -> list[dict[str, Any]]:
    """Each installed kernel, with whether the host's op still dispatches to it *now*.

    Answered inside the host's process (a test, a hook or the vendor's own code calls it there):
    the host's room checks its own registry, which cardcage's CLI, running where no host runs,
    cannot see. A row per ``installed()`` entry, as JSON-ready data.
    """
    from cardcage.platforms.hosts import room

    rows = []
    for row in installed():
        effective = False
        if row.installed:
            check = _checkers.get(row.host) or getattr(room(row.host), "kernel_in_effect", None)
            effective = bool(check(row)) if callable(check) else False
        rows.append(
            {
                "op": row.op,
                "kernel": row.kernel,
                "platform": row.platform,
                "host": row.host,
                "release": row.release,
                "host_op": row.host_op,
                "mechanism": row.mechanism,
                "problem": row.problem,
                "in_effect": effective,
            }
        )
    return rows
