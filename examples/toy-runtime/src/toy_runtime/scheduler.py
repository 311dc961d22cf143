"""The toy scheduler: picks batches of requests and "runs" them.

Plugins hook these methods; the runtime itself knows nothing about any plugin.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Request:
    rid: int
    prompt: str


class Scheduler:
    def __init__(self, max_batch: int = 2) -> None:
        self.max_batch = max_batch
        self.queue: list[Request] = []

    def add(self, request: Request) -> None:
        self.queue.append(request)

    def get_next_batch_to_run(self) -> list[Request]:
        """First come, first served."""
        batch, self.queue = self.queue[: self.max_batch], self.queue[self.max_batch :]
        return batch

    def run_batch(self, batch: list[Request]) -> list[str]:
        return [f"#{r.rid}: {r.prompt[::-1]}" for r in batch]
