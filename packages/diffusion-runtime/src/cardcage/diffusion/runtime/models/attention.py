"""The attention and feed-forward blocks shared by the prompt encoder and the latent transformer.

``Attention`` is the one place where the image sequence may be split across ranks: with a
sequence-parallel group of N ranks, self-attention receives ``S/N`` tokens per rank, exchanges
``[B, S/N, H, D]`` for ``[B, S, H/N, D]`` with its communicator's ``all_to_all_4D`` (the
platform's all-to-all communicator, see ``Platform.get_all_to_all_communicator_cls()``), attends
over the whole sequence for its heads, and exchanges back. Cross-attention needs no exchange:
the prompt tokens are replicated on every rank. Norms and the gated activation are ``CustomOp``
layers, so a platform's registered forwards run inside these blocks.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F  # noqa: N812

from cardcage.diffusion.runtime.layers.activation import SiluAndMul
from cardcage.diffusion.runtime.layers.layernorm import RMSNorm

if TYPE_CHECKING:
    from cardcage.diffusion.runtime.distributed import DeviceCommunicatorBase

__all__ = ["Attention", "FeedForward"]


class Attention(torch.nn.Module):  # type: ignore[misc]
    """Multi-head attention with per-head RMS-normalized queries and keys.

    ``context_dim=None`` builds self-attention (sequence-parallel when ``communicator`` spans
    more than one rank);
    otherwise keys and values come from ``context`` (cross-attention).
    """

    def __init__(
        self, dim: int, num_heads: int, *, context_dim: int | None = None, eps: float = 1e-6
    ) -> None:
        super().__init__()
        if dim % num_heads:
            raise ValueError(f"dim {dim} is not divisible by num_heads {num_heads}")
        self.num_heads = num_heads
        self.head_dim = dim // num_heads
        self.is_cross_attention = context_dim is not None
        kv_dim = dim if context_dim is None else context_dim
        self.to_q = torch.nn.Linear(dim, dim)
        self.to_k = torch.nn.Linear(kv_dim, dim)
        self.to_v = torch.nn.Linear(kv_dim, dim)
        self.to_out = torch.nn.Linear(dim, dim)
        self.norm_q = RMSNorm(self.head_dim, eps)
        self.norm_k = RMSNorm(self.head_dim, eps)
        #: The all-to-all communicator of the sequence-parallel group (self-attention only);
        #: None means one rank.
        self.communicator: DeviceCommunicatorBase | None = None

    def forward(
        self,
        x: torch.Tensor,
        context: torch.Tensor | None = None,
        context_mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """``x``: ``[B, S, dim]`` (this rank's tokens); ``context_mask``: ``[B, L]`` bool."""
        batch, seq, dim = x.shape
        source = x if context is None else context
        q = self.norm_q(self.to_q(x).view(batch, seq, self.num_heads, self.head_dim))
        k = self.norm_k(self.to_k(source).view(batch, -1, self.num_heads, self.head_dim))
        v = self.to_v(source).view(batch, -1, self.num_heads, self.head_dim)
        mask = None
        if context_mask is not None:
            mask = context_mask[:, None, None, :]
        comm = self.communicator
        parallel = not self.is_cross_attention and comm is not None and comm.world_size > 1
        if parallel:
            assert comm is not None
            if mask is not None:
                raise ValueError("sequence-parallel self-attention does not take a key mask")
            # [B, S/N, H, D] -> [B, S, H/N, D]: the whole sequence, this rank's heads.
            q, k, v = (comm.all_to_all_4D(t, 2, 1) for t in (q, k, v))
        out = F.scaled_dot_product_attention(
            q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), attn_mask=mask
        ).transpose(1, 2)
        if parallel:
            assert comm is not None
            out = comm.all_to_all_4D(out, 1, 2)
        return self.to_out(out.reshape(batch, seq, dim))


class FeedForward(torch.nn.Module):  # type: ignore[misc]
    """SwiGLU: ``down(silu(gate(x)) * up(x))`` with the gate computed by ``SiluAndMul``."""

    def __init__(self, dim: int, hidden: int) -> None:
        super().__init__()
        self.gate_up = torch.nn.Linear(dim, 2 * hidden)
        self.act = SiluAndMul()
        self.down = torch.nn.Linear(hidden, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.down(self.act(self.gate_up(x)))
        return out
