"""Scenarios: the diffusion runtime's platform selection and two plugin phases, end to end.

Run by the nox session ``scenario-diffusion``. It installs core-hooks, core-platforms, the
diffusion runtime and the pinned CPU torch into the session's venv, and every vendor (demo-cpu,
demo-cuda, the fixtures under tests_integration/fixtures/diffusion) into its own
``pip install --target`` site under ``$CC_SCENARIO_SITES``, all from built wheels. Each case picks
the sites it wants on PYTHONPATH, exactly as if only those distributions were installed, and
starts a fresh interpreter running ``probe.py``.

Evidence that a module was never imported comes from two places: the probe's ``sys.modules``,
and the marker file each fixture module writes into ``$CC_DIFF_EVIDENCE`` as its first act (a
module whose import failed half-way is gone from ``sys.modules``; its marker stays).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

PROBE = Path(__file__).with_name("probe.py")
SITES = Path(os.environ.get("CC_SCENARIO_SITES", "/nonexistent"))
STARTUP_FAILED = 3  # probe.py's exit status when a step raised
OVERRIDE = "SGLANG_DIFFUSION_PLATFORM_OVERRIDE"
CPU_BUILTIN = "cardcage.diffusion.runtime.platforms.cpu.CpuPlatform"
DEMO_CPU_PLATFORM = "cardcage_demo_cpu.diffusion.platform.DemoCpuPlatform"
DEMO_CPU_HOOK_TARGET = "cardcage.diffusion.runtime.layers.custom_op.CustomOp.dispatch_forward"
HAS_NVIDIA_DRIVER = Path("/proc/driver/nvidia/version").exists()

pytestmark = pytest.mark.skipif(
    not SITES.is_dir(), reason="run through `nox -s scenario-diffusion` (needs the fixture sites)"
)

# Platform distributions that all activate or decline on any machine, plus the demos.
FIXTURE_PLATFORMS = ["cc-diff-always-a", "cc-diff-always-b", "cc-diff-declines"]
ALL_VENDORS = ["demo-cpu", "demo-cuda", *FIXTURE_PLATFORMS]


def _env(sites: list[str], evidence: Path, extra: dict[str, str]) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("SGLANG_", "CARDCAGE_", "CC_DIFF_")) and k != "PYTHONPATH"
    }
    chosen = ["cc-diff-target", *sites]  # the hook target and the evidence helper, always
    missing = [s for s in chosen if not (SITES / s).is_dir()]
    assert not missing, f"no fixture site for {missing}"
    env["PYTHONPATH"] = os.pathsep.join(str(SITES / s) for s in chosen)
    env["CC_DIFF_EVIDENCE"] = str(evidence)
    env.update(extra)
    return env


def start(sites: list[str], *steps: str, **extra: str) -> dict[str, Any]:
    """Run ``steps`` in a fresh interpreter with only ``sites`` installed (besides the core).

    Returns the probe's report plus ``status`` (exit status), ``stderr``, ``imported`` (fixture
    modules whose code started running) and ``calls`` (recorded fixture calls, in order).
    """
    with tempfile.TemporaryDirectory(prefix="cc-diff-evidence-") as folder:
        evidence = Path(folder)
        done = subprocess.run(
            [sys.executable, str(PROBE), *steps],
            env=_env(sites, evidence, extra),
            capture_output=True,
            text=True,
            check=False,
        )
        if not done.stdout.strip():
            pytest.fail(f"probe crashed (exit status {done.returncode}):\n{done.stderr}")
        report: dict[str, Any] = json.loads(done.stdout)
        report["imported"] = sorted(
            p.name.removeprefix("import.") for p in evidence.glob("import.*")
        )
        calls = evidence / "calls"
        report["calls"] = calls.read_text().splitlines() if calls.exists() else []
    report["status"] = done.returncode
    report["stderr"] = done.stderr
    return report


def ok(report: dict[str, Any]) -> list[dict[str, Any]]:
    """The step results of a start-up that must have succeeded."""
    assert report["status"] == 0, report["results"]
    return report["results"]  # type: ignore[no-any-return]


def vendor_modules(report: dict[str, Any]) -> list[str]:
    """Modules of vendor distributions, from both sys.modules and the markers (target excluded)."""
    seen = {*report["modules"], *report["imported"]}
    return sorted(m for m in seen if not m.startswith("cc_diff_target"))


# -- discovery with demo-cpu (its diffusion half: cardcage_demo_cpu.diffusion) ------------------


def test_demo_cpu_starts_a_worker_when_asked_for() -> None:
    # A worker's order: backend init, then plugin registration and hook application; a second
    # initialize_current_platform() (the scheduler calls it again) is a no-op.
    report = start(["demo-cpu"], "select", "init", "apply", "init", CARDCAGE_DEMO_CPU="1")
    select, _, apply, _ = ok(report)
    assert select["platform"] == DEMO_CPU_PLATFORM
    assert select["out_of_tree"] is True
    assert select["dist"] == "cardcage-demo-cpu"
    assert select["plugin"] == "demo_cpu"
    assert select["mode"] == "automatic"
    assert apply["plugins"] == {"demo_cpu": "executed"}
    assert apply["applied"] == [DEMO_CPU_HOOK_TARGET]
    assert apply["failed"] == []
    evidence = report["demo_cpu_evidence"]
    assert sum(evidence["init_backend"].values()) == 1
    assert evidence["register"] == {DEMO_CPU_HOOK_TARGET: 1}
    assert report["torch_imported"] is True  # init_backend() sets torch's threads


def test_the_override_selects_demo_cpu_by_its_entry_point_name() -> None:
    report = start(["demo-cpu", *FIXTURE_PLATFORMS], "select", "load", **{OVERRIDE: "demo_cpu"})
    select, load = ok(report)
    assert select["platform"] == DEMO_CPU_PLATFORM
    assert select["mode"] == "explicit"
    assert load["plugins"] == {
        "demo_cpu": "executed",
        "diff_a_hooks": "excluded",
        "diff_b_hooks": "excluded",
        "diff_declines_hooks": "excluded",
    }
    # The other platform distributions were neither activated nor asked for their plugins.
    assert not [m for m in vendor_modules(report) if not m.startswith("cardcage_demo_cpu")]


def test_demo_cpu_never_activates_unasked_and_its_hooks_never_load() -> None:
    report = start(["demo-cpu"], "select", "apply")
    select, apply = ok(report)
    assert select["platform"] == CPU_BUILTIN
    assert select["dist"] is None
    assert select["candidates"]["entry-point:demo_cpu"] == "declined"
    assert apply["plugins"] == {"demo_cpu": "excluded"}
    assert "cardcage_demo_cpu.diffusion.hooks" not in report["modules"]


@pytest.mark.skipif(HAS_NVIDIA_DRIVER, reason="needs a machine without an NVIDIA driver")
def test_demo_cuda_declines_without_a_gpu_and_its_hooks_never_load() -> None:
    report = start(["demo-cuda"], "select", "apply")
    select, apply = ok(report)
    assert select["platform"] == CPU_BUILTIN
    assert select["candidates"]["entry-point:demo_cuda"] == "declined"
    assert apply["plugins"]["demo_cuda"] == "excluded"
    assert "cardcage_demo_cuda.diffusion.hooks" not in report["modules"]


@pytest.mark.skipif(HAS_NVIDIA_DRIVER, reason="needs a machine without an NVIDIA driver")
def test_selecting_demo_cuda_without_a_gpu_says_the_hardware_is_missing() -> None:
    report = start(["demo-cuda"], "select", **{OVERRIDE: "demo_cuda"})
    assert report["status"] == STARTUP_FAILED
    error = report["results"][0]["error"]
    assert error["type"] == "PlatformUnavailableError"
    assert error["distribution"] == "cardcage-demo-cuda"
    assert "activate() returned None" in error["message"]
    assert f"Unset {OVERRIDE}" in error["message"]


# -- the override ------------------------------------------------------------------------------


def test_automatic_selection_probes_the_builtins_when_no_plugin_activates() -> None:
    # The control for the next case: cc-diff-probe-spy's torch_npu marks the NPU probe's import.
    report = start(["cc-diff-probe-spy", "cc-diff-declines"], "select")
    (select,) = ok(report)
    assert select["platform"] == CPU_BUILTIN
    builtins = {k: v for k, v in select["candidates"].items() if k.startswith("built-in:")}
    probed = [name.removeprefix("built-in:") for name in builtins]
    assert probed == ["mps", "xpu", "rocm", "cuda", "npu", "musa", "cpu"]
    assert builtins["built-in:npu"] == "unavailable"
    assert "torch_npu" in report["imported"]


def test_a_builtin_alias_override_probes_nothing_and_loads_no_entry_point() -> None:
    sites = [*ALL_VENDORS, "cc-diff-probe-spy"]
    report = start(sites, "select", "apply", CARDCAGE_DEMO_CPU="1", **{OVERRIDE: "cpu"})
    select, apply = ok(report)
    assert select["platform"] == CPU_BUILTIN
    assert select["mode"] == "explicit"
    assert select["dist"] is None
    # No built-in probe ran (the NPU probe would have imported the spy's torch_npu).
    assert "torch_npu" not in report["imported"]
    builtins = {k: v for k, v in select["candidates"].items() if k.startswith("built-in:")}
    assert builtins == {"built-in:cpu": "selected"}
    entry_points = {k: v for k, v in select["candidates"].items() if k.startswith("entry-point:")}
    assert set(entry_points.values()) == {"not-loaded"}
    assert "entry-point:diff_a" in entry_points
    # Every platform distribution's general plugins are excluded, none was imported.
    assert set(apply["plugins"].values()) == {"excluded"}
    assert vendor_modules(report) == []
    assert report["torch_imported"] is False


def test_an_entry_point_override_imports_only_that_distribution() -> None:
    report = start(
        ALL_VENDORS, "select", "apply", "greet", CARDCAGE_DEMO_CPU="1", **{OVERRIDE: "diff_b"}
    )
    select, apply, greet = ok(report)
    assert select["device_name"] == "diff_b"
    assert select["dist"] == "cc-diff-always-b"
    assert apply["plugins"]["diff_b_hooks"] == "executed"
    assert apply["plugins"]["diff_a_hooks"] == "excluded"
    assert greet["greet"] == "hello ada [diff_b]"
    others = [m for m in vendor_modules(report) if not m.startswith("cc_diff_always_b")]
    assert others == [], "modules of unselected distributions were imported"


def test_an_unknown_override_lists_the_installed_platforms() -> None:
    report = start(FIXTURE_PLATFORMS, "select", **{OVERRIDE: "diff_c"})
    assert report["status"] == STARTUP_FAILED
    error = report["results"][0]["error"]
    assert error["type"] == "PlatformNotFoundError"
    for fragment in ("'diff_a' (cc-diff-always-a)", "'diff_b' (cc-diff-always-b)", "'cpu'"):
        assert fragment in error["message"]
    assert "Did you mean" in error["message"]
    assert vendor_modules(report) == []


# -- entry-point names are validated before anything is imported -------------------------------


# Names are validated before anything is loaded, whatever the override names (SGLang checks only
# the selected name in explicit mode; DESIGN.md §2 takes the stricter rule for both runtimes).
@pytest.mark.parametrize("override", ["", "diff_dup", "diff_a"])
def test_a_platform_name_used_by_two_distributions_fails_before_any_import(override: str) -> None:
    sites = ["cc-diff-dup-one", "cc-diff-dup-two", "cc-diff-always-a"]
    report = start(sites, "select", "apply", **{OVERRIDE: override})
    assert report["status"] == STARTUP_FAILED
    select, apply = report["results"]
    error = select["error"]
    assert error["type"] == "DuplicatePluginError"
    assert error["plugin"] == "diff_dup"
    for fragment in ("'diff_dup'", "cc-diff-dup-one", "cc-diff-dup-two", "rename"):
        assert fragment in error["message"]
    # The plugin phase cannot go on without a platform; it reports the same failure.
    assert apply["error"]["cause_of_step"] == 0
    assert vendor_modules(report) == []


@pytest.mark.parametrize("override", ["", "diff_a"])
def test_a_platform_named_like_a_builtin_fails_before_any_import(override: str) -> None:
    report = start(["cc-diff-reserved", "cc-diff-always-a"], "select", **{OVERRIDE: override})
    assert report["status"] == STARTUP_FAILED
    error = report["results"][0]["error"]
    assert error["type"] == "ReservedPlatformNameError"
    assert error["plugin"] == "cuda"
    assert error["distribution"] == "cc-diff-reserved"
    assert "Rename the entry point" in error["message"]
    assert vendor_modules(report) == []


# -- several platforms activating --------------------------------------------------------------


def test_several_activating_platforms_name_each_plugin_and_its_distribution() -> None:
    report = start(FIXTURE_PLATFORMS, "select", "apply")
    assert report["status"] == STARTUP_FAILED
    error = report["results"][0]["error"]
    assert error["type"] == "MultiplePlatformsError"
    for fragment in ("'diff_a' (cc-diff-always-a)", "'diff_b' (cc-diff-always-b)"):
        assert fragment in error["message"]
    assert f"Set {OVERRIDE} to select one (one of: 'diff_a', 'diff_b')" in error["message"]
    assert "diff_declines" not in error["message"]  # it declined: not part of the conflict
    # activate() ran; no platform class, no general plugin was imported.
    assert vendor_modules(report) == ["cc_diff_always_a", "cc_diff_always_b", "cc_diff_declines"]


# -- general plugins of platform distributions that did not supply the platform ----------------


def test_plugins_of_platform_distributions_that_did_not_supply_the_platform_never_load() -> None:
    report = start(["cc-diff-always-a", "cc-diff-declines"], "select", "apply", "greet")
    select, apply, greet = ok(report)
    assert select["device_name"] == "diff_a"
    # diff_a_sim declined, but its distribution supplied the platform: its plugin runs.
    assert select["candidates"]["entry-point:diff_a_sim"] == "declined"
    assert apply["plugins"] == {"diff_a_hooks": "executed", "diff_declines_hooks": "excluded"}
    assert greet["greet"] == "hello ada [diff_a]"
    assert "cc_diff_declines" in report["imported"]  # its activate() was asked
    assert "cc_diff_declines.hooks" not in vendor_modules(report)
    assert report["torch_imported"] is False


def test_a_builtin_platform_excludes_every_platform_distributions_plugins() -> None:
    report = start(["cc-diff-declines", "cc-diff-thirdparty"], "select", "apply", "greet")
    select, apply, greet = ok(report)
    assert select["platform"] == CPU_BUILTIN
    assert apply["plugins"]["diff_declines_hooks"] == "excluded"
    assert apply["plugins"]["tp_ok"] == "executed"  # not a platform distribution: not excluded
    assert greet["greet"] == "hello ada [tp]"
    assert "cc_diff_declines.hooks" not in vendor_modules(report)


# -- failure policy ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fail", "fragment"),
    [
        ("import", "failed to import (cc_diff_always_a.hooks:register): ImportError"),
        ("register", "failed in its general plugin callback: RuntimeError"),
    ],
)
def test_a_broken_plugin_of_the_selected_platform_aborts_start_up(fail: str, fragment: str) -> None:
    report = start(["cc-diff-always-a"], "select", "load", "apply", CC_DIFF_A_FAIL=fail)
    assert report["status"] == STARTUP_FAILED
    select, load, apply = report["results"]
    assert select["ok"]
    error = load["error"]
    assert error["type"] == "PluginLoadError"
    assert error["plugin"] == "diff_a_hooks"
    assert error["distribution"] == "cc-diff-always-a"
    assert fragment in error["message"]
    assert "ships with the selected platform" in error["message"]
    assert "or select another platform" in error["message"]
    # Hook application never runs on a failed registration: it reports that failure again.
    assert apply["error"]["type"] == "PhaseFailedError"
    assert apply["error"]["cause_of_step"] == 1


def test_an_unapplicable_hook_of_the_selected_platform_aborts_start_up() -> None:
    report = start(["cc-diff-always-a"], "select", "apply", CC_DIFF_A_FAIL="target")
    assert report["status"] == STARTUP_FAILED
    error = report["results"][1]["error"]
    assert error["type"] == "PluginLoadError"
    assert error["distribution"] == "cc-diff-always-a"
    assert error["plugin"] == "diff_a_hooks"
    assert "cc_diff_target.no_such_function" in error["message"]
    assert "fix the hook targets in that distribution" in error["message"]


def test_broken_plugins_of_other_distributions_are_logged_and_skipped() -> None:
    report = start(["cc-diff-always-a", "cc-diff-thirdparty"], "select", "apply", "greet")
    _, apply, greet = ok(report)
    assert apply["plugins"] == {
        "diff_a_hooks": "executed",
        "tp_broken_import": "failed-import",
        "tp_broken_register": "failed-register",
        "tp_ok": "executed",
    }
    # Their hooks (one registered while importing, one in register()) were discarded.
    assert greet["greet"] == "hello ada [diff_a] [tp]"
    # The failed import started (its marker) and left nothing behind in sys.modules.
    assert "cc_diff_thirdparty.broken_import" in report["imported"]
    assert "cc_diff_thirdparty.broken_import" not in report["modules"]
    errors = [line for line in report["stderr"].splitlines() if line.startswith("ERROR")]
    for plugin in ("tp_broken_import", "tp_broken_register"):
        assert any(plugin in line and "cc-diff-thirdparty" in line for line in errors), errors


# -- backend initialization --------------------------------------------------------------------


def test_init_backend_runs_once_per_process() -> None:
    report = start(["cc-diff-always-a"], "init", "init")
    ok(report)
    assert report["calls"] == ["diff_a.init_backend"]


def test_a_failing_init_backend_is_sticky_and_never_runs_twice() -> None:
    report = start(["cc-diff-always-a"], "init", "init", CC_DIFF_A_FAIL="init_backend")
    assert report["status"] == STARTUP_FAILED
    first, second = (r["error"] for r in report["results"])
    assert first["type"] == "RuntimeError"
    assert first["message"] == "diff_a runtime library failed to initialise"
    assert second["type"] == "PhaseFailedError"
    assert second["message"].startswith(
        "Diffusion platform backend initialization previously failed: RuntimeError: "
        "diff_a runtime library failed to initialise."
    )
    assert second["message"].endswith("Fix the cause shown above and restart the process.")
    assert second["cause_of_step"] == 0  # chained from the very exception the first call raised
    assert report["calls"] == ["diff_a.init_backend"]
    assert report["torch_imported"] is False


# -- the SGLANG_PLUGINS allowlist --------------------------------------------------------------


def test_the_allowlist_loads_only_the_named_diffusion_plugins() -> None:
    report = start(
        ["cc-diff-always-a", "cc-diff-thirdparty"],
        "select",
        "apply",
        "greet",
        SGLANG_PLUGINS=" diff_a_hooks ,tp_ok",
    )
    _, apply, greet = ok(report)
    assert apply["plugins"] == {
        "diff_a_hooks": "executed",
        "tp_broken_import": "not-allowed",
        "tp_broken_register": "not-allowed",
        "tp_ok": "executed",
    }
    assert greet["greet"] == "hello ada [diff_a] [tp]"
    assert not [m for m in vendor_modules(report) if m.startswith("cc_diff_thirdparty.broken")]
    assert "ERROR" not in report["stderr"]


def test_an_empty_allowlist_disables_every_diffusion_plugin_but_not_platform_selection() -> None:
    report = start(
        ["cc-diff-always-a", "cc-diff-thirdparty"],
        "select",
        "apply",
        "greet",
        SGLANG_PLUGINS=",",
        CC_DIFF_A_FAIL="register",  # would abort start-up, if the plugin were loaded
    )
    select, apply, greet = ok(report)
    assert select["device_name"] == "diff_a"
    assert set(apply["plugins"].values()) == {"not-allowed"}
    assert greet["greet"] == "hello ada"
    assert "cc_diff_always_a.hooks" not in vendor_modules(report)
    assert not [m for m in vendor_modules(report) if m.startswith("cc_diff_thirdparty")]


def test_an_allowlist_name_that_matches_nothing_is_warned_about() -> None:
    report = start(["cc-diff-always-a"], "select", "apply", SGLANG_PLUGINS="diff_a_hookz")
    _, apply = ok(report)
    assert apply["plugins"] == {"diff_a_hooks": "not-allowed"}
    warnings = [line for line in report["stderr"].splitlines() if line.startswith("WARNING")]
    assert any("SGLANG_PLUGINS" in w and "'diff_a_hookz'" in w for w in warnings), warnings
