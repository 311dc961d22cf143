"""The vLLM runtime without vLLM: ``cardcage ... --runtime vllm`` predicts by vLLM's rules.

Real fixture distributions with vLLM's entry-point groups (``cli_support.Site``), a real
``cardcage`` subprocess, and no vLLM anywhere: nothing of vLLM is stubbed, so every answer here
comes from metadata and the plugins' own code, run as vLLM would run it. ``scenario-vllm`` checks
the same predictions against vLLM 0.33's own choice.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from cli_support import Site, validate

PLATFORMS = "vllm.platform_plugins"
PLUGINS = "vllm.general_plugins"
ADAPTERS = "cardcage.platforms.hosts.vllm.adapter."

#: A cardcage platform distribution for vLLM, opted in by CCFIX_<NAME>=1; ``colon`` answers the
#: class in module:Class form instead of asking the host.
PLATFORM = """
import os

from cardcage.platforms.device_mixin import PlatformEnum
from cardcage.platforms.host import host_qualname
from cardcage.platforms.interface import SRTPlatform


class {cls}(SRTPlatform):
    _enum = PlatformEnum.OOT
    device_name = "{device}"
    device_type = "cpu"


def activate():
    mode = os.environ.get("CCFIX_{upper}", "")
    if mode == "raise":
        raise RuntimeError("driver exploded")
    if not mode:
        return None
    name = "{module}:{cls}"
    return name if mode == "colon" else host_qualname(name)
"""

#: The general plugin of the same distribution: reports what host it sees, hooks a vLLM name.
OWN_PLUGIN = """
import os

from cardcage.hooks import general_plugin
from cardcage.hooks.host import plugin_host
from cardcage.hooks.registry import HookRegistry, HookType
from cardcage.platforms.host import selected_by_vllm

SEEN = []


@general_plugin
def register():
    if os.environ.get("CCFIX_OWN_BROKEN"):
        raise RuntimeError("own plugin broken")
    if plugin_host() is not None and plugin_host().value == "vllm":
        if selected_by_vllm("{module}:{cls}"):
            HookRegistry.register(
                "vllm.engine.arg_utils.EngineArgs.add_cli_args",
                lambda result, *a, **k: result,
                HookType.AFTER,
            )
"""

BARE_RAISING = """
def register():
    raise RuntimeError("third-party plugin broken")
"""

WRAPPED_RAISING = """
from cardcage.hooks import general_plugin


@general_plugin
def register():
    raise RuntimeError("third-party plugin broken")
"""

SGLANG_HOOK = """
from cardcage.hooks.registry import HookRegistry


def register():
    HookRegistry.register("sglang.srt.utils.common.get_device_memory_capacity", print)
"""

QUIET = """
def register():
    pass
"""


def vendor(site: Site, name: str) -> str:
    """Distribution ``cc-<name>``: platform and general plugin ``<name>`` in vLLM's groups."""
    package = f"ccvllm_{name}"
    module = f"{package}.platform"
    cls = f"{name.capitalize()}Platform"
    fields = {"module": module, "cls": cls, "device": name, "upper": name.upper()}
    site.add(
        f"cc-{name}",
        entry_points={
            PLATFORMS: {name: f"{module}:activate"},
            PLUGINS: {name: f"{package}.hooks:register"},
        },
        modules={
            module: site.touching(name, PLATFORM.format(**fields)),
            f"{package}.hooks": OWN_PLUGIN.format(**fields),
        },
    )
    return f"{module}:{cls}"


def general(site: Site, name: str, source: str) -> None:
    module = f"ccvllm_general_{name}"
    site.add(f"cc-general-{name}", entry_points={PLUGINS: {name: f"{module}:register"}},
             modules={module: source})  # fmt: skip


@pytest.fixture
def site(tmp_path: Path) -> Site:
    return Site(tmp_path / "site")


def run_json(site: Site, *args: str, **env: str) -> dict[str, Any]:
    result = site.run(*args, "--runtime", "vllm", "--json", env=env)
    document: dict[str, Any] = result.json()
    validate(args[0], document)
    return document


def findings(document: dict[str, Any], code: str) -> list[dict[str, Any]]:
    return [f for f in document["findings"] if f["code"] == code]


# -- cardcage platform -------------------------------------------------------------------------


def test_the_one_activating_plugin_is_predicted_as_the_adapter_vllm_resolves(site: Site) -> None:
    vendor(site, "alpha")
    document = run_json(site, "platform", CCFIX_ALPHA="1")
    (runtime,) = document["runtimes"]
    selection = runtime["selection"]
    assert runtime["runtime"] == "vllm"
    assert runtime["mode"] == "automatic"
    assert runtime["selector_env"] == "VLLM_TARGET_DEVICE"
    assert selection["platform"].startswith(ADAPTERS)
    assert "AlphaPlatform" in selection["platform"]
    assert (selection["plugin"], selection["distribution"]) == ("alpha", "cc-alpha")
    assert (selection["device_name"], selection["enum"]) == ("alpha", "OOT")
    assert "vLLM is not installed" in selection["reason"]


def test_no_activating_plugin_leaves_it_to_vllms_built_ins(site: Site) -> None:
    vendor(site, "alpha")
    selection = run_json(site, "platform")["selection"]
    assert selection["platform"] == "vllm.platforms.interface.UnspecifiedPlatform"
    assert {c["name"]: c["outcome"] for c in selection["candidates"]}["alpha"] == "declined"
    doctor = run_json(site, "doctor")
    (startup,) = doctor["startup"]
    assert startup["known"] is False
    assert "built-in detection" in startup["detail"]
    assert doctor["ok"] is True


def test_target_device_cpu_selects_the_cpu_built_in_without_importing_a_plugin(
    site: Site,
) -> None:
    vendor(site, "alpha")
    document = run_json(site, "platform", CCFIX_ALPHA="1", VLLM_TARGET_DEVICE="CPU")
    assert document["mode"] == "explicit"
    assert document["selector"] == "CPU"
    assert document["selection"]["platform"] == "vllm.platforms.cpu.CpuPlatform"
    assert document["selection"]["builtin"] == "cpu"
    assert not site.marker("alpha").exists(), "vLLM loads no platform plugin for a cpu target"
    doctor = run_json(site, "doctor", CCFIX_ALPHA="1", VLLM_TARGET_DEVICE="cpu")
    (hidden,) = findings(doctor, "vllm-target-device-hides-platforms")
    assert hidden["severity"] == "warning"
    assert hidden["plugin"] == "alpha"
    assert doctor["startup"][0]["builtin"] == "cpu"


def test_an_allowlist_naming_only_a_general_plugin_drops_the_platform(site: Site) -> None:
    vendor(site, "alpha")
    general(site, "quiet", QUIET)
    env = {"CCFIX_ALPHA": "1", "VLLM_PLUGINS": "quiet"}
    selection = run_json(site, "platform", **env)["selection"]
    assert selection["platform"] == "vllm.platforms.interface.UnspecifiedPlatform"
    (dropped,) = findings(run_json(site, "doctor", **env), "vllm-allowlist-drops-platform")
    assert dropped["plugin"] == "alpha"
    assert "VLLM_PLUGINS" in dropped["fix"]
    rows = {
        (r["group"], r["name"]): r["status"]
        for r in run_json(site, "plugins", "list", **env)["plugins"]
    }
    assert rows[(PLATFORMS, "alpha")] == "not-allowed"
    assert rows[(PLUGINS, "quiet")] == "allowed"


def test_vllm_does_not_strip_its_allowlist_and_doctor_says_so(site: Site) -> None:
    vendor(site, "alpha")
    doctor = run_json(site, "doctor", CCFIX_ALPHA="1", VLLM_PLUGINS="alpha, alpha")
    (unmatched,) = findings(doctor, "allowlist-unmatched")
    assert "does not strip" in unmatched["message"]


def test_two_activating_plugins_are_vllms_runtime_error(site: Site) -> None:
    vendor(site, "alpha")
    vendor(site, "beta")
    env = {"CCFIX_ALPHA": "1", "CCFIX_BETA": "1"}
    platform = run_json(site, "platform", **env)
    assert platform["ok"] is False
    assert "only one platform plugin" in platform["error"]["message"]
    doctor = run_json(site, "doctor", **env)
    (multiple,) = findings(doctor, "multiple-platforms")
    assert multiple["severity"] == "error"
    assert {d["name"] for d in multiple["distributions"]} == {"cc-alpha", "cc-beta"}
    assert doctor["startup"][0]["known"] is False
    assert doctor["startup"][0]["selection_fails"]


def test_a_colon_spelled_qualname_is_flagged_as_what_vllm_cannot_resolve(site: Site) -> None:
    vendor(site, "alpha")
    doctor = run_json(site, "doctor", CCFIX_ALPHA="colon")
    (colon,) = findings(doctor, "vllm-colon-qualname")
    assert colon["severity"] == "error"
    assert "last dot" in colon["message"]
    assert "host_qualname" in colon["fix"]
    assert doctor["startup"][0]["selection_fails"] is True
    platform = run_json(site, "platform", CCFIX_ALPHA="colon")
    assert platform["error"]["type"] == "InvalidPlatformClassError"
    assert platform["error"]["plugin"] == "alpha"


def test_a_raising_activate_is_a_silent_fallback_under_vllm(site: Site) -> None:
    vendor(site, "alpha")
    platform = run_json(site, "platform", CCFIX_ALPHA="raise")
    assert platform["selection"]["platform"] == "vllm.platforms.interface.UnspecifiedPlatform"
    candidates = {c["name"]: c for c in platform["selection"]["candidates"]}
    assert "WARNING" in candidates["alpha"]["detail"]
    (failed,) = findings(
        run_json(site, "doctor", CCFIX_ALPHA="raise"), "platform-activation-failed"
    )
    assert failed["severity"] == "error"
    assert "falls back" in failed["message"]


# -- general plugins ---------------------------------------------------------------------------


def test_a_bare_raising_register_aborts_vllm_and_the_plugins_after_it(site: Site) -> None:
    general(site, "aa_broken", BARE_RAISING)
    general(site, "zz_quiet", QUIET)
    (failed,) = findings(run_json(site, "doctor"), "plugin-register-failed")
    assert failed["severity"] == "error"
    assert failed["plugin"] == "aa_broken"
    assert "does not catch" in failed["message"]
    # vLLM's order is the metadata's: the plugins after it are named, when there are any.
    order = [r["name"] for r in run_json(site, "hooks")["plugins"]]
    later = order[order.index("aa_broken") + 1 :]
    assert all(repr(name) in failed["message"] for name in later)
    assert "@cardcage.hooks.general_plugin" in failed["fix"]


def test_a_decorated_third_party_failure_is_isolated_and_the_platforms_own_is_not(
    site: Site,
) -> None:
    vendor(site, "alpha")
    general(site, "wrapped", WRAPPED_RAISING)
    (third,) = findings(run_json(site, "doctor", CCFIX_ALPHA="1"), "plugin-register-failed")
    assert third["severity"] == "warning"
    assert third["plugin"] == "wrapped"
    doctor = run_json(site, "doctor", CCFIX_ALPHA="1", CCFIX_OWN_BROKEN="1")
    own = [f for f in findings(doctor, "plugin-register-failed") if f["plugin"] == "alpha"]
    assert own[0]["severity"] == "error"
    assert "PluginLoadError" in own[0]["message"]


def test_hooks_a_plugin_registers_under_vllm_are_rehearsed_with_vllm_as_the_host(
    site: Site,
) -> None:
    vendor(site, "alpha")
    hooks = run_json(site, "hooks", CCFIX_ALPHA="1")
    (row,) = hooks["hooks"]
    assert row["target"] == "vllm.engine.arg_utils.EngineArgs.add_cli_args"
    assert (row["plugin"], row["distribution"]) == ("alpha", "cc-alpha")
    assert {p["name"]: p["status"] for p in hooks["plugins"]}["alpha"] == "executed"
    # Not selected by vLLM: the plugin's own check (selected_by_vllm) keeps its hook out.
    assert run_json(site, "hooks")["hooks"] == []


def test_a_hook_vllm_never_applies_is_flagged(site: Site) -> None:
    general(site, "sglangish", SGLANG_HOOK)
    (dead,) = findings(run_json(site, "doctor"), "vllm-hooks-never-applied")
    assert dead["severity"] == "warning"
    assert "sglang.srt.utils.common" in dead["message"]


# -- plugins list and presence -----------------------------------------------------------------


def test_every_group_vllm_reads_is_listed_with_vllms_statuses(site: Site) -> None:
    site.add(
        "cc-extras",
        entry_points={
            "vllm.io_processor_plugins": {"proc": "ccvllm_extras:proc"},
            "vllm.stat_logger_plugins": {"stats": "ccvllm_extras:stats"},
            "vllm.endpoint_plugins": {"route": "ccvllm_extras:route"},
        },
        modules={"ccvllm_extras": site.touching("extras")},
    )
    listing = run_json(site, "plugins", "list")
    rows = {r["group"]: r for r in listing["plugins"]}
    assert rows["vllm.endpoint_plugins"]["status"] == "not-allowed"
    assert rows["vllm.io_processor_plugins"]["status"] == "allowed"
    assert {r["runtime"] for r in rows.values()} == {"vllm"}
    assert listing["groups"][:2] == [PLATFORMS, PLUGINS]
    named = run_json(site, "plugins", "list", VLLM_PLUGINS="route")
    assert {r["group"]: r["status"] for r in named["plugins"]}["vllm.endpoint_plugins"] == (
        "allowed"
    )
    assert not site.marker("extras").exists(), "plugins list imports no plugin"


def test_without_vllm_the_default_commands_leave_the_vllm_runtime_out(site: Site) -> None:
    vendor(site, "alpha")
    result = site.run("platform", "--json")
    assert [r["runtime"] for r in result.json()["runtimes"]] == ["srt"]
    doctor = site.run("doctor", "--json").json()
    assert "vllm" not in doctor["checked"]["profiles"]
