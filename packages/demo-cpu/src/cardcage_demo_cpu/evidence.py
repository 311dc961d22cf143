"""Evidence of what demo-cpu did in this process: counters, and optionally a file.

One ``cardcage.platforms.evidence.Evidence`` for both halves of the package, ``EVIDENCE``; the
events and their keys are demo-cpu's. The diffusion half records

* ``init_backend``: ``DemoCpuPlatform.init_backend()`` ran (key: the dispatch key it registered);
* ``register``: the hook plugin's ``register()`` ran (key: the hook target);
* ``dispatch``: the hook saw ``CustomOp.dispatch_forward()`` choose a forward (key:
  ``"<op class> -> <forward>"``);
* ``forward``: the vendor's forward ran (key: the op class);
* ``all_to_all``: the sequence-parallel exchange ran through ``DemoCpuCommunicator`` (key: the
  communicator's name, ``sp-rank<N>`` in a worker).

The SRT half records, with a ``value`` where there is one to show:

* ``init_backend`` (key ``srt``): ``DemoCpuSRTPlatform.init_backend()`` ran; value: the torch
  intra-op threads it set (None without torch);
* ``device_total_memory`` (key: the device id): the device's answer to "how much memory?";
  value: bytes;
* ``register`` (key: the hook target): the general plugin registered its hook with SGLang or
  vLLM;
* ``hook`` (key: the hook target): the hook ran; value: what the hooked function returned
  (for ``sglang.srt.utils.common.get_device_memory_capacity``, MiB);
* ``kernel`` (key: the op, ``rms_norm``, ``fused_add_rms_norm``, ``silu_and_mul``): one of the
  platform's kernels (``kernels``) ran in a host's op; ``EVIDENCE.count("kernel", op)`` counts
  the calls in this process;
* ``resolve`` (key: the dotted name): vLLM resolved that name through the hooked
  ``resolve_obj_by_qualname`` (its worker class, its attention backend).

``EVIDENCE.count("forward", "...RMSNorm")`` reads a counter in this process. When
``CARDCAGE_DEMO_CPU_EVIDENCE`` names a file, the first occurrence of each (event, key) in each
process is also appended to it as one JSON line ``{"pid", "event", "key", "platform"}`` (platform
``demo_cpu``), plus ``"value"`` when the event has one; a launcher reads what each of its worker
processes did with ``read_evidence(path)``. Import-safe and fork-aware (see
``cardcage.platforms.evidence``).
"""

from __future__ import annotations

from cardcage.platforms.evidence import Evidence, Value, read_evidence
from cardcage_demo_cpu.envs import CARDCAGE_DEMO_CPU_EVIDENCE

__all__ = ["EVENTS", "EVIDENCE", "Evidence", "Value", "read_evidence"]

#: The events this package records: the diffusion half's in the order a worker produces them,
#: then the SRT half's own.
EVENTS = (
    "init_backend",
    "register",
    "dispatch",
    "forward",
    "all_to_all",
    "device_total_memory",
    "hook",
    "kernel",
    "resolve",
)

#: The evidence of this process.
EVIDENCE = Evidence("demo_cpu", CARDCAGE_DEMO_CPU_EVIDENCE)
