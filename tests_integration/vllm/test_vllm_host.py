"""Scenarios: vLLM 0.33 hosts cardcage-built plugins, with vLLM's own code (DESIGN §8).

Run by the nox session ``scenario-vllm``: vLLM's wheel (``--no-deps``) plus the light packages its
loader and selection import on CPU, the core, demo-cpu and the fixtures under
``tests_integration/fixtures/vllm``, each in its own ``--target`` site under
``$CC_SCENARIO_SITES``, composed per case on PYTHONPATH. Each case starts a fresh interpreter
running vLLM's real ``load_general_plugins()`` and ``current_platform``, steered by real
environment variables; nothing of vLLM is stubbed or patched by the test.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

PROBE = Path(__file__).with_name("probe.py")
SITES = Path(os.environ.get("CC_SCENARIO_SITES", "/nonexistent"))
CARDCAGE = shutil.which("cardcage", path=str(Path(sys.executable).parent)) or "cardcage"
ALL = ["demo-cpu", "cc-fixture-vllm-hooks", "cc-fixture-vllm-broken", "cc-fixture-vllm-platform"]
ADAPTERS = "cardcage.platforms.hosts.vllm.adapter."
DEMO_CPU = "cardcage_demo_cpu.platform.DemoCpuSRTPlatform"
RESOLVE = "vllm.utils.import_utils.resolve_obj_by_qualname"
BASE_METHOD = "vllm.platforms.interface.Platform.is_sleep_mode_available"
DEFERRED = "vllm.platforms.cpu.CpuPlatform.get_device_total_memory"

pytestmark = pytest.mark.skipif(
    not SITES.is_dir(), reason="run through `nox -s scenario-vllm` (needs the vendor sites)"
)


def env(sites: list[str], extra: dict[str, str]) -> dict[str, str]:
    clean = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("VLLM_", "SGLANG_", "CARDCAGE_", "CC_VLLM_")) and k != "PYTHONPATH"
    }
    clean["PYTHONPATH"] = os.pathsep.join(str(SITES / s) for s in sites)
    clean.update(extra)
    return clean


@functools.cache
def _start(
    sites: tuple[str, ...], steps: tuple[str, ...], extra: tuple[tuple[str, str], ...]
) -> str:
    done = subprocess.run(
        [sys.executable, str(PROBE), *steps],
        env=env(list(sites), dict(extra)),
        capture_output=True,
        text=True,
        check=False,
    )
    if not done.stdout.strip():
        pytest.fail(f"probe crashed (exit status {done.returncode}):\n{done.stderr}")
    report = json.loads(done.stdout)
    report["stderr"] = done.stderr
    return json.dumps(report)


def start(sites: list[str], *steps: str, **extra: str) -> dict[str, Any]:
    """The probe's report for ``steps`` in a fresh vLLM process (shared by identical cases)."""
    report: dict[str, Any] = json.loads(_start(tuple(sites), steps, tuple(sorted(extra.items()))))
    return report


def step(report: dict[str, Any], name: str) -> dict[str, Any]:
    (found,) = [r for r in report["results"] if r["step"] == name]
    assert found["ok"], f"{found}\n{report['stderr'][-3000:]}"
    return found  # type: ignore[no-any-return]


def failed(report: dict[str, Any], name: str) -> dict[str, Any]:
    (found,) = [r for r in report["results"] if r["step"] == name]
    assert not found["ok"], found
    return found  # type: ignore[no-any-return]


# -- selection ---------------------------------------------------------------------------------


def test_vllm_selects_demo_cpus_adapter_and_its_device_layer_answers() -> None:
    platform = step(start(ALL, "load", "platform", "hooks", CARDCAGE_DEMO_CPU="1"), "platform")
    assert platform["class"].startswith(ADAPTERS)
    assert platform["vendor_class"] == DEMO_CPU
    assert platform["is_vllm_platform"]
    assert platform["enum_is_vllm_oot"]
    assert platform["out_of_tree"]
    assert not platform["is_unspecified"]
    assert (platform["device_name"], platform["device_type"]) == ("demo_cpu", "cpu")
    # Class-level calls reach the vendor's instance methods; types are vLLM's.
    assert platform["has_device_capability"] is False
    assert platform["class_has_device_capability"] is False
    assert platform["capability_is_vllm_type"]
    assert platform["cpu_arch_is_vllm_enum"]
    assert platform["total_memory"] == platform["class_total_memory"] > 0
    assert platform["device_name_of_0"].startswith("demo_cpu")
    assert platform["dist_backend"] == "gloo"  # from get_torch_distributed_backend_str()
    assert platform["supported_quantization"] == []
    # demo-cpu's vLLM section.
    assert platform["attn_backend"] == "vllm.v1.attention.backends.cpu_attn.CPUAttentionBackend"
    assert platform["worker_cls"] == "vllm.v1.worker.cpu_worker.CPUWorker"
    assert platform["dispatch_key"] == "CPU"
    # A vLLM-only name the vendor left alone answers as vLLM's base does.
    assert platform["device_control_env_var"] == "VLLM_DEVICE_CONTROL_ENV_VAR_PLACEHOLDER"


def test_without_the_opt_in_vllm_falls_back_and_demo_cpu_registers_nothing() -> None:
    report = start(ALL, "load", "platform", "hooks")
    assert step(report, "platform")["class"] == "vllm.platforms.interface.UnspecifiedPlatform"
    assert RESOLVE not in step(report, "hooks")["registrations"]
    assert "cardcage_demo_cpu.platform" not in report["modules"]


def test_vllm_target_device_cpu_never_loads_an_out_of_tree_platform() -> None:
    report = start(ALL, "platform", CARDCAGE_DEMO_CPU="1", VLLM_TARGET_DEVICE="cpu")
    assert step(report, "platform")["class"] == "vllm.platforms.cpu.CpuPlatform"
    assert "cardcage_demo_cpu" not in report["modules"]


def test_an_allowlist_without_the_platform_drops_it_as_vllm_does() -> None:
    report = start(ALL, "platform", CARDCAGE_DEMO_CPU="1", VLLM_PLUGINS="cc_vllm_hooks")
    assert step(report, "platform")["class"] == "vllm.platforms.interface.UnspecifiedPlatform"
    report = start(ALL, "platform", CARDCAGE_DEMO_CPU="1", VLLM_PLUGINS="demo_cpu")
    assert step(report, "platform")["vendor_class"] == DEMO_CPU


def test_two_activating_platforms_are_vllms_runtime_error() -> None:
    report = start(ALL, "platform", CARDCAGE_DEMO_CPU="1", CC_VLLM_PLATFORM="ok")
    assert "Only one platform plugin can be activated" in failed(report, "platform")["error"]


def test_a_bad_opt_in_is_our_typed_error_which_vllm_logs_and_falls_back_from() -> None:
    report = start(ALL, "platform", CARDCAGE_DEMO_CPU="yes")
    assert step(report, "platform")["class"] == "vllm.platforms.interface.UnspecifiedPlatform"
    assert "InvalidEnvVarError" in report["stderr"]
    assert "CARDCAGE_DEMO_CPU" in report["stderr"]


def test_a_colon_spelled_qualname_is_what_vllm_cannot_resolve() -> None:
    report = start(ALL, "platform", CC_VLLM_PLATFORM="colon")
    assert "current_platform" in failed(report, "platform")["error"]


# -- hooks under vLLM's loader -------------------------------------------------------------------


def test_hooks_take_effect_under_vllms_loader_attributed_and_without_an_apply_call() -> None:
    report = start(ALL, "load", "platform", "hooks", CARDCAGE_DEMO_CPU="1")
    hooks = step(report, "hooks")
    assert hooks["registrations"][RESOLVE] == [["AROUND", ["demo_cpu", "cardcage-demo-cpu"]]]
    assert hooks["registrations"][BASE_METHOD] == [
        ["AFTER", ["cc_vllm_hooks", "cc-fixture-vllm-hooks"]]  # registered at import
    ]
    assert RESOLVE in hooks["applied"]
    assert BASE_METHOD in hooks["applied"]
    # The deferred target waited for its module, and was patched on its first import.
    assert hooks["pending"] == {DEFERRED: "vllm.platforms.cpu"}
    assert DEFERRED in hooks["applied_after_import"]
    assert hooks["fixture_calls"] == [BASE_METHOD, DEFERRED]
    # Called through vllm.platforms' own `from ... import` copy: propagation rebound it.
    assert hooks["demo_cpu_calls"] == {RESOLVE: 1}
    assert "vLLM resolved vllm.platforms.interface.Platform" in report["stderr"]


def test_a_broken_third_party_plugin_is_isolated_and_its_hook_withdrawn() -> None:
    report = start(ALL, "load", "platform", "hooks", CARDCAGE_DEMO_CPU="1")
    assert step(report, "load")["plugins_loaded"] is True
    hooks = step(report, "hooks")
    assert all(
        source != ["cc_vllm_broken", "cc-fixture-vllm-broken"]
        for records in hooks["registrations"].values()
        for _, source in records
    )
    assert (
        "plugin=cc_vllm_broken, dist=cc-fixture-vllm-broken failed in register()"
        in (report["stderr"])
    )
    assert "deliberately broken" in report["stderr"]


def test_a_failure_of_the_selected_platforms_own_plugin_is_never_hidden() -> None:
    report = start(ALL, "load", CC_VLLM_PLATFORM="broken-register")
    error = failed(report, "load")
    assert error["error_type"] == "cardcage.hooks.errors.PluginLoadError"
    assert error["fields"] == {
        "group": "vllm.general_plugins",
        "plugin": "cc_vllm_platform",
        "distribution": "cc-fixture-vllm-platform",
    }
