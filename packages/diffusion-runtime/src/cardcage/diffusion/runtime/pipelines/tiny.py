"""``TinyDiffusionPipeline``: text to RGB with the built-in latent DiT, on any torch device.

``build()`` resolves the model (built-in id or saved directory) onto the current platform's
device; ``generate()`` encodes the prompts, denoises seeded latents with rectified-flow Euler
steps (classifier-free guidance when ``guidance_scale > 1``) and decodes them to uint8 images.

Determinism: image ``i`` starts from noise drawn on the CPU by a generator seeded with
``seed + i``, so the same seed gives the same image on every run, and within one unit per channel
in every batch it is in (batched matrix products may round differently on some CPUs).
Build the pipeline after ``Platform.init_backend()``: the model's ``CustomOp`` layers choose their
forward when constructed.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from cardcage.diffusion.errors import InvalidPipelineConfigError
from cardcage.diffusion.runtime.models.tiny_dit import (
    DEFAULT_MODEL_ID,
    TinyDiffusionModel,
    load_model,
)

from .errors import GenerationParamsError
from .sampler import FlowMatchEulerSampler, apply_guidance

if TYPE_CHECKING:
    from cardcage.diffusion.runtime.distributed import DeviceCommunicatorBase

__all__ = ["GeneratedImage", "StepCallback", "TinyDiffusionPipeline", "resolve_dtype"]

logger = logging.getLogger(__name__)

#: ``on_step(step, num_steps)`` after each denoising step (1-based ``step``).
StepCallback = Callable[[int, int], None]

MAX_SIDE = 2048
_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
_PARAM_NAMES = (
    "height",
    "width",
    "num_inference_steps",
    "guidance_scale",
    "seed",
    "negative_prompt",
)


def resolve_dtype(dtype: torch.dtype | str | None) -> torch.dtype:
    """``None`` -> float32; accepts a ``torch.dtype`` or one of the names in ``_DTYPES``."""
    if dtype is None:
        return torch.float32
    if isinstance(dtype, str):
        resolved = _DTYPES.get(dtype.removeprefix("torch."))
        if resolved is None:
            raise InvalidPipelineConfigError("dtype", dtype, f"one of {sorted(_DTYPES)}")
        return resolved
    if dtype not in _DTYPES.values():
        raise InvalidPipelineConfigError("dtype", dtype, f"one of {sorted(_DTYPES)}")
    return dtype


@dataclasses.dataclass(frozen=True)
class GeneratedImage:
    """One generated image: ``pixels`` is a CPU uint8 tensor of shape ``[H, W, 3]``."""

    pixels: torch.Tensor
    prompt: str
    seed: int

    @property
    def height(self) -> int:
        return int(self.pixels.shape[0])

    @property
    def width(self) -> int:
        return int(self.pixels.shape[1])

    def rgb_bytes(self) -> bytes:
        """Row-major RGB bytes (what a PNG or a raw-image consumer wants)."""
        return bytes(self.pixels.contiguous().view(-1).tolist())

    def to_png(self) -> bytes:
        """The image as PNG file bytes (Pillow)."""
        from cardcage.diffusion.runtime.managers.images import encode_rgb

        return encode_rgb(self.rgb_bytes(), self.width, self.height)

    def save_png(self, path: str | os.PathLike[str]) -> Path:
        """Write the image as a PNG file (parent folders created) and return its path."""
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(self.to_png())
        return target


@dataclasses.dataclass(frozen=True)
class _Request:
    prompts: list[str]
    negative_prompt: str
    height: int
    width: int
    steps: int
    guidance_scale: float
    seed: int


def _platform_communicator(group: Any, device: torch.device) -> DeviceCommunicatorBase:
    """The current platform's all-to-all communicator for ``group`` on ``device``."""
    from cardcage.diffusion.runtime.distributed.resolve import (
        resolve_all_to_all_communicator_cls,
    )
    from cardcage.diffusion.runtime.platforms import get_current_platform

    cls = resolve_all_to_all_communicator_cls(get_current_platform())
    return cls(group, device=device, unique_name="sp")


class TinyDiffusionPipeline:
    """The built-in text-to-image pipeline; one instance per worker, reused across requests."""

    def __init__(
        self,
        model: TinyDiffusionModel,
        *,
        model_path: str = DEFAULT_MODEL_ID,
        sp_group: Any = None,
        communicator: DeviceCommunicatorBase | None = None,
    ) -> None:
        self.model = model
        self.model_path = model_path
        self.sampler = FlowMatchEulerSampler(shift=model.config.flow_shift)
        if sp_group is not None:
            if communicator is not None:
                raise ValueError(
                    "pass either communicator= (built for the sequence-parallel group) or "
                    "sp_group= (wrapped in the platform's all-to-all communicator), not both"
                )
            communicator = _platform_communicator(sp_group, model.device)
        self.model.transformer.set_sequence_parallel_communicator(communicator)

    @classmethod
    def build(
        cls,
        model_path: str | os.PathLike[str] = DEFAULT_MODEL_ID,
        device: Any = None,
        dtype: torch.dtype | str | None = None,
        *,
        sp_group: Any = None,
        communicator: DeviceCommunicatorBase | None = None,
    ) -> TinyDiffusionPipeline:
        """Load ``model_path`` onto ``device`` (default: the current platform's local device).

        ``communicator``: the all-to-all communicator of a sequence-parallel group whose ranks
        split the image tokens (Ulysses sequence parallelism); every rank of the group calls
        ``generate`` with the same request. ``sp_group``: the same with a bare torch.distributed
        group, wrapped in the current platform's all-to-all communicator. Neither: one rank.
        """
        if device is None:
            from cardcage.diffusion.runtime.platforms import get_current_platform

            device = get_current_platform().get_local_torch_device()
        model = load_model(model_path, device=device, dtype=resolve_dtype(dtype))
        return cls(
            model, model_path=os.fspath(model_path), sp_group=sp_group, communicator=communicator
        )

    @property
    def device(self) -> torch.device:
        return self.model.device

    @property
    def dtype(self) -> torch.dtype:
        return self.model.dtype

    def save_pretrained(self, directory: str | os.PathLike[str]) -> Path:
        return self.model.save_pretrained(directory)

    # -- requests -------------------------------------------------------------------------------
    def _request(self, prompt: object, params: dict[str, Any]) -> _Request:
        config = self.model.config
        if isinstance(prompt, str):
            prompts = [prompt]
        elif isinstance(prompt, Sequence):
            prompts = list(prompt)
        else:
            prompts = []
        if not prompts or not all(isinstance(p, str) for p in prompts):
            raise GenerationParamsError("prompt", prompt, "a string or a non-empty list of strings")
        negative = params["negative_prompt"]
        negative = "" if negative is None else negative
        if not isinstance(negative, str):
            raise GenerationParamsError("negative_prompt", negative, "a string")
        multiple = config.pixel_multiple
        sides: dict[str, int] = {}
        for name in ("height", "width"):
            value = params[name]
            value = 64 if value is None else value
            if (
                isinstance(value, bool)
                or not isinstance(value, int)
                or not 0 < value <= MAX_SIDE
                or value % multiple
            ):
                raise GenerationParamsError(
                    name, value, f"a positive multiple of {multiple} up to {MAX_SIDE}"
                )
            sides[name] = value
        steps = params["num_inference_steps"]
        steps = config.default_steps if steps is None else steps
        if isinstance(steps, bool) or not isinstance(steps, int) or not 1 <= steps <= 1000:
            raise GenerationParamsError("num_inference_steps", steps, "an int from 1 to 1000")
        scale = params["guidance_scale"]
        scale = config.default_guidance_scale if scale is None else scale
        if (
            isinstance(scale, bool)
            or not isinstance(scale, int | float)
            or not math.isfinite(scale)
            or scale < 1.0
        ):
            raise GenerationParamsError(
                "guidance_scale", scale, "a finite number >= 1 (1 disables guidance)"
            )
        seed = params["seed"]
        seed = 0 if seed is None else seed
        if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**62:
            raise GenerationParamsError("seed", seed, "an int from 0 to 2**62 - 1")
        self._check_split(sides["height"], sides["width"])
        return _Request(
            prompts, negative, sides["height"], sides["width"], steps, float(scale), seed
        )

    def _check_split(self, height: int, width: int) -> None:
        """Every rank of the sequence-parallel group must get the same number of image tokens."""
        world = self.model.transformer.sp_world_size
        if world == 1:
            return
        multiple = self.model.config.pixel_multiple
        tokens = (height // multiple) * (width // multiple)
        if tokens % world:
            raise GenerationParamsError(
                "height",
                height,
                f"a size whose image token count is a multiple of {world}",
                message=f"A {width}x{height} image has {tokens} image token(s), which cannot be "
                f"split across {world} ranks: choose a height and width whose token count "
                f"(height/{multiple} x width/{multiple}) is a multiple of {world}, or run "
                "fewer workers.",
            )

    def check_request(
        self, prompt: str | Sequence[str], sampling_params: Any = None, **overrides: Any
    ) -> None:
        """Raise ``GenerationParamsError`` if ``generate`` would reject these arguments.

        Runs no model code and no collective, so one rank can vet a request before it
        broadcasts it to the others. Takes the same arguments as ``generate``.
        """
        unknown = set(overrides) - set(_PARAM_NAMES)
        if unknown:
            raise TypeError(f"check_request() got unexpected keyword(s): {sorted(unknown)}")
        params = {
            name: overrides[name]
            if overrides.get(name) is not None
            else getattr(sampling_params, name, None)
            for name in _PARAM_NAMES
        }
        self._request(prompt, params)

    def initial_latents(self, seed: int, count: int, height: int, width: int) -> torch.Tensor:
        """Standard-normal latents ``[count, C, h, w]`` (float32, this device); image ``i`` uses
        a CPU generator seeded with ``seed + i``."""
        config = self.model.config
        shape = (
            config.latent_channels,
            height // config.vae_scale_factor,
            width // config.vae_scale_factor,
        )
        noise = [
            torch.randn(shape, generator=torch.Generator("cpu").manual_seed(seed + i))
            for i in range(count)
        ]
        return torch.stack(noise).to(self.device)

    # -- generation -----------------------------------------------------------------------------
    def generate(
        self,
        prompt: str | Sequence[str],
        sampling_params: Any = None,
        *,
        height: int | None = None,
        width: int | None = None,
        num_inference_steps: int | None = None,
        guidance_scale: float | None = None,
        seed: int | None = None,
        negative_prompt: str | None = None,
        on_step: StepCallback | None = None,
    ) -> list[GeneratedImage]:
        """One image per prompt. Keyword arguments override the same-named attributes of
        ``sampling_params`` (any object, e.g. ``SamplingParams``); unset values take the model's
        defaults (64x64, its step count and guidance scale, seed 0, empty negative prompt)."""
        explicit = {
            "height": height,
            "width": width,
            "num_inference_steps": num_inference_steps,
            "guidance_scale": guidance_scale,
            "seed": seed,
            "negative_prompt": negative_prompt,
        }
        params = {
            name: explicit[name]
            if explicit[name] is not None
            else getattr(sampling_params, name, None)
            for name in _PARAM_NAMES
        }
        request = self._request(prompt, params)
        with torch.inference_mode():
            pixels = self._denoise_and_decode(request, on_step)
        return [
            GeneratedImage(pixels[i], request.prompts[i], request.seed + i)
            for i in range(len(request.prompts))
        ]

    def _denoise_and_decode(self, request: _Request, on_step: StepCallback | None) -> torch.Tensor:
        model, dtype = self.model, self.dtype
        count = len(request.prompts)
        guided = request.guidance_scale > 1.0
        texts = ([request.negative_prompt] * count if guided else []) + request.prompts
        context, mask, pooled = model.encode_prompt(texts)
        latents = self.initial_latents(request.seed, count, request.height, request.width)
        sigmas = self.sampler.sigmas(request.steps).tolist()
        for index in range(request.steps):
            sigma, sigma_next = sigmas[index], sigmas[index + 1]
            model_in = torch.cat([latents, latents]) if guided else latents
            timestep = torch.full(
                (model_in.shape[0],), sigma * 1000.0, dtype=torch.float32, device=self.device
            )
            velocity = model.transformer(model_in.to(dtype), timestep, context, mask, pooled).to(
                torch.float32
            )
            if guided:
                uncond, cond = velocity.chunk(2)
                velocity = apply_guidance(uncond, cond, request.guidance_scale)
            latents = self.sampler.step(latents, velocity, sigma, sigma_next)
            if on_step is not None:
                on_step(index + 1, request.steps)
        logger.debug(
            "denoised %d image(s) %dx%d in %d steps (guidance %s)",
            count,
            request.width,
            request.height,
            request.steps,
            request.guidance_scale,
        )
        return model.decode(latents.to(dtype))
