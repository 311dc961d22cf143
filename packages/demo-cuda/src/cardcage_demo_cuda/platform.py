"""``DemoCudaSRTPlatform``: what the SRT runtime asks of the demo_cuda device.

``activate()`` names this class; selection checks it (an ``SRTPlatform`` subclass with
``_enum = OOT``, ``device_name`` and ``device_type``), constructs it with no arguments and
publishes it as ``current_platform``. The constructor therefore does nothing: device set-up
belongs in ``init_backend()``, which every worker calls before it builds the model.

The device mixin comes first in the bases: ``SRTPlatform`` defines no device operations, so either
order works today, but mixin-first guarantees your device's answers win over any default the
base might gain.

Import-safe: stdlib and cardcage only; torch is imported inside the methods that need it.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import Any, ClassVar

from cardcage.platforms.errors import PlatformUnavailableError, TorchNotInstalledError
from cardcage.platforms.interface import KVPoolKind, PlatformCapabilities, SRTPlatform

from . import ENTRY_POINT_NAME
from .device import DemoCudaDeviceMixin
from .envs import CARDCAGE_DEMO_CUDA_ALLOW_TF32

__all__ = ["DemoCudaSRTPlatform", "prepare_cuda_worker"]

logger = logging.getLogger(__name__)

_FP8_SINCE = (8, 9)  # Ada Lovelace and later have fp8 tensor cores
_HOPPER = 9


def prepare_cuda_worker(platform: DemoCudaDeviceMixin, *, selector_env: str) -> None:
    """Per-worker GPU set-up shared by the SRT and diffusion platforms' ``init_backend()``.

    1. fail now, with the fix, if torch cannot use a GPU (a CPU-only torch build, or
       ``CUDA_VISIBLE_DEVICES`` hiding every GPU after ``activate()`` ran); the message names
       ``selector_env``, the variable that selects another platform in the calling runtime;
    2. bind the worker to its GPU: ``LOCAL_RANK`` (set by torchrun and most launchers)
       modulo the visible GPU count; without it the current device stays as it is;
    3. when ``CARDCAGE_DEMO_CUDA_ALLOW_TF32`` is set, TF32 on (1) or off (0) for float32
       matmuls and cuDNN convolutions; unset leaves torch's defaults alone.
    """
    try:
        import torch
    except ModuleNotFoundError as exc:
        raise TorchNotInstalledError(f"{type(platform).__name__}.init_backend()") from exc
    if not torch.cuda.is_available():
        raise PlatformUnavailableError(
            f"{platform.device_name} was selected but torch {torch.__version__} cannot use a GPU "
            f"(torch.version.cuda={torch.version.cuda}, CUDA_VISIBLE_DEVICES="
            f"{os.environ.get('CUDA_VISIBLE_DEVICES')!r}). Install a CUDA build of torch or "
            f"select another platform with {selector_env}.",
            plugin=ENTRY_POINT_NAME,
            distribution="cardcage-demo-cuda",
        )
    local_rank = os.environ.get("LOCAL_RANK", "").strip()
    if local_rank.isdigit():
        platform.set_device(int(local_rank) % torch.cuda.device_count())
    if CARDCAGE_DEMO_CUDA_ALLOW_TF32.is_set():
        allow_tf32 = CARDCAGE_DEMO_CUDA_ALLOW_TF32.get()
        torch.set_float32_matmul_precision("high" if allow_tf32 else "highest")
        torch.backends.cudnn.allow_tf32 = allow_tf32
    logger.debug(
        "%s.init_backend(): device %d, float32 matmul precision %s",
        platform,
        torch.cuda.current_device(),
        torch.get_float32_matmul_precision(),
    )


class DemoCudaSRTPlatform(DemoCudaDeviceMixin, SRTPlatform):
    """NVIDIA GPUs: Triton kernels and PyNccl, fp8 quantization from SM 8.9, no own graphs."""

    #: What the runtime may rely on (SGLang 0.5.23's ``PlatformCapabilities``; every field not
    #: named stays False). Graph capture and piecewise graphs stay off: for an out-of-tree
    #: platform the runtime builds them only from the platform's own ``get_graph_runner_cls()``
    #: and ``get_piecewise_backend_cls()``, which this demo does not provide, so decoding runs
    #: eagerly. Set them when you return your own runner and backend there.
    capabilities = PlatformCapabilities(
        supports_triton=True,  # Triton kernels launch on NVIDIA GPUs
        supports_pynccl=True,  # NCCL for model-parallel groups
    )
    #: Its kernels, by op (``cardcage.platforms.kernels.OPS``), in kernels.py: a host that
    #: selects this platform runs them in its own ops. Data: nothing is imported until then.
    kernels: ClassVar[Mapping[str, str]] = {
        "rms_norm": "cardcage_demo_cuda.kernels:rms_norm",
        "fused_add_rms_norm": "cardcage_demo_cuda.kernels:fused_add_rms_norm",
        "silu_and_mul": "cardcage_demo_cuda.kernels:silu_and_mul",
    }
    #: [vLLM section] What only vLLM asks (attention backend, worker class, dispatch key,
    #: communicator): a class imported only when vLLM hosts this platform. Everything else here
    #: serves both hosts.
    vllm_section = "cardcage_demo_cuda.vllm_section:DemoCudaVllmSection"

    # -- lifecycle --------------------------------------------------------------------------
    def apply_server_args_defaults(self, server_args: Any) -> None:
        """Fill in what this device needs, after the user's arguments are parsed.

        * ``attention_backend``: ``get_default_attention_backend()`` when unset (None);
        * ``device``: ``device_type`` ("cuda") when unset (None).

        A value the user set is never replaced.
        """
        if getattr(server_args, "attention_backend", None) is None:
            server_args.attention_backend = self.get_default_attention_backend()
        if getattr(server_args, "device", None) is None:
            server_args.device = self.device_type

    def init_backend(self) -> None:
        """Per-worker set-up before the model is built (``prepare_cuda_worker``): fail with the
        fix when torch cannot use a GPU, bind ``LOCAL_RANK``'s GPU, apply the TF32 setting."""
        prepare_cuda_worker(self, selector_env="SGLANG_PLATFORM")

    # -- what the GPU can do ----------------------------------------------------------------
    def has_fp8_tensor_cores(self) -> bool:
        """True from SM 8.9 (Ada Lovelace) on. SGLang 0.5.23 asks no platform about fp8, so this
        is the demo's own helper behind ``verify_quantization()``, not a contract method."""
        capability = self.get_device_capability()
        return capability is not None and capability >= _FP8_SINCE

    def verify_quantization(self, quant: str) -> None:
        """[Planned] Refuse an fp8 method on a GPU without fp8 tensor cores."""
        if "fp8" in quant and not self.has_fp8_tensor_cores():
            raise ValueError(
                f"{self.device_name} cannot run quantization {quant!r}: fp8 needs compute "
                f"capability {_FP8_SINCE[0]}.{_FP8_SINCE[1]} or later, and this GPU has "
                f"{self.get_device_capability()}. Choose another --quantization."
            )

    # -- subsystem factories ----------------------------------------------------------------
    def get_default_attention_backend(self) -> str:
        """FlashAttention 3 on Hopper, FlashInfer elsewhere."""
        capability = self.get_device_capability()
        return "fa3" if capability is not None and capability.major == _HOPPER else "flashinfer"

    def get_compile_backend(self, mode: str | None = None) -> str:
        """Inductor generates Triton kernels for CUDA in every compile mode."""
        return "inductor"

    def get_dispatch_key_name(self) -> str:
        """``cuda``: multi-platform ops run their ``forward_cuda()`` kernels."""
        return "cuda"

    def get_quantization_config(self, quantization: str) -> type | None:
        """None, the runtime's default config, for every method the GPU can run; raises for an
        fp8 method below SM 8.9 (``verify_quantization()``)."""
        self.verify_quantization(quantization)
        return None

    def get_kv_pool_cls(self, *, kind: KVPoolKind) -> type | None:
        """None for every kind ("mha", "mla", "dsa"): the runtime's own pool, which allocates on
        ``device_type`` ("cuda"). Return a subclass of the runtime's pool for ``kind`` when your
        device needs its own storage layout."""
        return None

    # The other class factories (get_graph_runner_cls, get_piecewise_backend_cls,
    # get_paged_allocator_cls and the speculative-decoding ones) keep SRTPlatform's None, "the
    # runtime's own": the paged allocator then uses Triton (capabilities.supports_triton), and
    # no graphs are captured (see capabilities above).
