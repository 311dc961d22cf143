"""``DemoCpuPlatform``: what the diffusion runtime asks of the demo_cpu device.

``activate()`` (in ``__init__.py``) names this class; selection checks it (a subclass of
``cardcage.diffusion.runtime.platforms.Platform`` with ``_enum = OOT``, ``device_name`` and
``device_type``), constructs it with no arguments and publishes it as the diffusion
``current_platform``. The constructor therefore does nothing: device set-up belongs in
``init_backend()``, which every worker runs once, before plugins are applied and before any
model is built.

The device operations are the SRT half's (``DemoCpuDeviceMixin``: memory from ``/proc`` capped
by the cgroup limit, ``gloo``, no compute capability); the mixin comes first in the bases so its
answers win over ``Platform``'s out-of-tree defaults, which raise ``NotImplementedError`` naming
what to implement. Every method of the seed's Active contract is spelled out below, even where it
only delegates, so a vendor sees what to replace.

``get_all_to_all_communicator_cls()`` names ``communicator.DemoCpuCommunicator`` (the runtime's
gloo ``CpuCommunicator`` plus an ``all_to_all`` evidence event). An out-of-tree platform must
override it: the base falls back to the compatibility hook ``get_device_communicator_cls()``,
whose base answer makes an OOT platform fail at worker start-up with ``NotImplementedError``.

Import-safe: stdlib and cardcage only; torch and the custom-op layers are imported inside the
methods that need them (the diffusion runtime depends on torch, so they are present wherever the
runtime runs this class).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from cardcage.diffusion.runtime.platforms.interface import Platform, PlatformEnum
from cardcage_demo_cpu import ENTRY_POINT_NAME
from cardcage_demo_cpu.device import DemoCpuDeviceMixin
from cardcage_demo_cpu.envs import CARDCAGE_DEMO_CPU_THREADS
from cardcage_demo_cpu.platform import usable_cpu_count

from .evidence import EVIDENCE

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

    from cardcage.platforms.device_mixin import CpuArchEnum, DeviceCapability

__all__ = ["COMMUNICATOR_QUALNAME", "DISPATCH_KEY", "DemoCpuPlatform"]

logger = logging.getLogger(__name__)

#: The CustomOp key of this platform (``get_dispatch_key_name()``): a vendor key, so only the
#: forwards registered under it (``ops.py``) differ from the portable ones.
DISPATCH_KEY = ENTRY_POINT_NAME

#: The all-to-all communicator (``communicator.py``), by name: resolving it imports torch.
COMMUNICATOR_QUALNAME = "cardcage_demo_cpu.diffusion.communicator.DemoCpuCommunicator"


class DemoCpuPlatform(DemoCpuDeviceMixin, Platform):
    """The host CPU for diffusion pipelines: gloo, torch SDPA, fused RMSNorm and SiluAndMul."""

    # -- identity (device_name, device_type and _enum come from DemoCpuDeviceMixin) -----------
    #: The PyTorch dispatcher key of CPU tensors, for direct ``torch.library`` registrations.
    dispatch_key = "CPU"
    #: Out of tree (``_enum = OOT``) but CPU-like: the identity predicates (``is_cpu()``, ...)
    #: answer as the built-in CPU platform's, in both hosts. Under SGLang that is what lets its
    #: diffusion layers import their CPU code paths (``layers/layernorm.py`` imports Triton
    #: kernels unless ``is_cpu()``). Audited for the diffusion half only: the SRT half keeps the
    #: out-of-tree identity, since SRT's CPU branches were not checked against this device.
    behaves_as = PlatformEnum.CPU

    def __init__(self) -> None:
        super().__init__()
        #: Threads ``init_backend()`` gave torch; None until it ran.
        self.intra_op_threads: int | None = None

    # -- [Active] initialisation --------------------------------------------------------------
    def init_backend(self) -> None:
        """Once per worker, before plugins are applied and models are built.

        1. torch intra-op threads = ``CARDCAGE_DEMO_CPU_THREADS`` or the CPUs in this process's
           affinity mask (torch's default, the host's CPU count, oversubscribes pinned workers);
        2. register demo_cpu's custom-op forwards under ``get_dispatch_key_name()`` (see
           ``ops.py``): ops built after this use them. Registering later would be too late,
           since each op resolves its forward when it is constructed.

        Raising aborts start-up; the runtime never retries it in this process.
        """
        import torch  # a dependency of the diffusion runtime: present wherever this runs

        threads = CARDCAGE_DEMO_CPU_THREADS.get() or usable_cpu_count()
        torch.set_num_threads(threads)
        self.intra_op_threads = torch.get_num_threads()

        from .ops import register_custom_ops

        register_custom_ops()
        EVIDENCE.record("init_backend", DISPATCH_KEY)
        logger.debug(
            "%s.init_backend(): %d intra-op threads, custom ops registered under %r",
            self,
            self.intra_op_threads,
            DISPATCH_KEY,
        )

    # -- [Active] configuration ---------------------------------------------------------------
    def apply_server_args_defaults(self, server_args: Any) -> None:
        """Before argument validation: fill what this device needs where the user left None.

        * ``attention_backend``: ``"torch_sdpa"``, torch's portable attention (only when the
          arguments have that field and it is None; a user's choice is never replaced).
        """
        if hasattr(server_args, "attention_backend") and server_args.attention_backend is None:
            server_args.attention_backend = "torch_sdpa"

    # -- [Active] devices and memory ----------------------------------------------------------
    def get_device(self, local_rank: int) -> Any:
        """``torch.device("cpu")`` for every rank: one CPU device, shared by every worker."""
        return super().get_device(local_rank)

    def set_device(self, device: Any) -> None:
        """Nothing to select: one CPU device."""

    def get_local_torch_device(self) -> Any:
        """This worker's device: ``torch.device("cpu")``."""
        import torch

        return torch.device("cpu")

    def get_device_name(self, device_id: int = 0) -> str:
        """e.g. ``demo_cpu (x86_64: x86_64)``."""
        return super().get_device_name(device_id)

    def get_device_uuid(self, device_id: int = 0) -> str:
        """The machine architecture: a CPU has no better stable identifier."""
        return super().get_device_uuid(device_id)

    def get_device_total_memory(self, device_id: int = 0) -> int:
        """Bytes: physical RAM, capped by the cgroup limit (the runtime sizes offload by it)."""
        return super().get_device_total_memory(device_id)

    def get_available_gpu_memory(
        self,
        device_id: int | None = None,
        distributed: bool = False,
        empty_cache: bool = True,
        cpu_group: Any = None,
    ) -> float:
        """Free memory in GiB: MemAvailable capped by the total (min over ``cpu_group``)."""
        return super().get_available_gpu_memory(0, distributed, empty_cache, cpu_group)

    def get_device_capability(self, device_id: int = 0) -> DeviceCapability | None:
        """None: compute capability is a GPU notion (``has_device_capability`` is False)."""
        return None

    # -- [Active] distributed -----------------------------------------------------------------
    def get_torch_distributed_backend_str(self) -> str:
        """gloo: torch.distributed's CPU backend."""
        return "gloo"

    def supports_distributed_device_id(self) -> bool:
        """False: gloo does not bind a process group to a device."""
        return False

    @classmethod
    def get_all_to_all_communicator_cls(cls) -> str:
        """``DemoCpuCommunicator``: gloo's all-to-all for the sequence-parallel exchange, with
        evidence. A qualified name, so this module stays free of torch; each worker resolves it
        once (it must name a ``DeviceCommunicatorBase`` subclass) and builds one for its group."""
        return COMMUNICATOR_QUALNAME

    @classmethod
    def get_cpu_architecture(cls) -> CpuArchEnum:
        """X86 or ARM, from ``platform.machine()``."""
        return super().get_cpu_architecture()

    # -- [Active] dispatch and models ---------------------------------------------------------
    def get_dispatch_key_name(self) -> str:
        """``demo_cpu``: ops use the forwards registered in ``init_backend()``; ops without one
        fall back to ``forward_oot()``, which runs ``forward_native()``."""
        return DISPATCH_KEY

    def get_attn_backend_cls_str(self, selected_backend: Any, head_size: int, dtype: Any) -> str:
        """ "": the runtime's default (torch SDPA on CPU); no vendor attention class."""
        return ""

    def verify_model_arch(self, model_arch: str) -> None:
        """Every architecture runs: each op has a portable ``forward_native()``."""

    def optimize_vae(self, vae: Any) -> Any:
        """Unchanged: no CPU-specific VAE fast path."""
        return vae

    # -- [Active] execution -------------------------------------------------------------------
    def get_compile_backend(self, mode: str | None = None) -> str:
        """Inductor generates C++/OpenMP code for CPU."""
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
        """random, numpy (when installed) and torch, when ``seed`` is not None."""
        super().seed_everything(seed)

    def enable_dit_layerwise_offload_by_default(self) -> bool:
        """False: the weights already live in host memory; there is nothing to offload to."""
        return False

    def device_shares_host_memory(self) -> bool:
        """True: the device *is* the host."""
        return True
