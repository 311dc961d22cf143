"""The general plugin: demo-cuda's declaration, and the real loader applying it.

What the hooks measure is pinned with demo-cpu, whose hooks these are; the plumbing behind the
declaration is cardcage's, tested with ``cardcage.platforms.plugin``.
"""

from __future__ import annotations

import json
import subprocess
import sys

from cardcage.hooks.registry import BaseHookRegistry, HookType
from cardcage.hooks.testing import hook_sandbox
from cardcage_demo_cuda import hooks
from cardcage_demo_cuda.hooks import PLATFORM_ACCESS, RESCAN, register

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
