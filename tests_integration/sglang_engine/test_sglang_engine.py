"""SGLang's own SRT ``Engine`` generates text on demo-cpu's platform, old and new (DESIGN §8).

Run by the nox session ``scenario-sglang-engine`` (see ``engine_scenario.py`` for the venv and
the model), once per release in ``RELEASES``: 0.5.23, the contract's own release, and 0.5.20,
the last release before 0.5.22 changed what "no class" means from a KV-pool or allocator
factory (before it, SGLang builds whatever an out-of-tree platform's factory returns). One fresh
interpreter runs ``sglang.Engine(model_path=...)`` with ``SGLANG_PLATFORM=demo_cpu`` and nothing
that names a device: SGLang resolves its arguments in that launcher process, spawns its
scheduler and detokenizer, loads the tiny model, allocates its KV cache and generates. demo-cpu
is installed from its wheel, unchanged; its opt-in evidence file (``CARDCAGE_DEMO_CPU_EVIDENCE``)
says, per process, what of demo-cpu SGLang ran there, and the harness's probe plugin
(``engine_probe.py``) says what SGLang's scheduler built.

torchvision is the real 0.29.1 (SGLang's configs import it); no module of SGLang or torchvision
is stubbed, and the test patches nothing.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from engine_scenario import env, make_tiny_llama, release_site, run_engine

from cardcage.platforms.hosts.sglang.releases import parse_version, release_for
from cardcage_demo_cpu.evidence import read_evidence
from cardcage_demo_cpu.platform import DemoCpuSRTPlatform

#: The releases whose Engine runs: the venv's own, and the newest one before 0.5.22.
RELEASES = ("0.5.23", "0.5.20")
#: SGLang's in-tree pool for the tiny Llama's attention (MHA), in every release.
IN_TREE_MHA_POOL = "sglang.srt.mem_cache.memory_pool.MHATokenToKVPool"
#: The first release whose detokenizer process calls ``load_plugins()`` (detokenizer_manager.py).
DETOKENIZER_LOADS_PLUGINS_FROM = (0, 5, 22)

DEVICE_MEMORY = "sglang.srt.utils.common.get_device_memory_capacity"
DEMO_CPU_HOOK = "cardcage_demo_cpu.hooks.time_device_memory_query"
DEMO_CPU_SOURCE = ["demo_cpu", "cardcage-demo-cpu"]
MIB = 1 << 20
#: What the run sets CARDCAGE_DEMO_CPU_THREADS to: a value the scheduler can only get from it.
THREADS = "1"


@pytest.fixture(scope="module", params=RELEASES, ids=lambda version: f"sglang-{version}")
def run(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One Engine start-up per release for every case: it costs tens of seconds of imports."""
    release: str = request.param
    folder = tmp_path_factory.mktemp(f"sglang-engine-{release}")
    model = make_tiny_llama(folder / "tiny-llama")
    evidence = folder / "evidence.jsonl"
    report = run_engine(
        model,
        folder / "report.json",
        release=release,
        SGLANG_PLATFORM="demo_cpu",
        CARDCAGE_DEMO_CPU_EVIDENCE=str(evidence),
        CARDCAGE_DEMO_CPU_THREADS=THREADS,
    )
    by_pid: dict[int, dict[str, dict[str, Any]]] = {}
    for line in read_evidence(evidence):
        assert line["platform"] == "demo_cpu"
        by_pid.setdefault(line["pid"], {})[f"{line['event']}:{line['key']}"] = line
    report["evidence"] = by_pid
    report["children"] = {int(pid): title for pid, title in report["children"].items()}
    report["release"] = release
    return report


@pytest.fixture(scope="module")
def run_without_kernels(
    run: dict[str, Any], tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Any]:
    """``run``'s Engine again with ``CARDCAGE_KERNELS=0``: SGLang's ops on their own forwards."""
    release: str = run["release"]
    folder = tmp_path_factory.mktemp(f"sglang-engine-{release}-no-kernels")
    report = run_engine(
        make_tiny_llama(folder / "tiny-llama"),
        folder / "report.json",
        release=release,
        SGLANG_PLATFORM="demo_cpu",
        CARDCAGE_DEMO_CPU_THREADS=THREADS,
        CARDCAGE_KERNELS="0",
    )
    report["children"] = {int(pid): title for pid, title in report["children"].items()}
    return report


def _child(report: dict[str, Any], title: str) -> int:
    """The pid of the launcher's one child whose title SGLang set to ``title``."""
    (pid,) = [pid for pid, name in report["children"].items() if name.startswith(title)]
    return pid


def test_sglang_generates_text_deterministically(run: dict[str, Any]) -> None:
    texts = run["texts"]
    assert run["completion_tokens"] == [4, 4]
    for text in texts:
        words = text.split()
        assert len(words) == 4, text
        assert all(word.startswith("w") for word in words), text  # the tokenizer's own words
    # Greedy decoding: the same prompts give the same text again; different prompts differ.
    assert run["texts_again"] == texts
    assert texts[0] != texts[1]


def test_sglang_selected_demo_cpu_and_took_its_device_and_defaults(run: dict[str, Any]) -> None:
    platform = run["platform"]
    assert platform["is_sglang_platform"] is True  # SGLang's own base class, as SGLang insists
    assert platform["is_demo_cpu"] is True
    # No device= and no disable_cuda_graph= were passed: the platform answered both.
    assert run["server_args"]["device"] == "cpu"
    assert run["server_args"]["disable_cuda_graph"] is True


def test_the_scheduler_is_its_own_process_and_ran_demo_cpus_init_backend(
    run: dict[str, Any],
) -> None:
    launcher = run["launcher"]
    scheduler = _child(run, "sglang::scheduler")
    assert scheduler != launcher
    init = run["evidence"].get(scheduler, {}).get("init_backend:srt")
    assert init is not None, run["evidence"]
    # The vendor's own knob reached SGLang's scheduler through demo-cpu's init_backend().
    assert init["value"] == int(THREADS)
    # Only the scheduler builds a model: the launcher and the detokenizer never initialise one.
    detokenizer = _child(run, "sglang::detokenizer")
    for pid in (launcher, detokenizer):
        assert "init_backend:srt" not in run["evidence"].get(pid, {})


def test_sglang_sized_device_memory_with_demo_cpus_answer(run: dict[str, Any]) -> None:
    # SGLang resolves its server arguments, memory sizing included, in the launcher process:
    # for an out-of-tree platform it asks get_device_total_memory() and converts to MiB.
    launcher = run["evidence"][run["launcher"]]
    answer = launcher["device_total_memory:0"]["value"]
    assert answer == DemoCpuSRTPlatform().get_device_total_memory()  # same machine, same cgroup
    assert launcher[f"hook:{DEVICE_MEMORY}"]["value"] == answer / MIB


def test_demo_cpus_hook_is_registered_with_sglang_attributed_to_demo_cpu(
    run: dict[str, Any],
) -> None:
    assert run["hooks"] == [
        {"hook": DEMO_CPU_HOOK, "type": "AROUND", "source": DEMO_CPU_SOURCE, "applied": True}
    ]
    # SGLang's load_plugins() ran demo-cpu's register() in every process that calls it: the
    # launcher and the scheduler, and from 0.5.22 on the detokenizer too (0.5.20's never does).
    pids = {run["launcher"], _child(run, "sglang::scheduler")}
    if parse_version(run["release"]) >= DETOKENIZER_LOADS_PLUGINS_FROM:
        pids.add(_child(run, "sglang::detokenizer"))
    registered = {
        pid for pid, lines in run["evidence"].items() if f"register:{DEVICE_MEMORY}" in lines
    }
    assert registered == pids
    # And it fired where SGLang asked for the memory: demo-cpu's hook, not a copy of it.
    assert f"hook:{DEVICE_MEMORY}" in run["evidence"][run["launcher"]]


def test_in_effect_inside_sglangs_scheduler_reports_demo_cpus_hook_and_kernels(
    run: dict[str, Any],
) -> None:
    # Asked inside the scheduler: SGLang applied the hook demo-cpu handed it, with SGLang's own
    # wrapper, and its ops dispatch to demo-cpu's kernels there.
    report = _scheduler_probe(run)["in_effect"]
    assert report["schema"] == "cardcage.in-effect/1"
    hooks = [(h["target"], h["type"], h["applied_by"], h["state"]) for h in report["hooks"]]
    assert hooks == [(DEVICE_MEMORY, "AROUND", "sglang", "in-effect")], report["hooks"]
    kernels = {k["op"]: k["in_effect"] for k in report["kernels"]}
    declared = ("rms_norm", "fused_add_rms_norm", "silu_and_mul", "layer_norm", "rotary_embedding")
    assert kernels == dict.fromkeys(declared, True)


#: SRTPlatform names a release reaches through cardcage's adapter, from a vendor's declaration
#: under another name (before 0.5.22: the per-kind pool factories and support_*(); from 0.5.22:
#: get_kv_pool_cls and capabilities).
ADAPTER_SERVED = {
    "get_mha_kv_pool_cls",
    "get_mla_kv_pool_cls",
    "get_dsa_kv_pool_cls",
    "get_nsa_kv_pool_cls",
    "support_cuda_graph",
    "support_piecewise_cuda_graph",
    "get_kv_pool_cls",
    "capabilities",
}


def _predicted_platform_names(release: str) -> set[str]:
    """What ``cardcage deps`` predicts SGLang ``release`` calls on demo-cpu's platform."""
    site = release_site(release)
    done = subprocess.run(
        [str(Path(sys.executable).with_name("cardcage")), "deps", "cardcage-demo-cpu",
         "--against", "sglang", "--no-rehearse", "--json"],
        env=env({"PYTHONPATH": str(site or ""), "SGLANG_PLATFORM": "demo_cpu"}),
        capture_output=True,
        text=True,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:]
    (checked,) = json.loads(done.stdout)["releases"]
    assert checked["version"] == release
    return {
        v["symbol"].rsplit("SRTPlatform.", 1)[1]
        for v in checked["verdicts"]
        if v["source"] == "platform-method" and v["status"] == "present"
    }


def test_the_platform_methods_sglang_called_are_the_ones_cardcage_deps_predicts(
    run: dict[str, Any],
) -> None:
    # Every name SGLang's own code read off demo-cpu's platform, in every process, that
    # demo-cpu defines itself or cardcage's adapter serves from its declarations: each one is
    # in cardcage deps' prediction for this release, read from the release's files.
    reads: set[str] = set().union(*run["platform_reads"].values())
    own = {
        name
        for klass in DemoCpuSRTPlatform.__mro__
        if klass.__module__.startswith("cardcage_demo_cpu")
        for name in vars(klass)
        if not name.startswith("_")
    }
    predicted = _predicted_platform_names(run["release"])
    assert reads & (own | ADAPTER_SERVED) <= predicted, sorted(reads - predicted)
    assert "init_backend" in reads & predicted  # the scheduler's model runner called it


def test_only_sglangs_processes_wrote_evidence(run: dict[str, Any]) -> None:
    assert set(run["evidence"]) <= {run["launcher"], *run["children"]}


def _scheduler_probe(run: dict[str, Any]) -> dict[str, Any]:
    """The probe plugin's one line: what SGLang's one scheduler built, from that scheduler."""
    (line,) = run["probe"]
    assert line["pid"] == _child(run, "sglang::scheduler")
    assert line["sglang"] == run["release"]  # the release under test, not the venv's own
    return line


def test_sglang_built_its_in_tree_kv_cache_for_a_platform_that_declares_none(
    run: dict[str, Any],
) -> None:
    assert DemoCpuSRTPlatform().get_kv_pool_cls(kind="mha") is None  # "the runtime's own"
    built = _scheduler_probe(run)
    assert built["platform"] == run["platform"]["class"]  # the adapter, in the scheduler too
    assert built["kv_cache"] == IN_TREE_MHA_POOL
    assert built["max_total_num_tokens"] == 512  # the Engine's max_total_tokens: a real pool
    row, supported = release_for(run["release"])
    assert supported
    if row.kv_pool_factories:
        # Before 0.5.22 SGLang builds what get_mha_kv_pool_cls() returns: the adapter answered
        # the release's in-tree class for demo-cpu's None, and that is the cache SGLang built.
        assert built["kv_pool_question"] == "get_mha_kv_pool_cls()"
        _, fallback = row.kv_pool_factories["get_mha_kv_pool_cls"]
        assert built["kv_pool_answer"] == fallback.replace(":", ".") == built["kv_cache"]
    else:
        # From 0.5.22 the None reaches SGLang, which falls back to its own class.
        assert built["kv_pool_question"] == "get_kv_pool_cls(kind='mha')"
        assert built["kv_pool_answer"] is None


def test_sglang_built_the_allocator_the_platform_answered_or_its_own(run: dict[str, Any]) -> None:
    assert DemoCpuSRTPlatform().get_paged_allocator_cls() is None  # "the runtime's own"
    built = _scheduler_probe(run)
    assert built["allocator"].startswith("sglang.srt.mem_cache.allocator.")  # in-tree
    row, _ = release_for(run["release"])
    if row.allocator_fallback is not None:
        # Before 0.5.22 SGLang constructs get_paged_allocator_cls()'s answer for an out-of-tree
        # platform: the adapter's in-tree allocator, since demo-cpu answers None.
        module, name = row.allocator_fallback.split(":")
        assert built["allocator_answer"] == built["allocator"]
        assert built["allocator"].startswith(f"{module}.")
        assert built["allocator"].endswith(f".{name}")
    else:
        assert built["allocator_answer"] is None  # SGLang picks its own


def test_sglangs_graph_question_is_answered_from_demo_cpus_capabilities(
    run: dict[str, Any],
) -> None:
    built = _scheduler_probe(run)
    row, _ = release_for(run["release"])
    expected = "support_cuda_graph()" if row.capability_methods else "capabilities.graph_capture"
    assert built["graph_question"] == expected
    assert built["graph_answer"] is DemoCpuSRTPlatform().capabilities.graph_capture


KERNEL_OPS = ("rms_norm", "fused_add_rms_norm", "silu_and_mul", "rotary_embedding")


def test_the_scheduler_ran_demo_cpus_kernels_in_prefill_and_in_decode(run: dict[str, Any]) -> None:
    scheduler = _child(run, "sglang::scheduler")
    phases = run["kernel_phases"].get(scheduler)
    assert phases is not None, run["kernel_phases"]
    # Llama's layers: RMSNorm without a residual (the first input norm), with one (every other
    # norm), the attention's RotaryEmbedding and the MLP's SiluAndMul, all through demo-cpu's
    # kernels, in both phases. (Llama has no LayerNorm: that kernel is installed, never called.)
    for mode in ("extend", "decode"):
        assert all(phases[mode][op] > 0 for op in KERNEL_OPS), (mode, phases)
    assert set(run["kernel_phases"]) == {scheduler}  # no other process built ops


def test_greedy_tokens_are_the_same_with_sglangs_own_forwards(
    run: dict[str, Any], run_without_kernels: dict[str, Any]
) -> None:
    scheduler = _child(run_without_kernels, "sglang::scheduler")
    phases = run_without_kernels["kernel_phases"][scheduler]
    assert all(count == 0 for row in phases.values() for count in row.values()), phases
    assert run_without_kernels["texts"] == run["texts"]
