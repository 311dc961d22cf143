"""Scenario: cardcage-core-hooks installed with real fixture plugin distributions.

Runs only inside the nox session ``scenario-general-plugins``, which installs core-hooks and the
packages under tests_integration/fixtures/general as wheels. Each case starts a fresh Python
process, exactly as a runtime entry point would, and inspects what load_plugins() did.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

PROBE = Path(__file__).with_name("probe.py")
STEERING = (
    "SGLANG_PLATFORM",
    "SGLANG_PLUGINS",
    "CARDCAGE_STRICT_HOOKS",
    "CARDCAGE_DEFERRED_HOOKS",
    "CARDCAGE_EARLY_PATCHES",
)


def start_runtime(**env: str) -> dict[str, Any]:
    """Start a runtime process with ``env`` on top of a clean environment; return its report."""
    full = {k: v for k, v in os.environ.items() if k not in STEERING and "FIXTURE" not in k}
    full.update(env)
    done = subprocess.run(
        [sys.executable, str(PROBE)], env=full, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def messages(report: dict[str, Any], level: str) -> list[str]:
    return [r["message"] for r in report["logs"] if r["level"] == level]


def test_good_plugin_hook_runs_in_a_fresh_process() -> None:
    report = start_runtime()
    assert report["plugins"]["good"] == "executed"
    assert report["compute"] == 2 * 2 + 100


def test_broken_plugin_is_logged_with_traceback_and_its_hooks_discarded() -> None:
    report = start_runtime()
    assert report["plugins"]["broken"] == "failed-register"
    errors = [r for r in report["logs"] if r["level"] == "ERROR" and "broken" in r["message"]]
    assert errors, report["logs"]
    assert "boom: the broken fixture plugin failed on purpose" in errors[0]["traceback"]
    # It registered an upper-casing hook on greet() before raising: that hook must not run.
    assert report["greet"].startswith("hello ada")


def test_plugin_with_a_missing_target_fails_alone() -> None:
    report = start_runtime()
    assert report["failed_targets"] == ["cc_fixture_target.does_not_exist"]
    assert report["compute"] == 104  # the other plugins still applied


def test_allowlist_keeps_only_named_plugins() -> None:
    report = start_runtime(SGLANG_PLUGINS="good")
    assert report["plugins"]["good"] == "executed"
    assert report["plugins"]["broken"] == "not-allowed"
    assert "cc_fixture_broken" not in report["modules"]


def test_allowlist_of_nothing_loads_nothing() -> None:
    report = start_runtime(SGLANG_PLUGINS=",")
    assert set(report["plugins"].values()) == {"not-allowed"}
    assert report["compute"] == 4


def test_allowlist_name_that_matches_nothing_is_warned_about() -> None:
    report = start_runtime(SGLANG_PLUGINS="good,godo")
    warnings = messages(report, "WARNING")
    assert any("'godo'" in w and "SGLANG_PLUGINS" in w for w in warnings), warnings


def test_unselected_platform_distribution_is_never_imported() -> None:
    report = start_runtime(SGLANG_PLATFORM="vendor_a")
    assert report["selection"] == ["vendor_a", "cc-fixture-vendor-a"]
    assert report["plugins"]["vendor_a_hooks"] == "executed"
    assert report["plugins"]["vendor_b_hooks"] == "excluded"
    assert not [m for m in report["modules"] if m.startswith("cc_fixture_vendor_b")]
    assert report["greet"].endswith("[vendor a]")


def test_selected_vendor_plugin_failure_aborts_start_up() -> None:
    report = start_runtime(SGLANG_PLATFORM="vendor_a", CC_FIXTURE_VENDOR_A_FAIL="1")
    assert report["error"]["type"] == "PluginLoadError"
    assert report["error_fields"]["plugin"] == "vendor_a_hooks"
    assert report["error_fields"]["distribution"] == "cc-fixture-vendor-a"
    assert "vendor a hooks failed on purpose" in report["error"]["message"]


def test_unselected_vendor_failure_cannot_matter() -> None:
    report = start_runtime(SGLANG_PLATFORM="vendor_b", CC_FIXTURE_VENDOR_A_FAIL="1")
    assert "error" not in report
    assert report["plugins"]["vendor_a_hooks"] == "excluded"
    assert report["greet"].endswith("[vendor b]")


def test_third_party_failure_never_takes_the_process_down_even_with_a_vendor_selected() -> None:
    report = start_runtime(SGLANG_PLATFORM="vendor_b")
    assert "error" not in report
    assert report["plugins"]["broken"] == "failed-register"


def test_strict_mode_turns_any_unapplied_hook_into_an_error() -> None:
    report = start_runtime(CARDCAGE_STRICT_HOOKS="1")
    assert report["error"]["type"] == "HookApplyError"
    assert "cc_fixture_target.does_not_exist" in report["error"]["message"]
