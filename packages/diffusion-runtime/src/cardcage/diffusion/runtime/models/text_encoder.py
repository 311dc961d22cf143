"""``ByteTextEncoder``: prompts as UTF-8 bytes through a small pre-norm transformer.

No tokenizer file is needed: token ``b + 1`` is byte ``b``, 0 pads, and a leading BOS token keeps
every row attendable (an empty prompt is one BOS token). Rows are padded to a fixed length so
the encoder sees the same shapes whatever the batch holds.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import torch

from cardcage.diffusion.runtime.layers.layernorm import RMSNorm

from .attention import Attention, FeedForward
from .config import TinyDiTConfig

__all__ = ["BOS_TOKEN", "PAD_TOKEN", "VOCAB_SIZE", "ByteTextEncoder", "tokenize_prompts"]

logger = logging.getLogger(__name__)

PAD_TOKEN = 0
BOS_TOKEN = 257
VOCAB_SIZE = 258


def tokenize_prompts(prompts: Sequence[str], max_bytes: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Token ids ``[B, 1 + max_bytes]`` (int64) and the matching validity mask (bool)."""
    length = 1 + max_bytes
    ids = torch.zeros(len(prompts), length, dtype=torch.int64)
    for row, prompt in enumerate(prompts):
        data = prompt.encode("utf-8")
        if len(data) > max_bytes:
            logger.warning("prompt truncated from %d to %d UTF-8 bytes", len(data), max_bytes)
            data = data[:max_bytes]
        ids[row, 0] = BOS_TOKEN
        if data:
            ids[row, 1 : 1 + len(data)] = torch.tensor(list(data), dtype=torch.int64) + 1
    return ids, ids != PAD_TOKEN


class _TextLayer(torch.nn.Module):  # type: ignore[misc]
    def __init__(self, config: TinyDiTConfig) -> None:
        super().__init__()
        dim = config.text_dim
        self.norm1 = RMSNorm(dim, config.norm_eps)
        self.attn = Attention(dim, config.text_heads, eps=config.norm_eps)
        self.norm2 = RMSNorm(dim, config.norm_eps)
        self.mlp = FeedForward(dim, 2 * dim)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.norm1(x), context_mask=mask)
        out: torch.Tensor = x + self.mlp(self.norm2(x))
        return out


class ByteTextEncoder(torch.nn.Module):  # type: ignore[misc]
    """Prompt token ids -> per-token states ``[B, L, text_dim]`` and a pooled ``[B, text_dim]``."""

    def __init__(self, config: TinyDiTConfig) -> None:
        super().__init__()
        self.max_bytes = config.max_prompt_bytes
        self.token_embedding = torch.nn.Embedding(VOCAB_SIZE, config.text_dim)
        self.position_embedding = torch.nn.Parameter(
            torch.empty(1 + config.max_prompt_bytes, config.text_dim)
        )
        self.layers = torch.nn.ModuleList(_TextLayer(config) for _ in range(config.text_layers))
        self.norm_out = RMSNorm(config.text_dim, config.norm_eps)

    def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x = self.token_embedding(ids) + self.position_embedding[: ids.shape[1]]
        for layer in self.layers:
            x = layer(x, mask)
        states: torch.Tensor = self.norm_out(x)
        weights = mask.to(states.dtype).unsqueeze(-1)
        pooled = (states * weights).sum(dim=1) / weights.sum(dim=1)
        return states, pooled

    def encode(self, prompts: Sequence[str], device: torch.device) -> tuple[torch.Tensor, ...]:
        """``(states, mask, pooled)`` for ``prompts`` on ``device``."""
        ids, mask = tokenize_prompts(prompts, self.max_bytes)
        ids, mask = ids.to(device), mask.to(device)
        states, pooled = self(ids, mask)
        return states, mask, pooled
