"""The built-in text-to-image pipeline: determinism, guidance, save/load and image files."""

from __future__ import annotations

import dataclasses
import io
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from model_support import parse_png

from cardcage.diffusion.errors import InvalidPipelineConfigError, InvalidSamplingParamsError
from cardcage.diffusion.runtime.managers.images import encode_rgb
from cardcage.diffusion.runtime.pipelines.errors import GenerationParamsError
from cardcage.diffusion.runtime.pipelines.sampler import FlowMatchEulerSampler
from cardcage.diffusion.runtime.pipelines.tiny import GeneratedImage, TinyDiffusionPipeline
from cardcage.diffusion.runtime.platforms.cpu import CpuPlatform
from cardcage.diffusion.runtime.platforms.testing import (
    reset_current_platform,
    set_current_platform,
)

FAST: dict[str, Any] = {"num_inference_steps": 3, "guidance_scale": 3.0}


@pytest.fixture(autouse=True)
def _cpu_platform() -> Iterator[None]:
    reset_current_platform()
    set_current_platform(CpuPlatform())
    yield
    reset_current_platform()


@pytest.fixture
def pipeline() -> TinyDiffusionPipeline:
    return TinyDiffusionPipeline.build()


def _pixels(
    pipeline: TinyDiffusionPipeline, prompt: str = "a red square at night", **kw: Any
) -> torch.Tensor:
    return pipeline.generate(prompt, **{**FAST, **kw})[0].pixels


# -- outputs ------------------------------------------------------------------------------------
def test_generate_returns_one_uint8_rgb_image_per_prompt(pipeline: TinyDiffusionPipeline) -> None:
    images = pipeline.generate(["a", "b"], height=32, width=64, seed=5, **FAST)
    assert [type(i) for i in images] == [GeneratedImage, GeneratedImage]
    for image in images:
        assert image.pixels.shape == (32, 64, 3)
        assert image.pixels.dtype == torch.uint8
        assert (image.height, image.width) == (32, 64)
    assert [i.seed for i in images] == [5, 6]
    assert [i.prompt for i in images] == ["a", "b"]
    # a picture, not a flat fill
    assert float(images[0].pixels.float().std()) > 5


def test_the_pipeline_runs_on_the_current_platforms_device(
    pipeline: TinyDiffusionPipeline,
) -> None:
    assert pipeline.device == torch.device("cpu")
    assert pipeline.dtype == torch.float32


def test_defaults_come_from_the_model_config(pipeline: TinyDiffusionPipeline) -> None:
    steps: list[tuple[int, int]] = []
    images = pipeline.generate("x", on_step=lambda i, n: steps.append((i, n)))
    config = pipeline.model.config
    assert images[0].pixels.shape == (64, 64, 3)
    assert steps == [(i, config.default_steps) for i in range(1, config.default_steps + 1)]


# -- determinism ----------------------------------------------------------------------------------
def test_the_same_seed_gives_the_same_image(pipeline: TinyDiffusionPipeline) -> None:
    first = _pixels(pipeline, seed=11)
    assert torch.equal(first, _pixels(pipeline, seed=11))
    assert torch.equal(first, _pixels(TinyDiffusionPipeline.build(), seed=11))


def test_a_different_seed_or_prompt_gives_a_different_image(
    pipeline: TinyDiffusionPipeline,
) -> None:
    base = _pixels(pipeline, seed=11)
    assert not torch.equal(base, _pixels(pipeline, seed=12))
    assert not torch.equal(base, _pixels(pipeline, "a blue circle by day", seed=11))


def test_an_image_does_not_depend_on_the_batch_it_was_generated_in(
    pipeline: TinyDiffusionPipeline,
) -> None:
    batch = pipeline.generate(["one", "two"], seed=3, **FAST)
    alone = pipeline.generate("two", seed=4, **FAST)[0]
    diff = (batch[1].pixels.to(torch.int16) - alone.pixels.to(torch.int16)).abs()
    assert int(diff.max()) <= 1


def test_a_saved_and_reloaded_model_gives_the_same_image(
    pipeline: TinyDiffusionPipeline, tmp_path: Path
) -> None:
    pipeline.save_pretrained(tmp_path / "tiny")
    reloaded = TinyDiffusionPipeline.build(tmp_path / "tiny", device="cpu", dtype="float32")
    assert torch.equal(_pixels(pipeline, seed=2), _pixels(reloaded, seed=2))


def test_bfloat16_gives_nearly_the_float32_image(pipeline: TinyDiffusionPipeline) -> None:
    half = TinyDiffusionPipeline.build(dtype=torch.bfloat16)
    assert half.dtype == torch.bfloat16
    full, low = _pixels(pipeline, seed=9).float(), _pixels(half, seed=9).float()
    assert float((full - low).abs().mean()) < 16


# -- guidance -------------------------------------------------------------------------------------
def _count_passes(pipeline: TinyDiffusionPipeline) -> tuple[list[int], list[int]]:
    transformer_batches: list[int] = []
    encoder_batches: list[int] = []
    pipeline.model.transformer.register_forward_pre_hook(
        lambda _m, args: transformer_batches.append(int(args[0].shape[0]))
    )
    pipeline.model.text_encoder.register_forward_pre_hook(
        lambda _m, args: encoder_batches.append(int(args[0].shape[0]))
    )
    return transformer_batches, encoder_batches


def test_guidance_scale_one_skips_the_unconditional_pass(pipeline: TinyDiffusionPipeline) -> None:
    transformer_batches, encoder_batches = _count_passes(pipeline)
    pipeline.generate("x", num_inference_steps=4, guidance_scale=1.0)
    assert transformer_batches == [1, 1, 1, 1]
    assert encoder_batches == [1]


def test_guidance_adds_one_unconditional_row_per_image(pipeline: TinyDiffusionPipeline) -> None:
    transformer_batches, encoder_batches = _count_passes(pipeline)
    pipeline.generate(["x", "y"], num_inference_steps=4, guidance_scale=4.0)
    assert transformer_batches == [4, 4, 4, 4]
    assert encoder_batches == [4]


def test_the_negative_prompt_matters_only_with_guidance(pipeline: TinyDiffusionPipeline) -> None:
    guided = _pixels(pipeline, seed=1, guidance_scale=4.0)
    assert not torch.equal(
        guided, _pixels(pipeline, seed=1, guidance_scale=4.0, negative_prompt="a square on sand")
    )
    plain = _pixels(pipeline, seed=1, guidance_scale=1.0)
    assert torch.equal(
        plain, _pixels(pipeline, seed=1, guidance_scale=1.0, negative_prompt="a square on sand")
    )
    assert not torch.equal(guided, plain)


# -- parameters -----------------------------------------------------------------------------------
@dataclasses.dataclass
class _Params:
    height: int | None = 32
    width: int | None = 32
    num_inference_steps: int | None = 2
    guidance_scale: float | None = 1.0
    seed: int | None = 8
    negative_prompt: str | None = None


def test_a_sampling_params_object_supplies_values_and_keywords_override_them(
    pipeline: TinyDiffusionPipeline,
) -> None:
    from_object = pipeline.generate("x", _Params())[0]
    assert from_object.pixels.shape == (32, 32, 3)
    assert from_object.seed == 8
    explicit = pipeline.generate(
        "x", height=32, width=32, num_inference_steps=2, guidance_scale=1.0, seed=8
    )
    assert torch.equal(from_object.pixels, explicit[0].pixels)
    overridden = pipeline.generate("x", _Params(), width=64, seed=9)[0]
    assert overridden.pixels.shape == (32, 64, 3)
    assert overridden.seed == 9


@pytest.mark.parametrize(
    ("kwargs", "param"),
    [
        ({"height": 60}, "height"),
        ({"width": 0}, "width"),
        ({"width": 4096}, "width"),
        ({"height": 32.0}, "height"),
        ({"num_inference_steps": 0}, "num_inference_steps"),
        ({"guidance_scale": 0.5}, "guidance_scale"),
        ({"guidance_scale": float("nan")}, "guidance_scale"),
        ({"seed": -1}, "seed"),
        ({"seed": True}, "seed"),
        ({"negative_prompt": 3}, "negative_prompt"),
    ],
)
def test_bad_parameters_raise_a_typed_error_naming_them(
    pipeline: TinyDiffusionPipeline, kwargs: dict[str, Any], param: str
) -> None:
    with pytest.raises(GenerationParamsError, match=rf"^SamplingParams\.{param}=") as info:
        pipeline.generate("x", **kwargs)
    assert isinstance(info.value, InvalidSamplingParamsError)
    assert isinstance(info.value, ValueError)
    assert info.value.param == param


@pytest.mark.parametrize("prompt", [[], [1], None])
def test_a_bad_prompt_is_a_typed_error(pipeline: TinyDiffusionPipeline, prompt: Any) -> None:
    with pytest.raises(GenerationParamsError, match=r"^SamplingParams\.prompt="):
        pipeline.generate(prompt)


def test_an_unknown_dtype_is_a_typed_error() -> None:
    with pytest.raises(InvalidPipelineConfigError, match=r"dtype='float8' is not valid"):
        TinyDiffusionPipeline.build(dtype="float8")


# -- sampler --------------------------------------------------------------------------------------
def test_sigmas_run_from_one_to_zero_and_shift_toward_high_noise() -> None:
    plain = FlowMatchEulerSampler().sigmas(4)
    assert plain.tolist() == [1.0, 0.75, 0.5, 0.25, 0.0]
    shifted = FlowMatchEulerSampler(shift=3.0).sigmas(4)
    assert shifted[0] == 1.0
    assert shifted[-1] == 0.0
    assert bool((shifted[1:-1] > plain[1:-1]).all())
    assert bool((shifted[1:] < shifted[:-1]).all())


def test_an_exact_velocity_lands_on_the_data_in_one_step() -> None:
    x0, noise = torch.randn(2, 4, 3, 3), torch.randn(2, 4, 3, 3)
    out = FlowMatchEulerSampler.step(noise, noise - x0, 1.0, 0.0)
    torch.testing.assert_close(out, x0)


# -- PNG ------------------------------------------------------------------------------------------
def test_save_png_writes_a_valid_png_of_the_image(
    pipeline: TinyDiffusionPipeline, tmp_path: Path
) -> None:
    image = pipeline.generate("x", height=32, width=64, **FAST)[0]
    path = image.save_png(tmp_path / "out" / "image.png")
    parsed = parse_png(path.read_bytes())
    assert (parsed.width, parsed.height, parsed.bit_depth, parsed.color_type) == (64, 32, 8, 2)
    assert parsed.chunk_types == [b"IHDR", b"IDAT", b"IEND"]
    assert parsed.pixels == bytes(image.pixels.reshape(-1).tolist())
    assert path.read_bytes() == image.to_png()


def test_png_encoder_orders_rows_top_to_bottom() -> None:
    pixels = bytes([255, 0, 0, 0, 255, 0, 0, 0, 255, 9, 9, 9])  # 2x2: red green / blue grey
    parsed = parse_png(encode_rgb(pixels, 2, 2))
    assert parsed.pixels == pixels
    assert zlib.crc32(b"IEND") & 0xFFFFFFFF == 0xAE426082  # the constant every PNG ends with


@given(
    size=st.tuples(st.integers(1, 40), st.integers(1, 40)).flatmap(
        lambda wh: st.tuples(
            st.just(wh), st.binary(min_size=wh[0] * wh[1] * 3, max_size=wh[0] * wh[1] * 3)
        )
    )
)
def test_png_encoder_round_trips_any_rgb_image(size: tuple[tuple[int, int], bytes]) -> None:
    (width, height), pixels = size
    parsed = parse_png(encode_rgb(pixels, width, height))
    assert (parsed.width, parsed.height) == (width, height)
    assert parsed.pixels == pixels


@pytest.mark.parametrize(("fmt", "magic"), [("jpeg", b"\xff\xd8\xff"), ("webp", b"RIFF")])
def test_lossy_formats_are_written_at_the_image_size(fmt: str, magic: bytes) -> None:
    from PIL import Image

    pixels = bytes(range(256)) * 3  # 16x16
    data = encode_rgb(pixels, 16, 16, fmt=fmt, quality=90)
    assert data.startswith(magic)
    with Image.open(io.BytesIO(data)) as decoded:
        assert (decoded.format, decoded.size, decoded.mode) == (fmt.upper(), (16, 16), "RGB")


@pytest.mark.parametrize(
    ("size", "width", "height", "fmt"),
    [(11, 2, 2, "png"), (12, 0, 2, "png"), (0, 0, 0, "png"), (12, 2, 2, "gif")],
)
def test_image_encoder_rejects_mismatched_sizes_and_unknown_formats(
    size: int, width: int, height: int, fmt: str
) -> None:
    with pytest.raises(ValueError):
        encode_rgb(bytes(size), width, height, fmt=fmt)
