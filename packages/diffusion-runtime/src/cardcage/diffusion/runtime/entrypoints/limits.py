"""What one request may ask of ``cardcage-diffusion serve``: its size, steps, work and time.

Generation time grows with pixels x denoising steps x images, so a single request could hold the
only generation slot for hours without a bound on that product. ``ServeLimits`` holds the bounds
(each a ``serve`` flag) and ``check`` refuses a request beyond them before it is queued or
reaches a worker:

* one image larger than ``max_pixels`` (width x height): 400 naming ``size``;
* more than ``max_steps`` denoising steps: 400 naming ``num_inference_steps``;
* pixels x steps x n above ``max_pixel_steps``: 413 (the request asks for more work than this
  server does in one request; the message names the three fields to lower).

``request_timeout`` is the per-request deadline (from admission, queue wait included): past it
the request is stopped at its next denoising step and answered 504.

Import-safe: stdlib, ``cardcage.diffusion.configs`` and ``openai_api`` (pydantic; no torch).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from cardcage.diffusion.configs.sampling_params import SamplingParams

from .openai_api import ApiError

__all__ = [
    "DEFAULT_MAX_PIXELS",
    "DEFAULT_MAX_PIXEL_STEPS",
    "DEFAULT_MAX_QUEUE",
    "DEFAULT_MAX_STEPS",
    "DEFAULT_REQUEST_TIMEOUT",
    "ServeLimits",
]

DEFAULT_MAX_PIXELS = 1024 * 1024
DEFAULT_MAX_STEPS = 100
DEFAULT_MAX_PIXEL_STEPS = 512 * 512 * 50
DEFAULT_REQUEST_TIMEOUT = 300.0
DEFAULT_MAX_QUEUE = 8


@dataclass(frozen=True, slots=True)
class ServeLimits:
    """The bounds ``serve`` enforces per request (see the module docstring)."""

    max_pixels: int = DEFAULT_MAX_PIXELS
    max_steps: int = DEFAULT_MAX_STEPS
    max_pixel_steps: int = DEFAULT_MAX_PIXEL_STEPS
    request_timeout: float = DEFAULT_REQUEST_TIMEOUT
    max_queue: int = DEFAULT_MAX_QUEUE

    def __post_init__(self) -> None:
        for name in ("max_pixels", "max_steps", "max_pixel_steps"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"ServeLimits.{name} must be an int >= 1, got {value!r}")
        if not isinstance(self.max_queue, int) or self.max_queue < 0:
            raise ValueError(f"ServeLimits.max_queue must be an int >= 0, got {self.max_queue!r}")
        if not self.request_timeout > 0:
            raise ValueError(
                f"ServeLimits.request_timeout must be > 0 seconds, got {self.request_timeout!r}"
            )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def check(self, params: SamplingParams, *, default_steps: int | None) -> None:
        """Raise ``ApiError`` (400 or 413) when ``params`` asks for more than these limits.

        ``default_steps`` is the model's step count, used when the request names none (None:
        unknown, the step bounds are then checked only for an explicit count).
        """
        pixels = params.width * params.height
        if pixels > self.max_pixels:
            raise ApiError(
                400,
                f"size {params.width}x{params.height} is {pixels} pixels; this server allows at "
                f"most {self.max_pixels} pixels per image (serve --max-pixels).",
                param="size",
                code="invalid_value",
            )
        steps = params.num_inference_steps
        if steps is None:
            steps = default_steps
        if steps is None:
            return
        if steps > self.max_steps:
            raise ApiError(
                400,
                f"'num_inference_steps' is {steps}; this server allows at most {self.max_steps} "
                "(serve --max-steps).",
                param="num_inference_steps",
                code="invalid_value",
            )
        work = pixels * steps * params.num_images
        if work > self.max_pixel_steps:
            raise ApiError(
                413,
                f"This request asks for {params.width}x{params.height} pixels x {steps} steps x "
                f"n={params.num_images} = {work} pixel-steps; this server does at most "
                f"{self.max_pixel_steps} per request (serve --max-pixel-steps). Lower 'size', "
                "'num_inference_steps' or 'n', or split the request.",
                code="request_too_large",
            )
