"""``DiffGenerator`` end to end: real spawned CPU workers, a real gloo group, real shared memory.

One two-worker deployment (with the ``h7-probe`` plugin recording what its init hook saw) serves
most tests of this module; the one-worker comparison and the kill test launch their own.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from bootstrap_support import pid_alive
from conftest import reset_diffusion
from generation_support import MODEL, max_difference, shm_entries_of, write_probe
from model_support import parse_png
from picture_support import SCENES, scene_problems

from cardcage.diffusion.configs.sampling_params import SamplingParams
from cardcage.diffusion.errors import (
    InvalidSamplingParamsError,
    LauncherClosedError,
    RequestCancelledError,
    WorkerDiedError,
    WorkerFailedError,
    WorkerRequestError,
    WrongRankError,
)
from cardcage.diffusion.runtime.managers.diffusion_generator import DiffGenerator, DiffusionImage
from cardcage.diffusion.runtime.platforms.plugins import HookRegistry
from cardcage.hooks import HookRegistry as SRTHookRegistry
from cardcage.hooks.testing import on_sys_path

PROMPT = "a yellow circle at the top at night"
REQUEST = SamplingParams(num_inference_steps=3, guidance_scale=2.5, seed=11)

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")  # torch without numpy


@pytest.fixture(scope="module")
def probe_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    site = tmp_path_factory.mktemp("site")
    write_probe(site)
    return site


@pytest.fixture(scope="module")
def evidence_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("evidence")


@pytest.fixture(scope="module")
def pair(probe_site: Path, evidence_dir: Path) -> Iterator[DiffGenerator]:
    """Two CPU workers with the probe plugin installed.

    Spawned children start with the launcher's ``sys.path``, so the site goes there (and the
    launcher applies the plugin's hooks too: in a sandbox, undone once the workers are up).
    """
    with (
        pytest.MonkeyPatch.context() as patch,
        on_sys_path(probe_site),
        HookRegistry.sandbox(),
        SRTHookRegistry.sandbox(),
    ):
        patch.setenv("SGLANG_DIFFUSION_PLATFORM_OVERRIDE", "cpu")
        patch.setenv("H7_EVIDENCE_DIR", str(evidence_dir))
        reset_diffusion()
        try:
            generator = DiffGenerator.from_pretrained(model_path=MODEL, num_gpus=2)
        finally:
            reset_diffusion()
    pids = [h.pid for h in generator.workers.workers if h.pid is not None]
    with generator:
        yield generator
    assert not any(pid_alive(pid) for pid in pids)
    assert shm_entries_of(pids) == []
    assert multiprocessing.active_children() == []


def test_one_and_two_workers_make_the_same_image(
    pair: DiffGenerator, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SGLANG_DIFFUSION_PLATFORM_OVERRIDE", "cpu")
    with DiffGenerator.from_pretrained(model_path=MODEL, num_gpus=1) as single:
        alone = single.generate(prompt=PROMPT, sampling_params=REQUEST)
    split = pair.generate(prompt=PROMPT, sampling_params=REQUEST)
    assert isinstance(alone, DiffusionImage)
    assert isinstance(split, DiffusionImage)
    assert (split.width, split.height, split.seed, split.prompt) == (64, 64, 11, PROMPT)
    assert max_difference(alone.rgb, split.rgb) <= 1
    assert len(set(split.rgb)) > 16  # a picture, not a flat fill
    png = parse_png(split.save(tmp_path / "out" / "split.png").read_bytes())
    assert (png.width, png.height, png.pixels) == (64, 64, split.rgb)
    assert split.to_png() == (tmp_path / "out" / "split.png").read_bytes()


def test_one_and_two_workers_draw_what_the_prompts_ask_for(
    pair: DiffGenerator, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The built-in model's defaults (64x64, its steps and guidance) on a batch of scenes."""
    monkeypatch.setenv("SGLANG_DIFFUSION_PLATFORM_OVERRIDE", "cpu")
    prompts = list(SCENES)
    with DiffGenerator.from_pretrained(model_path=MODEL, num_gpus=1) as single:
        alone = single.generate(prompt=prompts, seed=3)
    split = pair.generate(prompt=prompts, seed=3)
    assert isinstance(alone, list)
    assert isinstance(split, list)
    for workers, images in (("1 worker", alone), ("2 workers", split)):
        for image in images:
            problems = scene_problems(image.rgb, image.width, image.height, *SCENES[image.prompt])
            assert problems == [], f"{workers}, {image.prompt!r}: {problems}"


def test_cancel_stops_a_request_on_every_worker_and_the_group_stays_in_step(
    pair: DiffGenerator,
) -> None:
    before = pair.generate(prompt=PROMPT, sampling_params=REQUEST)
    outcome: list[object] = []

    def slow() -> None:
        try:  # minutes of work if it ran to the end
            outcome.append(
                pair.generate(
                    prompt="slow", height=256, width=256, num_inference_steps=1000,
                    request_id="slow-1",
                )
            )  # fmt: skip
        except RequestCancelledError as exc:
            outcome.append(exc)

    thread = threading.Thread(target=slow)
    thread.start()
    pair.cancel("slow-1")  # before the request is sent or while it runs: both stop it
    thread.join(120)
    [stopped] = outcome
    assert isinstance(stopped, RequestCancelledError)
    assert stopped.request_id == "slow-1"
    # Both ranks stopped at the same step: the next request runs on a group still in step and
    # gives the same image as before.
    after = pair.generate(prompt=PROMPT, sampling_params=REQUEST)
    assert isinstance(before, DiffusionImage)
    assert isinstance(after, DiffusionImage)
    assert after.rgb == before.rgb


def test_seeds_and_prompts_select_the_images(pair: DiffGenerator) -> None:
    first = pair.generate(prompt=PROMPT, sampling_params=REQUEST)
    other_seed = pair.generate(prompt=PROMPT, sampling_params=REQUEST, seed=12)
    again = pair.generate(PROMPT, REQUEST)
    assert isinstance(first, DiffusionImage)
    assert isinstance(other_seed, DiffusionImage)
    assert isinstance(again, DiffusionImage)
    assert first.rgb == again.rgb
    differing = sum(a != b for a, b in zip(first.rgb, other_seed.rgb, strict=True))
    assert differing > len(first.rgb) // 2

    batch = pair.generate(prompt=[PROMPT, "a red triangle"], sampling_params=REQUEST, num_images=2)
    assert [(i.prompt, i.seed) for i in batch] == [
        (PROMPT, 11), (PROMPT, 12), ("a red triangle", 13), ("a red triangle", 14)
    ]  # fmt: skip
    assert max_difference(batch[0].rgb, first.rgb) <= 1  # a seed's image, whatever the batch
    assert max_difference(batch[1].rgb, other_seed.rgb) <= 1
    several = pair.generate(prompt=PROMPT, sampling_params=REQUEST, num_images=2)
    assert isinstance(several, list)
    assert len(several) == 2


def test_each_denoising_step_is_reported_to_the_caller_as_rank_0_computes(
    pair: DiffGenerator,
) -> None:
    steps: list[tuple[int, int]] = []
    image = pair.generate(PROMPT, REQUEST, on_step=lambda step, total: steps.append((step, total)))
    assert steps == [(1, 3), (2, 3), (3, 3)]
    steps.clear()
    again = pair.generate(PROMPT, REQUEST)  # nobody listening: the steps are not kept for later
    pair.generate(PROMPT, REQUEST, num_inference_steps=2, on_step=lambda *step: steps.append(step))
    assert steps == [(1, 2), (2, 2)]
    assert isinstance(image, DiffusionImage)
    assert isinstance(again, DiffusionImage)
    assert image.rgb == again.rgb  # listening changes nothing about the image


def test_the_server_seed_is_the_default(pair: DiffGenerator) -> None:
    image = pair.generate(prompt="a green square", num_inference_steps=1)
    assert isinstance(image, DiffusionImage)
    assert image.seed == pair.server_args.seed


def test_bad_requests_come_back_typed_and_the_group_keeps_serving(pair: DiffGenerator) -> None:
    # Found by the pipeline in rank 0: 1 image token cannot be split across 2 ranks.
    with pytest.raises(InvalidSamplingParamsError, match="cannot be split across 2 ranks") as info:
        pair.generate(prompt=PROMPT, height=8, width=8, num_inference_steps=1)
    assert info.value.field == "height"
    assert info.value.value == 8
    assert isinstance(info.value.__cause__, WorkerRequestError)
    assert info.value.__cause__.rank == 0
    # Found before anything is sent.
    with pytest.raises(InvalidSamplingParamsError) as bad_prompt:
        pair.generate(prompt=["ok", 3])  # type: ignore[list-item]
    assert bad_prompt.value.field == "prompt"
    with pytest.raises(InvalidSamplingParamsError, match="at most 16"):
        pair.generate(prompt=["a", "b", "c"], num_images=6)
    with pytest.raises(InvalidSamplingParamsError) as bad_steps:
        pair.generate(prompt=PROMPT, num_inference_steps=0)
    assert bad_steps.value.field == "num_inference_steps"
    with pytest.raises(InvalidSamplingParamsError, match="no field 'steps'"):
        pair.generate(prompt=PROMPT, sampling_params=REQUEST, steps=2)
    # A raw request that bypasses the client-side checks is checked by rank 0 as well.
    with pytest.raises(InvalidSamplingParamsError, match="num_steps") as raw:
        pair.generate_raw(PROMPT, {"num_steps": 3})
    assert raw.value.field == "num_steps"
    # Only rank 0 takes requests; the others follow it.
    with pytest.raises(WorkerRequestError) as wrong:
        pair.workers.submit("generate", {"prompt": PROMPT}, rank=1)
    assert wrong.value.error_type.endswith(WrongRankError.__qualname__)

    image = pair.generate(prompt=PROMPT, sampling_params=REQUEST)
    assert isinstance(image, DiffusionImage)
    assert [answer["rank"] for answer in pair.workers.ping()] == [0, 1]


def test_the_init_hook_of_a_plugin_runs_in_every_worker_with_its_rank(
    pair: DiffGenerator, evidence_dir: Path
) -> None:
    pids = [handle.pid for handle in pair.workers.workers]
    for rank, pid in enumerate(pids):
        seen = json.loads((evidence_dir / f"rank{rank}.json").read_text(encoding="utf-8"))
        assert seen["pid"] == pid != os.getpid()
        assert (seen["rank"], seen["local_rank"], seen["world_size"]) == (rank, rank, 2)
        assert seen["env_rank"] == str(rank)
        assert seen["before"] == {"dist_initialized": False, "pipeline": False}
        assert seen["after"] == {
            "dist_initialized": True,
            "dist_rank": rank,
            "dist_world": 2,
            "backend": "gloo",
            "sp_group": True,
            "sp_communicator": "CpuCommunicator",  # what CpuPlatform names
            "pipeline": "TinyDiffusionPipeline",
        }


def test_killing_a_follower_mid_request_fails_it_and_leaves_nothing(
    probe_site: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SGLANG_DIFFUSION_PLATFORM_OVERRIDE", "cpu")
    monkeypatch.setenv("H7_KILL_RANK", "1")
    monkeypatch.setenv("H7_KILL_AT", "2")  # rank 1 dies in its second denoising step
    with on_sys_path(probe_site):
        generator = DiffGenerator.from_pretrained(model_path=MODEL, num_gpus=2)
    pids = [h.pid for h in generator.workers.workers if h.pid is not None]
    with pytest.raises(WorkerDiedError, match="killed by signal SIGKILL") as info:
        generator.generate(prompt=PROMPT, sampling_params=REQUEST)
    assert info.value.rank == 1
    assert info.value.pid == pids[1]
    assert info.value.during == "request 'generate'"
    assert generator.workers.closed
    assert not any(pid_alive(pid) for pid in pids)
    assert shm_entries_of(pids) == []
    assert not [child for child in multiprocessing.active_children() if child.pid in pids]
    with pytest.raises(LauncherClosedError, match="rank 1"):
        generator.generate(prompt=PROMPT)
    generator.shutdown()  # idempotent


def test_a_follower_raising_mid_request_is_reported_as_the_cause(
    probe_site: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SGLANG_DIFFUSION_PLATFORM_OVERRIDE", "cpu")
    monkeypatch.setenv("H7_KILL_RANK", "1")
    monkeypatch.setenv("H7_KILL_AT", "2")
    monkeypatch.setenv("H7_KILL_MODE", "raise")
    with on_sys_path(probe_site):
        generator = DiffGenerator.from_pretrained(model_path=MODEL, num_gpus=2)
    pids = [h.pid for h in generator.workers.workers if h.pid is not None]
    with pytest.raises(WorkerFailedError) as info:
        generator.generate(prompt=PROMPT, sampling_params=REQUEST)
    # Rank 0's collective failed too, but the error names the rank that raised first.
    assert info.value.rank == 1
    assert info.value.error_type == "RuntimeError"
    assert info.value.error_message == "rank overheated"
    assert "following rank 0" in info.value.phase
    assert "die_mid_request" in info.value.traceback
    assert generator.workers.closed
    assert not any(pid_alive(pid) for pid in pids)
    assert shm_entries_of(pids) == []
