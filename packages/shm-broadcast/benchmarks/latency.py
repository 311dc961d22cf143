"""Quick one-way latency and idle-CPU probe for cardcage.shm (not the full §12 harness).

Writer and one reader in spawned processes (pinned to cpu0 / cpu1 when there are >= 2 CPUs).
The writer stamps ``perf_counter_ns()`` right before ``enqueue``; the reader stamps right after
``dequeue`` returns and sends its stamp back through a reverse queue; one-way = difference
(CLOCK_MONOTONIC is system-wide on Linux). Usage: ``python latency.py [iterations]``.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import statistics
import sys
import time
from typing import Any

from cardcage.shm import MessageQueue

SIZES = [64, 4096, 1 << 20, 16 << 20]


def _pin(cpu: int) -> None:
    if len(os.sched_getaffinity(0)) >= 2:
        os.sched_setaffinity(0, {cpu})


def _reader(handle: Any, conn: Any) -> None:
    _pin(1)
    q = MessageQueue.create_from_handle(handle, 0)
    back = MessageQueue(1, 1, max_chunk_bytes=4096, max_chunks=4)
    conn.send(back.export_handle())
    q.wait_until_ready()
    back.wait_until_ready()
    while True:
        msg = q.dequeue()
        t1 = time.perf_counter_ns()
        if msg is None:
            break
        if msg == "idle":
            time.sleep(2.0)  # stop reading: the writer parks on the full ring meanwhile
            while q.dequeue() != b"end-fill":
                pass
            back.enqueue(None)
            c0 = time.process_time()
            q.dequeue()  # parked here for ~2 s until the writer sends b"wake"
            back.enqueue(time.process_time() - c0)
            continue
        back.enqueue(t1)
    back.close()
    q.close()


def main() -> None:
    iters = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    ctx = mp.get_context("spawn")
    q = MessageQueue(1, 1, max_chunk_bytes=4 << 20, max_chunks=6)
    parent, child = ctx.Pipe()
    p = ctx.Process(target=_reader, args=(q.export_handle(), child))
    p.start()
    back = MessageQueue.create_from_handle(parent.recv(), 0)
    q.wait_until_ready()
    back.wait_until_ready()
    _pin(0)
    for size in SIZES:
        n = iters if size <= 4096 else max(20, iters // (10 if size <= 1 << 20 else 100))
        raw = os.urandom(size)
        obj = (0, raw)
        for label, payload in (("bytes", raw), ("tuple", obj)):
            lat = []
            for i in range(n + n // 10):
                t0 = time.perf_counter_ns()
                q.enqueue(payload)
                t1 = back.dequeue()
                if i >= n // 10:
                    lat.append((t1 - t0) / 1000)
            lat.sort()
            print(
                f"{label:5s} {size:>9d} B  one-way p50 {statistics.median(lat):9.1f} us  "
                f"p99 {lat[int(len(lat) * 0.99) - 1]:9.1f} us  (n={len(lat)})",
                flush=True,
            )
    q.enqueue("idle")
    c0 = time.process_time()
    for _ in range(7):  # 6 slots: the 7th enqueue blocks until the reader resumes (~2 s)
        q.enqueue(b"fill")
    q.enqueue(b"end-fill")
    blocked = time.process_time() - c0
    back.dequeue()
    print(f"writer blocked on a full ring for ~2 s: {blocked / 2 * 100:.3f} % of a core")
    time.sleep(2.0)
    q.enqueue(b"wake")
    print(f"reader parked in dequeue for ~2 s: {back.dequeue() / 2 * 100:.3f} % of a core")
    q.enqueue(None)
    p.join()
    q.close()
    back.close()


if __name__ == "__main__":
    main()
