"""Typed errors of the built-in diffusion models, rooted in ``DiffusionError``.

Each also subclasses the builtin a caller would already catch (``FileNotFoundError``,
``ValueError``) and says how to fix the problem. Import-safe: only class definitions.
"""

from __future__ import annotations

from cardcage.diffusion.errors import DiffusionError

__all__ = ["ModelConfigError", "ModelError", "ModelNotFoundError", "WeightsMismatchError"]


class ModelError(DiffusionError):
    """Root of the errors raised while resolving, building or loading a model."""


class ModelNotFoundError(ModelError, FileNotFoundError):
    """``model_path`` is neither a built-in model id nor a directory holding a saved model."""

    def __init__(
        self,
        model_path: str,
        builtin_ids: tuple[str, ...],
        detail: str = "",
        *,
        suggestion: str | None = None,
    ) -> None:
        self.model_path = model_path
        self.builtin_ids = builtin_ids
        #: The built-in id a near miss was likely meant as (``cardcage/tiny-ditt``), or None.
        self.suggestion = suggestion
        known = ", ".join(repr(i) for i in builtin_ids)
        hint = f" Did you mean {suggestion!r}?" if suggestion else ""
        super().__init__(
            f"model {model_path!r} not found{': ' + detail if detail else ''}.{hint} Pass a "
            f"built-in model id ({known}) or a directory holding config.json and "
            "model.safetensors (write one with save_pretrained(directory))."
        )


class ModelConfigError(ModelError, ValueError):
    """A model configuration (``config.json`` or keyword arguments) is invalid."""

    def __init__(self, source: str, problem: str) -> None:
        self.source = source
        self.problem = problem
        super().__init__(
            f"invalid model configuration in {source}: {problem}. Fix the value, or regenerate "
            "the directory with save_pretrained()."
        )


class WeightsMismatchError(ModelError, ValueError):
    """A weights file does not match the architecture its ``config.json`` describes."""

    def __init__(self, path: str, problems: list[str]) -> None:
        self.path = path
        self.problems = problems
        shown = "; ".join(problems[:5]) + (
            f"; and {len(problems) - 5} more" if len(problems) > 5 else ""
        )
        super().__init__(
            f"weights in {path} do not match config.json: {shown}. The file was written for a "
            "different configuration; save both files together with save_pretrained()."
        )
