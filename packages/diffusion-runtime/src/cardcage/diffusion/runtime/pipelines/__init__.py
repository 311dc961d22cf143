"""Diffusion pipelines: the built-in text-to-image pipeline and its sampler.

Importing this package imports nothing (no torch); the names below load their submodule on
first access. The runtime's import-neutral modules must never import from here.
"""

from __future__ import annotations

import importlib

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .errors import GenerationParamsError
    from .sampler import FlowMatchEulerSampler
    from .tiny import GeneratedImage, TinyDiffusionPipeline

_EXPORTS = {
    "GenerationParamsError": "errors",
    "FlowMatchEulerSampler": "sampler",
    "GeneratedImage": "tiny",
    "TinyDiffusionPipeline": "tiny",
}

__all__ = [
    "FlowMatchEulerSampler",
    "GeneratedImage",
    "GenerationParamsError",
    "TinyDiffusionPipeline",
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
