"""The ``cardcage`` command with the diffusion runtime installed, run for real.

Each test writes real fixture distributions (``cardcage.hooks.testing.write_distribution``) into a
temporary site and runs ``python -m cardcage.platforms.cli`` in a fresh interpreter with that
site on ``PYTHONPATH``: the CLI lives in cardcage-core-platforms and reaches the diffusion
runtime only through its profile, so the subprocess is where the behaviour is. ``--json``
documents are validated against the schemas shipped in cardcage-core-platforms.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import jsonschema
import pytest

from cardcage.hooks.testing import write_distribution
from cardcage.platforms.diagnostics import load_schema

if TYPE_CHECKING:
    from pathlib import Path

DIFF_PLATFORMS = "sglang.multimodal_gen.platforms"
DIFF_PLUGINS = "sglang.multimodal_gen.plugins"
SRT_PLATFORMS = "sglang.srt.platforms"
OVERRIDE = "SGLANG_DIFFUSION_PLATFORM_OVERRIDE"
CHAIN = ["mps", "xpu", "rocm", "cuda", "npu", "musa", "cpu"]
CPU = "cardcage.diffusion.runtime.platforms.cpu.CpuPlatform"


@dataclass
class Run:
    returncode: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        return json.loads(self.stdout)

    @property
    def flat(self) -> str:
        """stdout with line wrapping undone, for phrases the text report may wrap."""
        return " ".join(self.stdout.split())

    def __str__(self) -> str:
        return f"exit {self.returncode}\n--- stdout\n{self.stdout}\n--- stderr\n{self.stderr}"


def cardcage(site: Path, *args: str, env: dict[str, str] | None = None) -> Run:
    """Run ``cardcage *args`` in a fresh interpreter that sees ``site``'s distributions."""
    environ = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("SGLANG_", "CARDCAGE_")) and k != "PYTHONPATH"
    }
    environ.update(PYTHONPATH=str(site), PYTHONDONTWRITEBYTECODE="1", **(env or {}))
    done = subprocess.run(
        [sys.executable, "-m", "cardcage.platforms.cli", *args],
        env=environ,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    return Run(done.returncode, done.stdout, done.stderr)


def cardcage_json(
    site: Path, command: str, *args: str, env: dict[str, str] | None = None, code: int = 0
) -> dict[str, Any]:
    """Run ``cardcage <command> <args> --json``, check the exit code and the schema."""
    result = cardcage(site, *command.split(), *args, "--json", env=env)
    assert result.returncode == code, result
    document: dict[str, Any] = result.json()
    schema = load_schema(command.split(maxsplit=1)[0])
    jsonschema.Draft202012Validator(schema).validate(document)
    return document


def diffusion_vendor(
    site: Path,
    dist: str,
    name: str,
    *,
    version: str = "1.0",
    activates: bool = True,
    plugin: str | None = None,
) -> str:
    """A diffusion platform distribution whose import touches ``<module>.touched`` in ``site``."""
    module = f"ccdiff_{name}"
    marker = site / f"{module}.touched"
    body = f"return {module + ':VendorPlatform'!r}" if activates else "return None"
    source = f"""
open({str(marker)!r}, "w").close()
from cardcage.diffusion.runtime.platforms import Platform, PlatformEnum

class VendorPlatform(Platform):
    _enum = PlatformEnum.OOT
    device_name = "{name}"
    device_type = "{name}"
    dispatch_key = "PrivateUse1"

def activate():
    {body}
"""
    entry_points = {DIFF_PLATFORMS: {name: f"{module}:activate"}}
    modules = {module: source}
    if plugin is not None:
        entry_points[DIFF_PLUGINS] = {plugin: f"{module}_hooks:register"}
        modules[f"{module}_hooks"] = "def register():\n    pass\n"
    write_distribution(site, dist, version=version, entry_points=entry_points, modules=modules)
    return module


def by_runtime(document: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["runtime"]: r for r in document["runtimes"]}


# -- cardcage platform -------------------------------------------------------------------------


def test_platform_explains_every_installed_runtime_srt_first(site: Path) -> None:
    document = cardcage_json(site, "platform")
    assert [r["runtime"] for r in document["runtimes"]] == ["srt", "diffusion"]
    assert document["runtime"] == "srt", "the top level keeps the SRT layout of schema /1"
    diffusion = by_runtime(document)["diffusion"]
    assert diffusion["selector_env"] == OVERRIDE
    assert diffusion["builtin_chain"] == CHAIN
    assert "xpu" not in diffusion["selector_builtins"]

    text = cardcage(site, "platform")
    assert text.returncode == 0, text
    assert text.stdout.index("SRT platform:") < text.stdout.index("DIFFUSION platform:")


def test_diffusion_falls_back_through_the_builtin_chain_in_order(site: Path) -> None:
    document = cardcage_json(site, "platform", "--runtime", "diffusion")
    (diffusion,) = document["runtimes"]
    selection = diffusion["selection"]
    names = [c["name"] for c in selection["candidates"]]
    selected = [c["name"] for c in selection["candidates"] if c["outcome"] == "selected"]
    # Probing stops at the first built-in present; CPU always is (CI has no accelerator).
    assert names == CHAIN[: CHAIN.index(selected[0]) + 1]
    assert all(c["kind"] == "built-in" for c in selection["candidates"])
    assert selection["builtin"] == selected[0]
    assert selection["plugin"] is None
    assert selection["distribution"] is None
    if selected == ["cpu"]:
        assert selection["platform"] == CPU
        assert selection["enum"] == "CPU"

    text = cardcage(site, "platform", "--runtime", "diffusion")
    assert "SRT platform" not in text.stdout
    assert f"automatic selection: {OVERRIDE} is not set" in text.flat
    assert (
        "built-in chain (the first detected of mps, xpu, rocm, cuda, npu, musa, cpu)" in text.flat
    )
    assert f"'xpu' is detected automatically only: {OVERRIDE} does not accept it" in text.flat


def test_activated_diffusion_plugin_is_reported_with_its_distribution(site: Path) -> None:
    module = diffusion_vendor(site, "acme-diffusion", "acme", version="2.3")
    diffusion_vendor(site, "sleepy-diffusion", "sleepy", activates=False)
    document = cardcage_json(site, "platform")
    diffusion = by_runtime(document)["diffusion"]
    selection = diffusion["selection"]
    assert selection["platform"] == f"{module}.VendorPlatform"
    assert (selection["plugin"], selection["distribution"], selection["version"]) == (
        "acme",
        "acme-diffusion",
        "2.3",
    )
    assert selection["enum"] == "OOT"
    assert selection["builtin"] is None
    outcomes = {c["name"]: c["outcome"] for c in selection["candidates"]}
    assert outcomes == {"acme": "selected", "sleepy": "declined"}, "no built-in was probed"
    # The SRT runtime reads other groups: its selection is untouched by diffusion plugins.
    assert by_runtime(document)["srt"]["selection"]["plugin"] is None

    text = cardcage(site, "platform", "--runtime", "diffusion")
    assert "provided by: platform plugin 'acme' from acme-diffusion 2.3" in text.stdout
    assert "is the only one that activated" in text.flat


def test_override_with_a_builtin_alias_loads_no_platform_plugin(site: Path) -> None:
    module = diffusion_vendor(site, "acme-diffusion", "acme")
    document = cardcage_json(site, "platform", "--runtime", "diffusion", env={OVERRIDE: "cpu"})
    (diffusion,) = document["runtimes"]
    assert (diffusion["mode"], diffusion["selector"]) == ("explicit", "cpu")
    selection = diffusion["selection"]
    assert selection["platform"] == CPU
    assert selection["builtin"] == "cpu"
    outcomes = {c["name"]: (c["kind"], c["outcome"]) for c in selection["candidates"]}
    assert outcomes == {"acme": ("entry-point", "not-loaded"), "cpu": ("built-in", "selected")}
    assert not (site / f"{module}.touched").exists(), "the override loaded a platform plugin"
    assert f"{OVERRIDE}='cpu' selects the built-in platform" in selection["reason"]


def test_override_naming_a_plugin_selects_only_that_plugin(site: Path) -> None:
    diffusion_vendor(site, "acme-diffusion", "acme")
    other = diffusion_vendor(site, "other-diffusion", "other")
    document = cardcage_json(site, "platform", "--runtime", "diffusion", env={OVERRIDE: "acme"})
    selection = document["selection"]
    assert selection["plugin"] == "acme"
    assert selection["distribution"] == "acme-diffusion"
    assert selection["reason"].startswith(f"{OVERRIDE}='acme' selects platform plugin 'acme'")
    assert not (site / f"{other}.touched").exists()

    text = cardcage(site, "platform", "--runtime", "diffusion", env={OVERRIDE: "acme"})
    assert f"explicit selection: {OVERRIDE}='acme', so only that platform was loaded" in text.flat


def test_override_xpu_is_rejected_and_the_command_exits_1(site: Path) -> None:
    document = cardcage_json(site, "platform", env={OVERRIDE: "xpu"}, code=1)
    assert document["ok"] is False
    srt, diffusion = document["runtimes"]
    assert srt["ok"] is True, "a diffusion failure does not hide the SRT selection"
    assert diffusion["ok"] is False
    assert diffusion["selection"] is None
    # UnsupportedSelectorError: the PlatformNotFoundError for an alias that is automatic-only.
    assert diffusion["error"]["type"] == "UnsupportedSelectorError"
    assert diffusion["error"]["group"] == DIFF_PLATFORMS
    assert "'xpu'" in diffusion["error"]["message"]

    text = cardcage(site, "platform", env={OVERRIDE: "xpu"})
    assert text.returncode == 1, text
    assert "DIFFUSION platform selection failed:" in text.stdout
    assert f"'xpu' is detected automatically only: {OVERRIDE} does not accept it" in text.flat


def test_two_activating_diffusion_plugins_name_each_and_the_override(site: Path) -> None:
    diffusion_vendor(site, "acme-diffusion", "acme")
    diffusion_vendor(site, "beta-diffusion", "beta")
    document = cardcage_json(site, "platform", "--runtime", "diffusion", code=1)
    error = document["error"]
    assert error["type"] == "MultiplePlatformsError"
    assert "acme-diffusion" in error["message"]
    assert "beta-diffusion" in error["message"]
    assert OVERRIDE in error["message"]


def test_allowlist_does_not_filter_diffusion_platform_discovery(site: Path) -> None:
    diffusion_vendor(site, "acme-diffusion", "acme")
    write_distribution(
        site, "srt-vendor", entry_points={SRT_PLATFORMS: {"srtv": "ccsrt_v:activate"}}
    )
    env = {"SGLANG_PLUGINS": "something_else"}
    document = cardcage_json(site, "platform", "--runtime", "diffusion", env=env)
    assert document["allowlist"] == ["something_else"]
    assert document["allowlist_filters_platforms"] is False
    assert document["selection"]["plugin"] == "acme"
    text = cardcage(site, "platform", "--runtime", "diffusion", env=env)
    assert "(SGLANG_PLUGINS does not filter diffusion platform discovery)" in text.flat

    listing = cardcage_json(site, "plugins list", env=env)
    status = {row["name"]: row["status"] for row in listing["plugins"]}
    assert status == {"srtv": "not-allowed", "acme": "allowed"}


def test_verbose_shows_the_diffusion_first_access_stack(site: Path) -> None:
    document = cardcage_json(site, "platform", "--runtime", "diffusion", "-v")
    stack = document["first_access_stack"].rstrip().splitlines()
    assert "in _collect_runtime" in stack[-2]
    assert "get_current_platform()" in stack[-1]


# -- cardcage plugins list ---------------------------------------------------------------------


def test_plugins_list_labels_diffusion_groups_with_the_diffusion_runtime(site: Path) -> None:
    module = diffusion_vendor(site, "acme-diffusion", "acme", version="1.5", plugin="acme_ops")
    document = cardcage_json(site, "plugins list")
    assert [p["name"] for p in document["profiles"]] == ["srt", "diffusion"]
    assert document["profiles"][1]["selector_env"] == OVERRIDE
    rows = {
        r["name"]: (r["runtime"], r["group"], r["kind"], r["status"]) for r in document["plugins"]
    }
    assert rows == {
        "acme": ("diffusion", DIFF_PLATFORMS, "platform", "allowed"),
        # Automatic mode: it runs only if acme-diffusion's platform is the one selected.
        "acme_ops": ("diffusion", DIFF_PLUGINS, "general", "conditional"),
    }
    assert not (site / f"{module}.touched").exists(), "plugins list imported a plugin"

    text = cardcage(site, "plugins", "list")
    assert f"DIFFUSION runtime: {OVERRIDE} not set (automatic selection)" in text.stdout
    acme = next(line for line in text.stdout.splitlines() if " acme " in line).split()
    assert acme[:7] == [
        "diffusion",
        DIFF_PLATFORMS,
        "acme",
        "platform",
        "acme-diffusion",
        "1.5",
        "allowed",
    ]


def test_plugins_list_excludes_general_plugins_of_unselected_diffusion_platforms(
    site: Path,
) -> None:
    diffusion_vendor(site, "acme-diffusion", "acme", plugin="acme_ops")
    diffusion_vendor(site, "beta-diffusion", "beta", plugin="beta_ops")
    document = cardcage_json(site, "plugins list", env={OVERRIDE: "beta"})
    status = {row["name"]: row["status"] for row in document["plugins"]}
    assert status == {
        "acme": "not-selected",
        "beta": "selected",
        "acme_ops": "excluded",
        "beta_ops": "allowed",
    }


# -- cardcage doctor ---------------------------------------------------------------------------


def _findings(document: dict[str, Any], group: str) -> dict[str, dict[str, Any]]:
    return {f["code"]: f for f in document["findings"] if f["group"] == group}


def test_doctor_checks_the_diffusion_runtime_with_its_own_policy(site: Path) -> None:
    diffusion_vendor(site, "acme-diffusion", "acme")
    diffusion_vendor(site, "beta-diffusion", "beta")
    document = cardcage_json(site, "doctor")
    assert document["checked"]["profiles"] == ["srt", "diffusion"]
    found = _findings(document, DIFF_PLATFORMS)
    assert set(found) == {"multiple-platforms"}
    assert OVERRIDE in found["multiple-platforms"]["fix"]
    assert {d["name"] for d in found["multiple-platforms"]["distributions"]} == {
        "acme-diffusion",
        "beta-diffusion",
    }
    assert cardcage(site, "doctor", "--strict").returncode == 1


def test_doctor_flags_a_diffusion_entry_point_named_like_a_builtin(site: Path) -> None:
    write_distribution(
        site, "mps-clash", entry_points={DIFF_PLATFORMS: {"mps": "ccdiff_clash:activate"}}
    )
    found = _findings(cardcage_json(site, "doctor"), DIFF_PLATFORMS)
    assert "reserved-platform-name" in found
    assert "'mps'" in found["reserved-platform-name"]["message"]


def test_doctor_explains_that_the_override_does_not_accept_xpu(site: Path) -> None:
    found = _findings(cardcage_json(site, "doctor", env={OVERRIDE: "xpu"}), DIFF_PLATFORMS)
    finding = found["unknown-platform-selector"]
    assert "detected automatically only" in finding["message"]
    assert "'xpu'" not in finding["fix"], "the fix must not suggest the rejected alias"


@pytest.mark.parametrize("alias", ["cpu", "cuda", "npu"])
def test_doctor_accepts_any_override_alias_without_probing(site: Path, alias: str) -> None:
    # The override selects a built-in without probing its hardware, so none is flagged.
    document = cardcage_json(site, "doctor", env={OVERRIDE: alias})
    assert _findings(document, DIFF_PLATFORMS) == {}


def test_doctor_matches_the_shared_allowlist_against_both_runtimes(site: Path) -> None:
    diffusion_vendor(site, "acme-diffusion", "acme", plugin="acme_ops")
    write_distribution(
        site, "srt-tools", entry_points={"sglang.srt.plugins": {"srt_ops": "ccsrt_t:register"}}
    )
    document = cardcage_json(site, "doctor", env={"SGLANG_PLUGINS": "acme_ops,srt_ops,acme_opz"})
    unmatched = [f for f in document["findings"] if f["code"] == "allowlist-unmatched"]
    assert [f["plugin"] for f in unmatched] == ["acme_opz"], "reported once, real typos only"
    assert "Did you mean 'acme_ops'?" in unmatched[0]["message"]


# -- cardcage hooks ----------------------------------------------------------------------------


def test_hooks_lists_each_runtimes_hooks_under_that_runtime(site: Path) -> None:
    hooks = """
from cardcage.diffusion.runtime.platforms.plugins import HookRegistry, HookType


def shout(result, *args, **kwargs):
    return result.upper()


def register():
    HookRegistry.register("ccdiff_target.greet", shout, HookType.AFTER)
"""
    write_distribution(
        site,
        "diffusion-hooks",
        entry_points={DIFF_PLUGINS: {"shouter": "ccdiff_shouter:register"}},
        modules={
            "ccdiff_shouter": hooks,
            "ccdiff_target": "def greet(name):\n    return 'hello ' + name\n",
        },
    )

    document = cardcage_json(site, "hooks")
    runtimes = by_runtime(document)
    assert list(runtimes) == ["srt", "diffusion"]
    assert runtimes["srt"]["hooks"] == [], "a diffusion hook is not an SRT hook"
    (row,) = runtimes["diffusion"]["hooks"]
    assert (row["target"], row["type"], row["plugin"], row["status"]) == (
        "ccdiff_target.greet",
        "AFTER",
        "shouter",
        "applied",
    )

    only = cardcage_json(site, "hooks", "--runtime", "diffusion")
    assert [r["runtime"] for r in only["runtimes"]] == ["diffusion"]
    assert only["hooks"] == runtimes["diffusion"]["hooks"]
