"""The release matrix: demo-cpu, unchanged, inside every SGLang release with the plugin system.

Run by ``nox -s scenario-sglang-releases``. One venv holds torch, torchvision, SGLang's CPU import
path and cardcage; each release in ``cardcage.platforms.hosts.sglang.releases.RELEASES`` is
unpacked from its wheel (with the transformers and tokenizers it pins) into its own site under
``$CC_SGLANG_RELEASE_SITES``, and each case puts one release and demo-cpu's site on PYTHONPATH,
so every case sees exactly one SGLang installed. Each case runs SGLang's own code in fresh
interpreters (``release_probe.py``); nothing of SGLang is stubbed.

Per release: the release table against the release's own classes; SRT selection, explicit and
automatic; what the adapter answers to each name that release calls for capabilities, KV pools
and the allocator (demo-cpu, and a vendor that declares graphs and its own classes); demo-cpu's
hook applied by the release's ``load_plugins()`` before anything else imported its platform
module; the diffusion half where the release has it; and what ``cardcage doctor`` /
``cardcage platform`` say about the release.
"""

from __future__ import annotations

import copy
import functools
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from cardcage.platforms.hosts.sglang.releases import RELEASES, Release

PROBE = Path(__file__).with_name("release_probe.py")
SITES = Path(os.environ.get("CC_SCENARIO_SITES", "/nonexistent"))
RELEASE_SITES = Path(os.environ.get("CC_SGLANG_RELEASE_SITES", "/nonexistent"))
CARDCAGE = str(Path(sys.executable).with_name("cardcage"))

pytestmark = pytest.mark.skipif(
    not RELEASE_SITES.is_dir(),
    reason="run through `nox -s scenario-sglang-releases` (needs a site per SGLang release)",
)

ADAPTERS = "cardcage.platforms.hosts.sglang.adapter."
DEMO_CPU_SRT = "cardcage_demo_cpu.platform.DemoCpuSRTPlatform"
DEVICE_MEMORY = "sglang.srt.utils.common.get_device_memory_capacity"
DISPATCH_FORWARD = "sglang.multimodal_gen.runtime.layers.custom_op.CustomOp.dispatch_forward"
DEMO_CPU_SOURCE = ["demo_cpu", "cardcage-demo-cpu"]
OVERRIDE = "SGLANG_DIFFUSION_PLATFORM_OVERRIDE"
VENDOR_POOL = "graphs_vendor:VendorMHAPool"
VENDOR_ALLOCATOR = "graphs_vendor:VendorAllocator"

by_release = pytest.mark.parametrize("release", RELEASES, ids=[r.version for r in RELEASES])


def _env(release: Release, extra: dict[str, str]) -> dict[str, str]:
    clean = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("SGLANG_", "CARDCAGE_")) and k != "PYTHONPATH"
    }
    site = RELEASE_SITES / release.version
    assert site.is_dir(), f"no site for SGLang {release.version} under {RELEASE_SITES}"
    clean["PYTHONPATH"] = os.pathsep.join([str(site), str(SITES / "demo-cpu")])
    clean.update(extra)
    return clean


@functools.cache
def _start(version: str, steps: tuple[str, ...], extra: tuple[tuple[str, str], ...]) -> Any:
    (release,) = [r for r in RELEASES if r.version == version]
    done = subprocess.run(
        [sys.executable, str(PROBE), *steps],
        env=_env(release, dict(extra)),
        capture_output=True,
        text=True,
        check=False,
    )
    if not done.stdout.strip():
        pytest.fail(f"probe crashed (exit status {done.returncode}):\n{done.stderr[-4000:]}")
    report: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    failed = [r for r in report["results"] if not r["ok"]]
    assert done.returncode == 0, f"SGLang {version}: {failed}\n{done.stderr[-4000:]}"
    report["stderr"] = done.stderr
    return report


def start(release: Release, *steps: str, **extra: str) -> dict[str, Any]:
    """The probe's report of ``steps`` under ``release`` (one process per distinct request)."""
    report: dict[str, Any] = _start(release.version, steps, tuple(sorted(extra.items())))
    return copy.deepcopy(report)


def step(report: dict[str, Any], name: str) -> dict[str, Any]:
    (found,) = [r for r in report["results"] if r["step"] == name]
    return found  # type: ignore[no-any-return]


# The start-up SGLang's server runs, in its order: `import sglang`, its SRT loader (which runs
# demo-cpu's general plugin), a call of the hooked function; then what the selected platform and
# an adapter of the graphs vendor answer. On 0.5.12 nothing has imported sglang.srt.platforms
# when load_plugins() runs.
EXPLICIT = ("import", "imported", "srt-load", "srt-call", "table", "srt", "answers")


def explicit(release: Release) -> dict[str, Any]:
    return start(release, *EXPLICIT, SGLANG_PLATFORM="demo_cpu")


# -- the table is the release -------------------------------------------------------------------


@by_release
def test_the_release_table_row_is_what_the_release_ships(release: Release) -> None:
    table = step(explicit(release), "table")
    assert table["sglang_version"] == release.version
    assert table["row"] == release.version
    assert table["missing_from_row"] == []
    assert table["not_in_release"] == []
    assert table["capability_fields"] == table["row_capability_fields"]
    assert all(table["in_tree_classes"].values())
    assert len(table["in_tree_classes"]) == len(release.kv_pool_factories) + bool(
        release.allocator_fallback
    )
    assert table["diffusion_plugins_module"] is release.diffusion_plugins
    imported = step(explicit(release), "imported")["srt_platforms_imported"]
    assert imported is release.platforms_imported_by_sglang


# -- kernels ------------------------------------------------------------------------------------


@by_release
def test_demo_cpus_kernels_run_in_the_releases_own_srt_ops(release: Release) -> None:
    found = step(start(release, "import", "srt", "kernels", SGLANG_PLATFORM="demo_cpu"), "kernels")
    ops = ("rms_norm", "fused_add_rms_norm", "silu_and_mul", "layer_norm", "rotary_embedding")
    ran = ops
    if release.rotary_needs_vllm:  # the table says so: here the release's own op agrees
        # SGLang's own RotaryEmbedding cannot be built on an out-of-tree platform there: its
        # constructor imports vLLM's rotary kernel, which this venv (like a vendor's) lacks.
        assert found["rope_error"] == "ModuleNotFoundError: No module named 'vllm'"
        ran = ops[:-1]
    else:
        assert found["rope_error"] is None
    assert found["close"] == dict.fromkeys(ran, True)
    # SGLang's op called the kernel, once each
    assert found["counts"] == {op: int(op in ran) for op in ops}
    base = release.fused_op_base.replace(":", ".")
    for row in found["in_effect"]:
        assert (row["release"], row["mechanism"]) == (
            release.version,
            f"{base}.register_oot_forward",
        )
        assert row["in_effect"] is True, row
    assert {row["op"] for row in found["in_effect"]} == set(ops)


# -- SRT selection ------------------------------------------------------------------------------


def assert_demo_cpu(platform: dict[str, Any]) -> None:
    assert platform["class"].startswith(ADAPTERS)
    assert platform["vendor_class"] == DEMO_CPU_SRT
    assert platform["out_of_tree"] is True
    assert platform["enum_is_sglang_oot"] is True
    assert platform["device_name"] == "demo_cpu"


@by_release
def test_sglang_platform_selects_demo_cpus_adapter(release: Release) -> None:
    report = explicit(release)
    assert step(report, "import")["version"] == release.version
    assert_demo_cpu(step(report, "srt"))


@by_release
def test_automatic_selection_selects_demo_cpu_with_its_opt_in(release: Release) -> None:
    assert_demo_cpu(step(start(release, "import", "srt", CARDCAGE_DEMO_CPU="1"), "srt"))


# -- what each name the release calls answers ---------------------------------------------------


def _pool(release: Release, name: str) -> str:
    return release.kv_pool_factories[name][1]


@by_release
def test_demo_cpus_declaration_answers_every_name_the_release_calls(release: Release) -> None:
    answers = step(explicit(release), "answers")["demo_cpu"]
    declared = answers["declared"]
    if release.reads_capabilities:
        assert answers["capabilities_type_is_sglangs"] is True
        assert answers["capabilities"] == {f: declared[f] for f in release.capability_fields}
        # None: SGLang's own pool, which this release builds itself.
        assert set(answers["kv_pools"].values()) == {None}
        assert answers["legacy_kv_pool_names"] == []
        assert answers["paged_allocator"] is None
    else:
        assert answers["capability_methods"] == {
            "support_cuda_graph": declared["graph_capture"],
            "support_piecewise_cuda_graph": declared["piecewise_graph"],
        }
        # demo-cpu declares no pool: each factory hands out the release's in-tree class.
        assert answers["kv_pools"] == {
            f"{name}()": _pool(release, name) for name in release.kv_pool_factories
        }
        assert answers["paged_allocator"].endswith(":PagedTokenToKVPoolAllocator")
        assert answers["paged_allocator_is_the_rows"] is True


@by_release
def test_a_vendors_graphs_and_classes_reach_the_release(release: Release) -> None:
    answers = step(explicit(release), "answers")["graphs_vendor"]
    assert answers["paged_allocator"] == VENDOR_ALLOCATOR
    if release.reads_capabilities:
        assert answers["capabilities"]["graph_capture"] is True
        assert answers["capabilities"]["piecewise_graph"] is True
        assert answers["kv_pools"]["get_kv_pool_cls(kind='mha')"] == VENDOR_POOL
        assert answers["kv_pools"]["get_kv_pool_cls(kind='mla')"] is None
    else:
        assert answers["capability_methods"] == {
            "support_cuda_graph": True,
            "support_piecewise_cuda_graph": True,
        }
        pools = answers["kv_pools"]
        assert pools["get_mha_kv_pool_cls()"] == VENDOR_POOL
        assert pools["get_mla_kv_pool_cls()"] == _pool(release, "get_mla_kv_pool_cls")
        (dsa,) = [n for n in release.kv_pool_factories if "sa_kv_pool" in n]
        assert pools[f"{dsa}()"] == _pool(release, dsa)


# -- general plugins ----------------------------------------------------------------------------


@by_release
def test_the_releases_load_plugins_applies_demo_cpus_hook(release: Release) -> None:
    report = explicit(release)
    load = step(report, "srt-load")
    assert report["demo_cpu_calls"] == {DEVICE_MEMORY: 1}, report["stderr"][-3000:]
    assert load["hooks"][DEVICE_MEMORY] == [
        {
            "hook": "cardcage_demo_cpu.hooks.time_device_memory_query",
            "type": "AROUND",
            "source": DEMO_CPU_SOURCE,
        }
    ]
    assert DEVICE_MEMORY in load["patched"]
    assert step(report, "srt-call")["device_memory_capacity"] > 0


# -- diffusion ----------------------------------------------------------------------------------

WITH_DIFFUSION = [r for r in RELEASES if r.diffusion_plugins]


@pytest.mark.parametrize("release", WITH_DIFFUSION, ids=[r.version for r in WITH_DIFFUSION])
def test_the_diffusion_override_selects_demo_cpu_and_applies_its_hook(release: Release) -> None:
    report = start(release, "diffusion", "diffusion-load", **{OVERRIDE: "demo_cpu"})
    diffusion = step(report, "diffusion")
    assert diffusion["class"].startswith(ADAPTERS)
    assert diffusion["selected_dist"] == "cardcage-demo-cpu"
    load = step(report, "diffusion-load")
    assert DISPATCH_FORWARD in load["patched"]
    assert report["demo_cpu_evidence"]["register"] == {DISPATCH_FORWARD: 1}


# -- what cardcage's commands say about the release ---------------------------------------------


def cardcage_json(release: Release, *args: str, **extra: str) -> dict[str, Any]:
    done = subprocess.run(
        [CARDCAGE, *args, "--json"],
        env=_env(release, extra),
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.stdout.strip(), done.stderr
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def _release_findings(document: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {f["code"]: f for f in document["findings"] if f["code"].startswith("sglang-release")}


@by_release
def test_doctor_says_what_the_release_does_with_demo_cpus_diffusion_half(release: Release) -> None:
    doctor = cardcage_json(release, "doctor", **{OVERRIDE: "demo_cpu"})
    assert doctor["hosts"][0]["host"] == "sglang"
    assert doctor["hosts"][0]["version"] == release.version
    assert doctor["hosts"][0]["supported"] is True
    findings = _release_findings(doctor)
    if release.diffusion_plugins:
        assert "sglang-release-no-diffusion" not in findings
    else:
        finding = findings["sglang-release-no-diffusion"]
        assert finding["severity"] == "warning"  # the override names a plugin this release rejects
        assert "0.5.22" in finding["message"]
        assert finding["plugin"] == "demo_cpu"


@by_release
def test_doctor_warns_where_the_release_builds_no_rotary_op_without_vllm(release: Release) -> None:
    # demo-cpu selected for SRT, no vLLM in the venv: on 0.5.12 its Engine could load no model
    # with rotary embeddings (the kernels case above shows the release's own op failing)
    doctor = cardcage_json(release, "doctor", SGLANG_PLATFORM="demo_cpu")
    finding = _release_findings(doctor).get("sglang-release-rotary-needs-vllm")
    if not release.rotary_needs_vllm:
        assert finding is None
        return
    assert finding is not None
    assert finding["severity"] == "warning"
    assert finding["plugin"] == "demo_cpu"
    assert "No module named 'vllm'" in finding["message"]
    assert "sglang>=0.5.15" in finding["fix"]
    assert [d["name"] for d in finding["distributions"]] == ["sglang", "cardcage-demo-cpu"]


@by_release
def test_platform_says_whether_the_release_can_select_the_diffusion_platform(
    release: Release,
) -> None:
    platform = cardcage_json(
        release, "platform", "--runtime", "diffusion", **{OVERRIDE: "demo_cpu"}
    )
    (host,) = platform["hosts"]
    assert host["version"] == release.version
    assert host["selects"] is release.diffusion_plugins
