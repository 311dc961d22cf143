"""cardcage.diffusion: the diffusion runtime of the SGLang plugin contract.

Importing this package imports nothing else; the runtime lives under ``cardcage.diffusion.runtime``.
"""

from __future__ import annotations

__version__ = "0.1.0"
