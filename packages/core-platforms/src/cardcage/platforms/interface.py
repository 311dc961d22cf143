"""``SRTPlatform``: what the SRT runtime asks of a hardware platform, at SGLang 0.5.23's level.

The seed's ``sglang.srt.platforms.interface``, brought to SGLang 0.5.23's contract: a platform
declares what it can do in ``capabilities`` (a ``PlatformCapabilities``), serves its KV pools from
``get_kv_pool_cls(kind=...)``, and may provide the speculative-decoding and graph factories. The
seed's older names (``support_cuda_graph()``, ``get_mha_kv_pool_cls()``, ``supports_fp8()``, ...)
keep working, each mapped onto its successor with a one-time ``PlatformDeprecationWarning``.

A vendor subclasses it together with its device mixin (``class MySRTPlatform(SRTPlatform,
MyDeviceMixin)``; either base order works because this class defines no device operation,
``is_pin_memory_available`` included: that one belongs to the device mixin, as in the seed's
table) and overrides what its hardware needs. Every subclass is checked when it is defined
(``__init_subclass__``): a contract method whose signature cannot take the hosts' calls raises
``PlatformContractError``; an old name warns, naming its successor.

Import-safe: nothing but the device mixin and the contract checks at module scope; torch is
imported inside the one method that needs it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, ClassVar, Literal, NoReturn

from . import _contract
from .device_mixin import DeviceMixin, PlatformEnum

__all__ = [
    "KVPoolKind",
    "PlatformCapabilities",
    "PlatformEnum",
    "SRTPlatform",
    "reject_out_of_tree_path",
    "require_out_of_tree_impl",
]

#: The KV pool kinds ``get_kv_pool_cls(kind=...)`` is asked for.
KVPoolKind = Literal["mha", "mla", "dsa"]

_CAPABILITY_FIELDS = (
    "supports_triton",
    "graph_capture",
    "piecewise_graph",
    "hicache_device_kernels",
    "supports_pynccl",
)


def _restore_capabilities(fields: dict[str, bool]) -> PlatformCapabilities:
    return PlatformCapabilities(**fields)


class PlatformCapabilities:
    """What a platform can do, read by the runtime before it builds anything.

    Frozen, keyword-only, every field False by default (the conservative answer), as SGLang
    0.5.23's struct of the same name; this one is a plain class, so ``cardcage.platforms`` needs
    no msgspec, and under SGLang the adapter converts it to SGLang's type.

    * ``supports_triton``: Triton kernels can launch on the device; without it the runtime uses
      its torch-native allocator and writers.
    * ``graph_capture``: the decode graph runner (``get_graph_runner_cls()``) runs. An
      out-of-tree platform that sets it must return a runner class there.
    * ``piecewise_graph``: the prefill piecewise compilation backend
      (``get_piecewise_backend_cls()``) runs; the same applies.
    * ``hicache_device_kernels``: the hierarchical-cache transfer kernels exist for the device;
      otherwise the host pools skip their staging buffers.
    * ``supports_pynccl``: model-parallel groups may create a PyNccl communicator when the caller
      does not choose (read for out-of-tree platforms).

    Each field must be a ``bool``: ``PlatformCapabilities(graph_capture=1)`` raises
    ``PlatformContractError``.
    """

    __slots__ = _CAPABILITY_FIELDS
    __match_args__ = (
        "supports_triton",
        "graph_capture",
        "piecewise_graph",
        "hicache_device_kernels",
        "supports_pynccl",
    )

    #: The field names, in declaration order.
    FIELDS: ClassVar[tuple[str, ...]] = _CAPABILITY_FIELDS

    supports_triton: bool
    graph_capture: bool
    piecewise_graph: bool
    hicache_device_kernels: bool
    supports_pynccl: bool

    def __init__(
        self,
        *,
        supports_triton: bool = False,
        graph_capture: bool = False,
        piecewise_graph: bool = False,
        hicache_device_kernels: bool = False,
        supports_pynccl: bool = False,
    ) -> None:
        values: tuple[object, ...] = (
            supports_triton,
            graph_capture,
            piecewise_graph,
            hicache_device_kernels,
            supports_pynccl,
        )
        for name, value in zip(_CAPABILITY_FIELDS, values, strict=True):
            if type(value) is not bool:
                from .errors import PlatformContractError

                raise PlatformContractError(
                    platform_class="PlatformCapabilities",
                    owner="PlatformCapabilities",
                    member=name,
                    problem=f"must be True or False, got {type(value).__name__} {value!r}.",
                    fix=f"Write PlatformCapabilities({name}={bool(value)!r}) if that is meant.",
                )
            object.__setattr__(self, name, value)

    def as_dict(self) -> dict[str, bool]:
        """``{field: value}`` for every field, in declaration order."""
        return {name: getattr(self, name) for name in _CAPABILITY_FIELDS}

    def replace(self, **changes: bool) -> PlatformCapabilities:
        """A copy with ``changes`` applied (the instance itself is frozen)."""
        unknown = set(changes) - set(_CAPABILITY_FIELDS)
        if unknown:
            raise TypeError(
                f"PlatformCapabilities has no field {', '.join(sorted(unknown))}; "
                f"the fields are {', '.join(_CAPABILITY_FIELDS)}."
            )
        return type(self)(**{**self.as_dict(), **changes})

    __replace__ = replace  # copy.replace() on Python 3.13+

    def __setattr__(self, name: str, value: object) -> NoReturn:
        raise AttributeError(
            f"PlatformCapabilities is frozen: cannot set {name!r}; use .replace({name}=...)"
        )

    def __delattr__(self, name: str) -> NoReturn:
        raise AttributeError(f"PlatformCapabilities is frozen: cannot delete {name!r}")

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self.as_dict() == other.as_dict()

    def __hash__(self) -> int:
        return hash(tuple(getattr(self, name) for name in _CAPABILITY_FIELDS))

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in _CAPABILITY_FIELDS)
        return f"PlatformCapabilities({fields})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (_restore_capabilities, (self.as_dict(),))

    def __copy__(self) -> PlatformCapabilities:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> PlatformCapabilities:
        return self


class SRTPlatform(DeviceMixin):
    """Base class of every SRT platform, with SGLang 0.5.23's defaults."""

    supported_quantization: tuple[str, ...] = ()
    #: What the runtime may rely on; a platform declares its own (``capabilities =
    #: PlatformCapabilities(graph_capture=True, ...)``). A subclass that still overrides the
    #: seed's ``support_cuda_graph()`` or ``support_piecewise_cuda_graph()`` instead gets a
    #: per-instance ``capabilities`` that reads them.
    capabilities: PlatformCapabilities = PlatformCapabilities()
    #: SGLang 0.5.23's counterpart of this base: what ``cardcage.platforms.hosts.sglang.adapter``
    #: subclasses when SGLang hosts the platform (DESIGN §8). Not for vendors to change.
    sglang_base_class: ClassVar[str] = "sglang.srt.platforms.interface:SRTPlatform"
    #: vLLM 0.33's counterpart of this base, what ``cardcage.platforms.hosts.vllm.adapter``
    #: subclasses when vLLM hosts the platform. Not for vendors to change.
    vllm_base_class: ClassVar[str] = "vllm.platforms.interface:Platform"
    #: The vendor's vLLM section: ``"module:Class"`` of a class holding what only vLLM asks
    #: (``get_attn_backend_cls``, ``check_and_update_config``, ``dispatch_key``, ...). Imported
    #: only when vLLM hosts the platform, so it may import vLLM; its names win over every other
    #: answer in the vLLM adapter. None: vLLM's base answers every vLLM-only name.
    vllm_section: ClassVar[str | None] = None
    #: The vendor's kernels, op name -> ``"module:function"`` (``cardcage.platforms.kernels``
    #: lists the ops and their signatures). Data, imported only where a host installs them into
    #: its ops, right after ``init_backend()`` in each process that builds them.
    kernels: ClassVar[Mapping[str, str]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Check the contract as the class is defined (``cardcage.platforms._contract``)."""
        super().__init_subclass__(**kwargs)
        _contract.check_platform_class(cls, SRTPlatform)

    # -- lifecycle --------------------------------------------------------------------------
    def apply_server_args_defaults(self, server_args: Any) -> None:
        """Adjust parsed server arguments for this platform (runs in ServerArgs.__post_init__)."""

    def init_backend(self) -> None:
        """One-time backend set-up in each worker, before the model is built."""

    def post_load_model(self, model: Any) -> None:
        """Called once in each worker after the model's weights are loaded; change ``model`` in
        place (move parameters, swap quantization methods, install forward hooks)."""

    # -- subsystem factories ------------------------------------------------------------------
    def get_default_attention_backend(self) -> str:
        """The name of the attention backend to use when the user chose none."""
        raise NotImplementedError

    def get_default_speculative_draft_attention_backend(self, algorithm: str) -> str:
        """The draft model's attention backend for speculative ``algorithm``."""
        raise NotImplementedError

    def get_graph_runner_cls(self) -> type | None:
        """The decode graph runner class; None means the runtime's device-keyed default, which
        an out-of-tree platform with ``capabilities.graph_capture`` does not get."""
        return None

    def get_full_graph_backend_cls(self) -> type | None:
        """The full device-graph backend class; None means the runtime's default."""
        return None

    def get_kv_pool_cls(self, *, kind: KVPoolKind) -> type | None:
        """The KV pool class for ``kind`` ("mha", "mla" or "dsa"); None means the runtime's own.

        The class must subclass the runtime's pool for that kind and is constructed with the
        same keyword arguments. A platform that still overrides the seed's per-kind factory
        (``get_mha_kv_pool_cls()``, ``get_mla_kv_pool_cls()``, ``get_dsa_kv_pool_cls()``) is
        served from it, with a one-time ``PlatformDeprecationWarning``; ``get_nsa_kv_pool_cls()``
        is never consulted, as in SGLang 0.5.23.
        """
        hook = _contract.LEGACY_KV_POOL_HOOKS.get(kind)
        if hook is None:
            from .errors import UnknownKVPoolKindError

            raise UnknownKVPoolKindError(kind, tuple(_contract.LEGACY_KV_POOL_HOOKS))
        owner = _contract.legacy_override(type(self), hook, SRTPlatform)
        if owner is None:
            return None
        _contract.warn_legacy_use(owner, hook)
        with _contract.serving_legacy(self, hook):
            answer: type | None = getattr(self, hook)()
        return answer

    def get_paged_allocator_cls(self) -> type | None:
        """The paged KV allocator class; None means the runtime's own, which falls back to
        torch-native kernels when ``capabilities.supports_triton`` is False."""
        return None

    def get_piecewise_backend_cls(self) -> type | None:
        """The piecewise compilation backend class; None means the runtime's device-keyed
        default, which an out-of-tree platform with ``capabilities.piecewise_graph`` does not
        get."""
        return None

    def get_speculative_cache_locs_fn(self) -> Callable[..., Any] | None:
        """A function computing speculative decoding's KV-cache locations; None: the runtime's."""
        return None

    def get_speculative_worker_cls(self, algorithm: str) -> type | None:
        """A worker class replacing the runtime's for speculative ``algorithm``; None keeps it."""
        return None

    def get_speculative_graph_runner_cls(self, algorithm: str, phase: str) -> type | None:
        """The draft graph runner for ``phase`` ("draft_decode" or "draft_extend"); None runs
        the draft eagerly. Not consulted when ``capabilities.graph_capture`` is False."""
        return None

    def get_quantization_config(self, quantization: str) -> type | None:
        """A hardware-specific config class for ``quantization``; None means use the default."""
        return None

    def get_compile_backend(self, mode: str | None = None) -> str:
        """The torch.compile backend; ``mode`` lets a platform pick per compile mode."""
        return "inductor"

    def get_dispatch_key_name(self) -> str:
        """Selects ``forward_<key>()`` on multi-platform ops; "native" means the portable path."""
        return "native"

    # -- speculative decoding and feature support (conservative defaults) ----------------------
    def supports_speculative_algorithm(self, algorithm: str) -> bool:
        """Whether the platform runs speculative ``algorithm`` ("EAGLE", "DFLASH", ...)."""
        return False

    def supports_speculative_draft_attention_backend(self, algorithm: str, backend: str) -> bool:
        """Whether the draft model of ``algorithm`` may use attention ``backend``."""
        return False

    def support_mamba_cache_extra_buffer(self) -> bool:
        """Whether the platform supports the Mamba cache's extra snapshot buffer."""
        return False

    # -- distributed ----------------------------------------------------------------------------
    def get_group_coordinator_device(self, local_rank: int) -> Any:
        """The ``torch.device`` a process group's coordinator binds to on ``local_rank``; asked
        of out-of-tree platforms only. The CPU by default (needs the ``torch`` extra)."""
        from .torch_import import require_torch

        return require_torch("get_group_coordinator_device()").device("cpu")

    # -- the seed's names, deprecated: each maps onto its SGLang 0.5.23 successor ---------------
    def support_cuda_graph(self) -> bool:
        """Deprecated: read ``capabilities.graph_capture``."""
        _contract.warn_deprecated_call(type(self), "support_cuda_graph")
        return _contract.declared_capabilities(self).graph_capture

    def support_piecewise_cuda_graph(self) -> bool:
        """Deprecated: read ``capabilities.piecewise_graph``."""
        _contract.warn_deprecated_call(type(self), "support_piecewise_cuda_graph")
        return _contract.declared_capabilities(self).piecewise_graph

    def supports_fp8(self) -> bool:
        """Deprecated, with no successor in SGLang 0.5.23; answers False here."""
        _contract.warn_deprecated_call(type(self), "supports_fp8")
        return False

    def get_mha_kv_pool_cls(self) -> type | None:
        """Deprecated: ``get_kv_pool_cls(kind="mha")``."""
        _contract.warn_deprecated_call(type(self), "get_mha_kv_pool_cls")
        if _contract.is_serving_legacy(self, "get_mha_kv_pool_cls"):
            return None  # an override's super() call: the runtime's own pool
        return self.get_kv_pool_cls(kind="mha")

    def get_mla_kv_pool_cls(self) -> type | None:
        """Deprecated: ``get_kv_pool_cls(kind="mla")``."""
        _contract.warn_deprecated_call(type(self), "get_mla_kv_pool_cls")
        if _contract.is_serving_legacy(self, "get_mla_kv_pool_cls"):
            return None  # an override's super() call: the runtime's own pool
        return self.get_kv_pool_cls(kind="mla")

    def get_dsa_kv_pool_cls(self) -> type | None:
        """Deprecated: ``get_kv_pool_cls(kind="dsa")``."""
        _contract.warn_deprecated_call(type(self), "get_dsa_kv_pool_cls")
        if _contract.is_serving_legacy(self, "get_dsa_kv_pool_cls"):
            return None  # an override's super() call: the runtime's own pool
        return self.get_kv_pool_cls(kind="dsa")

    def get_nsa_kv_pool_cls(self) -> type | None:
        """Deprecated (an older name of the DSA factory): ``get_kv_pool_cls(kind="dsa")``."""
        _contract.warn_deprecated_call(type(self), "get_nsa_kv_pool_cls")
        return self.get_kv_pool_cls(kind="dsa")


def require_out_of_tree_impl(platform: SRTPlatform, *, hook: str, subsystem: str) -> None:
    """Refuse "no opinion" (a None from factory ``hook``) from an out-of-tree platform.

    The runtime calls it where a factory answered None: an in-tree platform then gets the
    runtime's device-keyed default, which would hand an out-of-tree device another device's
    implementation. Does nothing for an in-tree platform; raises
    ``OutOfTreeImplementationError`` (a ``NotImplementedError``) for an out-of-tree one.
    """
    if not platform.is_out_of_tree():
        return
    from .errors import OutOfTreeImplementationError

    cls = type(platform).__name__
    raise OutOfTreeImplementationError(
        f"Out-of-tree platform {cls} (device {platform.device_name!r}) provides no {subsystem}: "
        f"{hook} answered None, and the runtime's fallback is chosen by device and would give "
        f"this device another device's implementation. Override {hook} on {cls}, or declare "
        "in capabilities that the platform does not use this subsystem.",
        platform_class=cls,
        device_name=platform.device_name,
        subsystem=subsystem,
        hook=hook,
    )


def reject_out_of_tree_path(platform: SRTPlatform, *, subsystem: str) -> None:
    """Refuse a runtime path that has no platform seam yet, for an out-of-tree platform.

    Does nothing for an in-tree platform; raises ``OutOfTreeImplementationError`` (a
    ``NotImplementedError``) for an out-of-tree one, which would otherwise get classes written
    for the in-tree devices.
    """
    if not platform.is_out_of_tree():
        return
    from .errors import OutOfTreeImplementationError

    cls = type(platform).__name__
    raise OutOfTreeImplementationError(
        f"Out-of-tree platform {cls} (device {platform.device_name!r}) reached {subsystem}, "
        "which has no platform hook yet: the runtime would build classes written for its "
        "in-tree devices. Turn off the feature that leads there for this platform.",
        platform_class=cls,
        device_name=platform.device_name,
        subsystem=subsystem,
        hook=None,
    )
