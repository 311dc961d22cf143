"""Benchmarks for ``cardcage.shm`` against SGLang 0.5.23's ``shm_broadcast.MessageQueue``.

Both queues run in the same run, on the same machine, with the same ring geometry (4 MiB x 6
slots), the same payload objects and the same harness, each driven only through its public
``enqueue``/``dequeue`` (DESIGN.md section 7, reference/shm-broadcast.md section 12):

1. one-way latency p50/p99 of 64 B, 4 KiB, 1 MiB and 16 MiB messages, 1 reader and 2-3 readers,
   for ``bytes`` and for a pickled ``(seq, bytes)`` tuple;
2. throughput of back-to-back messages, and the CPU time all processes spend per message;
3. idle CPU of a reader blocked in ``dequeue`` after 100 ms without traffic, and the cold-wake
   latency of the first message after such an idle period, with the floors this machine sets:
   the same idle, then a bare futex wake between two processes (``ctypes`` syscall on a shared
   word, no queue: what any reader that sleeps pays), a bare spin (a ``sched_yield`` loop
   polling the word: what any reader that never sleeps pays), and a pipe wake for comparison;
4. ``import cardcage.shm`` against ``python -c pass`` (budget 1.3x: every name is exported
   lazily), and what creating a queue costs, with the share of the stale-segment sweep that
   creation runs, measured with ``/dev/shm`` holding enough live segments of another process
   that the sweep examines its full cap.

cardcage runs in both waiting modes, each a queue of its own in the same rounds: the default
(readers park after a 1 ms busy window) and latency-first (``MessageQueue(latency_first=True)``:
readers never park). Every row is printed for the default mode against SGLang; the latency-first
mode's cold wake is budgeted against SGLang's, and each of its other rows is printed against the
default mode's (budgeted at 1.0 where the trial's processes do not outnumber the CPUs), then one
side-by-side table shows both modes with the floors and idle CPU.

Every trial is one writer and N readers in fresh ``spawn``ed processes (handles travel pickled)
that hold all four queues side by side (SGLang's, cardcage's in both modes, and a second
default-mode queue whose rows against the first show the run's own noise), each with a
per-reader reverse queue of the same implementation for acknowledgements. The queues take turns
message by message (one-way and cold wake, in an order that puts every queue behind every other
equally often: see ``lane_order``) and in mirrored blocks (back-to-back), so every ratio compares
samples taken in the same processes within microseconds of each other. Separate trials per
queue could not settle a ratio on the benchmark VM: the same 1 MiB copy between its two vCPUs
takes ~55 or ~105 µs for tens of seconds at a time, the host's doing, and whichever queue's
trial drew the slow spell lost by up to 2x. The lanes' order also rotates every round and reader
count. With one reader the writer and reader are pinned to CPUs 0 and 1; with more readers than
spare CPUs the rows are oversubscribed and say so.

The anchor is ``sglang/srt/distributed/device_communicators/shm_broadcast.py`` read out of the
sglang wheel that ``nox -s bench`` downloads (``--anchor-dir``), loaded by path under a private
module name with minimal stand-ins for the few modules it imports (a ``torch`` whose only used
call zeroes the metadata region, ``sglang.srt.environ``, ``sglang.srt.utils.network``,
``sglang.srt.utils.stale_shm_cleanup``); pyzmq is real. Nothing of SGLang is copied into this
repository, and the stand-ins exist only inside the benchmark's trial processes (cardcage.shm
imports none of the modules they stand in for).

Every message is checked (length, content, sequence); the script exits 1 on any integrity
failure or a trial that does not finish. Missed budgets are reported, not fatal.

    python benchmarks/bench_shm.py --anchor-dir DIR [--json PATH] [--quick]
"""

from __future__ import annotations

import ast
import ctypes
import gc
import glob
import hashlib
import importlib.util
import json
import mmap
import multiprocessing as mp
import os
import pickle
import platform
import random
import secrets
import socket
import statistics
import sys
import tempfile
import time
import types
import zipfile
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from _common import (
    ANCHOR_VERSION,
    BenchError,
    Result,
    find_anchor_wheel,
    measure_startup,
    parse_args,
    progress,
    quartiles,
    table,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence
    from multiprocessing.connection import Connection

ANCHOR_MEMBER = "sglang/srt/distributed/device_communicators/shm_broadcast.py"
ANCHOR_MODULE = "_cardcage_bench_sglang_shm_broadcast"

SLOT_BYTES = 4 << 20  # SGLang's GroupCoordinator geometry: 4 MiB x 6 slots
SLOTS = 6
ACK_SLOT_BYTES = 1 << 16
ACK_SLOTS = 4
SIZES = (64, 4096, 1 << 20, 16 << 20)
KINDS = ("bytes", "tuple")  # raw bytes, and a (seq, bytes) tuple that every queue must pickle
VARIANTS = 3  # distinct payloads per size, rotated, so a lost or repeated message is noticed
SEED = 20261130

#: one-way p50 budgets, 1 writer 1 reader (DESIGN.md section 7): ratio to SGLang's queue
LATENCY_BUDGETS = {64: 0.35, 1 << 20: 0.35, 16 << 20: 0.2}
IDLE_CPU_LIMIT = 1.0  # % of a core, reader idle for > 100 ms (default mode)
#: latency-first cold wake / SGLang's cold wake, 1-3 readers (DESIGN.md section 7)
LATENCY_FIRST_COLD_BUDGET = 1.0
#: default-mode cold wake / this machine's bare futex wake (DESIGN.md section 7)
DEFAULT_COLD_FLOOR_BUDGET = 1.3
#: latency-first / default mode on every other row, where processes do not outnumber CPUs
MODE_BUDGET = 1.0
IDLE_GRACE_S = 0.1  # the budget starts after this long without traffic
IMPORT_BUDGET = 1.3  # import cardcage.shm / python -c pass
#: the stale-segment sweep's share of creating a 4 MiB x 6 queue, with a full cap to examine
SWEEP_BUDGET = 0.25


@dataclass(frozen=True)
class Settings:
    """How hard to measure; ``--quick`` gives a smoke run of well under a minute."""

    rounds: int
    readers: tuple[int, ...]
    latency_iters: dict[int, int]
    throughput_msgs: dict[int, int]
    idle_reps: int
    idle_window_s: float
    trial_timeout_s: float
    startup_rounds: int
    create_rounds: int
    floor_reps: int  # wakes per floor trial (one trial per mechanism, reader count and round)


FULL = Settings(
    rounds=3,
    readers=(1, 2, 3),
    latency_iters={64: 2000, 4096: 2000, 1 << 20: 200, 16 << 20: 20},
    # Each lane gets two blocks of half of these (tens of ms each, at least): shorter blocks let
    # one timer tick or host hiccup move a per-round ratio by 10 %.
    throughput_msgs={64: 40000, 4096: 40000, 1 << 20: 2000, 16 << 20: 100},
    # Cold wakes are bimodal where processes outnumber CPUs (a reader on a CPU, or one waiting
    # a time slice, ~2 ms, for it): 3 a trial let a budgeted median flip between the two modes.
    idle_reps=8,
    idle_window_s=0.6,
    trial_timeout_s=600.0,
    startup_rounds=20,
    create_rounds=40,
    floor_reps=6,
)
QUICK = Settings(
    rounds=1,
    readers=(1, 2),
    latency_iters={64: 300, 4096: 300, 1 << 20: 40, 16 << 20: 6},
    throughput_msgs={64: 2000, 4096: 2000, 1 << 20: 100, 16 << 20: 8},
    idle_reps=1,
    idle_window_s=0.3,
    trial_timeout_s=240.0,
    startup_rounds=5,
    create_rounds=10,
    floor_reps=2,
)


# -- the anchor ----------------------------------------------------------------------------------

#: Every import of the anchor file and what stands in for it. A new import in a later wheel
#: fails loudly in check_anchor_imports instead of somewhere inside a timed loop.
STUBBED = {
    "torch",
    "torch.distributed",
    "sglang.srt.environ",
    "sglang.srt.utils.network",
    "sglang.srt.utils.stale_shm_cleanup",
    "sglang.srt.distributed.parallel_state",  # only create_from_process_group, never called
}
REAL = {"zmq"}


def extract_anchor(wheel: Path, dest: Path) -> Path:
    """Extract only ``shm_broadcast.py`` from the wheel; the rest of SGLang is never unpacked."""
    with zipfile.ZipFile(wheel) as archive:
        return Path(archive.extract(ANCHOR_MEMBER, dest))


def check_anchor_imports(path: Path) -> None:
    """Fail with the module names if the anchor imports anything not stubbed or stdlib."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    needed: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            needed.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            needed.add(node.module)
    foreign = sorted(
        n
        for n in needed
        if n.split(".")[0] not in sys.stdlib_module_names and n not in STUBBED | REAL
    )
    if foreign:
        raise BenchError(
            f"{ANCHOR_MEMBER} now imports {', '.join(foreign)}; add minimal stand-ins for them "
            "to install_anchor_stubs() in benchmarks/bench_shm.py"
        )


class _Zeroing:
    """What ``torch.frombuffer(view, dtype=torch.uint8)`` must offer the anchor: ``fill_``."""

    def __init__(self, view: memoryview) -> None:
        self.view = view

    def fill_(self, value: int) -> None:
        self.view[:] = bytes([value]) * len(self.view)


class _EnvValue:
    def get(self) -> None:
        return None


def _get_open_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class _NetworkAddress:
    """IPv4 loopback only: the benchmark has no remote readers."""

    def __init__(self, host: str, port: int | None) -> None:
        self.host = host
        self.port = port
        self.is_ipv6 = ":" in host

    def to_tcp(self) -> str:
        host = f"[{self.host}]" if self.is_ipv6 else self.host
        return f"tcp://{host}:{self.port}"


def install_anchor_stubs() -> None:
    """Put the stand-ins in ``sys.modules`` (only ever in a trial process: never the parent)."""

    def module(name: str, **attrs: Any) -> None:
        mod = types.ModuleType(name)
        mod.__dict__.update(attrs)
        sys.modules[name] = mod

    torch_dist = types.ModuleType("torch.distributed")
    torch_dist.ProcessGroup = type("ProcessGroup", (), {})  # type: ignore[attr-defined]
    module("torch", uint8="uint8", frombuffer=lambda view, dtype: _Zeroing(view), distributed=None)
    sys.modules["torch"].distributed = torch_dist  # type: ignore[attr-defined]
    sys.modules["torch.distributed"] = torch_dist
    for pkg in ("sglang", "sglang.srt", "sglang.srt.utils"):
        module(pkg, __path__=[])
    module("sglang.srt.environ", envs=types.SimpleNamespace(SGLANG_PORT=_EnvValue()))
    module(
        "sglang.srt.utils.network",
        NetworkAddress=_NetworkAddress,
        get_local_ip_auto=lambda fallback=None: "127.0.0.1",
        get_open_port=_get_open_port,
    )
    module(
        "sglang.srt.utils.stale_shm_cleanup",
        make_shm_name=lambda kind: f"ccbench_{kind}_{os.getpid()}_{secrets.token_hex(6)}",
    )


def load_anchor(path: str) -> types.ModuleType:
    """Load the extracted file by path under a private name (pickled handles refer to it)."""
    if ANCHOR_MODULE in sys.modules:
        return sys.modules[ANCHOR_MODULE]
    check_anchor_imports(Path(path))
    install_anchor_stubs()
    spec = importlib.util.spec_from_file_location(ANCHOR_MODULE, path)
    if spec is None or spec.loader is None:
        raise BenchError(f"cannot load {path}")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[ANCHOR_MODULE] = mod
    spec.loader.exec_module(mod)
    return mod


# -- the two implementations behind one adapter --------------------------------------------------


class Impl:
    """The five things the harness does with a queue; both sides use only public API."""

    name = ""

    def writer(self, n_reader: int, slot_bytes: int, slots: int) -> tuple[Any, bytes]:
        raise NotImplementedError

    def attach(self, handle: bytes, rank: int) -> Any:
        raise NotImplementedError

    def ready(self, q: Any) -> None:
        raise NotImplementedError

    def close(self, q: Any) -> None:
        """Release the queue at the end of a trial."""


DEFAULT = "cardcage"
LATENCY_FIRST = "cardcage latency-first"
#: a second default-mode queue in the same trials: what two identical queues differ by in one
#: run, printed next to the latency-first rows (whose code, for a message in flight, is the
#: default mode's) so that a ratio a few percent off 1.0 can be told from the run's noise
TWIN = "cardcage, second default-mode queue"


class Ours(Impl):
    """cardcage.shm in one waiting mode; readers take it from the handle, as in production."""

    name = DEFAULT

    def __init__(self, latency_first: bool) -> None:
        from cardcage.shm import MessageQueue

        self.cls = MessageQueue
        self.latency_first = latency_first

    def writer(self, n_reader: int, slot_bytes: int, slots: int) -> tuple[Any, bytes]:
        q = self.cls(
            n_reader,
            n_reader,
            max_chunk_bytes=slot_bytes,
            max_chunks=slots,
            latency_first=self.latency_first,
        )
        return q, pickle.dumps(q.export_handle())

    def attach(self, handle: bytes, rank: int) -> Any:
        return self.cls.create_from_handle(pickle.loads(handle), rank)

    def ready(self, q: Any) -> None:
        q.wait_until_ready(timeout=120)

    def close(self, q: Any) -> None:
        q.close()


class Anchor(Impl):
    name = f"SGLang {ANCHOR_VERSION}"

    def __init__(self, path: str) -> None:
        self.mod = load_anchor(path)

    def writer(self, n_reader: int, slot_bytes: int, slots: int) -> tuple[Any, bytes]:
        q = self.mod.MessageQueue(n_reader, n_reader, max_chunk_bytes=slot_bytes, max_chunks=slots)
        return q, pickle.dumps(q.export_handle())

    def attach(self, handle: bytes, rank: int) -> Any:
        return self.mod.MessageQueue.create_from_handle(pickle.loads(handle), rank)

    def ready(self, q: Any) -> None:
        q.wait_until_ready()


def make_impl(name: str, anchor_path: str) -> Impl:
    if name in (DEFAULT, LATENCY_FIRST, TWIN):
        return Ours(latency_first=name == LATENCY_FIRST)
    return Anchor(anchor_path)


# -- payloads and checks ---------------------------------------------------------------------------


def payloads(sizes: Sequence[int]) -> dict[int, list[bytes]]:
    """``VARIANTS`` reproducible random buffers per size, told apart by their first 8 bytes."""
    out = {}
    for size in sizes:
        rng = random.Random(SEED + size)
        bufs = []
        for v in range(VARIANTS):
            data = bytearray(rng.randbytes(size))
            tag = (v + 1).to_bytes(8, "little")
            data[: min(8, size)] = tag[: min(8, size)]
            bufs.append(bytes(data))
        out[size] = bufs
    return out


def check(msg: Any, kind: str, index: int, expected: bytes, full: bool) -> str | None:
    """None if ``msg`` is message ``index`` of its block, else what is wrong with it."""
    if kind == "tuple":
        if type(msg) is not tuple or len(msg) != 2:
            return f"expected a (seq, bytes) tuple, got {type(msg).__name__}"
        if msg[0] != index:
            return f"sequence {msg[0]} where {index} was due"
        msg = msg[1]
    if type(msg) is not bytes:
        return f"expected bytes, got {type(msg).__name__}"
    if len(msg) != len(expected):
        return f"length {len(msg)} where {len(expected)} was due"
    n = len(expected)
    if full or n <= 4096:
        ok = msg == expected
    else:
        mid = n // 2
        ok = (
            msg[:64] == expected[:64]
            and msg[mid : mid + 64] == expected[mid : mid + 64]
            and msg[-64:] == expected[-64:]
        )
    return None if ok else f"content of message {index} differs from what was sent"


def plan(settings: Settings) -> list[tuple[str, int, int]]:
    """The latency blocks in order: (kind, size, messages incl. 10 % warm-up)."""
    return [
        (kind, size, settings.latency_iters[size] + settings.latency_iters[size] // 10)
        for kind in KINDS
        for size in SIZES
    ]


# -- processes -----------------------------------------------------------------------------------


def _pin(cpu: int | None) -> None:
    if cpu is not None:
        os.sched_setaffinity(0, {cpu})


def _cpu_s() -> float:
    t = os.times()
    return t.user + t.system


def task_cpu_ns(pid: int) -> int:
    """CPU time of every thread of ``pid`` (ZeroMQ's I/O threads included), in ns.

    ``schedstat`` counts in ns; kernels without it report 0 there, and then the clock-tick
    counters of ``/proc/<pid>/stat`` (utime + stime, coarser) are used instead.
    """
    total = 0
    for path in glob.glob(f"/proc/{pid}/task/*/schedstat"):
        try:
            with open(path, "rb") as f:
                total += int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            continue
    if total:
        return total
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
    except OSError as exc:
        raise BenchError(f"cannot read the CPU time of reader pid {pid}: {exc}") from exc
    ticks = int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15)
    return ticks * 1_000_000_000 // os.sysconf("SC_CLK_TCK")


def reader_main(
    lanes: Sequence[str],
    anchor_path: str,
    rank: int,
    conn: Connection,
    settings: Settings,
    cpu: int | None,
) -> None:
    """One reader of every lane: attach, then consume the deterministic plan (the writer's,
    lane by lane as :func:`lane_order` rotates them), verifying every message."""
    _pin(cpu)
    impls = [make_impl(name, anchor_path) for name in lanes]
    bufs = payloads(SIZES)
    qs = [impl.attach(h, rank) for impl, h in zip(impls, conn.recv(), strict=True)]
    made = [impl.writer(1, ACK_SLOT_BYTES, ACK_SLOTS) for impl in impls]
    acks = [ack for ack, _ in made]
    conn.send((os.getpid(), [handle for _, handle in made]))
    for impl, q, ack in zip(impls, qs, acks, strict=True):
        impl.ready(q)
        impl.ready(ack)
    failures: list[tuple[int, str]] = []  # (lane, what went wrong)

    def fail(lane: int, where: str, problem: str | None) -> None:
        if problem is not None and len(failures) < 20:
            failures.append((lane, f"reader {rank}, {where}: {problem}"))

    n_lanes = len(lanes)
    gc.collect()
    gc.freeze()
    for kind, size, count in plan(settings):
        expected = bufs[size]
        for i in range(count):
            for lane in lane_order(n_lanes, i):
                msg = qs[lane].dequeue()
                t = time.perf_counter_ns()
                problem = check(msg, kind, i, expected[i % VARIANTS], full=True)
                fail(lane, f"latency {kind} {size} B", problem)
                del msg
                acks[lane].enqueue((i, t, problem is None))
    for size in SIZES:
        expected = bufs[size]
        for lane, count in throughput_blocks(n_lanes, settings.throughput_msgs[size]):
            bad = 0
            c0 = _cpu_s()
            for i in range(count):
                msg = qs[lane].dequeue()
                problem = check(msg, "bytes", i, expected[i % VARIANTS], full=i == count - 1)
                if problem is not None:
                    bad += 1
                    fail(lane, f"throughput {size} B", problem)
            t = time.perf_counter_ns()
            acks[lane].enqueue((count, t, _cpu_s() - c0, bad))
    small = bufs[64]
    for i in range(settings.idle_reps):
        for lane in lane_order(n_lanes, i):
            msg = qs[lane].dequeue()  # blocked here through the idle window
            t = time.perf_counter_ns()
            problem = check(msg, "bytes", i, small[i % VARIANTS], full=True)
            fail(lane, "cold wake", problem)
            acks[lane].enqueue((i, t, problem is None))
    conn.send(failures)
    conn.recv()  # the writer is done with our ack queues
    for impl, q, ack in zip(impls, qs, acks, strict=True):
        impl.close(ack)
        impl.close(q)
    conn.close()


def lane_order(n_lanes: int, i: int) -> list[int]:
    """The order in which round ``i`` of a block visits the lanes: row ``i`` of a Williams
    square, so that over ``n_lanes`` rounds (twice that for an odd count) every lane comes
    right after every other lane equally often. A plain rotation would put each queue behind
    the same other one almost every time, and what one queue leaves in the caches (SGLang's
    pickle copies) moves the next one's time by a few percent."""
    if n_lanes == 1:
        return [0]
    first = [0]
    for k in range(1, n_lanes):  # 0, 1, n-1, 2, n-2, ...
        first.append((k + 1) // 2 if k % 2 else n_lanes - k // 2)
    rows = n_lanes if n_lanes % 2 == 0 else 2 * n_lanes
    r = i % rows
    order = [(x + r) % n_lanes for x in first]
    return order if r < n_lanes else order[::-1]


def throughput_blocks(n_lanes: int, count: int) -> list[tuple[int, int]]:
    """The back-to-back blocks of one size as ``(lane, messages)``: each lane twice, in mirrored
    order (0 1 2 2 1 0), half its messages each time, so a drift during the trial hits every
    lane alike. One lane keeps one block of every message."""
    if n_lanes == 1:
        return [(0, count)]
    half = max(1, count // 2)
    order = [*range(n_lanes), *reversed(range(n_lanes))]
    return [(lane, half) for lane in order]


@dataclass
class TrialResult:
    """Raw samples of one queue (lane) in one trial; the parent pools them over rounds."""

    impl: str
    n_reader: int
    latency: dict[str, list[float]] = field(default_factory=dict)  # "kind:size" -> µs
    throughput: dict[int, float] = field(default_factory=dict)  # size -> msg/s
    cpu_per_msg: dict[int, float] = field(default_factory=dict)  # size -> CPU-µs per message
    idle_cpu: list[float] = field(default_factory=list)  # % of a core, per reader and window
    cold_wake: list[float] = field(default_factory=list)  # µs
    failures: list[str] = field(default_factory=list)


def writer_main(
    lanes: Sequence[str],
    anchor_path: str,
    n_reader: int,
    conns: list[Connection],
    out: Connection,
    settings: Settings,
    cpu: int | None,
) -> None:
    """The writer of every lane: run the plan, collect acks and send the parent one
    :class:`TrialResult` per lane."""
    _pin(cpu)
    impls = [make_impl(name, anchor_path) for name in lanes]
    bufs = payloads(SIZES)
    results = [TrialResult(name, n_reader) for name in lanes]
    made = [impl.writer(n_reader, SLOT_BYTES, SLOTS) for impl in impls]
    qs = [q for q, _ in made]
    for c in conns:
        c.send([handle for _, handle in made])
    pids = []
    acks: list[list[Any]] = [[] for _ in lanes]  # per lane, one ack queue per reader
    for c in conns:
        pid, handles = c.recv()
        pids.append(pid)
        for lane, (impl, h) in enumerate(zip(impls, handles, strict=True)):
            acks[lane].append(impl.attach(h, 0))
    for impl, q, lane_acks in zip(impls, qs, acks, strict=True):
        impl.ready(q)
        for a in lane_acks:
            impl.ready(a)
    n_lanes = len(lanes)
    gc.collect()
    gc.freeze()
    perf = time.perf_counter_ns
    for kind, size, count in plan(settings):
        warm = count // 11
        samples: list[list[float]] = [[] for _ in lanes]
        variants = bufs[size]
        for i in range(count):
            obj: Any = variants[i % VARIANTS]
            if kind == "tuple":
                obj = (i, obj)
            for lane in lane_order(n_lanes, i):
                t0 = perf()
                qs[lane].enqueue(obj)
                for r, a in enumerate(acks[lane]):
                    j, t1, ok = a.dequeue()
                    if j != i or not ok:
                        results[lane].failures.append(
                            f"reader {r} acked message {j} of {kind} {size} B as {ok}"
                        )
                    if i >= warm:
                        samples[lane].append((t1 - t0) / 1e3)
            del obj
        for res, lane_samples in zip(results, samples, strict=True):
            res.latency[f"{kind}:{size}"] = lane_samples
    for size in SIZES:
        variants = bufs[size]
        took = [0] * n_lanes  # ns
        cpu_s = [0.0] * n_lanes
        sent = [0] * n_lanes
        for lane, count in throughput_blocks(n_lanes, settings.throughput_msgs[size]):
            c0 = _cpu_s()
            t0 = perf()
            for i in range(count):
                qs[lane].enqueue(variants[i % VARIANTS])
            cpu_s[lane] += _cpu_s() - c0
            last = t0
            for r, a in enumerate(acks[lane]):
                n, t1, reader_cpu, bad = a.dequeue()
                if n != count or bad:
                    results[lane].failures.append(
                        f"reader {r}: {bad} bad of {n} throughput messages ({size} B)"
                    )
                last = max(last, t1)
                cpu_s[lane] += reader_cpu
            took[lane] += last - t0
            sent[lane] += count
        for lane, res in enumerate(results):
            res.throughput[size] = sent[lane] / (took[lane] / 1e9)
            res.cpu_per_msg[size] = cpu_s[lane] / sent[lane] * 1e6
    small = bufs[64]
    for i in range(settings.idle_reps):
        for lane in lane_order(n_lanes, i):
            res = results[lane]
            time.sleep(IDLE_GRACE_S)
            before = [task_cpu_ns(p) for p in pids]
            w0 = perf()
            time.sleep(settings.idle_window_s - IDLE_GRACE_S)
            after = [task_cpu_ns(p) for p in pids]
            window = perf() - w0
            res.idle_cpu += [(b - a) / window * 100 for a, b in zip(before, after, strict=True)]
            t0 = perf()
            qs[lane].enqueue(small[i % VARIANTS])
            for r, a in enumerate(acks[lane]):
                j, t1, ok = a.dequeue()
                if j != i or not ok:
                    res.failures.append(f"reader {r} acked cold-wake message {j} as {ok}")
                res.cold_wake.append((t1 - t0) / 1e3)
    for c in conns:
        for lane, problem in c.recv():
            results[lane].failures.append(problem)
    for impl, lane_acks in zip(impls, acks, strict=True):
        for a in lane_acks:
            impl.close(a)
    for c in conns:
        c.send(None)
    for impl, q in zip(impls, qs, strict=True):
        impl.close(q)
    out.send(results)


# -- the cold-wake floor: a bare wake after the same idle, no queue ------------------------------

#: futex: what a reader that sleeps pays; spin: what a reader that never sleeps pays (the
#: latency-first mode's floor); pipe: another way to sleep, for comparison
FLOOR_MECHANISMS = ("futex", "spin", "pipe")
_SHARED_WORD = ("futex", "spin")  # mechanisms that wait on word 0 of a shared page
_FUTEX_NR = {"x86_64": 202, "amd64": 202, "aarch64": 98, "arm64": 98}.get(
    platform.machine().lower()
)
_FLOOR_STOP = 1 << 40  # the sequence value that tells floor readers to exit


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


def _futex() -> Any:
    """``libc.syscall`` as ``cardcage.shm._sys`` calls it (the queue is not imported here)."""
    fn = ctypes.CDLL(None, use_errno=True).syscall
    fn.restype = ctypes.c_long
    return fn


def floor_reader(mech: str, path: str, rank: int, conn: Connection, cpu: int | None) -> None:
    """Sleep until the writer's wake, stamp the time, report it; ``n`` times, then exit.

    futex: parks on word 0 of a shared page with the queue's bound (``PARK_S``, 100 ms), as a
    parked queue reader does; spin: polls that word with ``os.sched_yield()`` between loads, as
    a latency-first queue reader does; pipe: blocks in ``read()`` on its own FIFO.
    """
    _pin(cpu)
    perf = time.perf_counter_ns
    if mech in _SHARED_WORD:
        syscall = _futex()
        fd = os.open(path, os.O_RDWR)
        mm = mmap.mmap(fd, mmap.PAGESIZE)
        os.close(fd)
        u = memoryview(mm).cast("Q")
        anchor = ctypes.c_char.from_buffer(mm)
        addr = ctypes.c_void_p(ctypes.addressof(anchor))
        bound = _Timespec(0, 100_000_000)  # the queue's PARK_S
        ts = ctypes.byref(bound)
        conn.send("ready")
        seen = 0
        spin = mech == "spin"
        yield_cpu = os.sched_yield
        while True:
            if spin:
                while (v := u[0]) == seen:
                    yield_cpu()
            else:
                while (v := u[0]) == seen:
                    syscall(_FUTEX_NR, addr, 0, ctypes.c_uint32(v & 0xFFFFFFFF), ts, None, 0)
            t1 = perf()
            seen = v
            if v >= _FLOOR_STOP:
                break
            u[8 * (rank + 1)] = t1
            u[8 * (rank + 1) + 1] = v  # after the time: the writer polls this word
        del u, anchor
        mm.close()
    else:
        rfd = os.open(f"{path}.{rank}", os.O_RDONLY)
        afd = os.open(f"{path}.ack{rank}", os.O_WRONLY)
        conn.send("ready")
        while True:
            b = os.read(rfd, 1)
            t1 = perf()
            if b != b"w":
                break
            os.write(afd, t1.to_bytes(8, "little"))
        os.close(rfd)
        os.close(afd)
    conn.close()


def floor_writer(
    mech: str,
    path: str,
    n_reader: int,
    conns: list[Connection],
    out: Connection,
    settings: Settings,
    cpu: int | None,
) -> None:
    """After each idle window (the cold-wake row's length), one wake of every reader; sends
    the one-way times (reader's stamp - writer's call) to the parent."""
    _pin(cpu)
    perf = time.perf_counter_ns
    if mech == "pipe":  # each open waits for the other end: in the order the readers open
        wfds = [os.open(f"{path}.{r}", os.O_WRONLY) for r in range(n_reader)]
        afds = [os.open(f"{path}.ack{r}", os.O_RDONLY) for r in range(n_reader)]
    for c in conns:
        c.recv()
    samples: list[float] = []
    if mech in _SHARED_WORD:
        syscall = _futex()
        wake = mech == "futex"  # a spinning reader needs no wake-up call
        fd = os.open(path, os.O_RDWR)
        mm = mmap.mmap(fd, mmap.PAGESIZE)
        os.close(fd)
        u = memoryview(mm).cast("Q")
        anchor = ctypes.c_char.from_buffer(mm)
        addr = ctypes.c_void_p(ctypes.addressof(anchor))
        for i in range(1, settings.floor_reps + 1):
            time.sleep(settings.idle_window_s)
            t0 = perf()
            u[0] = i
            if wake:
                syscall(_FUTEX_NR, addr, 1, 2**31 - 1, None, None, 0)
            for r in range(n_reader):
                deadline = time.monotonic() + 10
                while u[8 * (r + 1) + 1] != i:
                    if time.monotonic() > deadline:
                        raise BenchError(f"floor reader {r} did not wake")
                    os.sched_yield()  # as the queue writer's ack wait does
                samples.append((u[8 * (r + 1)] - t0) / 1e3)
        u[0] = _FLOOR_STOP
        syscall(_FUTEX_NR, addr, 1, 2**31 - 1, None, None, 0)
        del u, anchor
        mm.close()
    else:
        for _ in range(settings.floor_reps):
            time.sleep(settings.idle_window_s)
            t0 = perf()
            for w in wfds:
                os.write(w, b"w")
            samples += [(int.from_bytes(os.read(a, 8), "little") - t0) / 1e3 for a in afds]
        for fd in wfds:
            os.write(fd, b"q")
            os.close(fd)
        for fd in afds:
            os.close(fd)
    out.send(samples)


def run_spawned(
    writer: Callable[..., None],
    reader: Callable[..., None],
    head: tuple[str, str],
    n_reader: int,
    settings: Settings,
    limit_s: float,
    *,
    reader_settings: bool = True,
) -> tuple[Any, list[int | None]]:
    """One writer and ``n_reader`` readers in fresh spawned processes, each reader with a pipe
    to the writer; with one reader (and two CPUs) the writer is pinned to the first CPU and the
    reader to the second. The writer's report (None if none came within ``limit_s``), and every
    process's exit code once all were joined (killed if still alive 30 s later).

    Every target takes ``*head`` first and its CPU (or None) last: the writer
    ``(*head, n_reader, reader pipes, report pipe, settings, cpu)``, a reader ``(*head, r, pipe,
    settings, cpu)``, without ``settings`` where ``reader_settings`` is false.
    """
    ctx = mp.get_context("spawn")
    cpus = sorted(os.sched_getaffinity(0))
    pinned = n_reader == 1 and len(cpus) >= 2
    pairs = [ctx.Pipe() for _ in range(n_reader)]
    out_recv, out_send = ctx.Pipe(duplex=False)
    conns = [a for a, _ in pairs]
    writer_args = (*head, n_reader, conns, out_send, settings, cpus[0] if pinned else None)
    extra = (settings,) if reader_settings else ()
    procs = [ctx.Process(target=writer, args=writer_args)]
    procs += [
        ctx.Process(target=reader, args=(*head, r, b, *extra, cpus[1] if pinned else None))
        for r, (_, b) in enumerate(pairs)
    ]
    for p in procs:
        p.start()
    out_send.close()
    report = None
    try:
        if out_recv.poll(limit_s):
            report = out_recv.recv()
    except EOFError:
        report = None
    finally:
        deadline = time.monotonic() + 30
        for p in procs:
            p.join(max(0.1, deadline - time.monotonic()))
        for p in procs:
            if p.is_alive():
                p.kill()
                p.join()
    return report, [p.exitcode for p in procs]


def run_floor_trial(mech: str, n_reader: int, settings: Settings) -> list[float]:
    """One floor trial in fresh spawned processes, pinned as ``run_trial`` pins the queues."""
    with tempfile.TemporaryDirectory(prefix="cardcage-bench-floor-") as tmp:
        path = os.path.join(tmp, "wake")
        if mech in _SHARED_WORD:
            with open(path, "wb") as f:
                f.truncate(os.sysconf("SC_PAGE_SIZE"))
        else:
            for r in range(n_reader):
                os.mkfifo(f"{path}.{r}", 0o600)
                os.mkfifo(f"{path}.ack{r}", 0o600)
        limit = 60 + settings.floor_reps * (settings.idle_window_s + 1)
        samples, _ = run_spawned(
            floor_writer,
            floor_reader,
            (mech, path),
            n_reader,
            settings,
            limit,
            reader_settings=False,
        )
    if not samples:
        raise BenchError(f"the {mech} floor trial with {n_reader} reader(s) did not finish")
    return samples


def shm_entries() -> set[str]:
    try:
        return set(os.listdir("/dev/shm"))
    except FileNotFoundError:
        return set()


def run_trial(
    lanes: Sequence[str], anchor_path: str, n_reader: int, settings: Settings
) -> tuple[list[TrialResult], list[str]]:
    """One writer and ``n_reader`` readers in fresh spawned processes, each holding every lane's
    queue: one result per lane, in ``lanes``' order, and what went wrong with the trial as a
    whole (a timeout, a crash, a leaked segment). Killed on timeout."""
    before = shm_entries()
    report, codes = run_spawned(
        writer_main,
        reader_main,
        (tuple(lanes), anchor_path),
        n_reader,
        settings,
        settings.trial_timeout_s,
    )
    results: list[TrialResult] = report or [TrialResult(name, n_reader) for name in lanes]
    trouble = []
    if report is None:
        trouble.append(
            f"trial did not finish within {settings.trial_timeout_s:g} s (exit codes {codes})"
        )
    elif any(c != 0 for c in codes):
        trouble.append(f"a process exited abnormally (exit codes {codes})")
    # Only our segments: on a shared machine other processes come and go in /dev/shm too.
    leaked = sorted(n for n in shm_entries() - before if n.startswith("cardcage-shm-"))
    if leaked:
        trouble.append(f"/dev/shm entries left behind: {leaked}")
    return results, trouble


# -- aggregation ---------------------------------------------------------------------------------


def percentile(values: Sequence[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(q / 100 * len(s)) - 1))]


def size_label(size: int) -> str:
    if size >= 1 << 20:
        return f"{size >> 20} MiB"
    if size >= 1 << 10:
        return f"{size >> 10} KiB"
    return f"{size} B"


def vs_sglang(group: str, name: str, unit: str, mine: float, other: float, **extra: Any) -> Result:
    """One row measured on both queues: ``mine`` against SGLang's ``other``."""
    label = extra.pop("reference_label", "SGLang")
    return Result(
        group=group,
        name=name,
        unit=unit,
        value=mine,
        reference=other,
        reference_label=label,
        ratio=mine / other if other else float("inf"),
        budget=extra.pop("budget", None),
        **extra,
    )


@dataclass(frozen=True)
class Versus:
    """Both queues' trials with one reader count, in round order: what every row compares."""

    n_reader: int
    ours: list[TrialResult]
    theirs: list[TrialResult]

    def pooled(
        self,
        group: str,
        name: str,
        unit: str,
        samples: Callable[[TrialResult], Sequence[float]],
        mine: Callable[[list[float]], float] = statistics.median,
        other: Callable[[list[float]], float] = statistics.median,
        **extra: Any,
    ) -> list[Result]:
        """The row of each side's samples pooled over its trials, reduced by ``mine`` (ours) and
        ``other`` (SGLang's); no row when either side has no samples."""
        ours = [x for t in self.ours for x in samples(t)]
        theirs = [x for t in self.theirs for x in samples(t)]
        if not ours or not theirs:
            return []
        group = f"{group} {self.n_reader}"
        return [vs_sglang(group, name, unit, mine(ours), other(theirs), **extra)]


Trials = dict[tuple[str, int], list[TrialResult]]
Floors = dict[tuple[str, int], list[list[float]]]


def versus(trials: Trials, n_reader: int, mine: str, other: str) -> Versus:
    """``mine``'s trials against ``other``'s (``Versus.ours`` / ``Versus.theirs``)."""
    return Versus(n_reader, trials[(mine, n_reader)], trials[(other, n_reader)])


def round_spread(
    mine: Iterable[Sequence[float]], theirs: Iterable[Sequence[float]]
) -> tuple[float, float] | None:
    """The 25-75 % range of the ratio of medians, round by round (rounds where both sides have
    samples); None without any such round."""
    ratios = [
        statistics.median(a) / statistics.median(b)
        for a, b in zip(mine, theirs, strict=False)
        if a and b
    ]
    return quartiles(ratios) if ratios else None


def latency_of(key: str) -> Callable[[TrialResult], list[float]]:
    """A trial's one-way latencies of ``key`` (``kind:size``)."""
    return lambda t: t.latency.get(key, [])


def measured(attr: str, size: int) -> Callable[[TrialResult], list[float]]:
    """A trial's one measurement of ``attr`` (``throughput``, ``cpu_per_msg``) at ``size``."""

    def samples(t: TrialResult) -> list[float]:
        values: dict[int, float] = getattr(t, attr)
        return [values[size]] if size in values else []

    return samples


def per_message(size: int) -> Callable[[TrialResult], list[float]]:
    """A trial's back-to-back time per message at ``size`` (1 / throughput, in µs): the
    throughput row as a cost, so that lower is better like every other row of a budget."""
    return lambda t: [1e6 / t.throughput[size]] if t.throughput.get(size) else []


def reader_tag(n_reader: int) -> str:
    return "1 reader, pinned" if n_reader == 1 else f"{n_reader} readers, oversubscribed"


def latency_rows(trials: Trials, n_reader: int, anchor: str) -> list[Result]:
    rows: list[Result] = []
    vs = versus(trials, n_reader, DEFAULT, anchor)
    tag = reader_tag(n_reader)
    for kind in KINDS:
        for size in SIZES:
            samples = latency_of(f"{kind}:{size}")
            spread = round_spread(map(samples, vs.ours), map(samples, vs.theirs))
            budget = LATENCY_BUDGETS.get(size) if n_reader == 1 and kind == "bytes" else None
            for q in (50, 99):
                rows += vs.pooled(
                    "latency",
                    f"one-way p{q} {kind} {size_label(size)} ({tag})",
                    "µs",
                    samples,
                    mine=partial(percentile, q=q),
                    other=partial(percentile, q=q),
                    budget=budget if q == 50 else None,
                    spread=spread if q == 50 else None,
                )
    return rows


def other_rows(trials: Trials, n_reader: int, anchor: str, floors: Floors) -> list[Result]:
    rows: list[Result] = []
    vs = versus(trials, n_reader, DEFAULT, anchor)
    tag = f"{n_reader} reader{'s' if n_reader > 1 else ''}"
    for size in SIZES:
        if not all(size in t.throughput for t in vs.ours + vs.theirs):
            continue
        label = size_label(size)
        rows += vs.pooled(
            "throughput",
            f"throughput bytes {label} ({tag}; higher is better)",
            "msg/s",
            measured("throughput", size),
        )
        rows += vs.pooled(
            "cpu",
            f"CPU per message bytes {label} ({tag}, all processes)",
            "µs",
            measured("cpu_per_msg", size),
        )
    rows += vs.pooled(
        "idle",
        f"idle reader CPU, worst reader/window ({tag}, > 100 ms idle)",
        "%",
        lambda t: t.idle_cpu,
        mine=max,
        reference_label="SGLang median",
        limit=IDLE_CPU_LIMIT,
    )
    cold = vs.pooled(
        "cold", f"cold-wake one-way p50 64 B ({tag}, after idle)", "µs", lambda t: t.cold_wake
    )
    if cold:
        rows += cold + floor_rows(floors, vs, tag, cold[0])
    return rows


def floor_median(floors: Floors, mech: str, n_reader: int) -> float | None:
    rounds = floors.get((mech, n_reader))
    return statistics.median([x for r in rounds for x in r]) if rounds else None


def floor_rows(floors: Floors, vs: Versus, tag: str, cold: Result) -> list[Result]:
    """What any reader pays here without a queue: a bare wake after the same idle, against
    SGLang's spinning reader (``cold``'s reference), and the default mode's cold wake
    (``cold``'s value) against the bare futex wake (its floor; budgeted, DESIGN.md section 7)."""
    rows = []
    group = f"cold {vs.n_reader}"
    what = {
        "futex": "bare futex wake (ctypes syscall)",
        "spin": "bare spin (sched_yield loop)",
        "pipe": "pipe wake (read/write)",
    }
    for mech in FLOOR_MECHANISMS:
        floor = floor_median(floors, mech, vs.n_reader)
        if floor is None:
            continue
        rows.append(
            vs_sglang(
                group,
                f"cold-wake floor: {what[mech]}, no queue ({tag}, after idle)",
                "µs",
                floor,
                cold.reference,
                spread=round_spread(floors[(mech, vs.n_reader)], (t.cold_wake for t in vs.theirs)),
            )
        )
        if mech == "futex":
            rows.append(
                vs_sglang(
                    group,
                    f"cold wake over its floor: default mode / bare futex wake ({tag})",
                    "µs",
                    cold.value,
                    floor,
                    reference_label="bare futex wake",
                    budget=DEFAULT_COLD_FLOOR_BUDGET,
                    spread=round_spread(
                        (o.cold_wake for o in vs.ours), floors[(mech, vs.n_reader)]
                    ),
                )
            )
    return rows


def latency_first_rows(
    trials: Trials, n_reader: int, anchor: str, floors: Floors, cpus: int
) -> list[Result]:
    """The latency-first mode: its cold wake against SGLang's (budgeted) and against the bare
    spin, its idle CPU (the price, reported), and every other row against the default mode,
    budgeted at ``MODE_BUDGET`` where the trial's processes fit the CPUs."""
    rows: list[Result] = []
    tag = f"{n_reader} reader{'s' if n_reader > 1 else ''}"
    vs = versus(trials, n_reader, LATENCY_FIRST, anchor)
    cold = vs.pooled(
        "cold",
        f"latency-first cold-wake one-way p50 64 B ({tag}, after idle)",
        "µs",
        lambda t: t.cold_wake,
        budget=LATENCY_FIRST_COLD_BUDGET,
        spread=round_spread((o.cold_wake for o in vs.ours), (t.cold_wake for t in vs.theirs)),
    )
    rows += cold
    spin = floor_median(floors, "spin", n_reader)
    if cold and spin is not None:
        rows.append(
            vs_sglang(
                f"cold {n_reader}",
                f"cold wake over its floor: latency-first / bare spin ({tag})",
                "µs",
                cold[0].value,
                spin,
                reference_label="bare spin",
                spread=round_spread((o.cold_wake for o in vs.ours), floors[("spin", n_reader)]),
            )
        )
    rows += vs.pooled(
        "idle",
        f"latency-first idle reader CPU, median reader/window ({tag}; its price, reported)",
        "%",
        lambda t: t.idle_cpu,
        reference_label="SGLang median",
    )
    if n_reader + 1 > cpus:  # reported, not budgeted: the queue stops spinning there
        return rows + against_default(trials, n_reader, LATENCY_FIRST, "latency-first")
    label = "noise: second default queue"
    twin = against_default(trials, n_reader, TWIN, label)
    noise = {r.name.removeprefix(f"{label} / default: "): r.ratio for r in twin}
    rows += against_default(trials, n_reader, LATENCY_FIRST, "latency-first", noise)
    return rows + twin


def against_default(
    trials: Trials,
    n_reader: int,
    mine: str,
    label: str,
    noise: dict[str, float] | None = None,
) -> list[Result]:
    """``mine``'s one-way, back-to-back and CPU rows against the default-mode queue of the same
    trials. With ``noise`` (each row's A/A ratio, by the row's name after ``label``), the one-way
    p50 and back-to-back rows are budgeted at ``MODE_BUDGET`` and carry their row's noise."""
    rows: list[Result] = []
    modes = versus(trials, n_reader, mine, DEFAULT)
    where = reader_tag(n_reader)
    tag = f"{n_reader} reader{'s' if n_reader > 1 else ''}"

    def budgeted(what: str) -> dict[str, Any]:
        if noise is None:
            return {"budget": None}
        return {"budget": MODE_BUDGET, "noise": noise.get(what)}

    for kind in KINDS:
        for size in SIZES:
            samples = latency_of(f"{kind}:{size}")
            for q in (50, 99):
                what = f"one-way p{q} {kind} {size_label(size)} ({where})"
                rows += modes.pooled(
                    "modes",
                    f"{label} / default: {what}",
                    "µs",
                    samples,
                    mine=partial(percentile, q=q),
                    other=partial(percentile, q=q),
                    reference_label="default mode",
                    spread=round_spread(map(samples, modes.ours), map(samples, modes.theirs))
                    if q == 50
                    else None,
                    **(budgeted(what) if q == 50 else {"budget": None}),
                )
    for size in SIZES:
        size_name = size_label(size)
        what = f"back-to-back µs per message bytes {size_name} ({where})"
        rows += modes.pooled(
            "modes",
            f"{label} / default: {what}",
            "µs",
            per_message(size),
            reference_label="default mode",
            **budgeted(what),
            spread=round_spread(
                map(per_message(size), modes.ours), map(per_message(size), modes.theirs)
            ),
        )
        rows += modes.pooled(
            "modes",
            f"{label} / default: CPU per message bytes {size_name} ({tag}, all processes)",
            "µs",
            measured("cpu_per_msg", size),
            reference_label="default mode",
        )
    return rows


def side_by_side(trials: Trials, floors: Floors, readers: Sequence[int], anchor: str) -> str:
    """Both modes next to SGLang and the floors: what a user trades, per reader count."""
    header = (
        "readers",
        "64 B one-way p50: default / latency-first / SGLang",
        "cold wake p50: default / latency-first / SGLang",
        "floors: bare futex / bare spin",
        "idle CPU, median reader: default / latency-first / SGLang",
    )

    def number(value: float) -> str:
        return f"{value:,.0f}" if value >= 1000 else f"{value:.3g}"

    def med(name: str, n: int, samples: Callable[[TrialResult], Sequence[float]]) -> str:
        values = [x for t in trials.get((name, n), []) for x in samples(t)]
        return number(statistics.median(values)) if values else "-"

    def floor(mech: str, n: int) -> str:
        value = floor_median(floors, mech, n)
        return "-" if value is None else number(value)

    names = (DEFAULT, LATENCY_FIRST, anchor)
    rows = [header]
    for n in readers:
        rows.append(
            (
                str(n),
                " / ".join(med(name, n, latency_of("bytes:64")) for name in names) + " µs",
                " / ".join(med(name, n, lambda t: t.cold_wake) for name in names) + " µs",
                f"{floor('futex', n)} / {floor('spin', n)} µs",
                " / ".join(med(name, n, lambda t: t.idle_cpu) for name in names) + " %",
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)) for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(line.rstrip() for line in lines)


# -- start-up and queue creation ----------------------------------------------------------------


def measure_import(scratch: Path, settings: Settings) -> list[Result]:
    """``import cardcage.shm`` (budgeted) and its first real use (context), as ``python -c``."""
    commands = {
        "pass": "pass",
        "import cardcage.shm": "import cardcage.shm",
        "from cardcage.shm import MessageQueue": "from cardcage.shm import MessageQueue",
    }
    rows = (("import cardcage.shm", IMPORT_BUDGET), ("from cardcage.shm import MessageQueue", None))
    env = dict(os.environ)
    # Bytecode cached under a private prefix: a deployed wheel ships its .pyc files.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(scratch / "pycache")
    return measure_startup(commands, rows, env, scratch, settings.startup_rounds)


def hold_segments(n: int, conn: Connection) -> None:
    """Child process: create ``n`` rings no reader attaches, report, and live until told."""
    from cardcage.shm import ShmRingBuffer

    rings = [ShmRingBuffer(1, 64, 1) for _ in range(n)]
    conn.send(len(rings))
    conn.recv()
    for ring in rings:
        ring.close()


def measure_creation(settings: Settings) -> list[Result]:
    """Creating (and closing) a 4 MiB x 6 queue with one local reader, and the stale-segment
    sweep it runs first, timed alone. Another live process holds twice the sweep's cap in
    segments, so every sweep examines as many as it ever does (and removes none)."""
    from cardcage.shm import MessageQueue, sweep_stale
    from cardcage.shm._segment import SWEEP_LIMIT

    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe()
    holder = ctx.Process(target=hold_segments, args=(2 * SWEEP_LIMIT, child), daemon=True)
    holder.start()
    try:
        if not parent.poll(60):
            raise BenchError("the segment-holding process did not start")
        parent.recv()
        create: list[float] = []
        sweep: list[float] = []
        for _ in range(settings.create_rounds):
            start = time.perf_counter()
            queue = MessageQueue(1, 1, max_chunk_bytes=SLOT_BYTES, max_chunks=SLOTS)
            create.append(time.perf_counter() - start)
            queue.close()
            start = time.perf_counter()
            sweep_stale(limit=SWEEP_LIMIT)
            sweep.append(time.perf_counter() - start)
    finally:
        parent.send("done")
        holder.join(30)
    created = statistics.median(create) * 1e6
    swept = statistics.median(sweep) * 1e6
    return [
        Result(
            group="create",
            name=f"stale-segment sweep at queue creation ({SWEEP_LIMIT} live segments examined)",
            unit="µs",
            value=swept,
            reference=created,
            reference_label="creating a 4 MiB x 6 queue, sweep included",
            ratio=swept / created,
            budget=SWEEP_BUDGET,
            spread=quartiles([s / c for s, c in zip(sweep, create, strict=True)]),
        )
    ]


# -- report --------------------------------------------------------------------------------------


def summary(results: Sequence[Result], failures: Sequence[str]) -> str:
    budgeted = [r for r in results if r.budget is not None or r.limit is not None]
    met = sum(r.verdict == "PASS" for r in budgeted)
    line = f"bench_shm: {met}/{len(budgeted)} budgets met"
    for verdict, label in (("MISS~", "over by less than the noise"), ("MISS", "missed")):
        missed = [r for r in budgeted if r.verdict == verdict]
        if missed:
            names = ", ".join(f"{r.name} {r.ratio:.3f}" for r in missed)
            line += f"; {len(missed)} {label} ({names})"
    line += f"; integrity: {'FAILED (' + str(len(failures)) + ')' if failures else 'ok'}"
    return line


def environment(wheel: Path, anchor_file: Path) -> dict[str, Any]:
    import zmq

    cpu_model = ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            cpu_model = next((ln.split(":", 1)[1].strip() for ln in f if "model name" in ln), "")
    except OSError:
        pass
    return {
        "python": sys.version.split()[0],
        "executable": sys.executable,
        "platform": platform.platform(),
        "cpus": len(os.sched_getaffinity(0)),
        "cpu_model": cpu_model,
        "pyzmq": zmq.pyzmq_version(),
        "libzmq": zmq.zmq_version(),
        "anchor_wheel": wheel.name,
        "anchor_member": ANCHOR_MEMBER,
        "anchor_sha256": hashlib.sha256(anchor_file.read_bytes()).hexdigest(),
        "ring": f"{SLOT_BYTES >> 20} MiB x {SLOTS}",
        "load_average": os.getloadavg(),
    }


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    settings = QUICK if args.quick else FULL
    started = time.perf_counter()
    wheel = find_anchor_wheel(args.anchor_dir)
    anchor = Anchor.name
    with tempfile.TemporaryDirectory(prefix="cardcage-bench-shm-") as tmp:
        anchor_file = extract_anchor(wheel, Path(tmp))
        check_anchor_imports(anchor_file)
        env = environment(wheel, anchor_file)
        print(f"cardcage.shm benchmarks vs {wheel.name} ({ANCHOR_MEMBER})")
        print(
            f"python {env['python']} on {env['platform']}, {env['cpus']} CPUs ({env['cpu_model']})"
            f", pyzmq {env['pyzmq']}, ring {env['ring']}\n",
            flush=True,
        )
        trials: Trials = {}
        floors: Floors = {}
        queues = [DEFAULT, LATENCY_FIRST, TWIN, anchor]
        failures: list[str] = []
        for rnd in range(settings.rounds):
            for n in settings.readers:
                shift = (rnd + n) % len(queues)
                lanes = queues[shift:] + queues[:shift]
                progress(f"round {rnd + 1}/{settings.rounds}: {' | '.join(lanes)}, {n} reader(s)")
                results, trouble = run_trial(lanes, str(anchor_file), n, settings)
                failures += [f"{' | '.join(lanes)}, {n} reader(s): {f}" for f in trouble]
                for t in results:
                    trials.setdefault((t.impl, n), []).append(t)
                    failures += [f"{t.impl}, {n} reader(s): {f}" for f in t.failures]
                for mech in FLOOR_MECHANISMS:
                    progress(f"round {rnd + 1}/{settings.rounds}: {mech} wake floor, {n} reader(s)")
                    floors.setdefault((mech, n), []).append(run_floor_trial(mech, n, settings))
        progress("start-up: python -c ... (subprocesses)")
        startup = measure_import(Path(tmp), settings)
        progress("queue creation and the stale-segment sweep")
        creation = measure_creation(settings)
    results: list[Result] = []
    for n in settings.readers:
        results += latency_rows(trials, n, anchor)
    for n in settings.readers:
        results += other_rows(trials, n, anchor, floors)
    cpus = env["cpus"]
    for n in settings.readers:
        results += latency_first_rows(trials, n, anchor, floors, cpus)
    results += startup + creation
    elapsed = time.perf_counter() - started
    print(table(results))
    print("\nBoth waiting modes side by side (medians over every round):\n")
    print(side_by_side(trials, floors, settings.readers, anchor))
    print(
        "\nvalue: cardcage.shm (default mode unless the row says latency-first); reference: "
        "SGLang's MessageQueue (or the row's), same run, same geometry, all through "
        "enqueue()/dequeue().\nratio = value / reference (throughput: higher is better); "
        "(25-75 %) is the spread of the per-round p50 ratio. One-way = reader's return from\n"
        "dequeue - writer's call of enqueue (CLOCK_MONOTONIC). Idle CPU: every thread of a reader "
        f"blocked in dequeue, measured from {IDLE_GRACE_S * 1e3:.0f} ms after the last message."
        "\nCold-wake floor: the same idle and pinning, then one bare wake between processes (no "
        "queue, no Python beyond the call); its ratio is to SGLang's cold wake, whose reader "
        "never sleeps; the bare spin is the floor of a reader that never sleeps.\nnoise rows: a "
        "second default-mode queue against the first, in the same trials (an A/A pair). MISS~ = "
        "over budget, but a quarter or more of the rounds met it, or the ratio is off the budget "
        "by no more than the row's A/A pair is off 1.0 (within noise)."
    )
    if failures:
        print("\nINTEGRITY FAILURES:")
        for f in failures:
            print(f"  {f}")
    print(f"\n{summary(results, failures)} ({elapsed:.0f} s)")
    if args.json:
        rows = [{**asdict(r), "verdict": r.verdict} for r in results]
        data = {
            "environment": env,
            "elapsed_s": elapsed,
            "results": rows,
            "failures": failures,
            "summary": summary(results, failures),
        }
        args.json.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
