"""demo-cpu's kernels in SGLang 0.5.23's own diffusion ops, and the identity it declares.

Each case starts a fresh interpreter with only the vendor sites it names on PYTHONPATH, selects
the platform with ``SGLANG_DIFFUSION_PLATFORM_OVERRIDE`` and runs SGLang's worker start-up in
SGLang's order (``initialize_current_platform()``, then its diffusion ``load_plugins()`` and
``apply_plugin_hooks()``), then builds SGLang's ops. No SGLang module is stubbed and nothing of
demo-cpu is replaced: the kernels run because demo-cpu's ``init_backend()`` registered them with
cardcage's ``CustomOp.register_oot_forward``, which handed them to SGLang's ops of the same kind
(``cardcage.platforms.hosts.sglang.ops``). demo-cpu's evidence counters say which op class called
each kernel; SGLang's own ``forward_native`` is the reference for the numbers.

A second vendor, written here without ``behaves_as``, shows what the declaration fixes: with an
out-of-tree identity SGLang's ``layers/layernorm.py`` does not import on a CPU machine, and its
RMSNorm kernel is reported at ``init_backend()`` with the fix.

Run by the nox session ``scenario-sglang``; see ``sglang_scenario.py``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest
from sglang_scenario import SITES, env, needs_sites

from cardcage.hooks.testing import write_distribution

pytestmark = needs_sites

OVERRIDE = "SGLANG_DIFFUSION_PLATFORM_OVERRIDE"
SGLANG_LAYERS = "sglang.multimodal_gen.runtime.layers"
SGLANG_RMS_NORM = f"{SGLANG_LAYERS}.layernorm.RMSNorm"
SGLANG_SILU = f"{SGLANG_LAYERS}.activation.SiluAndMul"

START_UP = """
import json, logging, sys
records = []


class Keep(logging.Handler):
    def emit(self, record):
        records.append({"level": record.levelname, "logger": record.name,
                        "message": record.getMessage()})


logging.getLogger("cardcage").addHandler(Keep(logging.WARNING))
from sglang.multimodal_gen.runtime import platforms
from sglang.multimodal_gen.runtime.platforms import plugins

platforms.initialize_current_platform()  # the platform's init_backend(): kernels registered
plugins.load_plugins()
plugins.apply_plugin_hooks()
"""

DEMO_CPU_SCRIPT = (
    START_UP
    + """
import torch
from sglang.multimodal_gen.runtime.platforms import PlatformEnum
from sglang.multimodal_gen.runtime.platforms.cpu import CpuPlatform

from cardcage.platforms.hosts.sglang import identity, ops
from cardcage_demo_cpu.diffusion.evidence import EVIDENCE

platform = platforms.current_platform
builtin = CpuPlatform()
report = {
    "adapter": type(platform).__module__,
    "enum_is_sglang_oot": platform._enum is PlatformEnum.OOT,
    "identity": {n: getattr(platform, n)() for n in identity.PREDICATES if hasattr(platform, n)},
    "cpu_identity": {n: getattr(builtin, n)() for n in identity.PREDICATES if hasattr(builtin, n)},
    "out_of_tree": platform.is_out_of_tree(),
    "mappings": [m.__dict__ for m in ops.MAPPINGS],
}

from sglang.multimodal_gen.runtime.layers.activation import SiluAndMul
from sglang.multimodal_gen.runtime.layers.layernorm import RMSNorm  # imports with demo_cpu

report["layernorm_imported"] = True
gen = torch.Generator().manual_seed(0)
tolerance = {torch.float32: 1e-5, torch.bfloat16: 1e-2, torch.float16: 2e-3}
agreement = []
for dtype in (torch.float32, torch.bfloat16, torch.float16):
    for shape in ((3, 64), (2, 5, 128)):
        norm = RMSNorm(shape[-1], eps=1e-5)
        with torch.no_grad():
            norm.weight.copy_(torch.linspace(0.5, 1.5, shape[-1]))
        silu = SiluAndMul()
        x = (torch.randn(shape, generator=gen) * 3).to(dtype)
        residual = torch.randn(shape, generator=gen).to(dtype)
        got, got_residual = norm(x, residual)
        want, want_residual = norm.forward_native(x, residual)
        cases = {
            "rms_norm": (norm(x), norm.forward_native(x)),
            "rms_norm_residual": (got, want),
            "rms_norm_new_residual": (got_residual, want_residual),
            "silu_and_mul": (silu(x), silu.forward_native(x)),
        }
        for name, (out, ref) in cases.items():
            assert out.dtype == ref.dtype == dtype and out.shape == ref.shape, name
            error = (out.float() - ref.float()).abs().max().item()
            agreement.append({"op": name, "dtype": str(dtype), "shape": list(shape),
                              "max_abs_error": error, "tolerance": tolerance[dtype]})
report["agreement"] = agreement
report["forwards"] = {
    "rms_norm": getattr(RMSNorm(8)._forward_method, "func", None).__qualname__,
    "silu_and_mul": getattr(SiluAndMul()._forward_method, "func", None).__qualname__,
}
before = EVIDENCE.count("forward", "RMS_NORM_KEY")
# SGLang's option that cardcage's RMSNorm lacks: SGLang's own forward_native runs it.
partial_variance = RMSNorm(16, var_hidden_size=8)
x = torch.randn(2, 16, generator=gen)
report["var_hidden_size"] = {
    "equal": torch.equal(partial_variance(x), partial_variance.forward_native(x)),
    "kernel_calls": EVIDENCE.count("forward", "RMS_NORM_KEY") - before,
}
report["evidence"] = EVIDENCE.as_dict()

# A kernel for an op SGLang has no counterpart of.
from cardcage.diffusion.runtime.layers.custom_op import CustomOp


@CustomOp.register("acme_fused_gate")
class AcmeFusedGate(CustomOp):
    def forward_native(self, x):
        return x


def acme_fused_gate_forward(op, x):
    return x


CustomOp.register_oot_forward(AcmeFusedGate, fn=acme_fused_gate_forward, platform_key="demo_cpu")
report["unmapped"] = [m.__dict__ for m in ops.MAPPINGS if m.host_op is None]
report["warnings"] = records
print(json.dumps(report))
"""
).replace("RMS_NORM_KEY", SGLANG_RMS_NORM)


def _run(script: str, sites: list[str], **extra: str) -> dict[str, Any]:
    environment = env([], extra)
    environment["PYTHONPATH"] = ":".join(sites)
    done = subprocess.run(
        [sys.executable, "-c", script],
        env=environment,
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-6000:]
    report: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return report


@pytest.fixture(scope="module")
def demo_cpu() -> dict[str, Any]:
    """SGLang's diffusion start-up with demo_cpu selected, then SGLang's ops built and run."""
    return _run(DEMO_CPU_SCRIPT, [str(SITES / "demo-cpu")], **{OVERRIDE: "demo_cpu"})


def test_sglangs_predicates_see_the_cpu_identity_demo_cpu_declares(
    demo_cpu: dict[str, Any],
) -> None:
    assert demo_cpu["adapter"] == "cardcage.platforms.hosts.sglang.adapter"
    identity = demo_cpu["identity"]
    assert identity["is_cpu"] is True
    assert identity["is_cuda"] is identity["is_rocm"] is identity["is_cuda_alike"] is False
    # Every identity predicate answers as SGLang's built-in CPU platform's does ...
    assert identity == demo_cpu["cpu_identity"]
    assert len(identity) >= 10
    # ... while the platform stays out of tree: SGLang's OOT member, OOT dispatch.
    assert demo_cpu["out_of_tree"] is True
    assert demo_cpu["enum_is_sglang_oot"] is True


def test_sglangs_diffusion_layernorm_imports_with_demo_cpu_selected(
    demo_cpu: dict[str, Any],
) -> None:
    assert demo_cpu["layernorm_imported"] is True


def test_sglangs_new_ops_dispatch_to_demo_cpus_kernels(demo_cpu: dict[str, Any]) -> None:
    assert demo_cpu["forwards"] == {
        "rms_norm": "rms_norm_forward",  # through the argument adapter (functools.wraps)
        "silu_and_mul": "silu_and_mul_forward",
    }
    mapped = {m["host_op"]: m["kernel"] for m in demo_cpu["mappings"] if m["host_op"]}
    assert mapped == {
        SGLANG_RMS_NORM: "cardcage_demo_cpu.diffusion.ops.rms_norm_forward",
        SGLANG_SILU: "cardcage_demo_cpu.diffusion.ops.silu_and_mul_forward",
    }
    # The kernels ran, called by SGLang's op classes: 6 cases x 2 RMSNorm calls, 6 SiLU calls.
    forwards = demo_cpu["evidence"]["forward"]
    assert forwards == {SGLANG_RMS_NORM: 12, SGLANG_SILU: 6}


def test_the_kernels_agree_with_sglangs_forward_native(demo_cpu: dict[str, Any]) -> None:
    agreement = demo_cpu["agreement"]
    assert len(agreement) == 24
    off = [a for a in agreement if a["max_abs_error"] > a["tolerance"]]
    assert off == []
    # SiluAndMul does SGLang's operations in SGLang's order: equal, not just close.
    assert all(a["max_abs_error"] == 0 for a in agreement if a["op"] == "silu_and_mul")
    assert all(a["max_abs_error"] == 0 for a in agreement if a["op"] == "rms_norm_new_residual")


def test_an_sglang_option_cardcages_op_lacks_runs_sglangs_forward_native(
    demo_cpu: dict[str, Any],
) -> None:
    assert demo_cpu["var_hidden_size"] == {"equal": True, "kernel_calls": 0}


def test_a_kernel_for_an_op_sglang_lacks_is_reported_with_the_fix(
    demo_cpu: dict[str, Any],
) -> None:
    (unmapped,) = demo_cpu["unmapped"]
    assert unmapped["kernel"] == "__main__.acme_fused_gate_forward"
    assert "no op named 'acme_fused_gate'" in unmapped["problem"]
    (warning,) = [w for w in demo_cpu["warnings"] if "acme_fused_gate" in w["message"]]
    assert warning["level"] == "WARNING"
    message = warning["message"]
    for part in (
        "__main__.acme_fused_gate_forward",  # the kernel
        "__main__.AcmeFusedGate",  # the op
        "platform plugin 'demo_cpu'",  # the plugin
        "distribution cardcage-demo-cpu",  # and its distribution
        "rms_norm",  # SGLang's ops, to choose from
        "register it for the op class of the same kind",  # the fix
    ):
        assert part in message, (part, message)
    # demo-cpu's own two kernels were mapped silently.
    assert [w for w in demo_cpu["warnings"] if w["level"] == "WARNING"] == [warning]


# -- a vendor that does not declare its identity ---------------------------------------------

PLAIN_VENDOR = """
from cardcage.diffusion.runtime.platforms.interface import Platform, PlatformEnum
from cardcage.platforms.host import host_qualname


def rms_norm_forward(op, x, residual=None):
    return op.forward_native(x, residual)


class PlainCpuPlatform(Platform):
    _enum = PlatformEnum.OOT
    device_name = "plain_cpu"
    device_type = "cpu"
    dispatch_key = "CPU"

    def get_dispatch_key_name(self):
        return "plain_cpu"

    def init_backend(self):
        from cardcage.diffusion.runtime.layers.custom_op import CustomOp
        from cardcage.diffusion.runtime.layers.layernorm import RMSNorm

        CustomOp.register_oot_forward(RMSNorm, fn=rms_norm_forward, platform_key="plain_cpu")


def activate():
    return host_qualname("ccplain_vendor:PlainCpuPlatform")
"""

PLAIN_SCRIPT = (
    START_UP
    + """
platform = platforms.current_platform
report = {"is_cpu": platform.is_cpu(), "out_of_tree": platform.is_out_of_tree(),
          "warnings": records}
try:
    import sglang.multimodal_gen.runtime.layers.layernorm
    report["layernorm"] = "imported"
except ImportError as exc:
    report["layernorm"] = f"{type(exc).__name__}: {exc}"
print(json.dumps(report))
"""
)


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    site = tmp_path_factory.mktemp("plain-site")
    write_distribution(
        site,
        "cc-plain-vendor",
        entry_points={"sglang.multimodal_gen.platforms": {"plain_cpu": "ccplain_vendor:activate"}},
        modules={"ccplain_vendor": PLAIN_VENDOR},
    )
    return _run(PLAIN_SCRIPT, [str(site)], **{OVERRIDE: "plain_cpu"})


def test_without_a_declared_identity_sglangs_layernorm_does_not_import(
    plain: dict[str, Any],
) -> None:
    assert plain["is_cpu"] is False
    assert plain["out_of_tree"] is True
    assert plain["layernorm"].startswith("ImportError"), plain["layernorm"]
    assert "norm_infer" in plain["layernorm"]


def test_its_rms_norm_kernel_is_reported_at_init_backend_with_the_identity_fix(
    plain: dict[str, Any],
) -> None:
    (warning,) = [w for w in plain["warnings"] if w["level"] == "WARNING"]
    message = warning["message"]
    assert warning["logger"] == "cardcage.platforms.hosts.sglang.ops"
    for part in (
        "ccplain_vendor.rms_norm_forward",
        "cardcage.diffusion.runtime.layers.layernorm.RMSNorm",
        "platform plugin 'plain_cpu'",
        "distribution cc-plain-vendor",
        f"{SGLANG_LAYERS}.layernorm does not import",
        "behaves_as = PlatformEnum.CPU",
    ):
        assert part in message, (part, message)


# -- a vendor that declares op-table kernels ---------------------------------------------------

KERNEL_VENDOR = """
import torch
from cardcage.diffusion.runtime.platforms.interface import Platform, PlatformEnum
from cardcage.platforms.host import host_qualname

CALLS = {}


def rms_norm(x, weight, eps):
    CALLS["rms_norm"] = CALLS.get("rms_norm", 0) + 1
    x32 = x.to(torch.float32)
    out = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps) * weight.to(torch.float32)
    return out.to(x.dtype)


def silu_and_mul(x):
    CALLS["silu_and_mul"] = CALLS.get("silu_and_mul", 0) + 1
    d = x.shape[-1] // 2
    return torch.nn.functional.silu(x[..., :d]) * x[..., d:]


class KernelCpuPlatform(Platform):
    _enum = PlatformEnum.OOT
    device_name = "kernel_cpu"
    device_type = "cpu"
    dispatch_key = "CPU"
    behaves_as = PlatformEnum.CPU
    kernels = {
        "rms_norm": "cckernel_vendor:rms_norm",
        "silu_and_mul": "cckernel_vendor:silu_and_mul",
    }

    def get_dispatch_key_name(self):
        return "kernel_cpu"


def activate():
    return host_qualname("cckernel_vendor:KernelCpuPlatform")
"""

KERNEL_SCRIPT = (
    START_UP
    + """
import torch
from sglang.multimodal_gen.runtime.layers.activation import SiluAndMul
from sglang.multimodal_gen.runtime.layers.layernorm import RMSNorm

import cckernel_vendor
from cardcage.platforms import kernels

gen = torch.Generator().manual_seed(0)
norm, silu = RMSNorm(64, eps=1e-5), SiluAndMul()
with torch.no_grad():
    norm.weight.copy_(torch.linspace(0.5, 1.5, 64))
x = torch.randn(3, 64, generator=gen)
report = {
    "close": {
        "rms_norm": torch.allclose(norm(x), norm.forward_native(x), atol=1e-5, rtol=1e-5),
        "silu_and_mul": torch.allclose(silu(x), silu.forward_native(x)),
    },
    "calls": cckernel_vendor.CALLS,
    "in_effect": kernels.in_effect(),
    "warnings": records,
}
print(json.dumps(report))
"""
)


@pytest.fixture(scope="module")
def declared(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    site = tmp_path_factory.mktemp("kernel-site")
    write_distribution(
        site,
        "cc-kernel-vendor",
        entry_points={
            "sglang.multimodal_gen.platforms": {"kernel_cpu": "cckernel_vendor:activate"}
        },
        modules={"cckernel_vendor": KERNEL_VENDOR},
    )
    return _run(KERNEL_SCRIPT, [str(site)], **{OVERRIDE: "kernel_cpu"})


def test_kernels_a_diffusion_platform_declares_run_in_sglangs_diffusion_ops(
    declared: dict[str, Any],
) -> None:
    # No register_oot_forward in the vendor's code: cardcage's adapter installed the declared
    # kernels after init_backend(), and cardcage's registration handed them to SGLang's ops.
    assert declared["close"] == {"rms_norm": True, "silu_and_mul": True}
    assert declared["calls"] == {"rms_norm": 1, "silu_and_mul": 1}  # SGLang's ops called them
    rows = {row["op"]: row for row in declared["in_effect"]}
    assert set(rows) == {"rms_norm", "silu_and_mul"}
    assert (rows["rms_norm"]["host"], rows["rms_norm"]["host_op"]) == ("sglang", SGLANG_RMS_NORM)
    assert (rows["silu_and_mul"]["host"], rows["silu_and_mul"]["host_op"]) == (
        "sglang",
        SGLANG_SILU,
    )
    for row in rows.values():
        assert row["in_effect"] is True, row
        assert row["problem"] is None
        assert row["mechanism"] == f"{SGLANG_LAYERS}.custom_op.CustomOp.register_oot_forward"
    assert [w for w in declared["warnings"] if w["level"] == "WARNING"] == []
