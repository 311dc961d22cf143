"""The diffusion half's evidence: the package's one record, ``cardcage_demo_cpu.evidence``.

Kept under this name so ``from .evidence import EVIDENCE`` in the diffusion modules, and anyone
who reads ``cardcage_demo_cpu.diffusion.evidence``, see the same object as the SRT half.
"""

from __future__ import annotations

from cardcage_demo_cpu.evidence import EVENTS, EVIDENCE, Evidence, read_evidence

__all__ = ["EVENTS", "EVIDENCE", "Evidence", "read_evidence"]
