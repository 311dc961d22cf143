"""The vLLM section of demo_cuda's platform: what only vLLM 0.33 asks of a platform.

``DemoCudaSRTPlatform.vllm_section`` names this class. cardcage imports it only when vLLM hosts
the platform (when vLLM resolves the adapter ``activate()`` named), so it may import vLLM; its
names win over every other answer in the vLLM adapter. What both hosts share (identity, memory,
device name, UUID, capability, quantization check, the nccl backend) stays in ``device.py`` and
``platform.py``, written once; only what cardcage's contract has no name for lives here.

Every answer names what vLLM already ships for NVIDIA GPUs, so a vendor of another CUDA-like
device sees where its own classes go: its attention backend, its worker, its communicator and
its LoRA kernels. The methods are classmethods, as vLLM calls them on the class; ``cls`` is the
adapter, so the shared answers are one call away (``cls.get_device_capability()``).
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "CUDA_ATTENTION_BACKEND",
    "CUDA_COMMUNICATOR",
    "CUDA_PUNICA_WRAPPER",
    "CUDA_WORKER",
    "DemoCudaVllmSection",
]

#: vLLM's FlashAttention backend, its worker for GPUs, its CUDA communicator and LoRA wrapper.
CUDA_ATTENTION_BACKEND = "vllm.v1.attention.backends.flash_attn.FlashAttentionBackend"
CUDA_WORKER = "vllm.v1.worker.gpu_worker.Worker"
CUDA_COMMUNICATOR = "vllm.distributed.device_communicators.cuda_communicator.CudaCommunicator"
CUDA_PUNICA_WRAPPER = "vllm.lora.punica_wrapper.punica_gpu.PunicaWrapperGPU"


class DemoCudaVllmSection:
    """vLLM-only answers for the demo_cuda device (NVIDIA GPUs through torch.cuda)."""

    #: The torch dispatch key vLLM's custom ops register kernels for.
    dispatch_key = "CUDA"
    #: The variable that hides devices from a process; vLLM's workers set it per rank.
    device_control_env_var = "CUDA_VISIBLE_DEVICES"
    #: The Ray resource a GPU worker asks for.
    ray_device_key = "GPU"
    #: torch.compile's backend for vLLM's simple (non-graph) compilations.
    simple_compile_backend = "inductor"

    @classmethod
    def get_attn_backend_cls(
        cls, selected_backend: Any, attn_selector_config: Any, num_heads: int | None = None
    ) -> str:
        """The qualname of the attention backend: vLLM's FlashAttention one, whatever was asked.

        A real device chooses by ``selected_backend`` and the capability here, and names its own
        backend class (a subclass of vLLM's ``AttentionBackend``).
        """
        return CUDA_ATTENTION_BACKEND

    @classmethod
    def check_and_update_config(cls, vllm_config: Any) -> None:
        """vLLM's base's config step first (the section comes first in the adapter's classes,
        so without this call the base's checks would never run); then what vLLM leaves to the
        platform: the worker class (vLLM's built-in platforms set ``parallel_config.worker_cls``
        when it is "auto"; an out-of-tree one must too)."""
        super().check_and_update_config(vllm_config)  # type: ignore[misc]
        parallel_config = getattr(vllm_config, "parallel_config", None)
        if parallel_config is not None and getattr(parallel_config, "worker_cls", None) == "auto":
            parallel_config.worker_cls = CUDA_WORKER

    @classmethod
    def get_device_communicator_cls(cls) -> str:
        """The device communicator of vLLM's distributed groups: its CUDA one (NCCL-backed).
        cardcage's ``get_communicator_class()`` answers None here (the runtime's default), which
        would leave vLLM on its base communicator."""
        return CUDA_COMMUNICATOR

    @classmethod
    def get_punica_wrapper(cls) -> str:
        """LoRA's punica wrapper: vLLM's Triton one for GPUs."""
        return CUDA_PUNICA_WRAPPER
