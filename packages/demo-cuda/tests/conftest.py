"""Shared fixtures: every test starts with none of the variables that steer the device set.

The diffusion tests add their own fixtures (``cuda_diffusion_support.py``): this file must import
neither torch nor the diffusion runtime, which the plain ``tests-demo-cuda`` session lacks.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from cardcage.platforms.testing import reset_current_platform
from cardcage_demo_cuda.diffusion.evidence import EVIDENCE
from cardcage_demo_cuda.hooks import STATS

if TYPE_CHECKING:
    from collections.abc import Iterator

STEERING = (
    "CARDCAGE_DEMO_CUDA_ALLOW_TF32",
    "CARDCAGE_DEMO_CUDA_EVIDENCE",
    "CUDA_DEVICE_ORDER",
    "CUDA_VISIBLE_DEVICES",
    "LOCAL_RANK",
    "SGLANG_DIFFUSION_PLATFORM_OVERRIDE",
    "SGLANG_PLATFORM",
    "SGLANG_PLUGINS",
)


def pytest_configure(config: pytest.Config) -> None:
    # Registered here too, so the tests run outside the monorepo (a copied template) as well.
    config.addinivalue_line(
        "markers", "torch: needs PyTorch (the torch extra); skipped with a reason without it"
    )


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in STEERING:
        monkeypatch.delenv(name, raising=False)
    yield
    reset_current_platform()
    STATS.reset()
    EVIDENCE.reset()
