"""Rectified-flow (flow-matching) Euler sampling with classifier-free guidance.

The model predicts the velocity ``v = noise - x0``; the path is ``x_s = (1 - s) x0 + s noise`` for
noise level ``s`` from 1 to 0, so one Euler step is ``x <- x + (s_next - s) v``. ``shift > 1``
spends more steps at high noise (``s' = shift s / (1 + (shift - 1) s)``).
"""

from __future__ import annotations

import dataclasses

import torch

__all__ = ["FlowMatchEulerSampler", "apply_guidance"]


@dataclasses.dataclass(frozen=True)
class FlowMatchEulerSampler:
    """Noise levels and Euler updates; stateless, so one instance serves every request."""

    shift: float = 1.0

    def sigmas(self, num_steps: int) -> torch.Tensor:
        """``num_steps + 1`` noise levels from 1 down to 0 (float64)."""
        if num_steps < 1:
            raise ValueError(f"num_steps must be >= 1, got {num_steps}")
        s = torch.linspace(1.0, 0.0, num_steps + 1, dtype=torch.float64)
        return self.shift * s / (1.0 + (self.shift - 1.0) * s)

    @staticmethod
    def step(
        latents: torch.Tensor, velocity: torch.Tensor, sigma: float, sigma_next: float
    ) -> torch.Tensor:
        return latents + (sigma_next - sigma) * velocity


def apply_guidance(uncond: torch.Tensor, cond: torch.Tensor, guidance_scale: float) -> torch.Tensor:
    """Classifier-free guidance: ``uncond + g (cond - uncond)``."""
    return uncond + guidance_scale * (cond - uncond)
