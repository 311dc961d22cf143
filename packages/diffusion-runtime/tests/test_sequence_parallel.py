"""Ulysses sequence parallelism: ``all_to_all_4D`` and the transformer split across real ranks.

The two-rank tests start two Python processes that join a gloo group through a ``FileStore``
(gloo implements ``all_to_all_single`` on CPU tensors) and compare what they computed with this
process's single-rank results.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from model_support import SP_PROMPT, SP_REQUEST, run_ranks

from cardcage.diffusion.runtime.models.distributed import (
    all_gather_sequence,
    all_to_all_4D,
    group_rank,
    group_size,
)
from cardcage.diffusion.runtime.pipelines.tiny import TinyDiffusionPipeline
from cardcage.diffusion.runtime.platforms.cpu import CpuPlatform
from cardcage.diffusion.runtime.platforms.testing import (
    reset_current_platform,
    set_current_platform,
)

TESTS_DIR = Path(__file__).resolve().parent


@pytest.fixture(autouse=True)
def _cpu_platform() -> Iterator[None]:
    reset_current_platform()
    set_current_platform(CpuPlatform())
    yield
    reset_current_platform()


def test_one_rank_collectives_are_the_identity() -> None:
    x = torch.randn(2, 6, 4, 3)
    assert group_size() == 1
    assert group_rank() == 0
    assert all_to_all_4D(x, scatter_dim=2, gather_dim=1) is x
    assert all_to_all_4D(x, scatter_dim=1, gather_dim=2) is x
    assert all_gather_sequence(x, dim=1) is x


@pytest.mark.parametrize(
    ("shape", "scatter", "gather", "message"),
    [
        ((2, 6, 4), 2, 1, "4-D tensor"),
        ((2, 6, 4, 3), 1, 1, "1 and 2"),
        ((2, 6, 4, 3), 3, 1, "1 and 2"),
        ((2, 6, 4, 3), 0, 2, "1 and 2"),
    ],
)
def test_all_to_all_4d_rejects_bad_layouts(
    shape: tuple[int, ...], scatter: int, gather: int, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        all_to_all_4D(torch.zeros(shape), scatter_dim=scatter, gather_dim=gather)


@pytest.fixture(scope="module")
def two_rank_results(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    return run_ranks(tmp_path_factory.mktemp("sp"), 2)


def test_all_to_all_4d_moves_sequence_slices_to_head_slices(
    two_rank_results: list[dict[str, Any]],
) -> None:
    full = torch.arange(2 * 8 * 4 * 3, dtype=torch.float32).reshape(2, 8, 4, 3)
    for rank, result in enumerate(two_rank_results):
        torch.testing.assert_close(result["a2a_by_heads"], full[:, :, 2 * rank : 2 * rank + 2])
        torch.testing.assert_close(result["a2a_back"], full[:, 4 * rank : 4 * rank + 4])


def test_sequence_parallel_transformer_matches_one_process(
    two_rank_results: list[dict[str, Any]],
) -> None:
    pipeline = TinyDiffusionPipeline.build()
    model = pipeline.model
    context, mask, pooled = model.encode_prompt([SP_PROMPT])
    latents = pipeline.initial_latents(3, 1, 64, 64)
    with torch.inference_mode():
        expected = model.transformer(latents, torch.tensor([600.0]), context, mask, pooled)
    for result in two_rank_results:
        assert result["velocity"].shape == expected.shape
        torch.testing.assert_close(result["velocity"], expected, rtol=1e-4, atol=1e-5)


def test_same_seed_gives_the_same_image_on_one_and_two_ranks(
    two_rank_results: list[dict[str, Any]],
) -> None:
    expected = TinyDiffusionPipeline.build().generate(SP_PROMPT, **SP_REQUEST)[0].pixels
    for result in two_rank_results:
        pixels = result["pixels"]
        assert pixels.shape == expected.shape
        assert pixels.dtype == torch.uint8
        # Float reassociation across ranks may move a value across a rounding boundary.
        diff = (pixels.to(torch.int16) - expected.to(torch.int16)).abs()
        assert int(diff.max()) <= 1
        assert float((diff > 0).float().mean()) < 0.01
    assert torch.equal(two_rank_results[0]["pixels"], two_rank_results[1]["pixels"])


def test_an_sp_group_runs_through_the_platforms_all_to_all_communicator(
    two_rank_results: list[dict[str, Any]],
) -> None:
    # build(sp_group=...) wraps the group in what CpuPlatform names: CpuCommunicator.
    for result in two_rank_results:
        assert result["communicator"] == "CpuCommunicator"


def test_a_token_count_the_ranks_cannot_split_is_a_clear_error(
    two_rank_results: list[dict[str, Any]],
) -> None:
    for result in two_rank_results:
        assert "cannot be split across 2 ranks" in result["indivisible_error"]
