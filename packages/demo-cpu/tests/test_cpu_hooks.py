"""The general plugin: ``register`` declares observability hooks that apply, count and time.

The per-host plumbing behind the declaration (host, selection, idempotence, vLLM's failure
policy) is cardcage's and tested once, with ``cardcage.platforms.plugin``; these tests pin what is
demo-cpu's: its hooks and what they measure.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys

import pytest

from cardcage.hooks.registry import BaseHookRegistry, HookType
from cardcage.hooks.testing import hook_sandbox
from cardcage.platforms import current
from cardcage.platforms.testing import set_current_platform
from cardcage_demo_cpu import hooks
from cardcage_demo_cpu.hooks import PLATFORM_ACCESS, RESCAN, STATS, register
from cardcage_demo_cpu.platform import DemoCpuSRTPlatform

__all__ = ["hook_sandbox"]  # the fixture, imported so pytest finds it


def test_register_adds_one_around_hook_per_target(hook_sandbox: type[BaseHookRegistry]) -> None:
    register()
    found = {
        t: [(r.hook_type, r.hook) for r in rs] for t, rs in hook_sandbox.registrations().items()
    }
    assert found == {
        PLATFORM_ACCESS: [(HookType.AROUND, hooks.time_platform_access)],
        RESCAN: [(HookType.AROUND, hooks.time_rescan)],
    }


def test_hooks_apply_and_count_platform_accesses(hook_sandbox: type[BaseHookRegistry]) -> None:
    register()
    report = hook_sandbox.apply(strict=True)
    assert set(report.applied) == {PLATFORM_ACCESS, RESCAN}
    platform = DemoCpuSRTPlatform()
    set_current_platform(platform)
    assert current.get_current_platform() is platform
    assert current.get_current_platform() is platform
    stats = STATS.get(PLATFORM_ACCESS)
    assert (stats.calls, stats.errors) == (2, 0)
    assert 0 <= stats.max_s <= stats.total_s


def test_rescans_are_counted_and_logged(
    hook_sandbox: type[BaseHookRegistry],
    caplog: pytest.LogCaptureFixture,
) -> None:
    register()
    hook_sandbox.apply(strict=True)
    from cardcage.hooks import snapshot

    with caplog.at_level(logging.INFO, logger="cardcage_demo_cpu.hooks"):
        snapshot.refresh()
    assert STATS.get(RESCAN).calls == 1
    assert "entry-point rescan took" in caplog.text


def test_load_plugins_applies_the_hooks_when_demo_cpu_is_selected() -> None:
    code = (
        "import json; from cardcage.hooks import load_plugins; "
        "report = load_plugins(); "
        "from cardcage.platforms import current_platform; current_platform; current_platform; "
        "from cardcage_demo_cpu.hooks import STATS, PLATFORM_ACCESS; "
        "print(json.dumps([report.names('executed'), STATS.get(PLATFORM_ACCESS).calls]))"
    )
    env = {**os.environ, "SGLANG_PLATFORM": "demo_cpu"}
    env.pop("CARDCAGE_DEMO_CPU", None)
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    ).stdout
    executed, calls = json.loads(out)
    assert executed == ["demo_cpu"]
    assert calls == 2
