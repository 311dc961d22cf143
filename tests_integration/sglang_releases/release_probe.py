"""Run one SGLang release's own start-up steps in this interpreter; report JSON.

Usage: ``release_probe.py STEP [STEP ...]``. The steps of ``tests_integration/sglang/probe.py``
(``import``, ``srt``, ``srt-load``, ``srt-call``, ``diffusion``, ``diffusion-load``), which run
unchanged on every release with the plugin system, plus:

* ``imported``: whether ``sglang.srt.platforms`` is imported yet (right after ``import``);
* ``table``: the release's row of ``cardcage.platforms.hosts.sglang.releases`` against the
  release's own classes: the public names of its ``SRTPlatform`` (with ``DeviceMixin``), the
  fields of its ``PlatformCapabilities``, the in-tree classes the row names, and whether its
  diffusion plugins module exists (found, not imported);
* ``answers``: what the selected platform answers to every name the release calls for
  capabilities, KV pools and the paged allocator, next to what the vendor's class declares;
* ``kernels``: what SGLang's model runner does before it builds a model (the selected platform's
  ``init_backend()``), then the release's own SRT ``RMSNorm`` (without and with a residual),
  ``SiluAndMul``, ``LayerNorm`` and ``RotaryEmbedding`` called on float32 inputs: whether each
  agrees with the op's own ``forward_native``, demo-cpu's kernel counters, and
  ``cardcage.platforms.kernels.in_effect()``.

No SGLang module is stubbed: whatever runs is SGLang's code as the release's wheel ships it.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "sglang"))

import probe

SRT_BASE = "sglang.srt.platforms.interface:SRTPlatform"


def _release() -> Any:
    from cardcage.platforms.hosts.sglang import releases

    return releases.running_release()


def _qualname(value: Any) -> str | None:
    if value is None:
        return None
    return f"{value.__module__}:{value.__qualname__}"


def _table() -> dict[str, Any]:
    import sglang

    row = _release()
    base = probe._resolve(SRT_BASE)
    names = {n for k in base.__mro__ if k is not object for n in vars(k) if not n.startswith("_")}
    interface = importlib.import_module(base.__module__)
    struct = getattr(interface, "PlatformCapabilities", None)
    fields = list(getattr(struct, "__struct_fields__", ())) if struct is not None else []
    in_tree = [q for _, q in row.kv_pool_factories.values()]
    if row.allocator_fallback:
        in_tree.append(row.allocator_fallback)
    resolved = {}
    for qualname in in_tree:
        module, _, attr = qualname.partition(":")
        resolved[qualname] = isinstance(getattr(importlib.import_module(module), attr), type)
    plugins = Path(sglang.__file__).parent / "multimodal_gen/runtime/platforms/plugins.py"
    return {
        "row": row.version,
        "sglang_version": sglang.__version__,
        "missing_from_row": sorted(names - row.names),
        "not_in_release": sorted(row.names - names),
        "capability_fields": fields,
        "row_capability_fields": list(row.capability_fields),
        "in_tree_classes": resolved,
        "diffusion_plugins_module": plugins.is_file(),
        "row_diffusion_plugins": row.diffusion_plugins,
    }


def _imported() -> dict[str, Any]:
    """Whether SGLang's SRT selection module is imported yet (run right after ``import``)."""
    return {"srt_platforms_imported": "sglang.srt.platforms" in sys.modules}


def _answers_of(platform: Any) -> dict[str, Any]:
    row = _release()
    vendor = probe._vendor_class(type(platform))
    declared = vendor.capabilities  # the vendor's own declaration (cardcage's struct)
    out: dict[str, Any] = {
        "declared": declared.as_dict(),
        "capability_methods": {n: getattr(platform, n)() for n in row.capability_methods},
        "kv_pools": {},
        "legacy_kv_pool_names": sorted(
            n
            for n in ("get_mha_kv_pool_cls", "get_mla_kv_pool_cls", "get_dsa_kv_pool_cls")
            if hasattr(platform, n)
        ),
    }
    if row.reads_capabilities:
        import msgspec

        caps = platform.capabilities
        base = probe._resolve(SRT_BASE)
        out["capabilities_type_is_sglangs"] = type(caps) is type(base.capabilities)
        out["capabilities"] = msgspec.structs.asdict(caps)
        for kind in ("mha", "mla", "dsa"):
            out["kv_pools"][f"get_kv_pool_cls(kind={kind!r})"] = _qualname(
                platform.get_kv_pool_cls(kind=kind)
            )
    else:
        for name in row.kv_pool_factories:
            out["kv_pools"][f"{name}()"] = _qualname(getattr(platform, name)())
    allocator = platform.get_paged_allocator_cls()
    out["paged_allocator"] = _qualname(allocator)
    if row.allocator_fallback is not None:  # the very class the row names (it may re-export it)
        out["paged_allocator_is_the_rows"] = allocator is probe._resolve(row.allocator_fallback)
    return out


def _answers() -> dict[str, Any]:
    """demo-cpu's answers (SGLang selected it), then those of ``graphs_vendor``'s adapter, built
    on the same release's base the way SGLang's selection builds any adapter."""
    import pkgutil

    from sglang.srt import platforms

    from cardcage.platforms.hosts.sglang import adapter_qualname

    graphs = pkgutil.resolve_name(adapter_qualname("graphs_vendor:GraphsVendorPlatform"))
    return {
        "demo_cpu": _answers_of(platforms.current_platform),
        "graphs_vendor": _answers_of(graphs()),
    }


#: A Llama's config, all SGLang's ServerArgs reads of a model before the scheduler builds ops.
_LLAMA_CONFIG = (
    '{"model_type": "llama", "architectures": ["LlamaForCausalLM"], "vocab_size": 512, '
    '"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, '
    '"num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 256}'
)


def _kernels() -> dict[str, Any]:
    import tempfile

    import torch
    from sglang.srt import platforms
    from sglang.srt.server_args import ServerArgs, set_global_server_args_for_scheduler

    # What SGLang's scheduler does before it builds a model: its server arguments made global
    # (0.5.12 - 0.5.18's SiluAndMul reads them), then the model runner's init_backend().
    model = Path(tempfile.mkdtemp())
    (model / "config.json").write_text(_LLAMA_CONFIG, encoding="utf-8")
    set_global_server_args_for_scheduler(ServerArgs(model_path=str(model), device="cpu"))
    platforms.current_platform.init_backend()
    from sglang.srt.layers.activation import SiluAndMul
    from sglang.srt.layers.layernorm import LayerNorm, RMSNorm
    from sglang.srt.layers.rotary_embedding.base import RotaryEmbedding

    from cardcage.platforms import kernels
    from cardcage_demo_cpu.evidence import EVIDENCE

    def close(got: Any, want: Any) -> bool:
        pairs = zip(got, want, strict=True) if isinstance(got, tuple) else [(got, want)]
        return all(torch.allclose(a, b, atol=1e-5, rtol=1e-5) for a, b in pairs)

    generator = torch.Generator().manual_seed(0)
    norm, silu, layer = RMSNorm(64, eps=1e-6), SiluAndMul(), LayerNorm(64)
    try:
        rope = RotaryEmbedding(16, 16, 64, 10000, True, torch.float32)
        rope_error = None
    except Exception as exc:  # what the release does on an out-of-tree platform, reported
        rope, rope_error = None, f"{type(exc).__name__}: {exc}"
    with torch.no_grad():
        for param in (norm.weight, layer.weight, layer.bias):
            param.copy_(torch.randn(64, generator=generator))
    x, residual = (torch.randn(3, 64, generator=generator) for _ in range(2))
    gate_up = torch.randn(3, 128, generator=generator)
    query, key = (torch.randn(3, 64, generator=generator) for _ in range(2))
    positions = torch.tensor([0, 5, 9])
    found = {
        "rms_norm": (norm(x), norm.forward_native(x)),
        "fused_add_rms_norm": (norm(x, residual), norm.forward_native(x, residual)),
        "silu_and_mul": (silu(gate_up), silu.forward_native(gate_up)),
        "layer_norm": (layer(x), layer.forward_native(x)),
    }
    if rope is not None:
        found["rotary_embedding"] = (
            rope(positions, query.clone(), key.clone()),
            rope.forward_native(positions, query.clone(), key.clone()),
        )
    ops = (*found, "rotary_embedding")
    return {
        "rope_error": rope_error,
        "close": {op: close(*pair) for op, pair in found.items()},
        "counts": {op: EVIDENCE.count("kernel", op) for op in ops},
        "in_effect": kernels.in_effect(),
    }


STEPS = {
    **probe.STEPS,
    "imported": _imported,
    "table": _table,
    "answers": _answers,
    "kernels": _kernels,
}


if __name__ == "__main__":
    probe.STEPS = STEPS
    sys.exit(probe.main(sys.argv[1:]))
