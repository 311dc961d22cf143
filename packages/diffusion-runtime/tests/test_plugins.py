"""Diffusion general plugins: two Once phases, the diffusion registry, the failure policy."""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import pytest
from diffusion_support import PLUGINS, platform_dist

from cardcage.diffusion.runtime.platforms.plugins import (
    HookRegistry,
    HookSource,
    HookType,
    apply_plugin_hooks,
    load_plugins,
    plugin_hook,
)
from cardcage.hooks import HookRegistry as SRTHookRegistry
from cardcage.hooks.errors import PhaseFailedError, PluginLoadError
from cardcage.hooks.registry import BaseHookRegistry
from cardcage.hooks.testing import on_sys_path, write_distribution

OVERRIDE = "SGLANG_DIFFUSION_PLATFORM_OVERRIDE"
TARGET = "dp_target.compute"

TARGET_SOURCE = "def compute(x):\n    return x + 1\n"


def _plugin_dist(site: Path, dist: str, name: str, module: str, source: str) -> None:
    write_distribution(
        site,
        dist,
        entry_points={PLUGINS: {name: f"{module}:register"}},
        modules={module: source, "dp_target": TARGET_SOURCE},
    )


DOUBLING = f"""
from cardcage.diffusion.runtime.platforms.plugins import plugin_hook

def register():
    @plugin_hook({TARGET!r})
    def doubled(result, *args, **kwargs):
        return result * 2
"""


@pytest.fixture(autouse=True)
def builtin_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(OVERRIDE, "cpu")


def test_load_registers_without_resolving_targets(site: Path) -> None:
    _plugin_dist(site, "hooks-a", "doubling", "dp_load_a", DOUBLING)
    with on_sys_path(site):
        report = load_plugins()
        assert report.names("executed") == ["doubling"]
        assert TARGET in HookRegistry.registrations()
        assert "dp_target" not in sys.modules
        (record,) = HookRegistry.registrations()[TARGET]
        assert record.source == HookSource("doubling", "hooks-a")


def test_apply_implies_registration_and_applies(site: Path) -> None:
    _plugin_dist(site, "hooks-a", "doubling", "dp_apply_a", DOUBLING)
    with on_sys_path(site):
        apply_plugin_hooks()
        apply_plugin_hooks()
        import dp_target  # type: ignore[import-not-found]

        assert dp_target.compute(1) == 4
        assert TARGET in HookRegistry.applied_targets()


def test_reentrant_apply_from_a_plugin_returns_and_outer_call_applies(site: Path) -> None:
    source = DOUBLING.replace(
        "def register():\n",
        "def register():\n"
        "    from cardcage.diffusion.runtime.platforms.plugins import apply_plugin_hooks\n"
        "    apply_plugin_hooks()\n"
        "    assert 'dp_target' not in __import__('sys').modules\n",
    )
    _plugin_dist(site, "hooks-a", "reentrant", "dp_reenter_a", source)
    with on_sys_path(site):
        report = apply_plugin_hooks()
        assert report.names("executed") == ["reentrant"]
        import dp_target

        assert dp_target.compute(1) == 4


def test_another_thread_waits_for_the_phases(site: Path) -> None:
    source = DOUBLING.replace(
        "def register():\n",
        "import threading\n"
        "entered = threading.Event()\n"
        "release = threading.Event()\n"
        "def register():\n"
        "    entered.set()\n"
        "    assert release.wait(30)\n",
    )
    _plugin_dist(site, "hooks-a", "slow", "dp_thread_a", source)
    seen: dict[str, object] = {}
    with on_sys_path(site):
        first = threading.Thread(target=apply_plugin_hooks)
        first.start()
        import dp_thread_a  # type: ignore[import-not-found]

        assert dp_thread_a.entered.wait(30)

        def second() -> None:
            apply_plugin_hooks()
            import dp_target

            seen["result"] = dp_target.compute(1)

        waiter = threading.Thread(target=second)
        waiter.start()
        dp_thread_a.release.set()
        first.join(30)
        waiter.join(30)
        assert seen["result"] == 4
        assert len(HookRegistry.registrations()[TARGET]) == 1


def test_failure_of_a_phase_is_sticky(site: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    platform_dist(
        site,
        "vendor-a",
        "vendor_a",
        "dp_sticky_platform",
        plugin="vendor_hooks",
        plugin_source="def register():\n    raise ValueError('broken')\n",
    )
    monkeypatch.setenv(OVERRIDE, "vendor_a")
    with on_sys_path(site):
        with pytest.raises(PluginLoadError, match="ValueError: broken"):
            load_plugins()
        with pytest.raises(PhaseFailedError):
            apply_plugin_hooks()


def test_diffusion_and_srt_registries_are_separate() -> None:
    def diffusion_hook(result: int, *args: object, **kwargs: object) -> int:
        return result

    def srt_hook(result: int, *args: object, **kwargs: object) -> int:
        return result

    plugin_hook("dp_isolation.f", HookType.AFTER)(diffusion_hook)
    SRTHookRegistry.register("dp_isolation.g", srt_hook)
    assert "dp_isolation.f" in HookRegistry.registrations()
    assert "dp_isolation.f" not in SRTHookRegistry.registrations()
    assert "dp_isolation.g" not in HookRegistry.registrations()
    assert issubclass(HookRegistry, BaseHookRegistry)
    assert not issubclass(HookRegistry, SRTHookRegistry)


def test_hooks_run_only_through_their_own_registry(site: Path) -> None:
    _plugin_dist(site, "hooks-a", "doubling", "dp_own_a", DOUBLING)
    with on_sys_path(site):
        load_plugins()
        SRTHookRegistry.apply()
        import dp_target

        assert dp_target.compute(1) == 2  # the diffusion hook did not run via SRT
        SRTHookRegistry.register("dp_target.compute", lambda result, *a, **k: result + 100)
        apply_plugin_hooks()
        assert dp_target.compute(1) == 4  # only the diffusion hook was applied


def test_plugins_of_unselected_platform_distributions_are_never_imported(
    site: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    platform_dist(site, "vendor-a", "vendor_a", "dp_sel_a", plugin="a_hooks")
    platform_dist(site, "vendor-b", "vendor_b", "dp_sel_b", plugin="b_hooks")
    monkeypatch.setenv(OVERRIDE, "vendor_a")
    with on_sys_path(site):
        report = apply_plugin_hooks()
        assert "dp_sel_a_plugin" in sys.modules
        assert "dp_sel_b_plugin" not in sys.modules
        assert report.names("executed") == ["a_hooks"]
        assert report.names("excluded") == ["b_hooks"]


def test_a_builtin_platform_excludes_every_platform_distribution(site: Path) -> None:
    platform_dist(site, "vendor-a", "vendor_a", "dp_builtin_a", plugin="a_hooks")
    with on_sys_path(site):
        report = apply_plugin_hooks()
        assert "dp_builtin_a_plugin" not in sys.modules
        assert "dp_builtin_a" not in sys.modules
        assert report.names("excluded") == ["a_hooks"]


def test_a_failing_plugin_of_the_selected_distribution_aborts(
    site: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    platform_dist(
        site,
        "vendor-a",
        "vendor_a",
        "dp_fatal_a",
        plugin="vendor_hooks",
        plugin_source="raise ImportError('missing kernel')\n",
    )
    monkeypatch.setenv(OVERRIDE, "vendor_a")
    with on_sys_path(site), pytest.raises(PluginLoadError, match="missing kernel"):
        apply_plugin_hooks()


def test_a_failing_third_party_plugin_is_skipped(site: Path) -> None:
    _plugin_dist(
        site, "broken", "broken", "dp_broken", "def register():\n    raise ValueError('x')\n"
    )
    _plugin_dist(site, "hooks-a", "doubling", "dp_ok_a", DOUBLING)
    with on_sys_path(site):
        report = apply_plugin_hooks()
        assert report.names("executed") == ["doubling"]
        assert report.names("failed-register") == ["broken"]


def test_hooks_registered_while_importing_keep_their_source(site: Path) -> None:
    source = DOUBLING.replace("def register():\n    @plugin_hook", "if True:\n    @plugin_hook")
    source += "\ndef register():\n    pass\n"
    _plugin_dist(site, "hooks-a", "at_import", "dp_import_a", source)
    with on_sys_path(site):
        load_plugins()
        (record,) = HookRegistry.registrations()[TARGET]
        assert record.source == HookSource("at_import", "hooks-a")


def test_a_failing_import_discards_the_hooks_it_registered(site: Path) -> None:
    source = DOUBLING.replace("def register():\n    @plugin_hook", "if True:\n    @plugin_hook")
    source += "\nraise RuntimeError('half imported')\n"
    _plugin_dist(site, "hooks-a", "half", "dp_half_a", source)
    with on_sys_path(site):
        report = load_plugins()
        assert report.names("failed-import") == ["half"]
        assert TARGET not in HookRegistry.registrations()
