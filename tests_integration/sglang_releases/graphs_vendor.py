"""A vendor platform that declares what demo-cpu does not: graphs, its own KV pool, its allocator.

demo-cpu declares every capability False and every factory None, which is also what SGLang
answers by default, so its answers alone cannot show that an older release reads the vendor's
declaration. The release probe builds this class's SGLang adapter on each release and asks it
the same names (written against cardcage only, like any vendor's class).
"""

from __future__ import annotations

from cardcage.platforms.cpu import CpuDeviceMixin
from cardcage.platforms.interface import KVPoolKind, PlatformCapabilities, PlatformEnum, SRTPlatform


class VendorMHAPool:
    """The vendor's MHA pool (never constructed here: the probe checks who is handed out)."""


class VendorAllocator:
    """The vendor's paged allocator (never constructed here)."""


class GraphsVendorPlatform(CpuDeviceMixin, SRTPlatform):
    _enum = PlatformEnum.OOT
    device_name = "graphs_vendor"
    device_type = "cpu"
    capabilities = PlatformCapabilities(graph_capture=True, piecewise_graph=True)

    def get_kv_pool_cls(self, *, kind: KVPoolKind) -> type | None:
        return VendorMHAPool if kind == "mha" else None

    def get_paged_allocator_cls(self) -> type | None:
        return VendorAllocator
