"""Scenarios: every vLLM release in the vLLM room's table hosts cardcage-built plugins (DESIGN §8).

Run by the nox session ``scenario-vllm``: vLLM 0.33.0's wheel (``--no-deps``) plus the light
packages its loader and selection import on CPU, the core, demo-cpu and the fixtures under
``tests_integration/fixtures/vllm``, each in its own ``--target`` site under
``$CC_SCENARIO_SITES``, composed per case on PYTHONPATH. Every other release of
``cardcage.platforms.hosts.vllm.releases.RELEASES`` is unpacked from its wheel into a site of its
own under ``$CC_VLLM_RELEASE_SITES``, and every case runs once per release with that site first
on PYTHONPATH: the releases swapped in one venv, as ``scenario-sglang-releases`` does. Each
case starts a fresh interpreter running vLLM's real ``load_general_plugins()`` and
``current_platform``, steered by real environment variables; nothing of vLLM is stubbed or
patched by the test.
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

import jsonschema
import pytest

from cardcage.platforms.hosts.vllm.releases import RELEASES, platform_names, release_for

PROBE = Path(__file__).with_name("probe.py")
SITES = Path(os.environ.get("CC_SCENARIO_SITES", "/nonexistent"))
RELEASE_SITES = Path(os.environ.get("CC_VLLM_RELEASE_SITES", "/nonexistent"))
#: The release the venv holds (the session installs it); the others come from their own sites.
VENV_RELEASE = "0.33.0"
#: The release the running case is about (set by the ``release`` fixture).
_release: list[str] = [VENV_RELEASE]
CARDCAGE = shutil.which("cardcage", path=str(Path(sys.executable).parent)) or "cardcage"
ALL = ["demo-cpu", "cc-fixture-vllm-hooks", "cc-fixture-vllm-broken", "cc-fixture-vllm-platform"]
ADAPTERS = "cardcage.platforms.hosts.vllm.adapter."
DEMO_CPU = "cardcage_demo_cpu.platform.DemoCpuSRTPlatform"
RESOLVE = "vllm.utils.import_utils.resolve_obj_by_qualname"
BASE_METHOD = "vllm.platforms.interface.Platform.is_sleep_mode_available"
DEFERRED = "vllm.platforms.zen_cpu.ZenCpuPlatform.is_zen_cpu"

pytestmark = pytest.mark.skipif(
    not SITES.is_dir(), reason="run through `nox -s scenario-vllm` (needs the vendor sites)"
)


@pytest.fixture(autouse=True, params=[r.version for r in RELEASES], ids=lambda v: f"vllm-{v}")
def release(request: pytest.FixtureRequest) -> str:
    """Every case runs on every release of the table: the venv's own, or one from its site."""
    version: str = request.param
    if version != VENV_RELEASE and not (RELEASE_SITES / version / "vllm").is_dir():
        pytest.fail(f"vLLM {version} is not unpacked under $CC_VLLM_RELEASE_SITES: run nox")
    _release[:] = [version]
    return version


def env(sites: list[str], extra: dict[str, str], release: str | None = None) -> dict[str, str]:
    clean = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("VLLM_", "SGLANG_", "CARDCAGE_", "CC_VLLM_")) and k != "PYTHONPATH"
    }
    version = release or _release[0]
    first = [] if version == VENV_RELEASE else [str(RELEASE_SITES / version)]
    clean["PYTHONPATH"] = os.pathsep.join([*first, *(str(SITES / s) for s in sites)])
    clean.update(extra)
    return clean


@functools.cache
def _start(
    release: str,
    sites: tuple[str, ...],
    steps: tuple[str, ...],
    extra: tuple[tuple[str, str], ...],
) -> str:
    done = subprocess.run(
        [sys.executable, str(PROBE), *steps],
        env=env(list(sites), dict(extra), release),
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
    key = (_release[0], tuple(sites), steps, tuple(sorted(extra.items())))
    report: dict[str, Any] = json.loads(_start(*key))
    return report


def step(report: dict[str, Any], name: str) -> dict[str, Any]:
    (found,) = [r for r in report["results"] if r["step"] == name]
    assert found["ok"], f"{found}\n{report['stderr'][-3000:]}"
    return found  # type: ignore[no-any-return]


def failed(report: dict[str, Any], name: str) -> dict[str, Any]:
    (found,) = [r for r in report["results"] if r["step"] == name]
    assert not found["ok"], found
    return found  # type: ignore[no-any-return]


# -- the release table ---------------------------------------------------------------------------


def test_the_release_table_says_what_this_vllm_release_is(release: str) -> None:
    found = step(start([], "release"), "release")
    assert found["version"] == release
    entry, supported = release_for(found["version"])
    assert (entry.version, supported) == (release, True)
    names = set(found["platform_names"])
    assert set(entry.platform_names_added) <= names
    assert platform_names(release) == {n for n in names if not n.startswith("_")}
    index = [r.version for r in RELEASES].index(release)
    for newer in RELEASES[index + 1 :]:  # the table is in release order
        assert not set(newer.platform_names_added) & names, newer
    assert found["cpu_config_raises_without_triton"] is entry.cpu_config_requires_triton
    assert found["removed_env_table"] is entry.rejects_removed_env
    refused = set(found["removed_env"]) | (
        {"VLLM_USE_V2_MODEL_RUNNER"} if found["refuses_v1_runner"] else set()
    )
    assert {rule.name for rule in entry.removed_env} == refused


# -- selection ---------------------------------------------------------------------------------


def test_vllm_selects_demo_cpus_adapter_and_its_device_layer_answers() -> None:
    platform = step(start(ALL, "load", "platform", "hooks", CARDCAGE_DEMO_CPU="1"), "platform")
    assert platform["class"].startswith(ADAPTERS)
    assert platform["vendor_class"] == DEMO_CPU
    assert platform["is_vllm_platform"]
    assert platform["enum_is_vllm_oot"]
    assert platform["out_of_tree"]
    assert not platform["is_unspecified"]
    # vLLM builds torch devices from device_name: it answers cardcage's device_type there, and
    # the vendor's name stays in get_device_name().
    assert (platform["device_name"], platform["device_type"]) == ("cpu", "cpu")
    # Class-level calls reach the vendor's instance methods; types are vLLM's.
    assert platform["has_device_capability"] is False
    assert platform["class_has_device_capability"] is False
    assert platform["capability_is_vllm_type"]
    assert platform["cpu_arch_is_vllm_enum"]
    assert platform["total_memory"] == platform["class_total_memory"] > 0
    # demo-cpu's get_device_name() starts with its device_name, which under vLLM is the torch
    # device type (vLLM builds torch devices from it), then names the host's CPU.
    assert platform["device_name_of_0"].startswith("cpu ")
    assert platform["dist_backend"] == "gloo"  # from get_torch_distributed_backend_str()
    assert platform["supported_quantization"] == []
    # demo-cpu's vLLM section declares CPU-like: vLLM's CpuPlatform answers what demo-cpu does
    # not (the kernels this CPU's instruction set runs), is_cpu() is True for vLLM's branches
    # and the platform stays out of tree. The section's own methods come first and chain to
    # CpuPlatform's; the config step, the worker and the attention backend they answer need a
    # real VllmConfig and vLLM's kernels: scenario-vllm-engine checks them in vLLM's engine.
    assert platform["vllm_bases"][0] == "vllm.platforms.cpu.CpuPlatform"
    assert platform["is_cpu"]
    assert platform["kernels_from"] == "vllm.platforms.cpu.CpuPlatform.import_kernels"
    section = "cardcage_demo_cpu.vllm_section.DemoCpuVllmSection"
    assert platform["attn_backend_defined_by"] == section
    assert platform["dispatch_key"] == "CPU"
    # A vLLM-only name the vendor left alone answers as vLLM's base does (here CpuPlatform).
    assert platform["device_control_env_var"] == platform["base_device_control_env_var"]


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


def test_a_bad_opt_in_is_our_typed_error_which_vllm_logs_and_falls_back_from(release: str) -> None:
    report = start(ALL, "platform", CARDCAGE_DEMO_CPU="yes")
    assert step(report, "platform")["class"] == "vllm.platforms.interface.UnspecifiedPlatform"
    # The probe logs at INFO: what vLLM logs at WARNING shows, what it logs at DEBUG does not.
    shown = release_for(release)[0].activate_failure_level == "WARNING"
    assert ("InvalidEnvVarError" in report["stderr"]) is shown
    assert ("CARDCAGE_DEMO_CPU" in report["stderr"]) is shown


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
    assert hooks["pending"] == {DEFERRED: "vllm.platforms.zen_cpu"}
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


# -- the cardcage command on the vLLM runtime, against vLLM's own choice -------------------------


def cardcage(sites: list[str], *args: str, **extra: str) -> dict[str, Any]:
    """``cardcage ARGS --runtime vllm --json`` in a fresh process, its document validated."""
    from cardcage.platforms.diagnostics import load_schema

    done = subprocess.run(
        [CARDCAGE, *args, "--runtime", "vllm", "--json"],
        env=env(sites, extra),
        capture_output=True,
        text=True,
        check=False,
    )
    try:
        document: dict[str, Any] = json.loads(done.stdout)
    except json.JSONDecodeError:
        pytest.fail(f"cardcage {' '.join(args)} -> {done.returncode}\n{done.stderr[-3000:]}")
    jsonschema.Draft202012Validator(load_schema(args[0])).validate(document)
    return document


def test_cardcage_platform_names_what_vllms_current_platform_selected() -> None:
    platform = step(start(ALL, "platform", CARDCAGE_DEMO_CPU="1"), "platform")
    document = cardcage(ALL, "platform", CARDCAGE_DEMO_CPU="1")
    selection = document["selection"]
    assert selection["platform"] == platform["class"]
    assert selection["platform"].startswith(ADAPTERS)
    assert (selection["plugin"], selection["distribution"]) == ("demo_cpu", "cardcage-demo-cpu")
    # What vLLM's platform answers: device_name is the torch device type under vLLM.
    assert (selection["device_name"], selection["enum"]) == ("cpu", "OOT")
    assert selection["reason"].startswith("vLLM's own selection")
    assert "chose otherwise" not in selection["reason"]


# Each layout: the probe's environment, and vLLM's class (None: vLLM's selection raises).
LAYOUTS = {
    "demo-cpu opts in": ({"CARDCAGE_DEMO_CPU": "1"}, "adapter"),
    "nothing activates": ({}, "vllm.platforms.interface.UnspecifiedPlatform"),
    "cpu target": (
        {"CARDCAGE_DEMO_CPU": "1", "VLLM_TARGET_DEVICE": "cpu"},
        "vllm.platforms.cpu.CpuPlatform",
    ),
    "allowlist drops it": (
        {"CARDCAGE_DEMO_CPU": "1", "VLLM_PLUGINS": "cc_vllm_hooks"},
        "vllm.platforms.interface.UnspecifiedPlatform",
    ),
    "two activate": ({"CARDCAGE_DEMO_CPU": "1", "CC_VLLM_PLATFORM": "ok"}, None),
    "a colon qualname": ({"CC_VLLM_PLATFORM": "colon"}, None),
}


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_doctors_prediction_agrees_with_vllms_own_choice(layout: str) -> None:
    extra, expected = LAYOUTS[layout]
    report = start(ALL, "platform", **extra)
    (result,) = [r for r in report["results"] if r["step"] == "platform"]
    doctor = cardcage(ALL, "doctor", **extra)
    (startup,) = doctor["startup"]
    codes = {f["code"] for f in doctor["findings"]}
    if expected is None:  # vLLM's selection raises; doctor says it fails
        assert not result["ok"]
        assert startup["selection_fails"], startup
        assert codes & {"multiple-platforms", "vllm-colon-qualname"}, codes
        return
    assert result["ok"], result
    vllm_class = result["class"]
    if expected == "adapter":
        assert vllm_class.startswith(ADAPTERS)
        assert startup["platform"]["qualname"] == vllm_class
        assert startup["platform"]["plugin"] == "demo_cpu"
        # doctor says what vLLM logs before its handlers exist, and reads demo-cpu's section
        # (CPU-like for vLLM) as vLLM's adapter does: no SIGILL warning.
        (selects,) = [f for f in doctor["findings"] if f["code"] == "vllm-selects"]
        assert selects["plugin"] == "demo_cpu"
        assert "vllm-cpu-like-undeclared" not in codes
    elif expected == "vllm.platforms.cpu.CpuPlatform":
        assert vllm_class == expected
        assert startup["builtin"] == "cpu"
        assert "vllm-target-device-hides-platforms" in codes
    else:
        assert vllm_class == expected
        # No plugin activates: vLLM's own built-in detection decided, as doctor says it would.
        assert startup["platform"] is None
        assert startup["known"] is False
    if layout == "allowlist drops it":
        assert "vllm-allowlist-drops-platform" in codes


def test_cardcage_hooks_runs_vllms_own_loader_and_lists_what_it_applied() -> None:
    document = cardcage(ALL, "hooks", CARDCAGE_DEMO_CPU="1")
    rows = {(h["target"], h["plugin"]): h["status"] for h in document["hooks"]}
    assert rows[(RESOLVE, "demo_cpu")] == "applied"
    statuses = {p["name"]: p["status"] for p in document["plugins"]}
    assert statuses["demo_cpu"] == "executed"
    assert statuses["cc_vllm_broken"] == "failed-register"  # isolated by @general_plugin
    assert document["ok"] is True
