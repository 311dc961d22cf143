"""``SRTPlatform``: what the SRT runtime asks of a hardware platform.

The seed's ``sglang.srt.platforms.interface``. A vendor subclasses it together with its device
mixin (``class MySRTPlatform(SRTPlatform, MyDeviceMixin)``; either base order works because this
class defines no device operation, ``is_pin_memory_available`` included: that one belongs to the
device mixin, as in the seed's table) and overrides the factories its hardware needs. The runtime
consults the factories only for out-of-tree platforms; in-tree platforms keep their own tables.

Import-safe: nothing but the device mixin at module scope.
"""

from __future__ import annotations

from typing import Any, ClassVar

from .device_mixin import DeviceMixin

__all__ = ["SRTPlatform"]


class SRTPlatform(DeviceMixin):
    """Base class of every SRT platform, with the seed's defaults."""

    supported_quantization: tuple[str, ...] = ()
    #: SGLang 0.5.23's counterpart of this base: what ``cardcage.platforms.sglang_adapters``
    #: subclasses when SGLang hosts the platform (DESIGN §8). Not for vendors to change.
    sglang_base_class: ClassVar[str] = "sglang.srt.platforms.interface:SRTPlatform"

    # -- lifecycle --------------------------------------------------------------------------
    def apply_server_args_defaults(self, server_args: Any) -> None:
        """Adjust parsed server arguments for this platform (runs in ServerArgs.__post_init__)."""

    def init_backend(self) -> None:
        """One-time backend set-up in each worker, before the model is built."""

    # -- capability flags ---------------------------------------------------------------------
    def supports_fp8(self) -> bool:
        return False

    def support_cuda_graph(self) -> bool:
        return False

    def support_piecewise_cuda_graph(self) -> bool:
        return False

    # -- subsystem factories ------------------------------------------------------------------
    def get_default_attention_backend(self) -> str:
        raise NotImplementedError

    def get_graph_runner_cls(self) -> type:
        raise NotImplementedError

    def get_mha_kv_pool_cls(self) -> type:
        raise NotImplementedError

    def get_mla_kv_pool_cls(self) -> type:
        raise NotImplementedError

    def get_dsa_kv_pool_cls(self) -> type:
        """KV pool for DeepSeek sparse attention (the seed's name; formerly ``nsa``)."""
        raise NotImplementedError

    def get_nsa_kv_pool_cls(self) -> type:
        """Older name of ``get_dsa_kv_pool_cls``, kept so existing plugins keep working."""
        return self.get_dsa_kv_pool_cls()

    def get_paged_allocator_cls(self) -> type:
        raise NotImplementedError

    def get_piecewise_backend_cls(self) -> type:
        raise NotImplementedError

    def get_quantization_config(self, quantization: str) -> type | None:
        """A hardware-specific config class for ``quantization``; None means use the default."""
        return None

    def get_compile_backend(self, mode: str | None = None) -> str:
        """The torch.compile backend; ``mode`` lets a platform pick per compile mode."""
        return "inductor"

    def get_dispatch_key_name(self) -> str:
        """Selects ``forward_<key>()`` on multi-platform ops; "native" means the portable path."""
        return "native"
