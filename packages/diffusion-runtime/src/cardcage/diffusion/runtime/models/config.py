"""``TinyDiTConfig``: the hyperparameters of the built-in latent diffusion model.

One frozen dataclass describes the prompt encoder, the latent transformer, the decoder and the
sampler defaults, so one ``config.json`` next to one ``model.safetensors`` fully determines a model.
Import-safe: stdlib only (no torch).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from .errors import ModelConfigError

__all__ = ["CONFIG_FORMAT_VERSION", "MODEL_TYPE", "TinyDiTConfig"]

#: ``model_type`` written to and required in ``config.json``.
MODEL_TYPE = "cardcage-tiny-dit"
#: Bumped when the meaning of a field or the parameter layout changes.
CONFIG_FORMAT_VERSION = 1


@dataclasses.dataclass(frozen=True)
class TinyDiTConfig:
    """Sizes of every part of the model; defaults give ~0.7M parameters."""

    # prompt encoder: tokens -> embeddings -> a few pre-norm transformer layers. With an empty
    # ``vocabulary`` the tokens are the prompt's UTF-8 bytes (at most ``max_prompt_bytes``);
    # otherwise they are its words, one token per word of ``vocabulary`` (at most
    # ``max_prompt_words``), ``stopwords`` are skipped and any other word is dropped with a
    # warning (see ``text_encoder.WordTokenizer``).
    text_dim: int = 64
    text_layers: int = 2
    text_heads: int = 4
    max_prompt_bytes: int = 128
    vocabulary: tuple[str, ...] = ()
    stopwords: tuple[str, ...] = ()
    max_prompt_words: int = 16
    # latent transformer
    latent_channels: int = 4
    patch_size: int = 2
    hidden_size: int = 96
    num_heads: int = 4
    depth: int = 3
    mlp_ratio: float = 2.0
    timestep_dim: int = 64
    norm_eps: float = 1e-6
    # decoder: each stage doubles the resolution, so vae_scale_factor = 2 ** len(channels)
    decoder_channels: tuple[int, ...] = (48, 24)
    # sampler defaults (rectified-flow Euler)
    flow_shift: float = 1.0
    default_steps: int = 8
    default_guidance_scale: float = 3.0
    # the (width, height) in pixels the weights were trained at, or None when unknown. Other
    # sizes run (the transformer's positions are computed for any grid) but lie outside what
    # the model learned, so the command line and the server warn about them.
    trained_size: tuple[int, int] | None = None

    def __post_init__(self) -> None:
        problems = self.problems()
        if problems:
            raise ModelConfigError("TinyDiTConfig", "; ".join(problems))

    # -- derived sizes ------------------------------------------------------------------------
    @property
    def vae_scale_factor(self) -> int:
        """Pixels per latent cell along each side."""
        return 1 << len(self.decoder_channels)

    @property
    def pixel_multiple(self) -> int:
        """Height and width must be multiples of this (one transformer token per patch)."""
        return self.vae_scale_factor * self.patch_size

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_heads

    @property
    def mlp_hidden(self) -> int:
        return int(self.hidden_size * self.mlp_ratio)

    # -- validation and (de)serialization -----------------------------------------------------
    def problems(self) -> list[str]:
        """Every reason this configuration cannot build a model (empty when valid)."""
        out: list[str] = []
        positive = (
            "text_dim",
            "text_layers",
            "text_heads",
            "max_prompt_bytes",
            "max_prompt_words",
            "latent_channels",
            "patch_size",
            "hidden_size",
            "num_heads",
            "depth",
            "timestep_dim",
            "default_steps",
        )
        for name in positive:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                out.append(f"{name} must be a positive int, got {value!r}")
        if out:
            return out
        if self.text_dim % self.text_heads:
            out.append(f"text_dim ({self.text_dim}) must be divisible by text_heads")
        if self.hidden_size % self.num_heads:
            out.append(f"hidden_size ({self.hidden_size}) must be divisible by num_heads")
        if self.timestep_dim % 2:
            out.append(f"timestep_dim ({self.timestep_dim}) must be even")
        if self.hidden_size % 4:
            out.append("hidden_size must be divisible by 4 (2-D sine-cosine positions)")
        if not self.decoder_channels or any(
            isinstance(c, bool) or not isinstance(c, int) or c <= 0 for c in self.decoder_channels
        ):
            out.append(f"decoder_channels must be positive ints, got {self.decoder_channels!r}")
        for name in ("vocabulary", "stopwords"):
            words = getattr(self, name)
            if not isinstance(words, tuple) or not all(
                isinstance(w, str) and w.isalpha() and w == w.lower() for w in words
            ):
                out.append(f"{name} must be lower-case alphabetic words, got {words!r}")
            elif len(set(words)) != len(words):
                out.append(f"{name} lists a word twice")
        if set(self.vocabulary) & set(self.stopwords):
            overlap = sorted(set(self.vocabulary) & set(self.stopwords))
            out.append(f"words in both vocabulary and stopwords: {overlap}")
        if self.stopwords and not self.vocabulary:
            out.append("stopwords need a vocabulary (byte-level prompts have no words)")
        for name in ("mlp_ratio", "norm_eps", "flow_shift"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
                out.append(f"{name} must be a positive number, got {value!r}")
        if self.trained_size is not None and not (
            isinstance(self.trained_size, tuple)
            and len(self.trained_size) == 2
            and all(
                isinstance(side, int) and not isinstance(side, bool) and side > 0
                for side in self.trained_size
            )
        ):
            out.append(f"trained_size must be [width, height] or null, got {self.trained_size!r}")
        if not isinstance(self.default_guidance_scale, int | float) or (
            self.default_guidance_scale < 1
        ):
            out.append("default_guidance_scale must be a number >= 1")
        return out

    def size_warning(self, width: int, height: int) -> str | None:
        """What to tell a user who asks for ``width`` x ``height`` away from ``trained_size``.

        None at the trained size, or when it is unknown. One wording for the command line and
        the server, which both say it: the picture is made, but it is noise, not a scene.
        """
        if self.trained_size is None or (width, height) == self.trained_size:
            return None
        trained = "x".join(str(side) for side in self.trained_size)
        return (
            f"the model was trained at {trained}; {width}x{height} lies outside what it learned, "
            f"so expect repeated or distorted shapes rather than the scene asked for. Ask for "
            f"{trained} for a faithful picture."
        )

    def to_dict(self) -> dict[str, Any]:
        """The ``config.json`` content, including ``model_type`` and ``format_version``."""
        data: dict[str, Any] = {"model_type": MODEL_TYPE, "format_version": CONFIG_FORMAT_VERSION}
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            data[field.name] = list(value) if isinstance(value, tuple) else value
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, source: str = "config") -> TinyDiTConfig:
        """Parse ``config.json`` content; unknown keys and a foreign ``model_type`` are errors."""
        if not isinstance(data, Mapping):
            raise ModelConfigError(source, f"expected a JSON object, got {type(data).__name__}")
        model_type = data.get("model_type")
        if model_type != MODEL_TYPE:
            raise ModelConfigError(source, f"model_type must be {MODEL_TYPE!r}, got {model_type!r}")
        version = data.get("format_version")
        if version != CONFIG_FORMAT_VERSION:
            raise ModelConfigError(
                source,
                f"format_version {version!r} is not supported (this runtime reads "
                f"{CONFIG_FORMAT_VERSION})",
            )
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - names - {"model_type", "format_version"})
        if unknown:
            raise ModelConfigError(source, f"unknown keys {unknown}")
        kwargs: dict[str, Any] = {}
        for key, value in data.items():
            if key in names:
                kwargs[key] = tuple(value) if isinstance(value, list) else value
        try:
            return cls(**kwargs)
        except ModelConfigError as exc:
            raise ModelConfigError(source, exc.problem) from None
