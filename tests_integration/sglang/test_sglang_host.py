"""Scenarios: SGLang 0.5.23 hosts cardcage-built plugins, with SGLang's own code (DESIGN §8).

Run by the nox session ``scenario-sglang`` (see ``sglang_scenario.py`` for the layout). Each case
starts fresh interpreters running SGLang's real selection (``sglang.srt.platforms``,
``sglang.multimodal_gen.runtime.platforms``) and its real plugin loaders, steered by real
environment variables; nothing of SGLang is stubbed or patched by the test.
"""

from __future__ import annotations

import re
from typing import Any

import jsonschema
import pytest
from sglang_scenario import (
    ALL_VENDORS,
    NATIVE,
    cardcage_json,
    needs_no_gpu,
    needs_sites,
    start,
    start_diffusion,
    start_srt,
    step,
)

from cardcage.platforms.diagnostics import load_schema

pytestmark = needs_sites

SRT_BASE = "sglang.srt.platforms.interface:SRTPlatform"
DIFFUSION_BASE = "sglang.multimodal_gen.runtime.platforms.interface:Platform"
DEMO_CPU_SRT = "cardcage_demo_cpu.platform:DemoCpuSRTPlatform"
DEMO_CPU_DIFFUSION = "cardcage_demo_cpu.diffusion.platform:DemoCpuPlatform"
ADAPTERS = "cardcage.platforms.hosts.sglang.adapter."
OVERRIDE = "SGLANG_DIFFUSION_PLATFORM_OVERRIDE"
DEVICE_MEMORY = "sglang.srt.utils.common.get_device_memory_capacity"
DISPATCH_FORWARD = "sglang.multimodal_gen.runtime.layers.custom_op.CustomOp.dispatch_forward"
SILU_DISPATCH = "sglang.multimodal_gen.runtime.layers.activation.SiluAndMul -> forward_oot"
DEMO_CPU_SOURCE = ["demo_cpu", "cardcage-demo-cpu"]
SILU_OF_ONE = 0.7310585975646973  # silu(1) * 1: SiluAndMul of ones


def modules_of(report: dict[str, Any], *packages: str) -> list[str]:
    """The modules of ``packages`` (and their submodules) that reached ``sys.modules``."""
    return [m for m in report["modules"] if m.split(".")[0] in packages or m in packages]


def assert_demo_cpu_selected(platform: dict[str, Any], base: str, vendor: str) -> None:
    """``platform`` is demo-cpu's adapter as SGLang insists: its base, OOT, the vendor's class."""
    assert platform["class"].startswith(ADAPTERS)
    assert platform["instance_of"][base] is True
    assert platform["instance_of"][vendor] is True
    assert platform["vendor_class"] == vendor.replace(":", ".")
    assert platform["out_of_tree"] is True
    assert platform["enum_is_sglang_oot"] is True
    assert platform["device_name"] == "demo_cpu"
    assert platform["device_type"] == "cpu"


# -- SRT selection (sglang.srt.platforms) ------------------------------------------------------


def test_sglang_platform_names_demo_cpu_and_import_sglang_selects_its_adapter() -> None:
    report = start_srt(ALL_VENDORS, SGLANG_PLATFORM="demo_cpu")
    assert step(report, "import")["version"] == "0.5.23"
    srt = step(report, "srt")
    assert_demo_cpu_selected(srt, SRT_BASE, DEMO_CPU_SRT)
    assert srt["enum"] == "sglang.srt.platforms.device_mixin.PlatformEnum.OOT"
    # Explicit selection loads only the named entry point: the other platforms stay unimported.
    assert modules_of(report, "cardcage_demo_cuda", "cc_plat_sglang_native") == []


@needs_no_gpu
def test_automatic_selection_picks_demo_cpu_with_its_opt_in() -> None:
    report = start_srt(ALL_VENDORS, CARDCAGE_DEMO_CPU="1")
    assert_demo_cpu_selected(step(report, "srt"), SRT_BASE, DEMO_CPU_SRT)
    # SGLang's automatic mode called every activate(); the others declined.
    assert "cardcage_demo_cuda" in report["modules"]
    assert "cc_plat_sglang_native" in report["modules"]
    assert "cc_plat_sglang_native.platform" not in report["modules"]


@needs_no_gpu
def test_without_the_opt_in_sglang_falls_back_to_its_base_platform() -> None:
    report = start(ALL_VENDORS, "import", "srt")
    srt = step(report, "srt")
    assert srt["class"] == SRT_BASE.replace(":", ".")
    assert srt["out_of_tree"] is False
    assert srt["instance_of"][DEMO_CPU_SRT] is False
    # demo-cpu's activate() declined: its platform class was never resolved.
    assert "cardcage_demo_cpu.platform" not in report["modules"]


# -- diffusion selection (sglang.multimodal_gen.runtime.platforms) ----------------------------


@pytest.mark.parametrize(
    "opt_in", [{OVERRIDE: "demo_cpu"}, {"CARDCAGE_DEMO_CPU": "1"}], ids=["override", "automatic"]
)
@needs_no_gpu
def test_multimodal_gen_selects_demo_cpus_adapter(opt_in: dict[str, str]) -> None:
    report = start_diffusion(ALL_VENDORS, **opt_in)
    diffusion = step(report, "diffusion")
    assert_demo_cpu_selected(diffusion, DIFFUSION_BASE, DEMO_CPU_DIFFUSION)
    assert diffusion["enum"] == "sglang.multimodal_gen.runtime.platforms.interface.PlatformEnum.OOT"
    assert diffusion["selected_dist"] == "cardcage-demo-cpu"
    assert diffusion["selected_plugin"] == "demo_cpu"


# -- SGLang's plugin loaders run demo-cpu's general plugins -----------------------------------


def test_sglang_load_plugins_applies_demo_cpus_hook_attributed_to_it() -> None:
    report = start_srt(ALL_VENDORS, SGLANG_PLATFORM="demo_cpu")
    load = step(report, "srt-load")
    # The hooked SGLang function, called once after load_plugins(), went through the hook.
    assert report["demo_cpu_calls"] == {DEVICE_MEMORY: 1}
    # MiB, from demo-cpu's get_device_total_memory(): SGLang asks an OOT platform for it.
    assert step(report, "srt-call")["device_memory_capacity"] > 0
    # In SGLang's own registry, attributed to the plugin by SGLang's HookSource, and applied.
    assert load["hooks"] == {
        DEVICE_MEMORY: [
            {
                "hook": "cardcage_demo_cpu.hooks.time_device_memory_query",
                "type": "AROUND",
                "source": DEMO_CPU_SOURCE,
            }
        ]
    }
    assert load["patched"] == [DEVICE_MEMORY]
    assert "Executed general plugin: demo_cpu" in report["stderr"]


IMPORT_TIME = "cc-fixture-import-time-hooks"


def test_a_hook_registered_at_import_reaches_sglang_attributed_to_its_plugin() -> None:
    # The seed's @plugin_hook at module level: SGLang's SRT loader imports the plugin before it
    # sets its plugin-source variable, and the hook must still land in SGLang's registry.
    report = start(
        ["demo-cpu", IMPORT_TIME], "import", "srt", "srt-load", "srt-call",
        SGLANG_PLATFORM="demo_cpu",
    )  # fmt: skip
    load = step(report, "srt-load")

    assert {
        "hook": "cc_fixture_import_time_hooks.report_fixed_capacity",
        "type": "AFTER",
        "source": ["import_time_hooks", IMPORT_TIME],
    } in load["hooks"][DEVICE_MEMORY]
    assert DEVICE_MEMORY in load["patched"]
    assert step(report, "srt-call")["device_memory_capacity"] == 4242.0  # the hook's answer


def test_sglang_diffusion_loader_applies_demo_cpus_dispatch_hook() -> None:
    report = start_diffusion(ALL_VENDORS, **{OVERRIDE: "demo_cpu"})
    load = step(report, "diffusion-load")
    evidence = report["demo_cpu_evidence"]
    assert evidence["register"] == {DISPATCH_FORWARD: 1}
    assert evidence["dispatch"] == {SILU_DISPATCH: 1}
    assert load["silu_and_mul"] == [[SILU_OF_ONE] * 4] * 2
    assert load["hooks"] == {
        DISPATCH_FORWARD: [
            {
                "hook": "cardcage_demo_cpu.diffusion.hooks.record_dispatch",
                "type": "AROUND",
                "source": DEMO_CPU_SOURCE,
            }
        ]
    }
    assert load["patched"] == [DISPATCH_FORWARD]


# -- exclusion: SGLang's rules keep other platform distributions' general plugins out -----------


@pytest.mark.parametrize(
    "sites", [["demo-cpu", "demo-cuda"], ALL_VENDORS], ids=["demo-cuda", "demo-cuda+native"]
)
def test_sglang_platform_excludes_the_other_platform_dists_general_plugins(
    sites: list[str],
) -> None:
    report = start_srt(sites, SGLANG_PLATFORM="demo_cpu")
    load = step(report, "srt-load")
    others = ["cardcage-demo-cuda", *(["cc-plat-sglang-native"] if NATIVE in sites else [])]
    assert load["excluded_dists"] == others
    for dist in others:  # SGLang's own words for it
        assert f"(dist {dist} excluded by SGLANG_PLATFORM)" in report["stderr"]
    # Neither their general plugin modules nor anything else of theirs was ever imported.
    assert modules_of(report, "cardcage_demo_cuda", "cc_plat_sglang_native") == []
    assert "cardcage_demo_cpu.hooks" in report["modules"]
    sources = {tuple(h["source"]) for hooks in load["hooks"].values() for h in hooks}
    assert sources == {tuple(DEMO_CPU_SOURCE)}


def test_the_diffusion_override_excludes_demo_cudas_diffusion_plugin() -> None:
    report = start_diffusion(ALL_VENDORS, **{OVERRIDE: "demo_cpu"})
    load = step(report, "diffusion-load")
    # cc-plat-sglang-native ships no diffusion platform: SGLang has nothing to exclude there.
    assert load["excluded_dists"] == ["cardcage-demo-cuda"]
    assert "cardcage_demo_cuda.diffusion" not in report["modules"]
    assert "cardcage_demo_cuda.diffusion.hooks" not in report["modules"]


@needs_no_gpu
def test_sglang_automatic_mode_runs_every_general_plugin_and_demo_cuda_stays_quiet() -> None:
    # The control for the exclusion cases, and SGLang's rule, not cardcage's: without
    # SGLANG_PLATFORM its SRT loader excludes nothing. demo-cuda's register() then sees that
    # SGLang did not select its platform and registers nothing; the SGLang-native fixture's
    # plugin registers its hook like any SGLang plugin.
    report = start_srt(ALL_VENDORS, CARDCAGE_DEMO_CPU="1")
    load = step(report, "srt-load")
    assert load["excluded_dists"] == []
    assert "cardcage_demo_cuda.hooks" in report["modules"]
    sources = [h["source"] for h in load["hooks"][DEVICE_MEMORY]]
    assert sorted(sources) == [DEMO_CPU_SOURCE, ["sglang_native_hooks", "cc-plat-sglang-native"]]
    assert report["demo_cpu_calls"] == {DEVICE_MEMORY: 1}
    assert report["native_calls"] == ["get_device_memory_capacity"]


@needs_no_gpu
def test_in_sglang_automatic_mode_demo_cpu_hooks_nothing_when_another_platform_wins() -> None:
    # SGLang selects the native fixture automatically and, excluding nothing, runs demo-cpu's
    # general plugin too: its register() sees SGLang did not select demo-cpu and hooks nothing.
    report = start(ALL_VENDORS, "import", "srt", "srt-load", CC_SGLANG_NATIVE="1")
    srt, load = step(report, "srt"), step(report, "srt-load")
    assert srt["class"] == "cc_plat_sglang_native.platform.NativeSRTPlatform"
    assert load["excluded_dists"] == []
    assert {"cardcage_demo_cpu.hooks", "cardcage_demo_cuda.hooks"} <= set(report["modules"])
    sources = [h["source"] for hooks in load["hooks"].values() for h in hooks]
    assert sources == [["sglang_native_hooks", NATIVE]]


# -- cardcage's CLI says what SGLang does (issue 12, 4(f)) --------------------------------------
#
# `cardcage platform --json`, `cardcage doctor --json` (its `startup` rows) and, where metadata
# decides, `cardcage plugins list --json` name the platform SGLang selected and the distributions
# SGLang's own `_get_excluded_dists()` excludes. One documented difference: SGLang's SRT loader
# excludes only under SGLANG_PLATFORM, cardcage's in automatic mode too.

SRT_PLUGINS = "sglang.srt.plugins"
DIFFUSION_PLUGINS = "sglang.multimodal_gen.plugins"
SGLANG_ACTIVATED = re.compile(r"OOT platform plugin activated: (\S+) -> ")


def _general(plugins: dict[str, Any], group: str, status: str) -> list[str]:
    """Distributions of the general plugins ``cardcage plugins list`` gives ``status``."""
    return sorted(
        {
            p["distribution"]
            for p in plugins["plugins"]
            if p["group"] == group and p["status"] == status
        }
    )


def _not_selected(selection: dict[str, Any]) -> list[str]:
    """Distributions of the platform entry points ``cardcage platform`` did not select."""
    return sorted(
        {
            c["distribution"]
            for c in selection["candidates"]
            if c["kind"] == "entry-point" and c["outcome"] != "selected"
        }
    )


def _platform_selection(sites: list[str], runtime: str, extra: dict[str, str]) -> dict[str, Any]:
    """``cardcage platform --json --runtime RUNTIME``'s selection, validated."""
    platform = cardcage_json(sites, "platform", "--runtime", runtime, **extra)
    jsonschema.validate(platform, load_schema("platform"))
    assert platform["ok"] is True, platform["error"]
    return platform["selection"]  # type: ignore[no-any-return]


def _doctor_startup(sites: list[str], runtime: str, extra: dict[str, str]) -> dict[str, Any]:
    """``cardcage doctor --json``'s conclusion for ``runtime``; doctor finds nothing wrong, and
    says about an excluded distribution at most what does not matter until it is selected."""
    doctor = cardcage_json(sites, "doctor", **extra)
    jsonschema.validate(doctor, load_schema("doctor"))
    assert doctor["ok"] is True, doctor["findings"]
    (startup,) = [s for s in doctor["startup"] if s["runtime"] == runtime]
    assert (startup["known"], startup["selection_fails"]) == (True, False), startup
    for finding in doctor["findings"]:
        concerned = {d["name"] for d in finding["distributions"]}
        if concerned & set(startup["excluded_distributions"]):
            assert finding["severity"] == "info", finding
    return startup  # type: ignore[no-any-return]


def _selected(
    selection: dict[str, Any], doctor: dict[str, Any]
) -> tuple[dict[str, str | None], dict[str, str | None]]:
    """The selected plugin as ``cardcage platform`` and as ``cardcage doctor`` name it."""
    assert doctor["platform"]["version"] == selection["version"]
    return (
        {
            "plugin": selection["plugin"],
            "distribution": selection["distribution"],
            "qualname": selection["platform"],
        },
        {k: doctor["platform"][k] for k in ("plugin", "distribution", "qualname")},
    )


def test_cardcage_names_sglangs_srt_selection_and_exclusions() -> None:
    extra = {"SGLANG_PLATFORM": "demo_cpu"}
    sglang = start_srt(ALL_VENDORS, **extra)
    srt, load = step(sglang, "srt"), step(sglang, "srt-load")
    sglangs = {
        "plugin": srt["selector"],
        "distribution": srt["selected_dist"],
        "qualname": srt["vendor_class"],
    }

    selection = _platform_selection(ALL_VENDORS, "srt", extra)
    doctor = _doctor_startup(ALL_VENDORS, "srt", extra)
    plugins = cardcage_json(ALL_VENDORS, "plugins", "list", **extra)
    jsonschema.validate(plugins, load_schema("plugins"))

    assert _selected(selection, doctor) == (sglangs, sglangs)
    assert selection["device_name"] == srt["device_name"]
    assert (doctor["mode"], doctor["selector"], doctor["builtin"]) == ("explicit", "demo_cpu", None)
    assert load["excluded_dists"] == ["cardcage-demo-cuda", NATIVE]
    assert doctor["excluded_distributions"] == load["excluded_dists"]
    assert _not_selected(selection) == load["excluded_dists"]
    assert _general(plugins, SRT_PLUGINS, "excluded") == load["excluded_dists"]


@needs_no_gpu
def test_in_srt_automatic_mode_cardcage_excludes_the_unselected_dists_sglang_runs() -> None:
    extra = {"CARDCAGE_DEMO_CPU": "1"}
    sglang = start_srt(ALL_VENDORS, **extra)
    srt, load = step(sglang, "srt"), step(sglang, "srt-load")
    # SGLang records no plugin in automatic mode: its INFO line names the entry point that
    # activated, and the class it selected is shipped by one distribution.
    (activated,) = SGLANG_ACTIVATED.findall(sglang["stderr"])
    sglangs = {
        "plugin": activated,
        "distribution": srt["class_dist"],
        "qualname": srt["vendor_class"],
    }

    selection = _platform_selection(ALL_VENDORS, "srt", extra)
    doctor = _doctor_startup(ALL_VENDORS, "srt", extra)
    plugins = cardcage_json(ALL_VENDORS, "plugins", "list", **extra)
    jsonschema.validate(plugins, load_schema("plugins"))

    assert sglangs["distribution"] == "cardcage-demo-cpu"
    assert _selected(selection, doctor) == (sglangs, sglangs)
    assert (doctor["mode"], doctor["selector"]) == ("automatic", None)
    # The documented difference: without SGLANG_PLATFORM, SGLang's SRT loader excludes nothing
    # (and runs every general plugin), while cardcage's excludes every platform distribution
    # that did not supply the selected platform.
    others = ["cardcage-demo-cuda", NATIVE]
    assert load["excluded_dists"] == []
    assert doctor["excluded_distributions"] == others
    assert _not_selected(selection) == others
    # plugins list activates nothing: it cannot know which of them runs, and says so.
    assert _general(plugins, SRT_PLUGINS, "excluded") == []
    assert _general(plugins, SRT_PLUGINS, "conditional") == sorted(
        [sglangs["distribution"], *others]
    )


@pytest.mark.parametrize(
    "extra",
    [{OVERRIDE: "demo_cpu"}, {"CARDCAGE_DEMO_CPU": "1"}],
    ids=["override", "automatic"],
)
@needs_no_gpu
def test_cardcage_names_sglangs_diffusion_selection_and_exclusions(extra: dict[str, str]) -> None:
    sglang = start_diffusion(ALL_VENDORS, **extra)
    diffusion, load = step(sglang, "diffusion"), step(sglang, "diffusion-load")
    sglangs = {
        "plugin": diffusion["selected_plugin"],
        "distribution": diffusion["selected_dist"],
        "qualname": diffusion["vendor_class"],
    }

    selection = _platform_selection(ALL_VENDORS, "diffusion", extra)
    doctor = _doctor_startup(ALL_VENDORS, "diffusion", extra)
    plugins = cardcage_json(ALL_VENDORS, "plugins", "list", **extra)
    jsonschema.validate(plugins, load_schema("plugins"))

    assert _selected(selection, doctor) == (sglangs, sglangs)
    assert doctor["mode"] == ("explicit" if OVERRIDE in extra else "automatic")
    # SGLang's diffusion loader excludes in both modes, as cardcage's does.
    assert load["excluded_dists"] == ["cardcage-demo-cuda"]
    assert doctor["excluded_distributions"] == load["excluded_dists"]
    assert _not_selected(selection) == load["excluded_dists"]
    if OVERRIDE in extra:  # `plugins list` decides from metadata: the selector is set
        assert _general(plugins, DIFFUSION_PLUGINS, "excluded") == load["excluded_dists"]
    else:  # it activates nothing, so it cannot know which platform distribution's plugins run
        assert _general(plugins, DIFFUSION_PLUGINS, "excluded") == []
        assert _general(plugins, DIFFUSION_PLUGINS, "conditional") == sorted(
            [sglangs["distribution"], *load["excluded_dists"]]
        )


# -- an SGLang-native plugin in the same layout ------------------------------------------------


def test_sglang_selects_the_native_fixture_and_runs_its_plugin() -> None:
    report = start(ALL_VENDORS, "import", "srt", "srt-load", SGLANG_PLATFORM="sglang_native")
    srt, load = step(report, "srt"), step(report, "srt-load")
    assert srt["class"] == "cc_plat_sglang_native.platform.NativeSRTPlatform"  # no adapter
    assert srt["instance_of"][SRT_BASE] is True
    assert srt["out_of_tree"] is True
    assert srt["enum_is_sglang_oot"] is True
    assert load["excluded_dists"] == ["cardcage-demo-cpu", "cardcage-demo-cuda"]
    # Registered and applied; not called here: the fixture implements no device memory query.
    assert load["hooks"][DEVICE_MEMORY] == [
        {
            "hook": "cc_plat_sglang_native.hooks._count",
            "type": "AROUND",
            "source": ["sglang_native_hooks", NATIVE],
        }
    ]
    assert load["patched"] == [DEVICE_MEMORY]
    assert modules_of(report, "cardcage_demo_cpu", "cardcage_demo_cuda") == []


# -- cardcage as the host, in the same venv ----------------------------------------------------


def test_cardcage_selection_never_imports_sglang_although_it_is_installed() -> None:
    report = start(ALL_VENDORS, "cardcage-srt", SGLANG_PLATFORM="demo_cpu")
    selected = step(report, "cardcage-srt")
    assert selected["class"] == DEMO_CPU_SRT.replace(":", ".")  # the vendor's class, no adapter
    assert selected["out_of_tree"] is True
    assert report["sglang_imported"] is False
