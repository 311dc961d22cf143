"""The vLLM section of demo_cpu's platform: what only vLLM 0.33 asks of a platform.

``DemoCpuSRTPlatform.vllm_section`` names this class. cardcage imports it only when vLLM hosts
the platform (when vLLM resolves the adapter ``activate()`` named), so it may import vLLM; its
names win over every other answer in the vLLM adapter. Everything the two hosts share (identity,
memory, device name, capability, quantization, distributed backend) stays in ``device.py`` and
``platform.py``, written once; only what has no counterpart in cardcage's contract lives here.

The methods are classmethods, as vLLM calls them on the class. ``cls`` is the adapter, so the
vendor's shared answers are one call away (``cls.get_device_total_memory(0)``).
"""

from __future__ import annotations

from typing import Any

__all__ = ["CPU_ATTENTION_BACKEND", "CPU_WORKER", "DemoCpuVllmSection"]

#: vLLM's portable CPU attention backend and worker, which run on the host CPU as is.
CPU_ATTENTION_BACKEND = "vllm.v1.attention.backends.cpu_attn.CPUAttentionBackend"
CPU_WORKER = "vllm.v1.worker.cpu_worker.CPUWorker"


class DemoCpuVllmSection:
    """vLLM-only answers for the demo_cpu device (the host CPU)."""

    #: The torch dispatch key vLLM's custom ops register kernels for.
    dispatch_key = "CPU"
    #: torch.compile's backend for vLLM's simple (non-graph) compilations.
    simple_compile_backend = "inductor"

    @classmethod
    def get_attn_backend_cls(
        cls, selected_backend: Any, attn_selector_config: Any, num_heads: int | None = None
    ) -> str:
        """The qualname of the attention backend: vLLM's CPU one, whatever was asked for."""
        return CPU_ATTENTION_BACKEND

    @classmethod
    def check_and_update_config(cls, vllm_config: Any) -> None:
        """Fill in what vLLM leaves to the platform: the worker class (vLLM's built-in platforms
        set ``parallel_config.worker_cls`` when it is "auto"; an out-of-tree one must too)."""
        parallel_config = getattr(vllm_config, "parallel_config", None)
        if parallel_config is not None and getattr(parallel_config, "worker_cls", None) == "auto":
            parallel_config.worker_cls = CPU_WORKER

    @classmethod
    def get_punica_wrapper(cls) -> str:
        """LoRA's punica wrapper: vLLM's portable CPU one."""
        return "vllm.lora.punica_wrapper.punica_cpu.PunicaWrapperCPU"
