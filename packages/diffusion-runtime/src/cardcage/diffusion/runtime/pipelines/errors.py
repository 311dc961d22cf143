"""Typed errors of the pipelines. Import-safe: class definitions only.

A bad generation request is an ``InvalidSamplingParamsError`` (so the facade and the HTTP server
map it to the same 4xx answer as a bad ``SamplingParams``), raised by the pipeline itself for the
checks that depend on the model (sizes that fit its patches, its limits).
"""

from __future__ import annotations

from cardcage.diffusion.errors import InvalidSamplingParamsError

__all__ = ["GenerationParamsError"]


class GenerationParamsError(InvalidSamplingParamsError):
    """A generation request holds a value this pipeline cannot run."""

    @property
    def param(self) -> str:
        """The offending parameter (same as ``field``)."""
        return self.field
