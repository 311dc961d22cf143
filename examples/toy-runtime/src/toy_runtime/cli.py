"""``toy-runtime``: start the toy runtime the way a real one starts, and show what cardcage did.

A real runtime calls ``load_plugins()`` first thing at every process entry point, before it
builds anything a plugin may hook. This one does the same, under its own profile (its own
entry-point groups and variables, ``toy_runtime.runtime``) and into its own hook registry, then
prints what cardcage discovered, registered and applied, and serves a few requests so the hooks'
effects are visible.
"""

from __future__ import annotations

import logging
import sys

from cardcage.hooks import format_source, load_plugins
from cardcage.hooks.snapshot import entry_point_snapshot
from toy_runtime.hooks import HookRegistry
from toy_runtime.runtime import TOY_PROFILE


def main() -> int:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    report = load_plugins(TOY_PROFILE, HookRegistry)

    print("== discovered entry points")
    snapshot = entry_point_snapshot()
    for group in (report.profile.platform_group, report.profile.plugin_group):
        for ep in snapshot.group(group):
            version = ep.dist.version if ep.dist else "?"
            print(f"  [{group}] {ep.name} = {ep.value}  ({ep.dist_name} {version})")
    print("== plugins")
    for plugin in report.plugins:
        print(f"  {plugin.name:<12} {plugin.status:<16} {plugin.dist_name} {plugin.detail}")
    print("== hooks")
    for target, records in HookRegistry.registrations().items():
        for record in records:
            hook = getattr(record.hook, "__qualname__", repr(record.hook))
            source = format_source(record.source)
            print(f"  {record.hook_type.name:<7} {target}  <- {hook} ({source})")
    applied = report.apply
    if applied is not None:
        print(
            f"== apply: {len(applied.applied)} applied, {len(applied.failed)} failed, "
            f"{applied.rebound} stale alias(es) rebound"
        )

    from toy_runtime.scheduler import Request, Scheduler

    print("== serving")
    scheduler = Scheduler(max_batch=2)
    for rid, prompt in enumerate(["a long prompt indeed", "hi", "medium one", "yo"]):
        scheduler.add(Request(rid, prompt))
    while scheduler.queue:
        batch = scheduler.get_next_batch_to_run()
        for line in scheduler.run_batch(batch):
            print(f"  {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
