"""Evidence of what demo-cuda's diffusion half did in this process: counters, and optionally a file.

One ``cardcage.platforms.evidence.Evidence``, ``EVIDENCE``; the events and their keys are
demo-cuda's:

* ``init_backend``: ``DemoCudaPlatform.init_backend()`` ran (key: the dispatch key it registered);
* ``register``: the hook plugin's ``register()`` ran (key: the hook target);
* ``dispatch``: the hook saw ``CustomOp.dispatch_forward()`` choose a forward (key:
  ``"<op class> -> <forward>"``);
* ``forward``: the vendor's forward ran (key: the op class).

``EVIDENCE.count("forward", "...RMSNorm")`` reads a counter in this process. When
``CARDCAGE_DEMO_CUDA_EVIDENCE`` names a file, the first occurrence of each (event, key) in each
process is also appended to it as one JSON line ``{"pid", "event", "key", "platform"}`` (platform
``demo_cuda``); a launcher reads what each of its worker processes did with
``read_evidence(path)``. Import-safe and fork-aware (see ``cardcage.platforms.evidence``).
"""

from __future__ import annotations

from cardcage.platforms.evidence import Evidence, read_evidence
from cardcage_demo_cuda.envs import CARDCAGE_DEMO_CUDA_EVIDENCE

__all__ = ["EVENTS", "EVIDENCE", "Evidence", "read_evidence"]

#: The events this package records, in the order a worker produces them.
EVENTS = ("init_backend", "register", "dispatch", "forward")

#: The evidence of this process.
EVIDENCE = Evidence("demo_cuda", CARDCAGE_DEMO_CUDA_EVIDENCE)
