"""``DemoCpuSRTPlatform``: what the SRT runtime asks of the demo_cpu device.

``activate()`` names this class; selection checks it (an ``SRTPlatform`` subclass with
``_enum = OOT``, ``device_name`` and ``device_type``), constructs it with no arguments and
publishes it as ``current_platform``. The constructor therefore does nothing: device set-up
belongs in ``init_backend()``, which every worker calls before it builds the model.

The device mixin comes first in the bases: ``SRTPlatform`` defines no device operations, so either
order works today, but mixin-first guarantees your device's answers win over any default the
base might gain.

Import-safe: stdlib and cardcage only; torch is imported inside ``init_backend()``.
"""

from __future__ import annotations

import importlib.util
import logging
import os
from collections.abc import Mapping
from typing import Any, ClassVar

from cardcage.platforms.interface import KVPoolKind, PlatformCapabilities, SRTPlatform

from .device import DemoCpuDeviceMixin
from .envs import CARDCAGE_DEMO_CPU_THREADS
from .evidence import EVIDENCE

__all__ = ["DemoCpuSRTPlatform", "usable_cpu_count"]

logger = logging.getLogger(__name__)


def usable_cpu_count() -> int:
    """CPUs this process may run on (its affinity mask), not every CPU of the host."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


class DemoCpuSRTPlatform(DemoCpuDeviceMixin, SRTPlatform):
    """The host CPU through torch's portable kernels: no graphs, no Triton, no quantization."""

    #: What the runtime may rely on, read before it builds anything (SGLang 0.5.23's
    #: ``PlatformCapabilities``). Every field is False by default, the conservative answer; each
    #: is spelled out so you see what to claim for your device.
    capabilities = PlatformCapabilities(
        supports_triton=False,  # Triton cannot launch on this device: torch-native allocator
        graph_capture=False,  # no decode graphs: apply_server_args_defaults() disables them
        piecewise_graph=False,  # no piecewise compilation backend either
        hicache_device_kernels=False,  # no hierarchical-cache transfer kernels
        supports_pynccl=False,  # gloo, not NCCL
    )
    #: Quantization methods ``verify_quantization`` accepts; none have CPU kernels here.
    supported_quantization: tuple[str, ...] = ()
    #: [vLLM section] What only vLLM asks (attention backend, worker class, dispatch key): a
    #: class imported only when vLLM hosts this platform. Everything else here serves both hosts.
    vllm_section = "cardcage_demo_cpu.vllm_section:DemoCpuVllmSection"
    #: The kernels, by op (``cardcage.platforms.kernels.OPS``): a host that selects this
    #: platform runs them in its own ops (SGLang's SRT and vLLM's RMSNorm, SiluAndMul, LayerNorm
    #: and RotaryEmbedding), installed right after init_backend() in each process that builds
    #: them. Data: nothing is imported until a host installs them.
    kernels: ClassVar[Mapping[str, str]] = {
        "rms_norm": "cardcage_demo_cpu.kernels:rms_norm",
        "fused_add_rms_norm": "cardcage_demo_cpu.kernels:fused_add_rms_norm",
        "silu_and_mul": "cardcage_demo_cpu.kernels:silu_and_mul",
        "layer_norm": "cardcage_demo_cpu.kernels:layer_norm",
        "rotary_embedding": "cardcage_demo_cpu.kernels:rotary_embedding",
    }

    def __init__(self) -> None:
        super().__init__()
        #: Threads ``init_backend()`` gave torch; None until it ran with torch installed.
        self.intra_op_threads: int | None = None

    # -- lifecycle --------------------------------------------------------------------------
    def apply_server_args_defaults(self, server_args: Any) -> None:
        """Fill in what this device needs, after the user's arguments are parsed.

        * ``attention_backend``: ``get_default_attention_backend()`` when unset (None);
        * ``device``: ``device_type`` ("cpu") when unset (None);
        * ``disable_cuda_graph``: always True, because the CPU cannot capture graphs; a user's
          False is overridden with an INFO line saying so.

        A value the user set is never replaced, except where the device cannot honour it.
        """
        if getattr(server_args, "attention_backend", None) is None:
            server_args.attention_backend = self.get_default_attention_backend()
        if getattr(server_args, "device", None) is None:
            server_args.device = self.device_type
        if getattr(server_args, "disable_cuda_graph", None) is False:
            logger.info("%s cannot capture graphs: setting disable_cuda_graph=True", self)
        server_args.disable_cuda_graph = True

    def init_backend(self) -> None:
        """Give torch one intra-op thread per usable CPU, once per worker.

        torch's default thread count is the host's CPU count, which oversubscribes a worker
        pinned to fewer CPUs (taskset, cgroups cpusets, several workers per host).
        ``CARDCAGE_DEMO_CPU_THREADS`` overrides the count; without torch there is nothing to set
        up and this does nothing. Either way it records ``init_backend`` evidence (key ``srt``,
        value: the threads set, or None), so a launcher can see that each worker ran it.
        """
        threads = CARDCAGE_DEMO_CPU_THREADS.get() or usable_cpu_count()
        if importlib.util.find_spec("torch") is None:
            logger.debug("%s.init_backend(): torch is not installed, nothing to set up", self)
            EVIDENCE.record("init_backend", "srt")
            return
        import torch

        torch.set_num_threads(threads)
        self.intra_op_threads = torch.get_num_threads()
        EVIDENCE.record("init_backend", "srt", self.intra_op_threads)
        logger.debug("%s.init_backend(): torch intra-op threads = %d", self, threads)

    # -- subsystem factories ----------------------------------------------------------------
    def get_default_attention_backend(self) -> str:
        """torch's scaled-dot-product attention: portable, needs no custom kernels."""
        return "torch_native"

    def get_compile_backend(self, mode: str | None = None) -> str:
        """Inductor generates C++/OpenMP code for CPU in every compile mode."""
        return "inductor"

    def get_dispatch_key_name(self) -> str:
        """``native``: multi-platform ops run their portable ``forward_native()``."""
        return "native"

    def get_kv_pool_cls(self, *, kind: KVPoolKind) -> type | None:
        """None for every kind ("mha", "mla", "dsa"): the runtime's own pool, which allocates on
        ``device_type`` and is correct for any torch device. Return a subclass of the runtime's
        pool for ``kind`` when your device needs its own storage layout."""
        return None

    def get_quantization_config(self, quantization: str) -> type | None:
        """No hardware-specific configs: raise for what we cannot run, else the default."""
        self.verify_quantization(quantization)
        return None

    def verify_quantization(self, quant: str) -> None:
        """[Planned] Refuse quantization methods this device has no kernels for."""
        if quant and quant not in self.supported_quantization:
            supported = ", ".join(self.supported_quantization) or "none"
            raise ValueError(
                f"{self.device_name} cannot run quantization {quant!r} (supported: {supported}). "
                "Drop --quantization or select another platform with SGLANG_PLATFORM."
            )

    # The other class factories (get_graph_runner_cls, get_piecewise_backend_cls,
    # get_paged_allocator_cls, get_full_graph_backend_cls and the speculative-decoding ones)
    # return runtime classes. This device captures no graphs and keeps the runtime's allocator,
    # so it inherits SRTPlatform's None ("the runtime's own"). An out-of-tree platform that
    # declares graph_capture or piecewise_graph must return its own runner or backend there.
