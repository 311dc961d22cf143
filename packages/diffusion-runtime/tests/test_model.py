"""The built-in latent DiT: configuration, word prompts, shipped weights, save/load, CustomOp."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from model_support import state_digest

from cardcage.diffusion.runtime.layers.activation import SiluAndMul
from cardcage.diffusion.runtime.layers.custom_op import CustomOp
from cardcage.diffusion.runtime.layers.layernorm import RMSNorm
from cardcage.diffusion.runtime.models.config import TinyDiTConfig
from cardcage.diffusion.runtime.models.errors import (
    ModelConfigError,
    ModelNotFoundError,
    WeightsMismatchError,
)
from cardcage.diffusion.runtime.models.resolve import resolve_model
from cardcage.diffusion.runtime.models.text_encoder import (
    BOS_TOKEN,
    WORD_BOS_TOKEN,
    WordTokenizer,
    tokenize_prompts,
)
from cardcage.diffusion.runtime.models.tiny_dit import (
    BUILTIN_DIR,
    BUILTIN_MODELS,
    DEFAULT_MODEL_ID,
    TinyDiffusionModel,
    load_model,
)
from cardcage.diffusion.runtime.platforms.cpu import CpuPlatform
from cardcage.diffusion.runtime.platforms.testing import (
    reset_current_platform,
    set_current_platform,
)

TESTS_DIR = Path(__file__).resolve().parent

#: sha256 of the built-in model's float32 state dict (see ``state_digest``): the shipped
#: ``builtin/tiny-dit/model.safetensors``. Retraining changes it and every image generated from
#: the id, so update it deliberately, with the weights.
BUILTIN_DIGEST = "29ecea22e98923084ba31238c977a83355223b70fe8636850f671e9a39413b30"


@pytest.fixture(autouse=True)
def _cpu_platform() -> Iterator[None]:
    reset_current_platform()
    set_current_platform(CpuPlatform())
    yield
    reset_current_platform()


def _inputs(model: TinyDiffusionModel, batch: int = 2, size: int = 32) -> tuple[Any, ...]:
    config = model.config
    side = size // config.vae_scale_factor
    generator = torch.Generator().manual_seed(0)
    latents = torch.randn(batch, config.latent_channels, side, side, generator=generator)
    context, mask, pooled = model.encode_prompt(
        ["a red circle on the left", "a blue square at night"][:batch]
    )
    return latents, torch.full((batch,), 500.0), context, mask, pooled


# -- configuration ------------------------------------------------------------------------------
def test_config_round_trips_through_its_json_form() -> None:
    config = TinyDiTConfig(depth=1, decoder_channels=(8, 8, 8))
    data = json.loads(json.dumps(config.to_dict()))
    assert data["model_type"] == "cardcage-tiny-dit"
    assert TinyDiTConfig.from_dict(data) == config
    assert config.vae_scale_factor == 8
    assert config.pixel_multiple == 16


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"hidden_size": 90, "num_heads": 4}, "hidden_size \\(90\\) must be divisible"),
        ({"depth": 0}, "depth must be a positive int"),
        ({"decoder_channels": ()}, "decoder_channels"),
        ({"mlp_ratio": -1.0}, "mlp_ratio"),
    ],
)
def test_invalid_config_names_the_field(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ModelConfigError, match=message):
        TinyDiTConfig(**kwargs)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"model_type": "other"}, "model_type must be 'cardcage-tiny-dit'"),
        ({"format_version": 99}, "format_version 99 is not supported"),
        ({"n_layers": 3}, "unknown keys \\['n_layers'\\]"),
    ],
)
def test_foreign_config_json_is_rejected(change: dict[str, Any], message: str) -> None:
    data = {**TinyDiTConfig().to_dict(), **change}
    with pytest.raises(ModelConfigError, match=message):
        TinyDiTConfig.from_dict(data, source="x/config.json")


# -- shapes ---------------------------------------------------------------------------------------
def test_prompts_are_utf8_bytes_after_a_bos_token() -> None:
    ids, mask = tokenize_prompts(["hé", ""], max_bytes=5)
    assert ids.shape == (2, 6)
    assert ids[0].tolist() == [BOS_TOKEN, ord("h") + 1, 0xC3 + 1, 0xA9 + 1, 0, 0]
    assert ids[1].tolist() == [BOS_TOKEN, 0, 0, 0, 0, 0]
    assert mask.sum(dim=1).tolist() == [4, 1]


def test_over_long_prompts_are_truncated(caplog: pytest.LogCaptureFixture) -> None:
    ids, mask = tokenize_prompts(["x" * 10], max_bytes=4)
    assert ids.shape == (1, 5)
    assert bool(mask.all())
    assert "truncated from 10 to 4" in caplog.text


def test_every_part_produces_the_documented_shapes() -> None:
    model = load_model()
    config = model.config
    latents, timestep, context, mask, pooled = _inputs(model, size=32)
    assert context.shape == (2, 1 + config.max_prompt_words, config.text_dim)
    assert pooled.shape == (2, config.text_dim)
    velocity = model.transformer(latents, timestep, context, mask, pooled)
    assert velocity.shape == latents.shape
    assert model.transformer.patchify(latents).shape == (2, 16, config.latent_channels * 4)
    torch.testing.assert_close(
        model.transformer.unpatchify(model.transformer.patchify(latents), 8, 8), latents
    )
    pixels = model.decode(latents)
    assert pixels.shape == (2, 32, 32, 3)
    assert pixels.dtype == torch.uint8


def test_the_velocity_depends_on_the_prompt_and_the_timestep() -> None:
    model = load_model()
    latents, timestep, context, mask, pooled = _inputs(model)
    with torch.inference_mode():
        base = model.transformer(latents, timestep, context, mask, pooled)
        later = model.transformer(latents, timestep * 0.5, context, mask, pooled)
        swapped = model.transformer(
            latents, timestep, context.flip(0), mask.flip(0), pooled.flip(0)
        )
    assert not torch.allclose(base, later)
    assert not torch.allclose(base, swapped)
    assert torch.isfinite(base).all()


# -- word prompts --------------------------------------------------------------------------------
def _words() -> WordTokenizer:
    return WordTokenizer(("red", "circle", "left"), ("a", "on", "the"), max_words=4)


def test_word_prompts_are_vocabulary_ids_after_a_bos_token() -> None:
    ids, mask = _words()(["A red CIRCLE, on the left!", ""])
    assert ids.tolist() == [[WORD_BOS_TOKEN, 2, 3, 4, 0], [WORD_BOS_TOKEN, 0, 0, 0, 0]]
    assert mask.sum(dim=1).tolist() == [4, 1]


def test_unknown_words_are_dropped_with_a_warning_naming_them(
    caplog: pytest.LogCaptureFixture,
) -> None:
    ids, _ = _words()(["a red lighthouse on the cliff"])
    assert ids[0].tolist() == [WORD_BOS_TOKEN, 2, 0, 0, 0]
    assert "'lighthouse', 'cliff'" in caplog.text
    assert "it knows: red circle left" in caplog.text


def test_stopwords_alone_warn_of_nothing(caplog: pytest.LogCaptureFixture) -> None:
    ids, _ = _words()(["a circle on the left"])
    assert ids[0].tolist() == [WORD_BOS_TOKEN, 3, 4, 0, 0]
    assert caplog.text == ""


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"vocabulary": ("Red",)}, "vocabulary must be lower-case alphabetic words"),
        ({"vocabulary": ("red", "red")}, "vocabulary lists a word twice"),
        ({"vocabulary": ("red",), "stopwords": ("red",)}, "in both vocabulary and stopwords"),
        ({"stopwords": ("a",)}, "stopwords need a vocabulary"),
    ],
)
def test_a_bad_vocabulary_is_rejected(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ModelConfigError, match=message):
        TinyDiTConfig(**kwargs)


def test_the_builtin_model_reads_its_prompts_as_words() -> None:
    words = load_model().text_encoder.words
    assert words is not None
    assert {"red", "circle", "left", "night"} <= set(words.vocabulary)


# -- shipped weights -------------------------------------------------------------------------------
def test_the_builtin_id_loads_the_shipped_directory_like_any_other() -> None:
    directory = BUILTIN_MODELS[DEFAULT_MODEL_ID].directory
    assert directory.parent == BUILTIN_DIR
    assert sorted(p.name for p in directory.iterdir()) == ["config.json", "model.safetensors"]
    by_id, by_path = load_model(DEFAULT_MODEL_ID), load_model(directory)
    assert by_id.config == by_path.config
    assert state_digest(by_id.state_dict()) == state_digest(by_path.state_dict())


def test_the_shipped_weights_are_small() -> None:
    weights = BUILTIN_MODELS[DEFAULT_MODEL_ID].directory / "model.safetensors"
    assert weights.stat().st_size <= 5 * 1024 * 1024


def test_loading_the_builtin_model_leaves_the_global_rng_alone() -> None:
    torch.manual_seed(123)
    before = torch.random.get_rng_state()
    load_model()
    assert torch.equal(torch.random.get_rng_state(), before)


def test_builtin_weights_are_identical_in_another_process() -> None:
    code = (
        "from cardcage.diffusion.runtime.platforms.cpu import CpuPlatform\n"
        "from cardcage.diffusion.runtime.platforms.testing import set_current_platform\n"
        "set_current_platform(CpuPlatform())\n"
        "from cardcage.diffusion.runtime.models.tiny_dit import load_model\n"
        "from model_support import state_digest\n"
        "print(state_digest(load_model().state_dict()))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=TESTS_DIR,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert result.stdout.strip() == state_digest(load_model().state_dict())


def test_builtin_weights_match_the_pinned_digest() -> None:
    assert state_digest(load_model().state_dict()) == BUILTIN_DIGEST


# -- save / load ---------------------------------------------------------------------------------
def test_save_pretrained_then_load_restores_every_tensor(tmp_path: Path) -> None:
    model = load_model()
    model.save_pretrained(tmp_path / "m")
    assert sorted(p.name for p in (tmp_path / "m").iterdir()) == [
        "config.json",
        "model.safetensors",
    ]
    loaded = load_model(tmp_path / "m")
    assert loaded.config == model.config
    assert state_digest(loaded.state_dict()) == state_digest(model.state_dict())


def test_a_saved_bfloat16_model_loads_as_float32(tmp_path: Path) -> None:
    model = load_model(dtype=torch.bfloat16)
    model.save_pretrained(tmp_path)
    loaded = load_model(tmp_path)
    assert loaded.dtype == torch.float32
    reference = model.state_dict()
    for name, tensor in loaded.state_dict().items():
        assert torch.equal(tensor, reference[name].to(torch.float32))


def test_a_non_default_config_round_trips(tmp_path: Path) -> None:
    config = TinyDiTConfig(depth=1, hidden_size=32, num_heads=2, decoder_channels=(8,))
    model = TinyDiffusionModel.empty(config)
    model.save_pretrained(tmp_path)
    loaded = load_model(str(tmp_path))
    assert loaded.config == config
    assert state_digest(loaded.state_dict()) == state_digest(model.state_dict())


def test_an_unknown_model_path_names_the_builtin_ids(tmp_path: Path) -> None:
    with pytest.raises(ModelNotFoundError, match="'cardcage/tiny-dit'") as info:
        load_model(tmp_path / "nowhere")
    assert isinstance(info.value, FileNotFoundError)
    assert tuple(BUILTIN_MODELS) == info.value.builtin_ids


def test_a_directory_without_weights_says_what_is_missing(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps(TinyDiTConfig().to_dict()))
    with pytest.raises(ModelNotFoundError, match=r"lacks model\.safetensors"):
        load_model(tmp_path)


def test_weights_for_another_architecture_are_rejected(tmp_path: Path) -> None:
    load_model().save_pretrained(tmp_path)
    data = json.loads((tmp_path / "config.json").read_text())
    data["depth"] = data["depth"] + 1
    (tmp_path / "config.json").write_text(json.dumps(data))
    with pytest.raises(WeightsMismatchError, match=r"missing transformer\.blocks\.3\.") as info:
        load_model(tmp_path)
    assert isinstance(info.value, ValueError)


def test_a_corrupt_weights_file_is_a_typed_error(tmp_path: Path) -> None:
    load_model().save_pretrained(tmp_path)
    (tmp_path / "model.safetensors").write_bytes(b"not a safetensors file")
    with pytest.raises(WeightsMismatchError, match="unreadable"):
        load_model(tmp_path)


def test_a_near_miss_of_a_builtin_id_names_the_id_it_was_likely_meant_as(tmp_path: Path) -> None:
    with pytest.raises(ModelNotFoundError, match="Did you mean 'cardcage/tiny-dit'") as info:
        resolve_model("cardcage/tiny-ditt")
    assert info.value.suggestion == DEFAULT_MODEL_ID
    with pytest.raises(ModelNotFoundError) as far:
        resolve_model(tmp_path / "no" / "such" / "model")
    assert far.value.suggestion is None
    assert "Did you mean" not in str(far.value)


def test_a_file_is_not_a_model_directory(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(ModelNotFoundError, match="is a file, not a directory"):
        resolve_model(tmp_path / "config.json")


def test_a_config_json_that_is_not_utf8_is_a_typed_error(tmp_path: Path) -> None:
    load_model().save_pretrained(tmp_path)
    (tmp_path / "config.json").write_bytes(b"\xff\xfe{}")
    with pytest.raises(ModelConfigError, match="not UTF-8 text"):
        resolve_model(tmp_path)


def test_resolving_a_model_reads_its_config_without_importing_torch() -> None:
    # The command line resolves --model-path before it spawns workers: that must stay cheap.
    probe = (
        "import sys\n"
        "from cardcage.diffusion.runtime.models.resolve import resolve_model\n"
        "model = resolve_model('cardcage/tiny-dit')\n"
        "print(model.config.trained_size, 'torch' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.split() == ["(64,", "64)", "False"]


def test_the_size_warning_names_the_trained_size_only_away_from_it() -> None:
    config = TinyDiTConfig(trained_size=(64, 32))
    assert config.size_warning(64, 32) is None
    assert TinyDiTConfig().size_warning(128, 128) is None  # trained size unknown: nothing to say
    warning = config.size_warning(32, 64)
    assert warning is not None
    assert warning.startswith("the model was trained at 64x32; 32x64 lies outside what it")


@pytest.mark.parametrize("value", [(64,), (0, 64), (64.0, 64), (True, 64), [64, 64]])
def test_a_trained_size_that_is_not_two_positive_ints_is_refused(value: Any) -> None:
    with pytest.raises(ModelConfigError, match="trained_size must be"):
        TinyDiTConfig(trained_size=value)


def test_the_trained_size_round_trips_through_config_json() -> None:
    config = TinyDiTConfig(trained_size=(96, 64))
    data = json.loads(json.dumps(config.to_dict()))
    assert data["trained_size"] == [96, 64]
    assert TinyDiTConfig.from_dict(data) == config


def test_invalid_config_json_is_a_typed_error(tmp_path: Path) -> None:
    load_model().save_pretrained(tmp_path)
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(ModelConfigError, match="not valid JSON"):
        load_model(tmp_path)


# -- CustomOp dispatch ----------------------------------------------------------------------------
def test_norms_and_activations_are_custom_ops() -> None:
    model = load_model()
    norms = [m for m in model.modules() if isinstance(m, RMSNorm)]
    acts = [m for m in model.modules() if isinstance(m, SiluAndMul)]
    config = model.config
    assert len(norms) == config.text_layers * 4 + 1 + config.depth * 7 + 1
    assert len(acts) == config.text_layers + config.depth
    assert all(isinstance(m, CustomOp) for m in norms + acts)


class _KeyedCpuPlatform(CpuPlatform):
    """The CPU platform under its own dispatch key, as a vendor's platform would have."""

    def get_dispatch_key_name(self) -> str:
        return "model_test"


def test_a_registered_oot_forward_runs_in_every_norm_of_the_model(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(CustomOp, "_oot_forward_registry", dict(CustomOp._oot_forward_registry))
    set_current_platform(_KeyedCpuPlatform())
    called: set[int] = set()

    def vendor_rms_norm(op: RMSNorm, x: Any, residual: Any = None) -> Any:
        called.add(id(op))
        return op.forward_native(x, residual)

    CustomOp.register_oot_forward(RMSNorm, fn=vendor_rms_norm, platform_key="model_test")
    model = load_model()
    reference = _inputs(model)
    with torch.inference_mode():
        model.transformer(*reference)
    assert called == {id(m) for m in model.modules() if isinstance(m, RMSNorm)}


def test_the_registered_forward_decides_the_numerics(monkeypatch: pytest.MonkeyPatch) -> None:
    baseline_model = load_model()
    inputs = _inputs(baseline_model)
    with torch.inference_mode():
        baseline = baseline_model.transformer(*inputs)
    monkeypatch.setattr(CustomOp, "_oot_forward_registry", dict(CustomOp._oot_forward_registry))
    set_current_platform(_KeyedCpuPlatform())

    def doubled(op: RMSNorm, x: Any, residual: Any = None) -> Any:
        return op.forward_native(x, residual) * 2

    CustomOp.register_oot_forward(RMSNorm, fn=doubled, platform_key="model_test")
    with torch.inference_mode():
        changed = load_model().transformer(*inputs)
    assert not torch.allclose(changed, baseline)


def test_models_and_pipelines_packages_import_no_torch() -> None:
    code = (
        "import sys\n"
        "import cardcage.diffusion.runtime.models, cardcage.diffusion.runtime.pipelines\n"
        "import cardcage.diffusion.runtime.models.config\n"
        "import cardcage.diffusion.runtime.managers.images\n"
        # The HTTP child's modules: it never touches the device, so it never needs torch.
        "import cardcage.diffusion.runtime.entrypoints.http_server\n"
        "import cardcage.diffusion.runtime.entrypoints.serve\n"
        "assert 'torch' not in sys.modules, 'torch imported'\n"
        "print('ok')\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"
