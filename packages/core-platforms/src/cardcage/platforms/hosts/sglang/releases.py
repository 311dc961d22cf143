"""What each SGLang release with the plugin system asks of an out-of-tree SRT platform: data.

SGLang's platform interface changed under plugin authors from release to release (the names of
its base class, how a platform declares what it can do, what "no class" means from a factory,
whether out-of-tree diffusion platforms exist). Everything cardcage knows about those changes is
in ``RELEASES`` below, one entry per measured release, and nowhere else: the adapter
(``compat``) serves the names a release calls from it, and ``cardcage doctor`` / ``cardcage
platform`` read it to say what the installed release will do with each plugin. The scenario
``nox -s scenario-sglang-releases`` installs every release listed here and checks each entry
against that release's own classes, so the table cannot drift from the wheels.

A release between two measured ones is read as the measured release below it (``release_for``);
one outside ``SUPPORTED`` is read as the nearest end and reported as unsupported.

Import-safe and cheap: stdlib only, nothing of SGLang. It is imported by the adapter (so only in
a process SGLang hosts) and by the diagnostics, never on the way to cardcage's first
``current_platform``.
"""

from __future__ import annotations

import importlib
import re
import sys
import types
from collections.abc import Mapping
from typing import Any

__all__ = [
    "RELEASES",
    "SUPPORTED",
    "Release",
    "installed_version",
    "parse_version",
    "release_for",
    "running_release",
]

#: The first and the last SGLang release cardcage supports as a host (both measured).
SUPPORTED: tuple[str, str] = ("0.5.12", "0.5.23")

_MEMORY_POOL = "sglang.srt.mem_cache.memory_pool"
_ALLOCATOR = "sglang.srt.mem_cache.allocator:PagedTokenToKVPoolAllocator"
_KV_POOL_NAMES = ("get_mha_kv_pool_cls", "get_mla_kv_pool_cls", "get_dsa_kv_pool_cls")
_CAPABILITY_METHODS = {
    "support_cuda_graph": "graph_capture",
    "support_piecewise_cuda_graph": "piecewise_graph",
}


class Release:
    """One SGLang release, as an out-of-tree SRT platform meets it.

    A plain class, not a dataclass: the table is data, and this keeps the module as light as
    its stdlib imports.
    """

    __slots__ = (
        "allocator_fallback",
        "capability_fields",
        "capability_methods",
        "diffusion_plugins",
        "fused_op_base",
        "kv_pool_factories",
        "names",
        "notes",
        "platforms_imported_by_sglang",
        "rotary_needs_vllm",
        "torchvision_at_import",
        "version",
    )

    def __init__(
        self,
        version: str,
        *,
        names: frozenset[str],
        kv_pool_factories: Mapping[str, tuple[str, str]],
        capability_methods: Mapping[str, str],
        capability_fields: tuple[str, ...],
        allocator_fallback: str | None,
        diffusion_plugins: bool,
        platforms_imported_by_sglang: bool,
        torchvision_at_import: bool,
        fused_op_base: str,
        rotary_needs_vllm: bool = False,
        notes: tuple[str, ...] = (),
    ) -> None:
        #: The release, as its metadata spells it.
        self.version = version
        #: Every public name of the release's ``SRTPlatform`` and ``DeviceMixin``: what its code
        #: may call on a platform.
        self.names = names
        #: The per-kind KV-pool factories the release calls on an out-of-tree platform, each to
        #: ``(kind, in-tree pool class as "module:Class")``. SGLang builds whatever they return,
        #: so a None ("the runtime's own", in cardcage's contract) must become that class.
        #: Empty where the release asks ``get_kv_pool_cls(kind=...)`` and treats None itself.
        self.kv_pool_factories = types.MappingProxyType(dict(kv_pool_factories))
        #: The capability methods the release calls instead of reading ``capabilities``, each to
        #: the ``PlatformCapabilities`` field that answers it. Empty where it reads the struct.
        self.capability_methods = types.MappingProxyType(dict(capability_methods))
        #: The fields of the release's ``PlatformCapabilities`` (empty: it has none). A field of
        #: cardcage's struct not listed here, nor in ``capability_methods``, is never read.
        self.capability_fields = capability_fields
        #: The allocator class ("module:Class") the release needs where the platform's
        #: ``get_paged_allocator_cls()`` answers None; None where the release falls back itself.
        self.allocator_fallback = allocator_fallback
        #: Whether the release selects out-of-tree diffusion platforms and loads diffusion
        #: plugins (the ``sglang.multimodal_gen.*`` entry-point groups).
        self.diffusion_plugins = diffusion_plugins
        #: Whether ``import sglang`` imports ``sglang.srt.platforms``; where it does not, SGLang's
        #: SRT loader may run general plugins before its selection module is imported.
        self.platforms_imported_by_sglang = platforms_imported_by_sglang
        #: Whether ``import sglang`` imports torchvision (a dependency to install on CPU).
        self.torchvision_at_import = torchvision_at_import
        #: The base class ("module:Class") of the release's SRT ops (``RMSNorm``,
        #: ``SiluAndMul``, ...) whose ``register_oot_forward`` takes an out-of-tree forward,
        #: keyed by the platform's dispatch key and the op's exact class.
        self.fused_op_base = fused_op_base
        #: Whether the release's ``RotaryEmbedding`` imports vLLM's rotary kernel
        #: (``vllm._custom_ops``) for an out-of-tree platform on a machine its own checks do not
        #: call CUDA, ROCm, its CPU engine, XPU, NPU, MUSA or MPS: without vLLM installed, no
        #: model with rotary position embeddings builds there, kernels or not. 0.5.15 exempts
        #: ``is_out_of_tree()`` platforms.
        self.rotary_needs_vllm = rotary_needs_vllm
        #: What else a vendor should know about the release, in words.
        self.notes = notes

    @property
    def reads_capabilities(self) -> bool:
        """Whether the release reads ``capabilities`` (a struct) rather than ``support_*()``."""
        return bool(self.capability_fields)

    def capability_fields_read(self) -> tuple[str, ...]:
        """The ``PlatformCapabilities`` fields whose value reaches this release's code."""
        if self.capability_fields:
            return self.capability_fields
        return tuple(dict.fromkeys(self.capability_methods.values()))

    def mapped(self) -> dict[str, str]:
        """cardcage contract name -> what this release reads it through (the adapter's work).

        Only names the release does not have itself: each is answered from the vendor's
        declaration under the release's own name.
        """
        if self.kv_pool_factories:
            pools = ", ".join(f"{name}()" for name in self.kv_pool_factories)
            methods = ", ".join(f"{name}()" for name in self.capability_methods)
            return {"get_kv_pool_cls": pools, "capabilities": methods}
        out = {name: f"capabilities.{field}" for name, field in _CAPABILITY_METHODS.items()}
        out.update({name: f"get_kv_pool_cls(kind={name[4:7]!r})" for name in _KV_POOL_NAMES})
        return out

    def host_names_for(self, name: str) -> tuple[str, ...]:
        """The names of this release's ``SRTPlatform`` through which it reaches the contract
        name ``name`` a vendor defines: the name itself when the release has it, else the names
        the adapter answers from it (``mapped()``), else none (never called)."""
        if name in self.names:
            return (name,)
        if self.kv_pool_factories:
            if name == "get_kv_pool_cls":
                return tuple(self.kv_pool_factories)
            if name == "capabilities":
                return tuple(self.capability_methods)
            return ()
        if name in _CAPABILITY_METHODS:
            return ("capabilities",)
        if name in _KV_POOL_NAMES:
            return ("get_kv_pool_cls",)
        return ()

    def never_called(self, overridden: set[str]) -> list[str]:
        """The names in ``overridden`` (contract names a vendor defines) that this release
        never calls, directly or through the adapter."""
        served = self.names | set(self.mapped())
        return sorted(name for name in overridden if name not in served)

    def __repr__(self) -> str:
        return f"Release({self.version!r})"


def _names(previous: frozenset[str], *, added: str = "", removed: str = "") -> frozenset[str]:
    gone = set(removed.split())
    unknown = gone - previous
    if unknown:
        raise ValueError(f"removing names the previous release lacks: {sorted(unknown)}")
    return frozenset((previous - gone) | set(added.split()))


# Public names of SRTPlatform and DeviceMixin, release by release, as deltas of the previous one
# (read from each wheel's sglang/srt/platforms/interface.py and device_mixin.py).
_NAMES_0_5_12 = _names(
    frozenset(),
    added="""
    apply_server_args_defaults device_name device_type empty_cache get_available_memory
    get_communicator_class get_compile_backend get_cpu_architecture get_current_memory_usage
    get_default_attention_backend get_device get_device_capability get_device_name
    get_device_total_memory get_device_uuid get_dispatch_key_name get_graph_runner_cls
    get_mha_kv_pool_cls get_mla_kv_pool_cls get_nsa_kv_pool_cls get_paged_allocator_cls
    get_piecewise_backend_cls get_torch_distributed_backend_str inference_mode init_backend
    is_cpu is_cuda is_cuda_alike is_mps is_musa is_npu is_out_of_tree is_pin_memory_available
    is_rocm is_tpu is_xpu seed_everything set_device support_cuda_graph
    support_piecewise_cuda_graph supported_quantization supports_fp8 synchronize
    verify_quantization
    """,
)
_NAMES_0_5_15 = _names(
    _NAMES_0_5_12,
    added="get_dsa_kv_pool_cls get_quantization_config",
    removed="get_nsa_kv_pool_cls",
)
_NAMES_0_5_18 = _names(
    _NAMES_0_5_15, added="get_torch_profiler_activity get_torch_profiler_activity_str"
)
_NAMES_0_5_20 = _names(_NAMES_0_5_18, added="reindex_device_id")
_NAMES_0_5_22 = _names(
    _NAMES_0_5_20,
    added="""
    capabilities cpu_arch get_kv_pool_cls get_full_graph_backend_cls post_load_model
    support_mamba_cache_extra_buffer get_speculative_cache_locs_fn supports_speculative_algorithm
    supports_speculative_draft_attention_backend get_default_speculative_draft_attention_backend
    """,
    removed="""
    support_cuda_graph support_piecewise_cuda_graph supports_fp8 get_mha_kv_pool_cls
    get_mla_kv_pool_cls get_dsa_kv_pool_cls
    """,
)
_NAMES_0_5_23 = _names(
    _NAMES_0_5_22,
    added="get_group_coordinator_device get_speculative_worker_cls "
    "get_speculative_graph_runner_cls is_sail",
)

_CAPABILITIES_0_5_22 = (
    "supports_triton",
    "graph_capture",
    "piecewise_graph",
    "hicache_device_kernels",
)


def _per_kind(dsa_name: str, dsa_class: str) -> dict[str, tuple[str, str]]:
    return {
        "get_mha_kv_pool_cls": ("mha", f"{_MEMORY_POOL}:MHATokenToKVPool"),
        "get_mla_kv_pool_cls": ("mla", f"{_MEMORY_POOL}:MLATokenToKVPool"),
        dsa_name: ("dsa", f"{_MEMORY_POOL}:{dsa_class}"),
    }


def _before_0_5_22(version: str, names: frozenset[str], *notes: str) -> Release:
    """A release from before the capabilities struct (0.5.12 - 0.5.20)."""
    dsa = ("get_nsa_kv_pool_cls", "NSATokenToKVPool") if version == "0.5.12" else None
    return Release(
        version,
        names=names,
        kv_pool_factories=_per_kind(*(dsa or ("get_dsa_kv_pool_cls", "DSATokenToKVPool"))),
        capability_methods=_CAPABILITY_METHODS,
        capability_fields=(),
        allocator_fallback=_ALLOCATOR,
        diffusion_plugins=False,
        platforms_imported_by_sglang=version != "0.5.12",
        torchvision_at_import=True,
        # sglang.kernels.fused_op arrived in 0.5.18; MultiPlatformOp became its alias.
        fused_op_base=_MULTI_PLATFORM_OP if version in ("0.5.12", "0.5.15") else _BASE_FUSED_OP,
        rotary_needs_vllm=version == "0.5.12",
        notes=notes,
    )


_MULTI_PLATFORM_OP = "sglang.srt.layers.utils.multi_platform:MultiPlatformOp"
_BASE_FUSED_OP = "sglang.kernels.fused_op:BaseFusedOp"

_NO_DIFFUSION = (
    "SGLang's diffusion runtime selects no out-of-tree platform and loads no diffusion plugin "
    "before 0.5.22."
)

#: Every measured release, oldest first.
RELEASES: tuple[Release, ...] = (
    _before_0_5_22(
        "0.5.12",
        _NAMES_0_5_12,
        "The DSA pool factory is still named get_nsa_kv_pool_cls (pool NSATokenToKVPool).",
        "import sglang does not import sglang.srt.platforms: SGLang's SRT loader can run "
        "general plugins before the platform is selected.",
        _NO_DIFFUSION,
    ),
    _before_0_5_22("0.5.15", _NAMES_0_5_15, _NO_DIFFUSION),
    _before_0_5_22("0.5.18", _NAMES_0_5_18, _NO_DIFFUSION),
    _before_0_5_22("0.5.20", _NAMES_0_5_20, _NO_DIFFUSION),
    Release(
        "0.5.22",
        names=_NAMES_0_5_22,
        kv_pool_factories={},
        capability_methods={},
        capability_fields=_CAPABILITIES_0_5_22,
        allocator_fallback=None,
        diffusion_plugins=True,
        platforms_imported_by_sglang=True,
        torchvision_at_import=False,
        fused_op_base=_BASE_FUSED_OP,
        notes=("PlatformCapabilities has no supports_pynccl field yet.",),
    ),
    Release(
        "0.5.23",
        names=_NAMES_0_5_23,
        kv_pool_factories={},
        capability_methods={},
        capability_fields=(*_CAPABILITIES_0_5_22, "supports_pynccl"),
        allocator_fallback=None,
        diffusion_plugins=True,
        platforms_imported_by_sglang=True,
        torchvision_at_import=False,
        fused_op_base=_BASE_FUSED_OP,
    ),
)

_VERSION = re.compile(r"\s*v?(\d+)\.(\d+)(?:\.(\d+))?")


def parse_version(text: str) -> tuple[int, int, int] | None:
    """``"0.5.23.post1"`` -> ``(0, 5, 23)``; None when ``text`` starts with no release number."""
    match = _VERSION.match(text)
    if match is None:
        return None
    major, minor, patch = match.groups()
    return int(major), int(minor), int(patch or 0)


def release_for(version: str) -> tuple[Release, bool]:
    """The table's entry that describes SGLang ``version``, and whether it is supported.

    A release between two measured ones is described by the measured one below it; one before
    ``SUPPORTED[0]`` by the first entry, one after ``SUPPORTED[1]`` by the last, both reported
    unsupported (False), as is a version that does not parse.
    """
    parsed = parse_version(version)
    if parsed is None:
        return RELEASES[-1], False
    if parsed < _key(SUPPORTED[0]):
        return RELEASES[0], False
    if parsed > _key(SUPPORTED[1]):
        return RELEASES[-1], False
    found = RELEASES[0]
    for release in RELEASES:
        if _key(release.version) <= parsed:
            found = release
    return found, True


def _key(version: str) -> tuple[int, int, int]:
    """A version of the table (always a release number) as a comparable tuple."""
    parsed = parse_version(version)
    if parsed is None:
        raise ValueError(f"not a release number: {version!r}")
    return parsed


def installed_version() -> str | None:
    """The installed SGLang's version, from its metadata (SGLang is not imported), or None."""
    from importlib import metadata

    try:
        return metadata.version("sglang")
    except metadata.PackageNotFoundError:
        return None


def running_release() -> Release:
    """The entry for the SGLang that runs in this process: the version its imported package
    reports, else its metadata's; the newest entry when neither says."""
    version = _imported_version()
    if version is None:
        version = installed_version()
    return release_for(version)[0] if version is not None else RELEASES[-1]


def _imported_version() -> str | None:
    """The version the imported ``sglang`` package declares, or None when it is not imported.

    SGLang selects its platform while ``sglang/__init__.py`` is still running, before it sets
    ``sglang.__version__``; its ``sglang.version`` module (a few lines, imported by that
    ``__init__`` anyway) already knows. Reading it costs nothing, where the metadata lookup that
    ``installed_version`` makes scans every distribution on the path (about 3 ms beside SGLang's
    dependencies, paid in every SGLang process that selects a cardcage platform).
    """
    if "sglang" not in sys.modules:
        return None
    version = getattr(sys.modules["sglang"], "__version__", None)
    if isinstance(version, str):
        return version
    try:
        declared = getattr(importlib.import_module("sglang.version"), "__version__", None)
    except ImportError:
        return None
    return declared if isinstance(declared, str) else None


def describe(release: Release) -> dict[str, Any]:
    """``release`` as JSON-ready data (for the diagnostics and the docs)."""
    return {
        "version": release.version,
        "kv_pool_factories": dict(release.kv_pool_factories),
        "capability_methods": dict(release.capability_methods),
        "capability_fields": list(release.capability_fields),
        "allocator_fallback": release.allocator_fallback,
        "diffusion_plugins": release.diffusion_plugins,
        "fused_op_base": release.fused_op_base,
    }
