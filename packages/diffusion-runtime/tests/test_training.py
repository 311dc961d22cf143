"""The built-in model's data and training: drawn scenes, and a seeded, reproducible trainer."""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path

import pytest
from model_support import state_digest
from picture_support import nearest_colour, scene_problems

from cardcage.diffusion.runtime.models.tiny_dit import load_model
from cardcage.diffusion.training.scenes import (
    BACKGROUNDS,
    COLOURS,
    PLACES,
    SHAPES,
    Scene,
    random_scene,
    vocabulary,
)
from cardcage.diffusion.training.train import IMAGE_SIZE, TrainingPlan, model_config, train

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")  # torch without numpy

TINY = TrainingPlan(batch_size=2, decoder_batch_size=2, decoder_steps=1, steps=2, threads=1)


def _rgb(scene: Scene) -> bytes:
    return scene.draw(64).tobytes()


@pytest.mark.parametrize("place", list(PLACES))
@pytest.mark.parametrize("shape", SHAPES)
def test_a_drawn_scene_passes_the_picture_check_of_its_caption(shape: str, place: str) -> None:
    scene = Scene("red", shape, place, "night")
    assert scene_problems(_rgb(scene), 64, 64, "red", place, "night") == []


def test_the_picture_check_fails_a_scene_that_shows_something_else() -> None:
    rgb = _rgb(Scene("blue", "circle", "right", "sand"))
    problems = scene_problems(rgb, 64, 64, "red", "left", "night")
    assert "the left of the picture is sand background, not red" in problems
    assert any("the right side of the picture are blue" in p for p in problems)


def test_every_colour_of_the_palette_is_told_apart() -> None:
    for name, rgb in COLOURS.items():
        assert nearest_colour(tuple(float(c) for c in rgb)) == name
    for name, (rgb, _) in BACKGROUNDS.items():
        assert nearest_colour(tuple(float(c) for c in rgb)) == f"{name} background"


def test_captions_use_only_the_models_words() -> None:
    words = load_model().text_encoder.words
    assert words is not None
    assert words.vocabulary == vocabulary() == model_config().vocabulary
    rng = random.Random(0)
    for _ in range(50):
        known, unknown = words.words(random_scene(rng).caption())
        assert unknown == []
        assert len(known) == 4


def test_training_is_seeded_and_saves_a_loadable_model_directory(tmp_path: Path) -> None:
    first = train(tmp_path / "first", TINY)
    second = train(tmp_path / "second", TINY)
    one, two = load_model(first), load_model(second)
    assert one.config == model_config()
    assert state_digest(one.state_dict()) == state_digest(two.state_dict())


def test_the_builtin_model_records_the_size_it_was_trained_at() -> None:
    # What the command line and the server warn about leaving comes from config.json.
    assert model_config().trained_size == (IMAGE_SIZE, IMAGE_SIZE)
    assert load_model().config.trained_size == (IMAGE_SIZE, IMAGE_SIZE)


def test_the_training_command_writes_a_model(tmp_path: Path) -> None:
    args = ["--output", str(tmp_path / "m"), "--steps", "1", "--decoder-steps", "1"]
    result = subprocess.run(
        [sys.executable, "-m", "cardcage.diffusion.training", *args, "--batch-size", "2"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in (tmp_path / "m").iterdir()) == [
        "config.json",
        "model.safetensors",
    ]


def test_the_runtime_never_imports_the_training_package() -> None:
    code = (
        "import sys\n"
        "from cardcage.diffusion.runtime.platforms.cpu import CpuPlatform\n"
        "from cardcage.diffusion.runtime.platforms.testing import set_current_platform\n"
        "set_current_platform(CpuPlatform())\n"
        "from cardcage.diffusion.runtime.pipelines.tiny import TinyDiffusionPipeline\n"
        "TinyDiffusionPipeline.build().generate('a red circle', num_inference_steps=1)\n"
        "print(sorted(m for m in sys.modules if m.startswith('cardcage.diffusion.training')))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert result.stdout.strip() == "[]"
