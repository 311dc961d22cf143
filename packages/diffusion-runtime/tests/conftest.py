"""Shared fixtures: a clean diffusion state and a site directory for real distributions."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from cardcage.diffusion.runtime.platforms.plugins import HookRegistry
from cardcage.diffusion.runtime.platforms.testing import reset_current_platform
from cardcage.hooks import HookRegistry as SRTHookRegistry
from cardcage.hooks.loader import reset_plugin_state
from cardcage.hooks.profile import DIFFUSION_PROFILE


def reset_diffusion() -> None:
    reset_current_platform()
    reset_plugin_state(DIFFUSION_PROFILE, HookRegistry)


@pytest.fixture(autouse=True)
def clean_diffusion(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv("SGLANG_DIFFUSION_PLATFORM_OVERRIDE", raising=False)
    monkeypatch.delenv("SGLANG_PLUGINS", raising=False)
    reset_diffusion()
    with HookRegistry.sandbox(), SRTHookRegistry.sandbox():
        yield
    reset_diffusion()


@pytest.fixture
def site(tmp_path: Path) -> Path:
    path = tmp_path / "site"
    path.mkdir()
    return path
