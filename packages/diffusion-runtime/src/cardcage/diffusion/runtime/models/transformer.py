"""``TinyDiT``: a compact latent diffusion transformer (DiT-style, adaLN-modulated blocks).

Latents ``[B, C, h, w]`` are cut into ``p x p`` patches, one token each, with fixed 2-D sine-cosine
positions. Each block modulates its norms with the timestep-plus-pooled-prompt vector (adaLN),
runs self-attention over the image tokens, cross-attention to the prompt tokens and a SwiGLU
feed-forward. The output is the flow-matching velocity, shaped like the latents.

With a sequence-parallel communicator (``set_sequence_parallel_communicator``, the platform's
all-to-all communicator over the sequence-parallel group) each rank keeps its contiguous slice of
the image tokens from the patch embedding to the final projection; only self-attention exchanges
data (through the communicator, see ``attention``) and the slices are gathered at the end over
the communicator's group, so every rank returns the full velocity.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F  # noqa: N812

from cardcage.diffusion.runtime.layers.layernorm import RMSNorm

from .attention import Attention, FeedForward
from .config import TinyDiTConfig
from .distributed import all_gather_sequence

if TYPE_CHECKING:
    from cardcage.diffusion.runtime.distributed import DeviceCommunicatorBase

__all__ = ["TinyDiT", "sincos_positions_2d", "timestep_embedding"]


def timestep_embedding(t: torch.Tensor, dim: int, max_period: float = 10000.0) -> torch.Tensor:
    """Sinusoidal features ``[B, dim]`` of timesteps ``t`` (``[B]``, any float scale)."""
    half = dim // 2
    freqs = torch.exp(
        -math.log(max_period) * torch.arange(half, dtype=torch.float32, device=t.device) / half
    )
    angles = t.to(torch.float32)[:, None] * freqs[None]
    return torch.cat([torch.cos(angles), torch.sin(angles)], dim=-1)


def sincos_positions_2d(grid_h: int, grid_w: int, dim: int) -> torch.Tensor:
    """Fixed positions ``[grid_h * grid_w, dim]`` in row-major token order (float32)."""
    quarter = dim // 4
    omega = 1.0 / (10000.0 ** (torch.arange(quarter, dtype=torch.float64) / quarter))
    ys = torch.arange(grid_h, dtype=torch.float64)[:, None].expand(grid_h, grid_w).reshape(-1)
    xs = torch.arange(grid_w, dtype=torch.float64)[None, :].expand(grid_h, grid_w).reshape(-1)
    ay, ax = ys[:, None] * omega[None], xs[:, None] * omega[None]
    pos = torch.cat([ay.sin(), ay.cos(), ax.sin(), ax.cos()], dim=-1)
    return pos.to(torch.float32)


class _Block(torch.nn.Module):  # type: ignore[misc]
    def __init__(self, config: TinyDiTConfig) -> None:
        super().__init__()
        dim, eps = config.hidden_size, config.norm_eps
        self.modulation = torch.nn.Linear(dim, 6 * dim)
        self.norm1 = RMSNorm(dim, eps)
        self.attn = Attention(dim, config.num_heads, eps=eps)
        self.norm2 = RMSNorm(dim, eps)
        self.cross_attn = Attention(dim, config.num_heads, context_dim=config.text_dim, eps=eps)
        self.norm3 = RMSNorm(dim, eps)
        self.mlp = FeedForward(dim, config.mlp_hidden)

    def forward(
        self, x: torch.Tensor, cond: torch.Tensor, context: torch.Tensor, mask: torch.Tensor
    ) -> torch.Tensor:
        mods = self.modulation(F.silu(cond)).unsqueeze(1).chunk(6, dim=-1)
        shift1, scale1, gate1, shift2, scale2, gate2 = mods
        x = x + gate1 * self.attn(self.norm1(x) * (1 + scale1) + shift1)
        x = x + self.cross_attn(self.norm2(x), context=context, context_mask=mask)
        out: torch.Tensor = x + gate2 * self.mlp(self.norm3(x) * (1 + scale2) + shift2)
        return out


class TinyDiT(torch.nn.Module):  # type: ignore[misc]
    """Predicts the velocity ``noise - x0`` for latents at noise level ``timestep / 1000``."""

    def __init__(self, config: TinyDiTConfig) -> None:
        super().__init__()
        self.config = config
        dim, p, c = config.hidden_size, config.patch_size, config.latent_channels
        self.patch_embed = torch.nn.Linear(c * p * p, dim)
        self.time_in = torch.nn.Linear(config.timestep_dim, dim)
        self.time_out = torch.nn.Linear(dim, dim)
        self.prompt_in = torch.nn.Linear(config.text_dim, dim)
        self.blocks = torch.nn.ModuleList(_Block(config) for _ in range(config.depth))
        self.norm_out = RMSNorm(dim, config.norm_eps)
        self.out_modulation = torch.nn.Linear(dim, 2 * dim)
        self.proj_out = torch.nn.Linear(dim, c * p * p)
        self._communicator: DeviceCommunicatorBase | None = None

    # -- sequence parallelism -------------------------------------------------------------------
    @property
    def communicator(self) -> DeviceCommunicatorBase | None:
        """The sequence-parallel all-to-all communicator; None: one rank."""
        return self._communicator

    @property
    def sp_group(self) -> Any:
        """The sequence-parallel process group (the communicator's); None: one rank."""
        return None if self._communicator is None else self._communicator.group

    @property
    def sp_world_size(self) -> int:
        return 1 if self._communicator is None else self._communicator.world_size

    @property
    def sp_rank(self) -> int:
        return 0 if self._communicator is None else self._communicator.rank

    def set_sequence_parallel_communicator(
        self, communicator: DeviceCommunicatorBase | None
    ) -> None:
        """Split the image tokens across ``communicator``'s ranks (None: one rank); every
        self-attention exchanges them through ``communicator.all_to_all_4D``."""
        if communicator is not None and communicator.world_size > 1:
            world = communicator.world_size
            if self.config.num_heads % world:
                raise ValueError(
                    f"num_heads ({self.config.num_heads}) must be divisible by the "
                    f"sequence-parallel size ({world})"
                )
        self._communicator = communicator
        for block in self.blocks:
            block.attn.communicator = communicator

    # -- patches --------------------------------------------------------------------------------
    def patchify(self, latents: torch.Tensor) -> torch.Tensor:
        """``[B, C, h, w]`` -> ``[B, (h/p)(w/p), C p p]`` in row-major patch order."""
        b, c, h, w = latents.shape
        p = self.config.patch_size
        x = latents.reshape(b, c, h // p, p, w // p, p).permute(0, 2, 4, 1, 3, 5)
        return x.reshape(b, (h // p) * (w // p), c * p * p)

    def unpatchify(self, tokens: torch.Tensor, height: int, width: int) -> torch.Tensor:
        b = tokens.shape[0]
        c, p = self.config.latent_channels, self.config.patch_size
        x = tokens.reshape(b, height // p, width // p, c, p, p).permute(0, 3, 1, 4, 2, 5)
        return x.reshape(b, c, height, width)

    # -- forward --------------------------------------------------------------------------------
    def forward(
        self,
        latents: torch.Tensor,
        timestep: torch.Tensor,
        context: torch.Tensor,
        context_mask: torch.Tensor,
        pooled: torch.Tensor,
    ) -> torch.Tensor:
        """Velocity ``[B, C, h, w]``; ``timestep`` is ``[B]`` in ``[0, 1000]``."""
        _, c, h, w = latents.shape
        p = self.config.patch_size
        if c != self.config.latent_channels or h % p or w % p:
            raise ValueError(
                f"latents of shape {tuple(latents.shape)} do not fit this model "
                f"({self.config.latent_channels} channels, patch size {p})"
            )
        x = self.patch_embed(self.patchify(latents))
        x = x + sincos_positions_2d(h // p, w // p, x.shape[-1]).to(x.device, x.dtype)
        world = self.sp_world_size
        if world > 1:
            if x.shape[1] % world:
                raise ValueError(
                    f"{x.shape[1]} image tokens cannot be split across {world} ranks; choose a "
                    "height and width whose token count is a multiple of the number of ranks"
                )
            x = x.chunk(world, dim=1)[self.sp_rank]
        t = timestep_embedding(timestep, self.config.timestep_dim).to(x.dtype)
        cond = self.time_out(F.silu(self.time_in(t))) + self.prompt_in(pooled)
        for block in self.blocks:
            x = block(x, cond, context, context_mask)
        shift, scale = self.out_modulation(F.silu(cond)).unsqueeze(1).chunk(2, dim=-1)
        x = self.proj_out(self.norm_out(x) * (1 + scale) + shift)
        if world > 1:
            x = all_gather_sequence(x, dim=1, group=self.sp_group)
        return self.unpatchify(x, h, w)
