"""Built-in diffusion models: a compact latent DiT, its prompt encoder (words or bytes) and decoder.

Importing this package imports nothing (no torch); the names below load their submodule on
first access. The runtime's import-neutral modules (``cardcage.diffusion``,
``runtime.managers.worker_bootstrap``) must never import from here.
"""

from __future__ import annotations

import importlib

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .config import TinyDiTConfig
    from .distributed import all_to_all_4D
    from .errors import ModelConfigError, ModelError, ModelNotFoundError, WeightsMismatchError
    from .resolve import BUILTIN_MODELS, DEFAULT_MODEL_ID, ResolvedModel, resolve_model
    from .tiny_dit import TinyDiffusionModel, load_model

_EXPORTS = {
    "TinyDiTConfig": "config",
    "all_to_all_4D": "distributed",
    "ModelConfigError": "errors",
    "ModelError": "errors",
    "ModelNotFoundError": "errors",
    "WeightsMismatchError": "errors",
    "BUILTIN_MODELS": "resolve",
    "DEFAULT_MODEL_ID": "resolve",
    "ResolvedModel": "resolve",
    "resolve_model": "resolve",
    "TinyDiffusionModel": "tiny_dit",
    "load_model": "tiny_dit",
}

__all__ = [
    "BUILTIN_MODELS",
    "DEFAULT_MODEL_ID",
    "ModelConfigError",
    "ModelError",
    "ModelNotFoundError",
    "ResolvedModel",
    "TinyDiTConfig",
    "TinyDiffusionModel",
    "WeightsMismatchError",
    "all_to_all_4D",
    "load_model",
    "resolve_model",
]


def __getattr__(name: str) -> object:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
