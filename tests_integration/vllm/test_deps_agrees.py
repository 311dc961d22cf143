"""``cardcage deps`` predicts what each vLLM release really does with a plugin.

Run by ``nox -s scenario-vllm``, on every release of the vLLM release table, each composed as
``test_vllm_host`` composes it (0.33.0 in the venv, the others from their sites first on
PYTHONPATH). A fixture distribution written without cardcage's platform layer,
``cc-deps-vllm-fixture``, has two vLLM general plugins, both hooking with ``cardcage.hooks``:

* ``cc_hooks`` registers AROUND hooks on ``make_ndarray_with_pad`` of ``vllm.utils.torch_utils``
  (every release has it), on ``make_tensor_with_pad`` of the same module (0.34.0 removed the
  function) and on ``SpecDecodeMetadata.make_dummy`` of ``vllm.v1.spec_decode.metadata`` (0.34.0
  removed the module with the V1 model runner), and pins the V1 model runner with
  ``VLLM_USE_V2_MODEL_RUNNER=0``, which 0.34.0 no longer reads and refuses at start-up;
* ``cc_batch`` imports ``vllm.v1.sample.ops.bad_words`` at module level (gone in 0.34.0) and
  registers a hook in ``register()``.

For each release, ``cardcage deps --against vllm`` (the release installed in that environment,
read from its files) predicts each hook target, the import and the variable present or not;
then ``deps_probe.py`` runs the release's own ``load_general_plugins()`` and platform selection,
imports the hook targets' modules as vLLM's workers do, and asks ``in_effect()`` which hooks
run and vLLM's start-up check what it makes of the environment. They must agree on every
release. Checked together, the releases date what 0.34.0 removed. demo-cpu, opted in, breaks on
no release, its hook runs on each, and the kernel mechanism it relies on is present.
"""

from __future__ import annotations

import functools
import importlib.metadata
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from test_vllm_host import CARDCAGE, RELEASE_SITES, SITES, VENV_RELEASE

from cardcage.platforms.hosts.vllm.releases import RELEASES

pytestmark = pytest.mark.skipif(
    not SITES.is_dir(), reason="run through `nox -s scenario-vllm` (needs the vendor sites)"
)

PROBE = Path(__file__).with_name("deps_probe.py")
FIXTURE = "cc-deps-vllm-fixture"
DEMO_CPU = "cardcage-demo-cpu"
LAST = RELEASES[-1].version  # 0.34.0: the release that removed what the fixture relies on

KEPT = "vllm.utils.torch_utils.make_ndarray_with_pad"
REMOVED = "vllm.utils.torch_utils.make_tensor_with_pad"
REMOVED_MODULE = "vllm.v1.spec_decode.metadata.SpecDecodeMetadata.make_dummy"
#: Each hook target, as ``cardcage deps`` names it (``module:Qual.name``).
TARGETS = {
    KEPT: "vllm.utils.torch_utils:make_ndarray_with_pad",
    REMOVED: "vllm.utils.torch_utils:make_tensor_with_pad",
    REMOVED_MODULE: "vllm.v1.spec_decode.metadata:SpecDecodeMetadata.make_dummy",
}
BAD_WORDS = "vllm.v1.sample.ops.bad_words"
V1_RUNNER = "VLLM_USE_V2_MODEL_RUNNER"
DEMO_CPU_HOOK = "vllm.utils.import_utils.resolve_obj_by_qualname"
REGISTER_OOT = "vllm.model_executor.custom_op:CustomOp.register_oot"

HOOKS_PLUGIN = f'''
import os

from cardcage.hooks import HookRegistry, HookType

KEPT = "{KEPT}"
REMOVED = "{REMOVED}"
REMOVED_MODULE = "{REMOVED_MODULE}"


def _around(original, *args, **kwargs):
    return original(*args, **kwargs)


def register():
    HookRegistry.register(KEPT, _around, HookType.AROUND)
    HookRegistry.register(REMOVED, _around, HookType.AROUND)
    HookRegistry.register(REMOVED_MODULE, _around, HookType.AROUND)
    if os.environ.get("{V1_RUNNER}") is None:
        os.environ["{V1_RUNNER}"] = "0"  # pin the V1 model runner
'''

BATCH_PLUGIN = f"""
from cardcage.hooks import HookRegistry, HookType
from {BAD_WORDS} import apply_bad_words


def _after(result, *args, **kwargs):
    return result


def register():
    HookRegistry.register("{KEPT}", _after, HookType.AFTER)
"""

by_release = pytest.mark.parametrize(
    "release", [r.version for r in RELEASES], ids=lambda v: f"vllm-{v}"
)


@pytest.fixture(scope="module")
def fixture_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``cc-deps-vllm-fixture`` 1.0 as a wheel installs it: modules, metadata, entry points,
    RECORD."""
    root = tmp_path_factory.mktemp("cc-deps-vllm-fixture")
    modules = {"cc_deps_vllm_hooks.py": HOOKS_PLUGIN, "cc_deps_vllm_batch.py": BATCH_PLUGIN}
    for name, source in modules.items():
        (root / name).write_text(textwrap.dedent(source), encoding="utf-8")
    info = root / "cc_deps_vllm_fixture-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {FIXTURE}\nVersion: 1.0\n", encoding="utf-8"
    )
    (info / "entry_points.txt").write_text(
        "[vllm.general_plugins]\n"
        "cc_hooks = cc_deps_vllm_hooks:register\n"
        "cc_batch = cc_deps_vllm_batch:register\n",
        encoding="utf-8",
    )
    record = [f"{name},," for name in modules]
    record += [f"{info.name}/{n},," for n in ("METADATA", "entry_points.txt", "RECORD")]
    (info / "RECORD").write_text("\n".join(record) + "\n", encoding="utf-8")
    return root


def _site(release: str) -> Path:
    """The folder ``release`` is installed in: the venv's site-packages, or its own site."""
    if release == VENV_RELEASE:
        return Path(str(importlib.metadata.distribution("vllm").locate_file("")))
    site = RELEASE_SITES / release
    if not (site / "vllm").is_dir():
        pytest.fail(f"vLLM {release} is not unpacked under $CC_VLLM_RELEASE_SITES: run nox")
    return site


def _env(release: str, fixture_site: Path) -> dict[str, str]:
    """The case's environment: ``release`` first (unless the venv's), demo-cpu opted in, the
    fixture; no VLLM_/CARDCAGE_ variable of the caller's."""
    clean = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("VLLM_", "SGLANG_", "CARDCAGE_", "CC_VLLM_")) and k != "PYTHONPATH"
    }
    first = [] if release == VENV_RELEASE else [str(_site(release))]
    clean["PYTHONPATH"] = os.pathsep.join([*first, str(SITES / "demo-cpu"), str(fixture_site)])
    clean["CARDCAGE_DEMO_CPU"] = "1"
    return clean


def _run(command: list[str], env: dict[str, str]) -> dict[str, Any]:
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr[-4000:]
    assert done.stdout.strip(), done.stderr[-4000:]
    document: dict[str, Any] = json.loads(done.stdout)
    document["stderr"] = done.stderr
    return document


@functools.cache
def _predicted(release: str, fixture_site: Path) -> dict[str, Any]:
    """``cardcage deps`` on the fixture and demo-cpu, against the vLLM installed in the case."""
    document = _run(
        [CARDCAGE, "deps", FIXTURE, DEMO_CPU, "--against", "vllm", "--json"],
        _env(release, fixture_site),
    )
    (checked,) = document["releases"]
    assert (checked["host"], checked["distribution"], checked["version"]) == (
        "vllm",
        "vllm",
        release,
    )
    return checked  # type: ignore[no-any-return]


@functools.cache
def _real(release: str, fixture_site: Path) -> dict[str, Any]:
    """What the release's own loader, selection and start-up check did with the plugins."""
    modules = sorted({_module(target) for target in TARGETS})
    report = _run(
        [
            sys.executable,
            str(PROBE),
            *(arg for module in modules for arg in ("--import", module)),
            "--variable",
            V1_RUNNER,
        ],
        _env(release, fixture_site),
    )
    assert report["version"] == release
    return report


def _module(target: str) -> str:
    """The module a hook target lives in."""
    return TARGETS[target].partition(":")[0]


def _verdict(checked: dict[str, Any], distribution: str, symbol: str) -> dict[str, Any]:
    (found,) = [
        v
        for v in checked["verdicts"]
        if v["distribution"] == distribution and v["symbol"] == symbol
    ]
    return found


def _breaks(checked: dict[str, Any]) -> dict[tuple[str, str], bool]:
    """The fixture's verdicts: (symbol, source) -> whether it breaks the plugin."""
    return {
        (v["symbol"], v["source"]): v["breaks"]
        for v in checked["verdicts"]
        if v["distribution"] == FIXTURE
    }


def _hook(real: dict[str, Any], target: str, plugin: str) -> dict[str, Any]:
    (found,) = [h for h in real["hooks"] if h["target"] == target and h["plugin"] == plugin]
    return found


@by_release
def test_deps_predicts_which_hook_targets_the_release_applies(
    release: str, fixture_site: Path
) -> None:
    checked = _predicted(release, fixture_site)
    real = _real(release, fixture_site)
    for target, symbol in TARGETS.items():
        predicted = _verdict(checked, FIXTURE, symbol)
        applied = _hook(real, target, "cc_hooks")["in_effect"]
        assert (predicted["status"] == "present") is applied, (target, predicted, real["hooks"])
        assert predicted["breaks"] is (not applied)
    if release == LAST:
        # The removed function fails to apply when its module is imported; the removed
        # module never imports, so its hook waits for ever.
        assert _hook(real, REMOVED, "cc_hooks")["state"] == "not-applied"
        assert real["imports"][_module(REMOVED_MODULE)].startswith("ModuleNotFoundError")
        assert _hook(real, REMOVED_MODULE, "cc_hooks")["state"] == "pending"


@by_release
def test_deps_predicts_whether_the_release_can_import_the_plugin(
    release: str, fixture_site: Path
) -> None:
    checked = _predicted(release, fixture_site)
    real = _real(release, fixture_site)
    (predicted,) = [
        v
        for v in checked["verdicts"]
        if v["distribution"] == FIXTURE
        and v["source"] == "import"
        and v["symbol"].startswith(BAD_WORDS)
    ]
    # cc_batch's hook is registered only if vLLM's loader imported its module and ran it.
    imported = any(h["plugin"] == "cc_batch" for h in real["hooks"])
    assert (predicted["status"] == "present") is imported, (predicted, real["hooks"])
    assert predicted["breaks"] is (not imported)
    assert ("Failed to load plugin cc_batch" in real["stderr"]) is (not imported)
    if release == LAST:
        assert not imported


@by_release
def test_deps_predicts_whether_the_release_accepts_the_variable_the_plugin_sets(
    release: str, fixture_site: Path
) -> None:
    checked = _predicted(release, fixture_site)
    real = _real(release, fixture_site)
    predicted = _verdict(checked, FIXTURE, V1_RUNNER)
    read = real["variables"][V1_RUNNER]["read"]
    accepted = real["environ_refused"] is None
    assert read is accepted, real
    assert (predicted["status"] == "present") is read, (predicted, real)
    assert predicted["breaks"] is (not read)
    if release == LAST:
        assert V1_RUNNER in real["environ_refused"]


@by_release
def test_deps_finds_no_break_for_demo_cpu_and_its_kernel_mechanism_present(
    release: str, fixture_site: Path
) -> None:
    checked = _predicted(release, fixture_site)
    demo = [v for v in checked["verdicts"] if v["distribution"] == DEMO_CPU]
    assert demo, checked
    assert [v["symbol"] for v in demo if v["breaks"]] == []
    assert _verdict(checked, DEMO_CPU, REGISTER_OOT)["status"] == "present"
    hook = _verdict(checked, DEMO_CPU, "vllm.utils.import_utils:resolve_obj_by_qualname")
    assert hook["status"] == "present"
    # Opted in, demo-cpu is the platform vLLM selected, and its hook runs there.
    real = _real(release, fixture_site)
    assert real["platform"].startswith("cardcage.platforms.hosts.vllm.adapter.")
    assert _hook(real, DEMO_CPU_HOOK, "demo_cpu")["in_effect"]


def test_checked_together_the_releases_date_what_the_last_one_removed(
    fixture_site: Path,
) -> None:
    # Every release's folder at once, each read from its files: what the fixture relies on
    # and 0.34.0 removed is missing there, last present in 0.33.0.
    against = [arg for r in RELEASES for arg in ("--against", str(_site(r.version)))]
    document = _run(
        [CARDCAGE, "deps", FIXTURE, *against, "--json"], _env(VENV_RELEASE, fixture_site)
    )
    releases = {r["version"]: r for r in document["releases"]}
    assert sorted(releases) == sorted(r.version for r in RELEASES)
    previous = RELEASES[-2].version
    removed = [TARGETS[REMOVED], TARGETS[REMOVED_MODULE], V1_RUNNER]
    removed += [
        v["symbol"] for v in releases[LAST]["verdicts"] if v["symbol"].startswith(BAD_WORDS)
    ]
    for symbol in removed:
        verdict = _verdict(releases[LAST], FIXTURE, symbol)
        assert verdict["status"] in ("missing", "moved"), verdict
        assert (verdict["last_present"], verdict["removed_in"]) == (previous, LAST), verdict
        assert verdict["breaks"]
    for version, release in releases.items():
        # Read from a folder among others, each release breaks the fixture where it does on
        # its own (a signature may read as changed against the venv's release, the baseline).
        assert _breaks(release) == _breaks(_predicted(version, fixture_site)), version
    assert _verdict(releases[LAST], FIXTURE, TARGETS[KEPT])["status"] == "present"
