"""Diffusion pipelines: the built-in text-to-image pipeline, its sampler and a PNG writer.

Importing this package imports nothing (no torch); the names below load their submodule on
first access. The runtime's import-neutral modules must never import from here.
"""

from __future__ import annotations

import importlib

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .errors import GenerationParamsError
    from .png import encode_png_rgb, write_png_rgb
    from .sampler import FlowMatchEulerSampler
    from .tiny import GeneratedImage, TinyDiffusionPipeline

_EXPORTS = {
    "GenerationParamsError": "errors",
    "encode_png_rgb": "png",
    "write_png_rgb": "png",
    "FlowMatchEulerSampler": "sampler",
    "GeneratedImage": "tiny",
    "TinyDiffusionPipeline": "tiny",
}

__all__ = [
    "FlowMatchEulerSampler",
    "GeneratedImage",
    "GenerationParamsError",
    "TinyDiffusionPipeline",
    "encode_png_rgb",
    "write_png_rgb",
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
