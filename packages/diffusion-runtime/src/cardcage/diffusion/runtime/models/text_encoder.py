"""``ByteTextEncoder``: prompt tokens through a small pre-norm transformer.

No tokenizer file is needed. A config without a ``vocabulary`` reads prompts as UTF-8 bytes:
token ``b + 1`` is byte ``b``. A config with one reads them as words (``WordTokenizer``): token
``i + 2`` is word ``i`` of the vocabulary, which ``config.json`` carries. Either way 0 pads, and a
leading BOS token keeps every row attendable (an empty prompt is one BOS token). Rows are padded
to a fixed length so the encoder sees the same shapes whatever the batch holds.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence

import torch

from cardcage.diffusion.runtime.layers.layernorm import RMSNorm

from .attention import Attention, FeedForward
from .config import TinyDiTConfig

__all__ = [
    "BOS_TOKEN",
    "PAD_TOKEN",
    "VOCAB_SIZE",
    "WORD_BOS_TOKEN",
    "ByteTextEncoder",
    "WordTokenizer",
    "tokenize_prompts",
]

logger = logging.getLogger(__name__)

PAD_TOKEN = 0
BOS_TOKEN = 257
VOCAB_SIZE = 258
#: BOS of word-level prompts; word ``i`` of the vocabulary is token ``i + 2``.
WORD_BOS_TOKEN = 1
_WORD = re.compile(r"[^\W\d_]+")


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


class WordTokenizer:
    """Prompts as words of a closed vocabulary, for models trained on one.

    Words are the prompt's runs of letters, lower-cased; stopwords ("a", "the", ...) carry no
    token. A word outside both lists cannot be drawn: it is dropped and a warning names it and
    the vocabulary, so "a cat" gives the unconditioned picture (what the empty prompt gives) and
    says why, rather than an arbitrary embedding pretending to mean something.
    """

    def __init__(self, vocabulary: Sequence[str], stopwords: Sequence[str], max_words: int) -> None:
        self.vocabulary = tuple(vocabulary)
        self.stopwords = frozenset(stopwords)
        self.max_words = max_words
        self._ids = {word: index + 2 for index, word in enumerate(self.vocabulary)}

    @property
    def vocab_size(self) -> int:
        """Embedding rows: padding, BOS and one per vocabulary word."""
        return len(self.vocabulary) + 2

    def words(self, prompt: str) -> tuple[list[str], list[str]]:
        """``(known, unknown)`` words of ``prompt``, in order; stopwords in neither."""
        known: list[str] = []
        unknown: list[str] = []
        for word in _WORD.findall(prompt.lower()):
            if word in self._ids:
                known.append(word)
            elif word not in self.stopwords:
                unknown.append(word)
        return known, unknown

    def __call__(self, prompts: Sequence[str]) -> tuple[torch.Tensor, torch.Tensor]:
        """Token ids ``[B, 1 + max_words]`` (int64) and the matching validity mask (bool)."""
        ids = torch.zeros(len(prompts), 1 + self.max_words, dtype=torch.int64)
        for row, prompt in enumerate(prompts):
            known, unknown = self.words(prompt)
            if unknown:
                logger.warning(
                    "prompt %r: the model cannot draw %s, so the word(s) are ignored; it knows: %s",
                    prompt,
                    ", ".join(repr(w) for w in unknown),
                    " ".join(self.vocabulary),
                )
            if len(known) > self.max_words:
                logger.warning("prompt truncated from %d to %d words", len(known), self.max_words)
                known = known[: self.max_words]
            ids[row, 0] = WORD_BOS_TOKEN
            if known:
                ids[row, 1 : 1 + len(known)] = torch.tensor([self._ids[w] for w in known])
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
        self.words: WordTokenizer | None = None
        vocab_size, length = VOCAB_SIZE, 1 + config.max_prompt_bytes
        if config.vocabulary:
            self.words = WordTokenizer(config.vocabulary, config.stopwords, config.max_prompt_words)
            vocab_size, length = self.words.vocab_size, 1 + config.max_prompt_words
        self.token_embedding = torch.nn.Embedding(vocab_size, config.text_dim)
        self.position_embedding = torch.nn.Parameter(torch.empty(length, config.text_dim))
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
        if self.words is not None:
            ids, mask = self.words(prompts)
        else:
            ids, mask = tokenize_prompts(prompts, self.max_bytes)
        ids, mask = ids.to(device), mask.to(device)
        states, pooled = self(ids, mask)
        return states, mask, pooled
