"""Scenarios: real platform distributions installed from wheels, real processes, real CLI.

Run by the nox session ``scenario-platforms``. It installs core-hooks, core-platforms and the
hook-target fixture into the session's venv, and every platform distribution (demo-cpu,
demo-cuda, the fixtures under tests_integration/fixtures/platforms, the broken general plugin)
into its own ``pip install --target`` site under ``$CC_SCENARIO_SITES``. Each case picks the set
of sites it wants on PYTHONPATH, exactly as if only those distributions were installed, and starts
a fresh interpreter.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from cardcage.platforms.diagnostics import load_schema

PROBE = Path(__file__).with_name("probe.py")
SITES = Path(os.environ.get("CC_SCENARIO_SITES", "/nonexistent"))
CARDCAGE = shutil.which("cardcage") or "cardcage"

pytestmark = pytest.mark.skipif(
    not SITES.is_dir(), reason="run through `nox -s scenario-platforms` (needs the fixture sites)"
)

#: How error messages name the porting guide (a page title a wheel-only user can look up).
PORTING_GUIDE_NAMED = 'the porting guide: the page "Porting a plugin between SGLang and cardcage"'


def _env(sites: list[str], extra: dict[str, str]) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("SGLANG_", "CARDCAGE_", "CC_FIXTURE_")) and k != "PYTHONPATH"
    }
    missing = [s for s in sites if not (SITES / s).is_dir()]
    assert not missing, f"no fixture site for {missing}"
    env["PYTHONPATH"] = os.pathsep.join(str(SITES / s) for s in sites)
    env.update(extra)
    return env


def start(sites: list[str], **extra: str) -> dict[str, Any]:
    """Start a runtime with only ``sites`` installed (besides the core); return its report."""
    done = subprocess.run(
        [sys.executable, str(PROBE)],
        env=_env(sites, extra),
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def cardcage(sites: list[str], *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [CARDCAGE, *args], env=_env(sites, extra), capture_output=True, text=True, check=False
    )


# -- discovery ---------------------------------------------------------------------------------


def test_demo_cpu_is_discovered_when_asked_for_and_its_hooks_are_applied() -> None:
    report = start(["demo-cpu"], CARDCAGE_DEMO_CPU="1")
    assert report["platform"] == "cardcage_demo_cpu.platform.DemoCpuSRTPlatform"
    assert report["out_of_tree"] is True
    assert report["plugins"]["demo_cpu"] == "executed"
    assert report["demo_cpu_platform_calls"] >= 1


def test_demo_cpu_never_activates_unasked() -> None:
    report = start(["demo-cpu"])
    assert report["platform"] == "cardcage.platforms.interface.SRTPlatform"
    assert report["plugins"]["demo_cpu"] == "excluded"
    assert "cardcage_demo_cpu.hooks" not in report["modules"]


def test_cardcage_platform_json_says_why_demo_cpu_was_chosen() -> None:
    done = cardcage(["demo-cpu"], "platform", "--json", CARDCAGE_DEMO_CPU="1")
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    jsonschema.validate(document, load_schema("platform"))
    selection = document["selection"]
    assert selection["plugin"] == "demo_cpu"
    assert selection["distribution"] == "cardcage-demo-cpu"
    assert "only one that activated" in selection["reason"]


def test_demo_cuda_declines_on_a_machine_without_an_nvidia_gpu() -> None:
    if Path("/proc/driver/nvidia/version").exists():
        pytest.skip("this machine has an NVIDIA driver; the decline path needs one without")
    report = start(["demo-cuda"])
    assert report["platform"] == "cardcage.platforms.interface.SRTPlatform"
    # activate() probed (its NVML helper loaded) but neither the platform nor the hooks did.
    assert "cardcage_demo_cuda.platform" not in report["modules"]
    assert "cardcage_demo_cuda.hooks" not in report["modules"]
    assert report["plugins"]["demo_cuda"] == "excluded"


# -- multiple activation -----------------------------------------------------------------------


def test_two_activating_platforms_name_both_plugins_and_the_variable_to_set() -> None:
    report = start(["cc-plat-always-a", "cc-plat-always-b"])
    error = report["error"]
    assert error["type"] == "MultiplePlatformsError"
    for fragment in ("'always_a'", "cc-plat-always-a", "'always_b'", "cc-plat-always-b"):
        assert fragment in error["message"]
    assert "SGLANG_PLATFORM" in error["message"]


@pytest.mark.parametrize("chosen", ["always_a", "always_b"])
def test_sglang_platform_picks_either_of_two_activating_platforms(chosen: str) -> None:
    report = start(["cc-plat-always-a", "cc-plat-always-b"], SGLANG_PLATFORM=chosen)
    assert report["device_name"] == chosen
    assert report["greet"] == f"hello ada [{chosen}]"


def test_a_misspelt_platform_gets_a_suggestion() -> None:
    done = cardcage(
        ["cc-plat-always-a", "cc-plat-always-b"], "platform", SGLANG_PLATFORM="always_c"
    )
    assert done.returncode == 1
    assert "Did you mean" in done.stdout + done.stderr


def test_duplicate_platform_names_across_distributions_are_an_error_naming_both() -> None:
    report = start(["cc-plat-dup-one", "cc-plat-dup-two"])
    assert report["error"]["type"] == "DuplicatePluginError"
    assert "cc-plat-dup-one" in report["error"]["message"]
    assert "cc-plat-dup-two" in report["error"]["message"]


def test_a_raising_activate_aborts_start_up_instead_of_falling_back() -> None:
    report = start(["cc-plat-raises"])
    error = report["error"]
    assert error["type"] == "PlatformActivationError"
    assert error["distribution"] == "cc-plat-raises"
    assert error["cause"] == "RuntimeError"
    assert "driver library is broken" in error["message"]


def test_an_activate_returning_a_non_string_is_rejected() -> None:
    report = start(["cc-plat-nonstring"])
    error = report["error"]
    assert error["type"] == "InvalidActivateResultError"
    assert {"PlatformActivationError", "TypeError"} <= set(error["bases"])
    assert error["distribution"] == "cc-plat-nonstring"
    assert "int" in error["message"]


def test_doctor_strict_fails_on_two_activatable_platforms_and_passes_once_one_is_selected() -> None:
    sites = ["cc-plat-always-a", "cc-plat-always-b"]
    ambiguous = cardcage(sites, "doctor", "--strict", "--json")
    assert ambiguous.returncode == 1
    document = json.loads(ambiguous.stdout)
    jsonschema.validate(document, load_schema("doctor"))
    assert "multiple-platforms" in {f["code"] for f in document["findings"]}
    assert cardcage(sites, "doctor", "--strict", SGLANG_PLATFORM="always_a").returncode == 0


# -- exclusion of unselected platform distributions ---------------------------------------------

#: cc-plat-sglang-native is written for SGLang itself and SGLang is not installed here: it is in
#: every "all vendors" case to show that, unselected, it changes nothing (its platform declines
#: unless asked for, and its general plugin is never imported).
ALL_VENDORS = [
    "demo-cpu",
    "demo-cuda",
    "cc-plat-always-b",
    "cc-plat-multi",
    "cc-plat-sglang-native",
]


def _vendor_modules(report: dict[str, Any], prefix: str) -> list[str]:
    return [m for m in report["modules"] if m.startswith(prefix)]


def test_explicit_selection_never_imports_other_platform_distributions_plugins() -> None:
    report = start(ALL_VENDORS, SGLANG_PLATFORM="always_b")
    assert report["device_name"] == "always_b"
    assert report["plugins"]["always_b_hooks"] == "executed"
    assert "cc_plat_always_b.heavy" in report["modules"]
    for other in (
        "cardcage_demo_cpu.hooks",
        "cardcage_demo_cuda.hooks",
        "cc_plat_multi",
        "cc_plat_sglang_native",
    ):
        assert not _vendor_modules(report, other), report["modules"]


def test_automatic_selection_excludes_the_platform_distributions_that_did_not_activate() -> None:
    report = start(["demo-cpu", "demo-cuda", "cc-plat-always-b", "cc-plat-sglang-native"])
    assert report["device_name"] == "always_b"
    assert report["plugins"]["demo_cpu"] == "excluded"
    assert report["plugins"]["sglang_native_hooks"] == "excluded"
    assert not _vendor_modules(report, "cardcage_demo_cpu.hooks")
    assert not _vendor_modules(report, "cardcage_demo_cuda.hooks")
    # Its activate() ran (and declined); neither its SGLang class nor its plugin was imported.
    assert _vendor_modules(report, "cc_plat_sglang_native") == ["cc_plat_sglang_native"]
    assert report["greet"] == "hello ada [always_b]"


def test_a_distribution_that_supplied_the_selected_platform_is_not_excluded() -> None:
    report = start(ALL_VENDORS, SGLANG_PLATFORM="multi_main")
    assert report["device_name"] == "multi"
    assert report["plugins"]["multi_hooks"] == "executed"
    assert report["plugins"]["always_b_hooks"] == "excluded"
    assert "cc_plat_multi.heavy" in report["modules"]
    assert not _vendor_modules(report, "cc_plat_always_b.hooks")


# -- failure policy ----------------------------------------------------------------------------


def test_a_broken_plugin_of_the_selected_platform_aborts_start_up() -> None:
    report = start(["cc-plat-always-a"], CC_FIXTURE_ALWAYS_A_FAIL="register")
    error = report["load_error"]
    assert error["type"] == "PluginLoadError"
    assert error["plugin"] == "always_a_hooks"
    assert error["distribution"] == "cc-plat-always-a"


def test_an_unpatchable_target_of_the_selected_platform_aborts_start_up() -> None:
    report = start(["cc-plat-always-a"], CC_FIXTURE_ALWAYS_A_FAIL="target")
    error = report["load_error"]
    assert error["type"] == "PluginLoadError"
    assert "cc_fixture_target.no_such_function" in error["message"]


def test_a_broken_plugin_of_any_other_distribution_is_logged_and_start_up_goes_on() -> None:
    report = start(["cc-plat-always-a", "cc-fixture-broken"])
    assert "load_error" not in report
    assert report["plugins"]["broken"] == "failed-register"
    assert report["greet"] == "hello ada [always_a]"


def test_the_allowlist_can_disable_every_general_plugin_including_the_platforms() -> None:
    report = start(
        ["cc-plat-always-a", "cc-fixture-broken"],
        SGLANG_PLATFORM="always_a",
        SGLANG_PLUGINS=",",
        CC_FIXTURE_ALWAYS_A_FAIL="register",
    )
    assert "load_error" not in report
    assert set(report["plugins"].values()) == {"not-allowed"}
    assert report["greet"] == "hello ada"


# -- a plugin written for SGLang itself, hosted by cardcage without SGLang installed -----------

SGLANG_NATIVE = "cc-plat-sglang-native"


def _assert_targets_sglang(error: dict[str, Any]) -> None:
    """The error says the plugin targets SGLang's runtime, why, and both ways out."""
    message = error["message"]
    assert error["distribution"] == SGLANG_NATIVE
    assert "'sglang_native' (cc-plat-sglang-native) targets SGLang's runtime" in message
    assert "No module named 'sglang'" in message
    assert "has no attribute" not in message  # what pkgutil.resolve_name used to report
    assert "install SGLang (pip install sglang) and start SGLang's own runtime" in message
    assert PORTING_GUIDE_NAMED in message
    assert {"InvalidPlatformClassError", "TargetsSGLangError", "TypeError"} <= set(error["bases"])
    assert error["cause"] == "ModuleNotFoundError"


def test_sglang_is_not_installed_in_the_scenario_environment() -> None:
    done = subprocess.run(
        [sys.executable, "-c", "import sglang"], env=_env([SGLANG_NATIVE], {}), check=False
    )
    assert done.returncode != 0


@pytest.mark.parametrize(
    "selection",
    [{"SGLANG_PLATFORM": "sglang_native"}, {"CC_SGLANG_NATIVE": "1"}],
    ids=["explicit", "automatic"],
)
def test_selecting_a_platform_written_for_sglang_says_it_targets_sglangs_runtime(
    selection: dict[str, str],
) -> None:
    report = start([SGLANG_NATIVE, "demo-cpu"], **selection)

    error = report["error"]
    assert error["type"] == "SGLangPlatformClassError"
    _assert_targets_sglang(error)
    assert "cc_plat_sglang_native.platform.NativeSRTPlatform" in error["message"]
    assert "cc_plat_sglang_native.hooks" not in report["modules"]


def test_cardcage_platform_shows_the_sglang_cause_and_fix() -> None:
    done = cardcage([SGLANG_NATIVE], "platform", "--json", SGLANG_PLATFORM="sglang_native")

    assert done.returncode == 1, done.stderr
    document = json.loads(done.stdout)
    jsonschema.validate(document, load_schema("platform"))
    (srt,) = [r for r in document.get("runtimes", [document]) if r.get("runtime", "srt") == "srt"]
    error = srt["error"]
    assert error["type"] == "SGLangPlatformClassError"
    assert error["cause"] == "ModuleNotFoundError: No module named 'sglang'"
    assert "targets SGLang's runtime" in error["message"]
    assert "docs/platforms/porting.md" in error["message"]


def _doctor(sites: list[str], **extra: str) -> tuple[int, dict[str, Any]]:
    done = cardcage(sites, "doctor", "--strict", "--json", **extra)
    document = json.loads(done.stdout)
    jsonschema.validate(document, load_schema("doctor"))
    return done.returncode, document


def test_doctor_reports_the_selected_sglang_plugin_as_targeting_sglangs_runtime() -> None:
    code, document = _doctor([SGLANG_NATIVE], SGLANG_PLATFORM="sglang_native")

    assert code == 1
    found = {f["plugin"]: f for f in document["findings"]}
    assert set(found) == {"sglang_native", "sglang_native_hooks"}
    for finding in found.values():
        assert (finding["code"], finding["severity"]) == ("plugin-targets-sglang", "error")
        assert finding["distributions"] == [{"name": SGLANG_NATIVE, "version": "0.1.0"}]
        assert "No module named 'sglang'" in finding["message"]
        assert "pip install sglang" in finding["fix"]
        assert "docs/platforms/porting.md" in finding["fix"]
    assert "ships with the selected platform" in found["sglang_native_hooks"]["message"]


@pytest.mark.parametrize(
    "sites",
    [[SGLANG_NATIVE], [SGLANG_NATIVE, "demo-cpu"], [SGLANG_NATIVE, "cc-plat-always-a"]],
    ids=["alone", "with-demo-cpu", "with-always-a"],
)
def test_doctor_strict_passes_while_the_sglang_plugin_is_not_selected(sites: list[str]) -> None:
    code, document = _doctor(sites, CARDCAGE_DEMO_CPU="1")

    assert code == 0, document
    (finding,) = [f for f in document["findings"] if f["code"] == "plugin-targets-sglang"]
    assert (finding["plugin"], finding["severity"]) == ("sglang_native_hooks", "info")
    assert "Startup never imports it" in finding["message"]
    assert {f["severity"] for f in document["findings"]} == {"info"}


def test_with_the_sglang_plugin_installed_demo_cpu_still_starts_and_hooks() -> None:
    report = start(["demo-cpu", SGLANG_NATIVE], CARDCAGE_DEMO_CPU="1")
    assert report["platform"] == "cardcage_demo_cpu.platform.DemoCpuSRTPlatform"
    assert report["plugins"]["demo_cpu"] == "executed"
    assert report["plugins"]["sglang_native_hooks"] == "excluded"
    assert report["demo_cpu_platform_calls"] >= 1
    assert "cc_plat_sglang_native.hooks" not in report["modules"]


def test_with_the_sglang_plugin_installed_a_failure_policy_case_is_unchanged() -> None:
    report = start(["cc-plat-always-a", "cc-fixture-broken", SGLANG_NATIVE])
    assert "load_error" not in report
    assert report["plugins"]["broken"] == "failed-register"
    assert report["plugins"]["sglang_native_hooks"] == "excluded"
    assert report["greet"] == "hello ada [always_a]"
