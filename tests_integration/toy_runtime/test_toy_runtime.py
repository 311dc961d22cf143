"""Scenario: a runtime that embeds cardcage under its own profile is seen by every command.

Run by the nox session ``scenario-toy-runtime``, which installs the core-hooks and
core-platforms wheels plus the ``toy-runtime`` and ``hello-plugin`` example wheels into a fresh
venv. The toy runtime registers itself in the ``cardcage.runtimes`` entry-point group with its own
profile (groups ``toy_runtime.platforms`` / ``toy_runtime.plugins``, variables ``TOY_PLATFORM`` /
``TOY_PLUGINS``), selection policy, hook registry and variables; nothing in the core packages
names it. Each case runs the real ``cardcage`` console script in a fresh process.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from cardcage.hooks.testing import write_distribution
from cardcage.platforms.diagnostics import load_schema


def _script(name: str) -> str:
    """The console script installed next to this interpreter (the venv's), else on PATH."""
    beside = Path(sys.executable).with_name(name)
    return str(beside) if beside.exists() else shutil.which(name) or name


CARDCAGE = _script("cardcage")
TOY_RUNTIME = _script("toy-runtime")

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("toy_runtime") is None,
    reason="run through `nox -s scenario-toy-runtime` (needs the toy-runtime wheel)",
)

#: A vendor platform for the toy runtime, in the toy's own platform group.
ACME_TOY = """
from cardcage.platforms.device_mixin import PlatformEnum
from toy_runtime.platform import ToyPlatform


class AcmeToyPlatform(ToyPlatform):
    _enum = PlatformEnum.OOT
    device_name = "acme"
    device_type = "acme"


def activate():
    return "acme_toy:AcmeToyPlatform"
"""


def _run(*args: str, site: Path | None = None, **extra: str) -> subprocess.CompletedProcess[str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("SGLANG_", "CARDCAGE_", "TOY_")) and k != "PYTHONPATH"
    }
    if site is not None:
        env["PYTHONPATH"] = str(site)
    env.update(extra)
    return subprocess.run(list(args), env=env, capture_output=True, text=True, check=False)


def cardcage_json(*args: str, site: Path | None = None, **extra: str) -> dict[str, Any]:
    """``cardcage <args> --json``: exit 0, a document valid against the shipped schema."""
    done = _run(CARDCAGE, *args, "--json", site=site, **extra)
    assert done.returncode == 0, done
    document: dict[str, Any] = json.loads(done.stdout)
    jsonschema.Draft202012Validator(load_schema(args[0])).validate(document)
    return document


@pytest.fixture
def acme_site(tmp_path: Path) -> Path:
    """A site with ``acme-toy``: a platform plugin of the toy runtime."""
    write_distribution(
        tmp_path,
        "acme-toy",
        entry_points={"toy_runtime.platforms": {"acme": "acme_toy:activate"}},
        modules={"acme_toy": ACME_TOY},
    )
    return tmp_path


def test_platform_lists_the_toy_runtime_after_srt() -> None:
    document = cardcage_json("platform")
    names = [r["runtime"] for r in document["runtimes"]]
    assert names[0] == "srt"
    assert "toy" in names


def test_platform_runtime_toy_explains_the_toys_own_selection() -> None:
    document = cardcage_json("platform", "--runtime", "toy")
    (toy,) = document["runtimes"]
    assert toy["runtime"] == "toy"
    assert toy["selector_env"] == "TOY_PLATFORM"
    assert toy["allowlist_env"] == "TOY_PLUGINS"
    assert toy["builtin_chain"] == ["cpu"]
    assert toy["selection"]["platform"] == "toy_runtime.platform.ToyCpuPlatform"
    assert toy["selection"]["builtin"] == "cpu"


def test_a_toy_platform_plugin_is_selected_by_the_toys_policy(acme_site: Path) -> None:
    automatic = cardcage_json("platform", "--runtime", "toy", site=acme_site)
    selection = automatic["runtimes"][0]["selection"]
    assert selection["platform"] == "acme_toy.AcmeToyPlatform"
    assert (selection["plugin"], selection["distribution"]) == ("acme", "acme-toy")

    explicit = cardcage_json("platform", "--runtime", "toy", site=acme_site, TOY_PLATFORM="cpu")
    assert explicit["runtimes"][0]["selection"]["builtin"] == "cpu"


def test_plugins_list_runtime_toy_shows_the_toys_groups_only(acme_site: Path) -> None:
    document = cardcage_json("plugins", "list", "--runtime", "toy", site=acme_site)
    assert [p["name"] for p in document["profiles"]] == ["toy"]
    assert document["groups"] == ["toy_runtime.platforms", "toy_runtime.plugins"]
    rows = {
        r["name"]: (r["runtime"], r["group"], r["kind"], r["status"]) for r in document["plugins"]
    }
    assert rows == {
        "acme": ("toy", "toy_runtime.platforms", "platform", "allowed"),
        "hello": ("toy", "toy_runtime.plugins", "general", "allowed"),
    }

    filtered = cardcage_json("plugins", "list", "--runtime", "toy", TOY_PLUGINS="acme")
    (hello,) = [r for r in filtered["plugins"] if r["name"] == "hello"]
    assert (hello["status"], hello["detail"]) == ("not-allowed", "not in TOY_PLUGINS")


def test_doctor_runtime_toy_checks_the_toy_with_its_own_policy(acme_site: Path) -> None:
    document = cardcage_json("doctor", "--runtime", "toy", site=acme_site)
    assert document["checked"]["profiles"] == ["toy"]
    assert document["checked"]["groups"] == ["toy_runtime.platforms", "toy_runtime.plugins"]
    assert document["findings"] == []
    (startup,) = document["startup"]
    assert startup["runtime"] == "toy"
    assert startup["known"] is True

    reserved = _run(CARDCAGE, "doctor", "--runtime", "toy", "--json", site=acme_site,
                    TOY_PLATFORM="nosuch")  # fmt: skip
    codes = [f["code"] for f in json.loads(reserved.stdout)["findings"]]
    assert "unknown-platform-selector" in codes


def test_hooks_runtime_toy_loads_the_toys_plugins_into_its_own_registry() -> None:
    document = cardcage_json("hooks", "--runtime", "toy")
    (toy,) = document["runtimes"]
    assert [(p["name"], p["status"]) for p in toy["plugins"]] == [("hello", "executed")]
    assert {(h["target"], h["type"], h["status"]) for h in toy["hooks"]} == {
        ("toy_runtime.scheduler:Scheduler.get_next_batch_to_run", "AROUND", "applied"),
        ("toy_runtime.scheduler:Scheduler.run_batch", "AROUND", "applied"),
    }
    everything = cardcage_json("hooks")
    srt = next(r for r in everything["runtimes"] if r["runtime"] == "srt")
    assert srt["hooks"] == [], "the toy's hooks are not SRT hooks"


def test_env_runtime_toy_lists_the_toys_variables() -> None:
    document = cardcage_json("env", "--runtime", "toy", TOY_PLATFORM="cpu")
    assert "toy_runtime.envs" in document["registries"]
    variables = {v["name"]: v for v in document["variables"]}
    assert variables["TOY_PLATFORM"]["value"] == "cpu"
    assert variables["TOY_PLATFORM"]["distribution"] == "toy-runtime"
    assert "SGLANG_USE_CPU_ENGINE" not in variables, "SRT's own variables are not the toy's"


def test_the_toy_runtime_loads_hello_through_its_own_profile() -> None:
    done = _run(TOY_RUNTIME)
    assert done.returncode == 0, done
    assert "[toy_runtime.plugins] hello = hello_plugin:register" in done.stdout
    assert "us for the batch" in done.stdout, "hello's AROUND hook did not run"
