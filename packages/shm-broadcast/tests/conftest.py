"""Shared fixtures: every test must leave no cardcage segment behind in /dev/shm."""

from __future__ import annotations

import multiprocessing as mp
import os
from collections.abc import Iterator
from multiprocessing.context import SpawnContext

import pytest

from cardcage.shm import SHM_DIR, SHM_PREFIX


def _segments() -> set[str]:
    try:
        return {n for n in os.listdir(SHM_DIR) if n.startswith(SHM_PREFIX)}
    except FileNotFoundError:
        return set()


@pytest.fixture(autouse=True)
def no_leaked_segments() -> Iterator[None]:
    before = _segments()
    yield
    leaked = _segments() - before
    assert not leaked, f"test left shared-memory segments behind: {sorted(leaked)}"


@pytest.fixture
def spawn() -> SpawnContext:
    return mp.get_context("spawn")
