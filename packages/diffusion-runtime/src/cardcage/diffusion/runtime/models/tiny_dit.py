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

import dataclasses
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
from .errors import ModelConfigError, ModelError, ModelNotFoundError, WeightsMismatchError
from .text_encoder import ByteTextEncoder
from .transformer import TinyDiT

__all__ = [
    "BUILTIN_MODELS",
    "CONFIG_FILE",
    "DEFAULT_MODEL_ID",
    "WEIGHTS_FILE",
    "BuiltinModel",
    "TinyDiffusionModel",
    "load_model",
]

logger = logging.getLogger(__name__)

CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"
DEFAULT_MODEL_ID = "cardcage/tiny-dit"


#: Where the built-in model directories live inside the installed package.
BUILTIN_DIR = Path(__file__).resolve().parent / "builtin"


@dataclasses.dataclass(frozen=True)
class BuiltinModel:
    """A model id that names a directory shipped in this package."""

    directory: Path
    description: str


BUILTIN_MODELS: Mapping[str, BuiltinModel] = {
    DEFAULT_MODEL_ID: BuiltinModel(
        BUILTIN_DIR / "tiny-dit",
        "~0.28M-parameter latent DiT trained on drawn scenes (a colour, a shape, a place, a "
        "background); 64x64 in well under a CPU-second",
    ),
}


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


def _read_config(directory: Path) -> TinyDiTConfig:
    config_path = directory / CONFIG_FILE
    try:
        data = json.loads(config_path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ModelConfigError(str(config_path), f"not valid JSON ({exc})") from None
    return TinyDiTConfig.from_dict(data, source=str(config_path))


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
    """Resolve ``model_path`` (built-in id or saved directory) to an eval-mode model."""
    key = os.fspath(model_path)
    builtin = BUILTIN_MODELS.get(key)
    directory = Path(key)
    source = str(directory)
    if builtin is not None and not directory.is_dir():
        directory = builtin.directory
        source = f"built-in {key!r} ({directory})"
    if directory.is_dir():
        missing = [f for f in (CONFIG_FILE, WEIGHTS_FILE) if not (directory / f).is_file()]
        if missing:
            raise ModelNotFoundError(
                key, tuple(BUILTIN_MODELS), f"the directory lacks {', '.join(missing)}"
            )
        model = TinyDiffusionModel.empty(_read_config(directory))
        _load_weights(model, directory / WEIGHTS_FILE)
    else:
        raise ModelNotFoundError(key, tuple(BUILTIN_MODELS))
    model.to(device=device, dtype=dtype).eval().requires_grad_(False)
    logger.info("loaded model %s on %s as %s", source, device, dtype)
    return model
