"""The vLLM section of demo_cpu's platform: what only vLLM asks of a platform.

``DemoCpuSRTPlatform.vllm_section`` names this class. cardcage imports it only when vLLM hosts
the platform (when vLLM resolves the adapter ``activate()`` named), so it may import vLLM; its
names win over every other answer in the vLLM adapter. Everything the two hosts share (identity,
memory, device name, capability, quantization, distributed backend) stays in ``device.py`` and
``platform.py``, written once; only what has no counterpart in cardcage's contract lives here.

**CPU-like, under vLLM only.** ``behaves_as = PlatformEnum.CPU`` here, not on the platform class:
demo_cpu's tensors live on the host CPU, and vLLM's CPU branches were audited for it (vLLM's
``CpuPlatform`` runs on this very device), so the adapter derives from vLLM's ``CpuPlatform``
and answers ``is_cpu()`` True while staying out of tree. SGLang's SRT branches on ``is_cpu()``
were not audited for demo_cpu (they reach for SGLang's CPU kernel package), so what SGLang sees
stays a plain out-of-tree platform.

The methods are classmethods, as vLLM calls them on the class. ``cls`` is the adapter, so the
vendor's shared answers are one call away (``cls.get_device_total_memory(0)``), and ``super()``
reaches the adapter's vLLM base (here ``CpuPlatform``): each method here adds to vLLM's answer
instead of replacing it, which is why this class is only usable inside the adapter.
"""

from __future__ import annotations

from typing import Any

from cardcage.platforms.device_mixin import PlatformEnum

__all__ = ["CPU_ATTENTION_BACKEND", "CPU_WORKER", "DemoCpuVllmSection"]

#: vLLM's portable CPU attention backend and worker, which run on the host CPU as is.
CPU_ATTENTION_BACKEND = "vllm.v1.attention.backends.cpu_attn.CPUAttentionBackend"
CPU_WORKER = "vllm.v1.worker.cpu_worker.CPUWorker"


class DemoCpuVllmSection:
    """vLLM-only answers for the demo_cpu device (the host CPU)."""

    #: Under vLLM, answer as vLLM's CPU platform where demo_cpu says nothing itself.
    behaves_as = PlatformEnum.CPU
    #: The torch dispatch key vLLM's custom ops register kernels for.
    dispatch_key = "CPU"

    @classmethod
    def get_attn_backend_cls(cls, *args: Any, **kwargs: Any) -> str:
        """vLLM's base's choice (its CPU platform checks the model against its CPU backends);
        vLLM's portable CPU backend where the base has none."""
        chosen: str = super().get_attn_backend_cls(*args, **kwargs)  # type: ignore[misc]
        return chosen or CPU_ATTENTION_BACKEND

    @classmethod
    def check_and_update_config(cls, vllm_config: Any) -> None:
        """vLLM's base's config step first (its CPU platform sets the worker, the start method
        and the KV cache's size); then the CPU worker, should the base have left it "auto"."""
        super().check_and_update_config(vllm_config)  # type: ignore[misc]
        parallel_config = getattr(vllm_config, "parallel_config", None)
        if parallel_config is not None and getattr(parallel_config, "worker_cls", None) == "auto":
            parallel_config.worker_cls = CPU_WORKER
