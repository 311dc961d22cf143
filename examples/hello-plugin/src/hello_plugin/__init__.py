"""A general plugin for the toy runtime, registered under ``toy_runtime.plugins`` as ``hello``.

It changes behaviour without touching the runtime's code:
* AROUND ``Scheduler.get_next_batch_to_run``: serve the shortest prompts first;
* AFTER ``Scheduler.run_batch``: append how long each batch took.
"""

from __future__ import annotations

import time
from typing import Any

from toy_runtime.hooks import HookRegistry, HookType

SCHEDULER = "toy_runtime.scheduler:Scheduler"


def shortest_first(original_fn: Any, self: Any) -> Any:
    self.queue.sort(key=lambda request: len(request.prompt))
    return original_fn(self)


def timed(original_fn: Any, self: Any, batch: Any) -> Any:
    start = time.perf_counter()
    lines = original_fn(self, batch)
    elapsed_us = (time.perf_counter() - start) * 1e6
    return [f"{line}  ({elapsed_us:.0f} us for the batch)" for line in lines]


def register() -> None:
    HookRegistry.register(f"{SCHEDULER}.get_next_batch_to_run", shortest_first, HookType.AROUND)
    HookRegistry.register(f"{SCHEDULER}.run_batch", timed, HookType.AROUND)
