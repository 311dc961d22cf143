"""``SamplingParams``: how one request is sampled (steps, guidance, size, seed, image count).

Validated on construction with ``InvalidSamplingParamsError`` (a ``ValueError``) naming the field,
so a bad request fails in the caller's process, before it reaches a worker. Plain data: it
pickles to workers and converts to and from a dict (the HTTP API's JSON body).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cardcage.diffusion.errors import InvalidSamplingParamsError

from ._validate import check_float, check_int

if TYPE_CHECKING:
    from cardcage.diffusion.errors import InvalidArgumentError

__all__ = ["MAX_IMAGES_PER_REQUEST", "MAX_IMAGE_SIDE", "MAX_SEED", "SamplingParams", "check_seed"]

MAX_IMAGE_SIDE = 4096
MAX_IMAGES_PER_REQUEST = 16
MAX_SEED = 2**62 - 1  # room for seed + image index in a signed 64-bit generator seed
_SIDE_MULTIPLE = 8  # the latent grid: image sides are whole latent cells


def check_seed(error: type[InvalidArgumentError], name: str, value: object) -> int:
    """``value`` as a seed every request accepts: an int from 0 to ``MAX_SEED``.

    The one definition of the range: ``SamplingParams.seed``, ``ServerArgs.seed`` (the default
    of requests that pass none) and the command line's ``--seed`` all check through it, so a
    default the server accepts is never one its requests then reject.
    """
    return check_int(error, name, value, low=0, high=MAX_SEED)


@dataclass(frozen=True, slots=True)
class SamplingParams:
    """Per-request sampling settings.

    ``None`` means "the default": the model's step count and guidance scale, the server's
    ``ServerArgs.seed``. ``guidance_scale=1`` disables classifier-free guidance. ``num_images``
    is the number of images per prompt (image ``i`` uses ``seed + i``).
    """

    num_inference_steps: int | None = None
    guidance_scale: float | None = None
    height: int = 64
    width: int = 64
    seed: int | None = None
    num_images: int = 1
    negative_prompt: str | None = None

    def __post_init__(self) -> None:
        err = InvalidSamplingParamsError
        if self.num_inference_steps is not None:
            check_int(err, "num_inference_steps", self.num_inference_steps, low=1, high=1000)
        if self.guidance_scale is not None:
            scale = check_float(err, "guidance_scale", self.guidance_scale, low=1.0)
            object.__setattr__(self, "guidance_scale", scale)
        for side in ("height", "width"):
            check_int(
                err, side, getattr(self, side), low=_SIDE_MULTIPLE, high=MAX_IMAGE_SIDE,
                multiple_of=_SIDE_MULTIPLE,
            )  # fmt: skip
        if self.seed is not None:
            check_seed(err, "seed", self.seed)
        check_int(err, "num_images", self.num_images, low=1, high=MAX_IMAGES_PER_REQUEST)
        if self.negative_prompt is not None and not isinstance(self.negative_prompt, str):
            raise err("negative_prompt", self.negative_prompt, "a str or None")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SamplingParams:
        """Build from a mapping; an unknown key is an error naming it (typos must not pass)."""
        known = {f.name for f in dataclasses.fields(cls)}
        for key, value in data.items():
            if key not in known:
                raise InvalidSamplingParamsError.unknown_field(str(key), value, known)
        return cls(**data)

    def replace(self, **changes: Any) -> SamplingParams:
        """A copy with ``changes`` applied (validated again)."""
        return dataclasses.replace(self, **changes)
