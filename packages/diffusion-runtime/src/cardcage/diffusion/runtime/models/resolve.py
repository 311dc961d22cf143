"""Where a ``model_path`` leads: a built-in id or a saved directory, checked without torch.

``resolve_model()`` answers the questions a user's mistake fails on (does the path name a model
directory, does it hold both files, is its ``config.json`` readable and valid) with the typed
errors of ``.errors``, in a few milliseconds. The command line asks it in the launching process
before any worker is spawned, so a mistyped ``--model-path`` is one line naming the path and the
fix rather than several seconds of worker start-up and a worker's traceback; ``load_model``
asks it too, so both say the same thing.

Import-safe: stdlib, ``.config`` and ``.errors`` only (no torch, nothing of the runtime). It does
not read the weights: whether they match the configuration is known only once they are loaded.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping
from pathlib import Path

from .config import TinyDiTConfig
from .errors import ModelConfigError, ModelNotFoundError

__all__ = [
    "BUILTIN_DIR",
    "BUILTIN_MODELS",
    "CONFIG_FILE",
    "DEFAULT_MODEL_ID",
    "WEIGHTS_FILE",
    "BuiltinModel",
    "ResolvedModel",
    "read_config",
    "resolve_model",
]

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


@dataclasses.dataclass(frozen=True)
class ResolvedModel:
    """A ``model_path`` that names a usable model directory, and that directory's configuration.

    ``source`` is how logs name it: the directory, or the built-in id and its directory.
    """

    model_path: str
    directory: Path
    config: TinyDiTConfig
    source: str

    @property
    def weights_path(self) -> Path:
        return self.directory / WEIGHTS_FILE


def read_config(directory: Path) -> TinyDiTConfig:
    """Parse ``directory/config.json``; every way it can be unusable is a ``ModelConfigError``
    naming the file."""
    config_path = directory / CONFIG_FILE
    try:
        text = config_path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ModelConfigError(str(config_path), f"not UTF-8 text ({exc.reason})") from None
    except OSError as exc:
        raise ModelConfigError(
            str(config_path), f"cannot be read ({exc.strerror or exc})"
        ) from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ModelConfigError(str(config_path), f"not valid JSON ({exc})") from None
    return TinyDiTConfig.from_dict(data, source=str(config_path))


def _not_found(key: str, detail: str = "") -> ModelNotFoundError:
    """The error for a path that names no model, with the built-in id it was likely meant as."""
    from cardcage.hooks.spelling import closest  # the error path only: difflib is not cheap

    suggestion = None if detail else closest(key, BUILTIN_MODELS)
    return ModelNotFoundError(key, tuple(BUILTIN_MODELS), detail, suggestion=suggestion)


def resolve_model(model_path: str | os.PathLike[str]) -> ResolvedModel:
    """Check that ``model_path`` names a model this runtime can load, and read its configuration.

    A directory of that name wins over a built-in id (so a local copy can shadow it). Raises
    ``ModelNotFoundError`` (naming the built-in id a near miss was likely meant as) or
    ``ModelConfigError``; the weights file is checked to exist, not read.
    """
    key = os.fspath(model_path)
    directory = Path(key)
    source = str(directory)
    builtin = BUILTIN_MODELS.get(key)
    if builtin is not None and not directory.is_dir():
        directory = builtin.directory
        source = f"built-in {key!r} ({directory})"
    if not directory.is_dir():
        detail = f"{key} is a file, not a directory" if directory.exists() else ""
        raise _not_found(key, detail)
    missing = [f for f in (CONFIG_FILE, WEIGHTS_FILE) if not (directory / f).is_file()]
    if missing:
        raise _not_found(key, f"the directory lacks {', '.join(missing)}")
    return ResolvedModel(key, directory, read_config(directory), source)
