"""``in_effect()``: which of the plugins' hooks and kernels run *now*, asked inside the host.

What a plugin registered and what runs are different questions once a host is involved: SGLang
applies handed-over hooks with its own wrappers, an op's dispatch can be overridden after a
kernel was installed, a later patch can replace a patched attribute. ``cardcage hooks`` cannot
see any of that: it runs where no host does. This function runs where the host runs (a test, a
hook, or the vendor's own code in SGLang's scheduler or vLLM's worker) and answers from the
process itself: every hook with its state (``cardcage.hooks.effect``) and every installed
kernel with whether the host's op still dispatches to it (``cardcage.platforms.kernels``).

It imports nothing of a host and nothing a host has not imported already.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

__all__ = ["SCHEMA", "in_effect"]

SCHEMA = "cardcage.in-effect/1"


def in_effect(distribution: str | None = None) -> dict[str, Any]:
    """The hooks (only ``distribution``'s, when given) and the installed kernels of the selected
    platform, each with whether it is in effect in this process now, as JSON-ready data::

        {"schema": "cardcage.in-effect/1",
         "hooks": [{"target", "type", "hook", "plugin", "distribution", "applied_by",
                    "registry", "state", "in_effect"}, ...],
         "kernels": [{"op", "kernel", "platform", "host", "release", "host_op", "mechanism",
                      "problem", "in_effect"}, ...]}

    A hook's ``state`` is ``in-effect``, ``not-applied``, ``pending`` (waiting for its module),
    ``not-imported`` (handed to the host, whose target module is not imported yet) or
    ``replaced-since`` (something replaced the patched attribute after cardcage applied it).
    """
    from cardcage.hooks.effect import in_effect as hooks_in_effect

    from .kernels import in_effect as kernels_in_effect

    hooks = [{**asdict(row), "in_effect": row.in_effect} for row in hooks_in_effect(distribution)]
    return {"schema": SCHEMA, "hooks": hooks, "kernels": kernels_in_effect()}
