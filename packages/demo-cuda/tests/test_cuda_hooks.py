"""The general plugin: demo-cuda's declaration, its SGLang hook, and the real loader applying it.

The plumbing behind the declaration is cardcage's, tested with ``cardcage.platforms.plugin``.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys

import pytest

from cardcage.hooks.host import Host, rehearsing
from cardcage.hooks.registry import BaseHookRegistry, HookRegistry, HookType
from cardcage.hooks.testing import hook_sandbox
from cardcage.platforms.plugin import HookSpec
from cardcage_demo_cuda import PLATFORM_QUALNAME
from cardcage_demo_cuda.hooks import PLATFORM_ACCESS, RESCAN, SGLANG_DEVICE_MEMORY, STATS, register

__all__ = ["hook_sandbox"]  # the fixture, imported so pytest finds it


def test_register_adds_one_around_hook_per_cardcage_target(
    hook_sandbox: type[BaseHookRegistry],
) -> None:
    register()
    found = {t: [r.hook_type for r in rs] for t, rs in hook_sandbox.registrations().items()}
    assert found == {PLATFORM_ACCESS: [HookType.AROUND], RESCAN: [HookType.AROUND]}


def test_the_sglang_hook_counts_and_logs_what_sglang_was_told(
    caplog: pytest.LogCaptureFixture,
) -> None:
    (hook,) = (spec.hook for spec in _declared("sglang"))
    with caplog.at_level(logging.INFO, logger="cardcage_demo_cuda.hooks"):
        assert hook(lambda device=None: 81559.0, "cuda") == 81559.0
    assert STATS.get(SGLANG_DEVICE_MEMORY).calls == 1
    assert "SGLang sizes GPU memory at 81559.0 MiB" in caplog.text


def _declared(host: str) -> list[HookSpec]:
    with rehearsing(Host(host), selected=PLATFORM_QUALNAME), HookRegistry.sandbox():
        register()
        return [
            HookSpec(target, record.hook, record.hook_type)
            for target, records in HookRegistry.registrations().items()
            for record in records
        ]


def test_load_plugins_applies_the_hooks_when_demo_cuda_supplied_the_platform() -> None:
    """The loader's view when demo_cuda was selected; the choice is given, so no GPU is needed."""
    code = (
        "import json; from cardcage.hooks import load_plugins; "
        "from cardcage.hooks.loader import PlatformChoice; "
        "from cardcage.platforms.testing import set_current_platform; "
        "from cardcage_demo_cuda.platform import DemoCudaSRTPlatform; "
        "set_current_platform(DemoCudaSRTPlatform()); "
        "report = load_plugins(selection=PlatformChoice('demo_cuda', 'cardcage-demo-cuda')); "
        "from cardcage.platforms import current_platform; current_platform; current_platform; "
        "from cardcage_demo_cuda.hooks import STATS, PLATFORM_ACCESS; "
        "print(json.dumps([report.names('executed'), STATS.get(PLATFORM_ACCESS).calls]))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    executed, calls = json.loads(out)
    assert executed == ["demo_cuda"]
    assert calls == 2
