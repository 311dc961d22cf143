"""``TinyDiffusionModel``: prompt encoder, latent transformer and decoder, and their weights.

A model is resolved from ``model_path``:

* a built-in id (``"cardcage/tiny-dit"``): a model directory shipped inside this package
  (``builtin/tiny-dit``), loaded exactly like any other directory, so no network is needed and
  the built-in model exercises the real loading code. Its weights were trained on procedurally
  drawn scenes by ``cardcage.diffusion.training`` (docs/diffusion/model.md);
* a directory with ``config.json`` and ``model.safetensors`` (see ``save_pretrained``).

Building a model leaves torch's global random state untouched.
"""

from __future__ import annotations

import importlib
import json
import logging
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

from .config import TinyDiTConfig
from .decoder import LatentDecoder, to_uint8
from .errors import ModelError, WeightsMismatchError
from .resolve import (
    BUILTIN_DIR,
    BUILTIN_MODELS,
    CONFIG_FILE,
    DEFAULT_MODEL_ID,
    WEIGHTS_FILE,
    BuiltinModel,
    resolve_model,
)
from .text_encoder import ByteTextEncoder
from .transformer import TinyDiT

__all__ = [
    "BUILTIN_DIR",
    "BUILTIN_MODELS",
    "CONFIG_FILE",
    "DEFAULT_MODEL_ID",
    "WEIGHTS_FILE",
    "BuiltinModel",
    "TinyDiffusionModel",
    "load_model",
]

logger = logging.getLogger(__name__)


class TinyDiffusionModel(torch.nn.Module):  # type: ignore[misc]
    """The three networks of the pipeline under one state dict (one safetensors file)."""

    def __init__(self, config: TinyDiTConfig) -> None:
        super().__init__()
        self.config = config
        self.text_encoder = ByteTextEncoder(config)
        self.transformer = TinyDiT(config)
        self.decoder = LatentDecoder(config)

    @classmethod
    def empty(cls, config: TinyDiTConfig) -> TinyDiffusionModel:
        """CPU float32 parameters about to be overwritten (loaded or trained).

        torch's default initializers run under ``fork_rng`` so that building a model leaves the
        caller's global random state untouched. (Building on the meta device would skip them,
        but its first use imports several seconds of torch machinery.)
        """
        with torch.random.fork_rng(devices=[]):
            return cls(config)

    def encode_prompt(self, prompts: Sequence[str]) -> tuple[torch.Tensor, ...]:
        """``(states, mask, pooled)`` on this model's device and dtype."""
        return self.text_encoder.encode(list(prompts), self.device)

    def decode(self, latents: torch.Tensor) -> torch.Tensor:
        """Latents -> ``[B, H, W, 3]`` uint8 on the CPU."""
        return to_uint8(self.decoder(latents))

    @property
    def device(self) -> torch.device:
        return next(self.parameters()).device

    @property
    def dtype(self) -> torch.dtype:
        return next(self.parameters()).dtype

    def save_pretrained(self, directory: str | os.PathLike[str]) -> Path:
        """Write ``config.json`` and ``model.safetensors`` into ``directory`` (created)."""
        path = Path(directory)
        path.mkdir(parents=True, exist_ok=True)
        _write_safetensors(self.state_dict(), path / WEIGHTS_FILE)
        text = json.dumps(self.config.to_dict(), indent=2, sort_keys=True) + "\n"
        (path / CONFIG_FILE).write_text(text, encoding="utf-8")
        logger.info("saved %s model to %s", self.config.to_dict()["model_type"], path)
        return path


def _write_safetensors(state: Mapping[str, torch.Tensor], path: Path) -> None:
    """Write ``state`` with ``safetensors.serialize_file`` from the tensors' own memory.

    ``safetensors.torch.save_file`` converts through numpy, which the runtime does not depend
    on; ``serialize_file`` takes raw pointers instead, valid while ``tensors`` holds them.
    """
    if sys.byteorder != "little":
        raise ModelError("save_pretrained() writes little-endian safetensors only")
    safetensors = importlib.import_module("safetensors")
    tensors = {k: v.detach().to("cpu").contiguous() for k, v in state.items()}
    specs = {
        name: safetensors.TensorSpec(
            dtype=str(t.dtype).removeprefix("torch."),
            shape=list(t.shape),
            data_ptr=t.data_ptr(),
            data_len=t.numel() * t.element_size(),
        )
        for name, t in tensors.items()
    }
    safetensors.serialize_file(specs, str(path), metadata={"format": "pt"})
    del tensors


def _load_weights(model: TinyDiffusionModel, weights_path: Path) -> None:
    st = importlib.import_module("safetensors.torch")
    try:
        tensors: dict[str, torch.Tensor] = st.load_file(str(weights_path), device="cpu")
    except Exception as exc:  # safetensors raises its own SafetensorError and OSErrors
        raise WeightsMismatchError(str(weights_path), [f"unreadable: {exc}"]) from exc
    expected = model.state_dict()
    problems = [f"missing {k}" for k in sorted(set(expected) - set(tensors))]
    problems += [f"unexpected {k}" for k in sorted(set(tensors) - set(expected))]
    for key in sorted(set(expected) & set(tensors)):
        if tuple(tensors[key].shape) != tuple(expected[key].shape):
            problems.append(
                f"{key} has shape {tuple(tensors[key].shape)}, expected "
                f"{tuple(expected[key].shape)}"
            )
        elif not tensors[key].is_floating_point():
            problems.append(f"{key} has non-float dtype {tensors[key].dtype}")
    if problems:
        raise WeightsMismatchError(str(weights_path), problems)
    model.load_state_dict(tensors, strict=True)


def load_model(
    model_path: str | os.PathLike[str] = DEFAULT_MODEL_ID,
    *,
    device: Any = "cpu",
    dtype: torch.dtype = torch.float32,
) -> TinyDiffusionModel:
    """Resolve ``model_path`` (built-in id or saved directory) to an eval-mode model.

    ``resolve_model`` checks the path and reads the configuration (the same check the command
    line makes before it spawns workers); then the weights are loaded and checked against it.
    """
    resolved = resolve_model(model_path)
    model = TinyDiffusionModel.empty(resolved.config)
    _load_weights(model, resolved.weights_path)
    model.to(device=device, dtype=dtype).eval().requires_grad_(False)
    logger.info("loaded model %s on %s as %s", resolved.source, device, dtype)
    return model
