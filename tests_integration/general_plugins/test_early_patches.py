"""Scenario: early patches from installed wheels, run by the .pth line at interpreter start.

Runs inside the nox session ``scenario-general-plugins``: core-hooks and the fixtures under
tests_integration/fixtures/general are installed as wheels, so the ``.pth`` file of
cardcage-core-hooks sits in the venv's site-packages as it would for a user. Every case starts
fresh interpreters (``early_probe.py``): the host (``cc_early_host``) computes its constants,
decorator arguments and optional imports while importing, and the probe reports what it got.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

PROBE = Path(__file__).with_name("early_probe.py")
STEERING = ("SGLANG_PLATFORM", "SGLANG_PLUGINS", "CARDCAGE_")

#: What the host computes while importing when no early patch runs.
UNPATCHED = {
    "config_is_cpu": True,
    "topk_is_cpu": True,
    "device": "cpu",
    "backend": "inductor",
    "backend_now": "inductor",
    "vendor": None,
    "have_accel": False,
    "accel_name": None,
}


def start(*args: str, **env: str) -> dict[str, Any]:
    full = {
        k: v for k, v in os.environ.items() if not k.startswith(STEERING) and "FIXTURE" not in k
    }
    full.update(env)
    done = subprocess.run(
        [sys.executable, str(PROBE), *args], env=full, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    report: dict[str, Any] = json.loads(done.stdout)
    report["stderr"] = done.stderr
    return report


def patches(report: dict[str, Any]) -> dict[str, list[Any]]:
    return {row[1]: row for row in report["early"]["patches"]}


def test_without_the_opt_in_nothing_is_imported_and_the_host_is_unpatched() -> None:
    report = start()
    assert report["at_start"] == []  # the .pth line imported nothing, not even cardcage
    host = report["host"]
    assert {k: host[k] for k in UNPATCHED} == UNPATCHED
    assert host["kernel"].startswith("TypeError")  # the legacy six-argument call fails
    assert not host["early_imported"]
    # The loader reports this site's broken general plugins on stderr (a broken plugin is never
    # silent); nothing there speaks of early patches.
    assert "early patch" not in report["stderr"].lower()
    assert "CARDCAGE_EARLY_PATCHES" not in report["stderr"]


def test_each_kind_of_early_patch_takes_effect_at_import_time() -> None:
    report = start(CARDCAGE_EARLY_PATCHES="cc_early")
    assert "cardcage.hooks.early" in report["at_start"]
    host = report["host"]
    # (b) a module constant, set right after its module executed: the copy made by
    # `from config import _is_cpu` and everything computed from it see the new value.
    assert (host["config_is_cpu"], host["topk_is_cpu"], host["device"]) == (
        False,
        False,
        "accelerator",
    )
    # (b) a function called for a decorator argument at module scope went through the hook.
    assert host["backend"] == "vendor-backend"
    # (a) the missing accelerator library was provided by its stand-in.
    assert (host["have_accel"], host["accel_name"]) == (True, "stand-in accel")
    # (c) the third-party kernel accepts the legacy form the host calls.
    assert host["kernel"] == ["in-place", 1.0, 2.0, 3.0, 4.0]


def test_attribution_and_statuses_are_reported() -> None:
    report = start(CARDCAGE_EARLY_PATCHES="cc_early")
    rows = patches(report)
    owner = ["cc_early", "cc-fixture-early"]
    for target in (
        "cc_early_host.config:_is_cpu",
        "cc_early_host.platform_info:compiler_backend",
        "cc_early_ops._custom_ops:fused_add_rms_norm",
    ):
        assert rows[target][2] == "applied", rows[target]
        assert rows[target][3:5] == owner
    assert rows["cc_missing_accel"][2] == "provided"
    assert rows["cc_missing_accel.ops"][2] == "provided"
    # A stand-in for a module that is installed is never used: the real one wins.
    assert rows["cc_fixture_target"][2] == "real-module"
    # A target whose module never imports stays visibly pending.
    assert rows["cc_early_host.never_imported:anything"][2] == "pending"
    assert rows["cc_early_host.never_imported:anything"][5] == "cc_early_host.never_imported"
    # A value on an attribute that does not exist fails alone; the rest applied (above).
    failed = rows["cc_early_host.config:no_such_constant"]
    assert failed[2] == "failed"
    assert "no_such_constant" in failed[6]
    assert report["early"]["plugins"]["unrelated"][0] == "not-requested"


def test_an_unrelated_installed_early_patch_does_nothing_unless_named() -> None:
    report = start(CARDCAGE_EARLY_PATCHES="cc_early")
    assert "cc_fixture_early_unrelated" not in report["host"]["modules"]
    named = start(CARDCAGE_EARLY_PATCHES="unrelated")
    assert named["host"]["config_is_cpu"] == "the unrelated patch ran"
    assert "cc_fixture_early_unrelated" in named["host"]["modules"]


def test_a_spawned_child_inherits_the_opt_in_and_runs_the_patches_too() -> None:
    report = start("--spawn", CARDCAGE_EARLY_PATCHES="cc_early")
    child = report["child"]
    assert child["early_imported"]
    assert (child["device"], child["backend"], child["have_accel"]) == (
        "accelerator",
        "vendor-backend",
        True,
    )
    plain = start("--spawn")
    assert plain["child"]["device"] == "cpu"
    assert not plain["child"]["early_imported"]


def test_unapply_restores_the_host() -> None:
    report = start("--unapply", CARDCAGE_EARLY_PATCHES="cc_early")
    after = report["after_unapply"]
    assert {k: after[k] for k in UNPATCHED} == UNPATCHED
    assert after["kernel"].startswith("TypeError")


def test_a_raising_early_patch_is_isolated_and_its_hooks_discarded() -> None:
    report = start(CARDCAGE_EARLY_PATCHES="cc_early_broken,cc_early")
    assert report["early"]["plugins"]["cc_early_broken"][0] == "failed-register"
    # It armed a hook making is_cpu() return False before raising: that hook never applied,
    # so the constant is the one cc_early set, and is_cpu() itself is untouched.
    assert "cc_early_host.platform_info:is_cpu" not in patches(report)
    assert report["host"]["backend"] == "vendor-backend"  # the other early patch applied
    # Logged with its traceback on stderr (logging is not configured at interpreter start).
    assert "the broken early patch failed on purpose" in report["stderr"]
    assert "Traceback" in report["stderr"]
    assert "'cc_early_broken' (distribution cc-fixture-early)" in report["stderr"]
    assert "load_error" not in report  # not the selected platform's: never fatal


def test_a_misspelled_name_is_warned_about_with_a_suggestion() -> None:
    report = start(CARDCAGE_EARLY_PATCHES="cc_erly")
    assert report["early"]["plugins"]["cc_erly"][0] == "not-found"
    assert "Did you mean 'cc_early'?" in report["stderr"]
    assert report["host"]["device"] == "cpu"


def test_an_invalid_variable_is_a_typed_error_at_load_plugins() -> None:
    report = start(CARDCAGE_EARLY_PATCHES="cc_early cc_early_broken")
    assert report["load_error"]["type"] == "InvalidEnvVarError"
    assert "CARDCAGE_EARLY_PATCHES" in report["load_error"]["message"]
    assert report["host"]["device"] == "cpu"  # nothing ran
    assert "CARDCAGE_EARLY_PATCHES" in report["stderr"]


def test_the_selected_platforms_failing_early_patch_is_fatal_at_load_plugins() -> None:
    report = start(
        SGLANG_PLATFORM="vendor_a",
        CARDCAGE_EARLY_PATCHES="vendor_a_early",
        CC_FIXTURE_VENDOR_A_EARLY_FAIL="1",
    )
    error = report["load_error"]
    assert error["type"] == "EarlyPatchError"
    assert "PluginLoadError" in error["mro"]
    assert error["fields"] == {
        "plugin": "vendor_a_early",
        "distribution": "cc-fixture-vendor-a",
        "group": "cardcage.early_patches",
    }
    assert "vendor a early patch failed on purpose" in error["message"]
    assert "select another platform" in error["message"]


def test_another_platforms_failing_early_patch_is_isolated() -> None:
    report = start(
        SGLANG_PLATFORM="vendor_b",
        CARDCAGE_EARLY_PATCHES="vendor_a_early,cc_early",
        CC_FIXTURE_VENDOR_A_EARLY_FAIL="1",
    )
    assert "load_error" not in report
    assert report["selection"] == "cc-fixture-vendor-b"
    assert report["early"]["plugins"]["vendor_a_early"][0] == "failed-register"
    assert report["host"]["backend"] == "vendor-backend"


def test_the_selected_platforms_early_patch_applies_when_it_works() -> None:
    report = start(SGLANG_PLATFORM="vendor_a", CARDCAGE_EARLY_PATCHES="vendor_a_early")
    assert "load_error" not in report
    assert report["host"]["vendor"] == "vendor a"
