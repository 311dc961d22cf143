"""Diffusion runtime benchmark: launch-to-ready, per-request latency, per-step runtime overhead.

There is no SGLang anchor to run here (its diffusion runtime needs the real model stack), so
every ratio is against a baseline measured in the same run, on the same machine:

* launch-to-ready of N spawned workers vs ``python -c "import torch"``, the floor of any worker
  that computes with torch; the phases of rank 0's start (spawn, platform init, the two plugin
  phases, process group, model build, request queue) follow as context rows;
* a request through ``DiffGenerator`` (pipe to rank 0, shm broadcast, N ranks, image back) vs the
  same request run in this process by ``TinyDiffusionPipeline`` with the same seed;
* the runtime's overhead per denoising step: (request through the runtime - in-process) / steps;
* ``cardcage-diffusion serve``'s HTTP latency on a reused keep-alive connection (what the
  ``openai`` client does) vs a fresh connection per request, ``GET /v1/models`` and a
  ``POST /v1/images/generations`` with a JSON body that the server refuses (400) before it
  reaches a worker, so image compute does not drown the framing cost; the budget is 1.2x (a
  server that writes headers and body separately with Nagle on waits ~40 ms for the delayed ACK
  on a reused connection).

Usage: ``python benchmarks/bench_diffusion.py [--quick] [--http-only] [--json out.json]`` in an
environment with cardcage-diffusion-runtime and torch (``nox -s bench`` runs it).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import select
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from _common import Result, progress, quartiles, table

MODEL = "cardcage/tiny-dit"
PROMPT = "a red circle on the left at night"
SIZE = 64
STEPS = 8
GUIDANCE = 3.0

# Rank 0's phase timings, in the order a worker runs them (keys of WorkerHandle.info["timings"]).
PHASES = (
    ("platform_init_s", "platform init (init_backend)"),
    ("load_plugins_s", "load_plugins()"),
    ("apply_hooks_s", "apply_plugin_hooks()"),
    ("init_distributed_s", "torch.distributed group"),
    ("build_pipeline_s", "model build"),
    ("init_broadcast_s", "shm request queue"),
)


def _import_torch_seconds() -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import torch"], check=True, capture_output=True)
    return time.perf_counter() - started


def _launch(num_workers: int) -> tuple[Any, float]:
    from cardcage.diffusion import DiffGenerator

    started = time.perf_counter()
    generator = DiffGenerator.from_pretrained(model_path=MODEL, num_gpus=num_workers)
    return generator, time.perf_counter() - started


def _rank0_phases(generator: Any) -> dict[str, float]:
    info = generator.workers.workers[0].info
    timings: dict[str, float] = dict(info.get("timings", {}))
    if "bootstrap_started" in timings and "launch_started" in info:
        timings["spawn_s"] = timings["bootstrap_started"] - info["launch_started"]
    return timings


def _params(seed: int) -> Any:
    from cardcage.diffusion import SamplingParams

    return SamplingParams(
        height=SIZE, width=SIZE, num_inference_steps=STEPS, guidance_scale=GUIDANCE, seed=seed
    )


def _request_seconds(generator: Any, seed: int) -> float:
    started = time.perf_counter()
    generator.generate(prompt=PROMPT, sampling_params=_params(seed))
    return time.perf_counter() - started


def _in_process_seconds(pipeline: Any, seed: int) -> float:
    started = time.perf_counter()
    pipeline.generate(PROMPT, _params(seed))
    return time.perf_counter() - started


def _row(
    group: str, name: str, value_s: float, reference_s: float, label: str, samples: list[float]
) -> Result:
    return Result(
        group=group,
        name=name,
        unit="ms",
        value=value_s * 1e3,
        reference=reference_s * 1e3,
        reference_label=label,
        ratio=value_s / reference_s,
        budget=None,
        spread=quartiles(samples) if samples else None,
    )


def _context(group: str, name: str, value_s: float) -> tuple[str, str, float]:
    return (group, name, value_s * 1e3)


HTTP_BUDGET = 1.2
SERVE_START_TIMEOUT = 120.0


def _start_server(tmpdir: str) -> tuple[subprocess.Popen[bytes], int]:
    """``cardcage-diffusion serve --port 0`` from this environment; returns it and its port."""
    script = Path(sys.executable).with_name("cardcage-diffusion")
    command = [str(script)] if script.exists() else [sys.executable, "-m",
               "cardcage.diffusion.runtime.entrypoints.cli"]  # fmt: skip
    process = subprocess.Popen(
        [*command, "serve", "--model-path", MODEL, "--port", "0", "--log-level", "warning"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "TMPDIR": tmpdir},
        start_new_session=True,
    )
    assert process.stdout is not None
    deadline = time.monotonic() + SERVE_START_TIMEOUT
    seen = b""
    while (match := re.search(rb"at http://[^:]+:(\d+) with", seen)) is None:
        remaining = deadline - time.monotonic()
        if remaining <= 0 or process.poll() is not None:
            process.kill()
            raise RuntimeError(f"serve did not start: {seen!r}")
        if select.select([process.stdout], [], [], remaining)[0]:
            seen += os.read(process.stdout.fileno(), 4096)
    return process, int(match.group(1))


def _timed(
    conn: http.client.HTTPConnection, method: str, path: str, body: bytes | None, status: int
) -> float:
    started = time.perf_counter()
    conn.request(method, path, body=body, headers={"Content-Type": "application/json"})
    response = conn.getresponse()
    response.read()
    elapsed = time.perf_counter() - started
    if response.status != status:
        raise RuntimeError(f"{method} {path} answered {response.status}")
    return elapsed


def _http_rows(rounds: int, per_round: int) -> list[Result]:
    """Reused-connection latency over fresh-connection latency, per round, for two requests."""
    tmpdir = tempfile.mkdtemp(prefix="cc-bench-")
    process, port = _start_server(tmpdir)
    refused = json.dumps({"prompt": "a dot", "size": "30x30"}).encode()  # 400: not a multiple of 8
    requests = (("GET /v1/models", "GET", "/v1/models", None, 200),
                ("POST /v1/images/generations (400)", "POST", "/v1/images/generations", refused,
                 400))  # fmt: skip
    results = []
    try:
        for label, method, path, body, status in requests:
            fresh_all: list[float] = []
            reused_all: list[float] = []
            ratios: list[float] = []
            for _ in range(rounds):
                fresh = []
                for _ in range(per_round):
                    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
                    started = time.perf_counter()
                    _timed(conn, method, path, body, status)  # connect + request + answer
                    fresh.append(time.perf_counter() - started)
                    conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
                _timed(conn, method, path, body, status)  # opens the connection: not measured
                reused = [_timed(conn, method, path, body, status) for _ in range(per_round)]
                conn.close()
                fresh_all.extend(fresh)
                reused_all.extend(reused)
                ratios.append(statistics.median(reused) / statistics.median(fresh))
            value, reference = statistics.median(reused_all), statistics.median(fresh_all)
            results.append(
                Result(
                    group="HTTP (serve, 1 worker)",
                    name=f"{label}, reused connection",
                    unit="ms",
                    value=value * 1e3,
                    reference=reference * 1e3,
                    reference_label="fresh connection",
                    ratio=value / reference,
                    budget=HTTP_BUDGET,
                    spread=quartiles(ratios),
                )
            )
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(60)
        if process.stdout is not None:
            process.stdout.close()
        shutil.rmtree(tmpdir, ignore_errors=True)
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", type=Path, help="also write the results to this JSON file")
    parser.add_argument("--quick", action="store_true", help="few repeats: a smoke run")
    parser.add_argument("--http-only", action="store_true", help="only the HTTP rows")
    args = parser.parse_args(argv)
    launches = 2 if args.quick else 4
    requests = 3 if args.quick else 10
    http_rounds, http_per_round = (3, 10) if args.quick else (7, 30)
    if args.http_only:
        progress("HTTP: reused vs fresh connection")
        print(table(_http_rows(http_rounds, http_per_round)))
        return 0

    progress("python -c 'import torch' (the floor of any torch worker)")
    torch_floor = statistics.median(_import_torch_seconds() for _ in range(launches))

    results: list[Result] = []
    context: list[tuple[str, str, float]] = []
    per_request: dict[int, list[float]] = {}
    for workers in (1, 2):
        progress(f"launch-to-ready and requests with {workers} worker(s)")
        ready: list[float] = []
        phases: dict[str, list[float]] = {}
        for attempt in range(launches):
            generator, seconds = _launch(workers)
            try:
                ready.append(seconds)
                for key, value in _rank0_phases(generator).items():
                    phases.setdefault(key, []).append(value)
                if attempt == 0:
                    _request_seconds(generator, seed=0)  # warm-up: first-call allocations
                    per_request[workers] = [
                        _request_seconds(generator, seed=n) for n in range(requests)
                    ]
            finally:
                generator.shutdown()
        group = f"launch, {workers} worker(s)"
        results.append(
            _row(
                group,
                f"launch to ready, {workers} worker(s)",
                statistics.median(ready),
                torch_floor,
                "python -c 'import torch'",
                [r / torch_floor for r in ready],
            )
        )
        for key, label in (("spawn_s", "spawn to bootstrap"), *PHASES):
            if key in phases:
                context.append(_context(group, f"rank 0: {label}", statistics.median(phases[key])))

    progress("the same requests in this process (the baseline)")
    from cardcage.diffusion.runtime.pipelines import TinyDiffusionPipeline

    pipeline = TinyDiffusionPipeline.build(MODEL)
    _in_process_seconds(pipeline, seed=0)
    in_process = [_in_process_seconds(pipeline, seed=n) for n in range(requests)]
    baseline = statistics.median(in_process)
    for workers, samples in per_request.items():
        value = statistics.median(samples)
        group = f"request {SIZE}x{SIZE}, {STEPS} steps, guidance {GUIDANCE:g}"
        results.append(
            _row(
                group,
                f"through the runtime, {workers} worker(s)",
                value,
                baseline,
                "in-process pipeline",
                [s / baseline for s in samples],
            )
        )
        context.append(
            _context(
                group,
                f"runtime overhead per denoising step, {workers} worker(s)",
                max(0.0, value - baseline) / STEPS,
            )
        )

    progress("HTTP: reused vs fresh connection")
    results.extend(_http_rows(http_rounds, http_per_round))

    print(table(results))
    print("\nwhere the time goes (medians):")
    width = max(len(f"{g}: {n}") for g, n, _ in context)
    for group, name, value_ms in context:
        print(f"  {f'{group}: {name}'.ljust(width)}  {value_ms:10.2f} ms")
    print(
        f"\nmachine: {os.cpu_count()} CPUs; {launches} launches and {requests} requests per "
        "configuration; ratios are medians, [spread] the 25-75 % range of per-sample ratios."
    )
    if args.json:
        dump = {
            "ratios": [asdict(r) for r in results],
            "context_ms": [{"group": g, "name": n, "value": v} for g, n, v in context],
        }
        args.json.write_text(json.dumps(dump, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
