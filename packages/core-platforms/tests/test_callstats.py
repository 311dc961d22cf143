"""``CallStats``: what a vendor's timing AROUND hooks count, exactly, under threads and errors."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from cardcage.hooks.registry import BaseHookRegistry, HookType
from cardcage.hooks.testing import hook_sandbox
from cardcage.platforms.callstats import CallStats, TargetStats

__all__ = ["hook_sandbox"]  # the fixture, imported so pytest finds it


def test_a_timed_call_returns_the_result_and_counts_once() -> None:
    stats = CallStats()
    assert stats.timed("t", lambda x: x * 2, 21) == 42
    got = stats.get("t")
    assert (got.calls, got.errors) == (1, 0)
    assert 0 <= got.max_s <= got.total_s


def test_a_failing_call_is_counted_as_an_error_and_still_raises() -> None:
    stats = CallStats()

    def broken() -> None:
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        stats.timed("t", broken)
    assert (stats.get("t").calls, stats.get("t").errors) == (1, 1)


def test_counts_are_exact_under_concurrent_calls() -> None:
    stats = CallStats()

    def work() -> None:
        for _ in range(500):
            stats.timed("t", int)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert stats.get("t").calls == 4000


def test_an_unseen_target_reads_as_zeros_and_reset_forgets() -> None:
    stats = CallStats()
    assert stats.get("never") == TargetStats()
    stats.record("t", 0.5, failed=False)
    assert stats.as_dict() == {"t": TargetStats(calls=1, total_s=0.5, max_s=0.5)}
    stats.reset()
    assert stats.as_dict() == {}


def test_an_around_hook_built_on_it_counts_the_hooked_function(
    hook_sandbox: type[BaseHookRegistry],
) -> None:
    stats = CallStats()

    def timed(original: Any, *args: Any, **kwargs: Any) -> Any:
        return stats.timed("json.dumps", original, *args, **kwargs)

    hook_sandbox.register("json.dumps", timed, HookType.AROUND)
    hook_sandbox.apply(strict=True)
    import json

    assert json.dumps([1]) == "[1]"
    assert stats.get("json.dumps").calls == 1


def test_a_built_hook_times_into_its_target_and_shows_each_result(
    hook_sandbox: type[BaseHookRegistry],
) -> None:
    stats = CallStats()
    seen: list[tuple[Any, tuple[Any, ...]]] = []
    hook = stats.hook("json.loads", then=lambda result, *args, **kw: seen.append((result, args)))
    hook_sandbox.register("json.loads", hook, HookType.AROUND)
    hook_sandbox.apply(strict=True)
    import json

    assert json.loads("[2]") == [2]
    assert stats.get("json.loads").calls == 1
    assert seen == [([2], ("[2]",))]
