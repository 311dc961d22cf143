"""``cardcage deps`` predicts what each SGLang release really does with a plugin.

Run by ``nox -s scenario-sglang-releases``, on every release of the release table, each from its
own site (see ``test_sglang_releases``). A fixture distribution written without cardcage,
``cc-deps-fixture``, has two SGLang general plugins:

* ``cc_hooks`` registers, with SGLang's own hook registry, an AROUND hook on a function every
  release has and one on ``SRTPlatform.support_cuda_graph``, which 0.5.22 removed;
* ``cc_fused`` imports ``sglang.kernels.fused_op`` at module level (it arrived in 0.5.18), and
  registers a hook in ``register()``.

For each release, ``cardcage deps --against sglang`` (the release installed in that site, read
from its files) predicts each hook target present or missing and each import breaking or not;
then the release's own ``load_plugins()`` runs the plugins, and its registry says what it
applied and whose hooks it holds. They must agree on every release. demo-cpu is checked too: its
SRT half breaks on no release, its diffusion half exactly where the release table says SGLang
loads no diffusion plugin, and the kernel registration mechanism the release really uses is the
one predicted present.
"""

from __future__ import annotations

import copy
import functools
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from test_sglang_releases import CARDCAGE, PROBE, RELEASE_SITES, SITES, by_release

from cardcage.platforms.hosts.sglang.releases import RELEASES, Release

pytestmark = pytest.mark.skipif(
    not RELEASE_SITES.is_dir(),
    reason="run through `nox -s scenario-sglang-releases` (needs a site per SGLang release)",
)

MEMORY = "sglang.srt.utils.common.get_device_memory_capacity"
CUDA_GRAPH = "sglang.srt.platforms.interface.SRTPlatform.support_cuda_graph"
FUSED_MODULE = "sglang.kernels.fused_op"
#: What the fused plugin's ``from sglang.kernels.fused_op import BaseFusedOp`` depends on.
FUSED_BASE = f"{FUSED_MODULE}:BaseFusedOp"

HOOKS_PLUGIN = f'''
from sglang.srt.plugins.hook_registry import HookRegistry, HookType

MEMORY = "{MEMORY}"
CUDA_GRAPH = "{CUDA_GRAPH}"


def _around(original, *args, **kwargs):
    return original(*args, **kwargs)


def register():
    HookRegistry.register(MEMORY, _around, HookType.AROUND)
    HookRegistry.register(CUDA_GRAPH, _around, HookType.AROUND)
'''

FUSED_PLUGIN = f"""
from {FUSED_MODULE} import BaseFusedOp


def _after(result, *args, **kwargs):
    return result


def register():
    from sglang.srt.plugins.hook_registry import HookRegistry, HookType

    HookRegistry.register("{MEMORY}", _after, HookType.AFTER)
"""


@pytest.fixture(scope="module")
def fixture_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``cc-deps-fixture`` 1.0 as a wheel installs it: modules, metadata, entry points, RECORD."""
    root = tmp_path_factory.mktemp("cc-deps-fixture")
    modules = {"cc_deps_hooks.py": HOOKS_PLUGIN, "cc_deps_fused.py": FUSED_PLUGIN}
    for name, source in modules.items():
        (root / name).write_text(textwrap.dedent(source), encoding="utf-8")
    info = root / "cc_deps_fixture-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: cc-deps-fixture\nVersion: 1.0\n", encoding="utf-8"
    )
    (info / "entry_points.txt").write_text(
        "[sglang.srt.plugins]\n"
        "cc_hooks = cc_deps_hooks:register\n"
        "cc_fused = cc_deps_fused:register\n",
        encoding="utf-8",
    )
    record = [f"{name},," for name in modules]
    record += [f"{info.name}/{n},," for n in ("METADATA", "entry_points.txt", "RECORD")]
    (info / "RECORD").write_text("\n".join(record) + "\n", encoding="utf-8")
    return root


def _env(release: Release, fixture_site: Path) -> dict[str, str]:
    clean = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("SGLANG_", "CARDCAGE_")) and k != "PYTHONPATH"
    }
    sites = [RELEASE_SITES / release.version, SITES / "demo-cpu", fixture_site]
    clean["PYTHONPATH"] = os.pathsep.join(str(s) for s in sites)
    clean["SGLANG_PLATFORM"] = "demo_cpu"
    return clean


def _predicted(release: Release, fixture_site: Path) -> dict[str, Any]:
    """What ``cardcage deps --against sglang`` predicts for ``release`` (one run per release)."""
    return copy.deepcopy(_predict(release.version, fixture_site))


@functools.cache
def _predict(version: str, fixture_site: Path) -> dict[str, Any]:
    (release,) = [r for r in RELEASES if r.version == version]
    done = subprocess.run(
        [CARDCAGE, "deps", "cc-deps-fixture", "cardcage-demo-cpu", "--against", "sglang",
         "--json"],
        env=_env(release, fixture_site),
        capture_output=True,
        text=True,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:]
    document: dict[str, Any] = json.loads(done.stdout)
    (checked,) = document["releases"]
    assert (checked["host"], checked["version"]) == ("sglang", release.version)
    return checked  # type: ignore[no-any-return]


def _real(release: Release, fixture_site: Path) -> dict[str, Any]:
    """What ``release``'s own ``load_plugins()`` did (one run per release)."""
    return copy.deepcopy(_load(release.version, fixture_site))


@functools.cache
def _load(version: str, fixture_site: Path) -> dict[str, Any]:
    (release,) = [r for r in RELEASES if r.version == version]
    done = subprocess.run(
        [sys.executable, str(PROBE), "import", "srt-load"],
        env=_env(release, fixture_site),
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.stdout.strip(), done.stderr[-4000:]
    report: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    (load,) = [r for r in report["results"] if r["step"] == "srt-load"]
    assert load["ok"], load
    return load  # type: ignore[no-any-return]


def _verdict(checked: dict[str, Any], distribution: str, symbol: str) -> dict[str, Any]:
    (found,) = [
        v
        for v in checked["verdicts"]
        if v["distribution"] == distribution and v["symbol"] == symbol
    ]
    return found


def _colon(dotted: str) -> str:
    """SGLang's dotted target, as ``cardcage deps`` names it (``module:Qual.name``)."""
    module, _, rest = dotted.partition(".SRTPlatform")
    if rest or dotted.endswith(".SRTPlatform"):
        return f"{module}:SRTPlatform{rest}"
    module, _, function = dotted.rpartition(".")
    return f"{module}:{function}"


@by_release
def test_deps_predicts_which_hook_targets_the_release_applies(
    release: Release, fixture_site: Path
) -> None:
    checked = _predicted(release, fixture_site)
    real = _real(release, fixture_site)
    for target in (MEMORY, CUDA_GRAPH):
        predicted = _verdict(checked, "cc-deps-fixture", _colon(target))
        applied = target in real["patched"]
        assert (predicted["status"] == "present") is applied, (target, predicted, real)
        assert predicted["breaks"] is (not applied)
    if release.version in ("0.5.22", "0.5.23"):
        assert CUDA_GRAPH not in real["patched"]


@by_release
def test_deps_predicts_whether_the_release_can_import_the_plugin(
    release: Release, fixture_site: Path
) -> None:
    checked = _predicted(release, fixture_site)
    real = _real(release, fixture_site)
    predicted = _verdict(checked, "cc-deps-fixture", FUSED_BASE)
    # The fused plugin's hook is in SGLang's registry only if its module imported.
    sources = [entry["source"] for entries in real["hooks"].values() for entry in entries]
    imported = ["cc_fused", "cc-deps-fixture"] in sources
    assert (predicted["status"] == "present") is imported, (predicted, sources)
    assert predicted["breaks"] is (not imported)


@by_release
def test_deps_finds_no_break_for_demo_cpu_and_the_kernel_mechanism_the_release_uses(
    release: Release, fixture_site: Path
) -> None:
    checked = _predicted(release, fixture_site)
    demo = [v for v in checked["verdicts"] if v["distribution"] == "cardcage-demo-cpu"]
    assert demo, checked
    breaks = [v["symbol"] for v in demo if v["breaks"]]
    if release.diffusion_plugins:
        assert breaks == []
    else:
        # Before 0.5.22 SGLang loads no diffusion plugin (the table's diffusion_plugins): what
        # demo-cpu's diffusion half relies on is what breaks there, and nothing of its SRT half.
        assert breaks, checked
        assert all(s.startswith("sglang.multimodal_gen") for s in breaks), breaks
    mechanism = f"{release.fused_op_base}.register_oot_forward"
    assert _verdict(checked, "cardcage-demo-cpu", mechanism)["status"] == "present"


def test_checked_together_the_releases_date_what_each_one_removed(fixture_site: Path) -> None:
    # Every release's site at once, each read from its files: the hook on
    # SRTPlatform.support_cuda_graph is missing from 0.5.22 on, and says since when.
    against = [arg for r in RELEASES for arg in ("--against", str(RELEASE_SITES / r.version))]
    done = subprocess.run(
        [CARDCAGE, "deps", "cc-deps-fixture", *against, "--no-rehearse", "--json"],
        env=_env(RELEASES[-1], fixture_site),
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    releases = {r["version"]: r for r in json.loads(done.stdout)["releases"]}
    assert sorted(releases) == sorted(r.version for r in RELEASES)
    for version in ("0.5.22", "0.5.23"):
        verdict = _verdict(releases[version], "cc-deps-fixture", _colon(CUDA_GRAPH))
        assert (verdict["status"], verdict["last_present"], verdict["removed_in"]) == (
            "missing",
            "0.5.20",
            "0.5.22",
        )
    fused = {v: _verdict(r, "cc-deps-fixture", FUSED_BASE)["status"] for v, r in releases.items()}
    assert fused == {
        r.version: "present" if r.fused_op_base.startswith(FUSED_MODULE) else "missing"
        for r in RELEASES
    }
