"""``DemoCudaPlatform``: what the diffusion runtime asks of the demo_cuda device.

``activate()`` (in ``__init__.py``) names this class when an NVIDIA GPU is usable; selection
checks it (a subclass of ``cardcage.diffusion.runtime.platforms.Platform`` with ``_enum = OOT``,
``device_name`` and ``device_type``), constructs it with no arguments and publishes it as the
diffusion ``current_platform``. Construction happens in the launcher too, so the constructor does
nothing and no method called there creates a CUDA context: ``get_device_total_memory`` asks NVML
(the runtime sizes offload defaults by it while building ``ServerArgs``). Everything else talks
to torch.cuda, in workers, after ``init_backend()``.

The device operations are the SRT half's (``DemoCudaDeviceMixin``); the mixin comes first in the
bases so its answers win over ``Platform``'s out-of-tree defaults, which raise
``NotImplementedError`` naming what to implement. Every method of the seed's Active contract is
spelled out below, even where it only delegates, so a vendor sees what to replace.

``get_dispatch_key_name()`` is ``"cuda"``: every op's ``forward_cuda()`` kernel is reused, and
``init_backend()`` registers demo_cuda's own RMSNorm under that key (``ops.py``), which wins over
``RMSNorm.forward_cuda()``.

``get_all_to_all_communicator_cls()`` names the runtime's ``CudaCommunicator`` (NCCL, tensors on
the worker's GPU) for the sequence-parallel all-to-all. An out-of-tree platform must override it:
the base falls back to the compatibility hook ``get_device_communicator_cls()``, whose base answer
makes an OOT platform fail at worker start-up with ``NotImplementedError``.

Import-safe: stdlib and cardcage only; torch and the custom-op layers are imported inside the
methods that need them. Without a GPU, every torch.cuda method fails with torch's own error and
``init_backend()`` fails first, with the fix.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from cardcage.diffusion.runtime.platforms.interface import Platform
from cardcage.hooks.profile import DIFFUSION_PROFILE
from cardcage_demo_cuda.device import DemoCudaDeviceMixin
from cardcage_demo_cuda.platform import prepare_cuda_worker

from .evidence import EVIDENCE

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

    from cardcage.platforms.device_mixin import CpuArchEnum, DeviceCapability

__all__ = ["COMMUNICATOR_QUALNAME", "DISPATCH_KEY", "DemoCudaPlatform"]

logger = logging.getLogger(__name__)

#: The CustomOp key of this platform (``get_dispatch_key_name()``): "cuda" reuses every op's
#: ``forward_cuda()``, and demo_cuda's own forwards are registered under it.
DISPATCH_KEY = "cuda"

#: The all-to-all communicator, by name (resolving it imports torch): the runtime's NCCL one.
COMMUNICATOR_QUALNAME = (
    "cardcage.diffusion.runtime.distributed.device_communicators.cuda_communicator.CudaCommunicator"
)


class DemoCudaPlatform(DemoCudaDeviceMixin, Platform):
    """NVIDIA GPUs for diffusion pipelines: nccl, the CUDA kernels of every op, a fused RMSNorm."""

    # -- identity (device_name, device_type and _enum come from DemoCudaDeviceMixin) ----------
    #: The PyTorch dispatcher key of CUDA tensors, for direct ``torch.library`` registrations.
    dispatch_key = "CUDA"

    # -- [Active] initialisation --------------------------------------------------------------
    def init_backend(self) -> None:
        """Once per worker, before plugins are applied and models are built.

        1. ``prepare_cuda_worker``: fail now, with the fix, when torch cannot use a GPU; bind
           ``LOCAL_RANK``'s GPU; apply ``CARDCAGE_DEMO_CUDA_ALLOW_TF32``;
        2. register demo_cuda's custom-op forwards under ``get_dispatch_key_name()``
           (``ops.py``): ops built after this use them.

        Raising aborts start-up; the runtime never retries it in this process.
        """
        prepare_cuda_worker(self, selector_env=DIFFUSION_PROFILE.selector_env)

        from .ops import register_custom_ops

        register_custom_ops()
        EVIDENCE.record("init_backend", DISPATCH_KEY)
        logger.debug("%s.init_backend(): custom ops registered under %r", self, DISPATCH_KEY)

    # -- [Active] configuration ---------------------------------------------------------------
    def apply_server_args_defaults(self, server_args: Any) -> None:
        """Nothing to change: the runtime's defaults are CUDA's.

        Called in the launcher; a vendor whose device needs other defaults (an attention
        backend, offloading) sets them here, only where the user left None.
        """

    # -- [Active] devices and memory ----------------------------------------------------------
    def get_device(self, local_rank: int) -> Any:
        """``torch.device("cuda", local_rank)``."""
        return super().get_device(local_rank)

    def set_device(self, device: Any) -> None:
        """``torch.cuda.set_device``."""
        super().set_device(device)

    def get_local_torch_device(self) -> Any:
        """The GPU ``init_backend()`` bound this worker to (torch's current CUDA device)."""
        import torch

        return torch.device("cuda", torch.cuda.current_device())

    def get_device_name(self, device_id: int = 0) -> str:
        """The marketing name, e.g. ``NVIDIA H100 80GB HBM3``."""
        return super().get_device_name(device_id)

    def get_device_uuid(self, device_id: int = 0) -> str:
        """The GPU's UUID, as torch reports it."""
        return super().get_device_uuid(device_id)

    def get_device_total_memory(self, device_id: int = 0) -> int:
        """Bytes on the GPU: NVML first (no CUDA context in the launcher), else torch.cuda."""
        return super().get_device_total_memory(device_id)

    def get_available_gpu_memory(
        self,
        device_id: int | None = None,
        distributed: bool = False,
        empty_cache: bool = True,
        cpu_group: Any = None,
    ) -> float:
        """Free GiB on ``device_id`` (default: this worker's GPU); min over ``cpu_group``."""
        if device_id is None:
            import torch

            device_id = torch.cuda.current_device()
        return super().get_available_gpu_memory(device_id, distributed, empty_cache, cpu_group)

    def get_device_capability(self, device_id: int = 0) -> DeviceCapability | None:
        """The SM version, e.g. ``DeviceCapability(9, 0)`` on Hopper."""
        return super().get_device_capability(device_id)

    # -- [Active] distributed -----------------------------------------------------------------
    def get_torch_distributed_backend_str(self) -> str:
        """nccl."""
        return "nccl"

    def supports_distributed_device_id(self) -> bool:
        """True: NCCL process groups may be bound to the worker's GPU at creation."""
        return True

    @classmethod
    def get_all_to_all_communicator_cls(cls) -> str:
        """The runtime's ``CudaCommunicator``: the sequence-parallel all-to-all over NCCL on the
        worker's GPU. A qualified name, so this module stays free of torch; each worker
        resolves it once and builds one for its sequence-parallel group."""
        return COMMUNICATOR_QUALNAME

    @classmethod
    def get_cpu_architecture(cls) -> CpuArchEnum:
        """The host's architecture (x86_64 servers, aarch64 Grace)."""
        return super().get_cpu_architecture()

    # -- [Active] dispatch and models ---------------------------------------------------------
    def get_dispatch_key_name(self) -> str:
        """``cuda``: reuse every op's ``forward_cuda()``; registrations under it win."""
        return DISPATCH_KEY

    def get_attn_backend_cls_str(self, selected_backend: Any, head_size: int, dtype: Any) -> str:
        """ "": the runtime's CUDA default; no vendor attention class."""
        return ""

    def verify_model_arch(self, model_arch: str) -> None:
        """Every architecture runs: each op has a CUDA or portable forward."""

    def optimize_vae(self, vae: Any) -> Any:
        """Unchanged: this demo installs no VAE fast path."""
        return vae

    # -- [Active] execution -------------------------------------------------------------------
    def get_compile_backend(self, mode: str | None = None) -> str:
        """Inductor generates Triton kernels for CUDA."""
        return "inductor"

    def get_compile_options(self, module: Any) -> dict[str, Any] | None:
        """None: inductor's defaults."""
        return None

    @classmethod
    def inference_mode(cls) -> AbstractContextManager[Any]:
        """``torch.inference_mode(True)``."""
        return super().inference_mode()

    @classmethod
    def seed_everything(cls, seed: int | None = None) -> None:
        """random, numpy, torch and every GPU's generator."""
        super().seed_everything(seed)

    def enable_dit_layerwise_offload_by_default(self) -> bool:
        """True: GPU memory is the scarce resource; offload DiT layers to the host by default."""
        return True

    def device_shares_host_memory(self) -> bool:
        """False: discrete GPUs have their own memory."""
        return False
