"""What a plugin distribution needs from its hosts, read from the plugin's own source files.

``cardcage deps`` checks a plugin against a host release *before* the vendor upgrades; this
module produces the plugin's half of that check: every host module, name, hook target,
environment variable and entry point group the plugin's code mentions, as :class:`Dependency`
rows, each with the files and lines that make it one.

It reads source text with ``ast`` and must never import the plugin or a host: the plugin may not
be importable here (its host absent, or another release of it installed), and importing it would
run its code. Files that do not parse are skipped with a warning, not fatal: one broken file must
not hide the rest of the plugin's dependencies.

What counts as a dependency, and when one is *guarded* (the plugin copes with its absence), is
documented in ``_scan_ast``, next to each rule.

Import-safe: stdlib only. Nothing here imports a host or the plugin.
"""

from __future__ import annotations

import ast
import logging
from collections.abc import Iterable, Mapping
from importlib.metadata import Distribution

from ._scan_ast import Accumulator, Key, scan_tree
from ._scan_files import distribution_sources
from .model import HOST_PACKAGES, Dependency, Where

__all__ = ["HOST_PACKAGES", "plugin_sources", "scan_distribution", "scan_sources"]

logger = logging.getLogger(__name__)

#: Each host cardcage serves, and the top-level import packages that are that host's.

#: Where an entry point group dependency is declared (a wheel's metadata file).
_ENTRY_POINTS = Where("entry_points.txt")


def plugin_sources(dist: Distribution) -> list[tuple[str, str]]:
    """(display path, source text) for every ``.py`` file the distribution ships.

    The display path is relative to the directory the import package lives in
    (``"cardcage_demo_cpu/kernels.py"``), the same for a wheel install (files from ``RECORD``)
    and an editable one (the ``.pth`` directories or editable finder mappings, walked on disk),
    so a report reads the same however the vendor installed the plugin.
    """
    return distribution_sources(dist)


def scan_distribution(
    dist: Distribution, *, hosts: Mapping[str, tuple[str, ...]] = HOST_PACKAGES
) -> list[Dependency]:
    """Every host dependency of an installed distribution: its code and its entry point groups."""
    return scan_sources(
        dist.name,
        plugin_sources(dist),
        entry_point_groups={ep.group for ep in dist.entry_points},
        hosts=hosts,
    )


def scan_sources(
    distribution: str,
    sources: Iterable[tuple[str, str]],
    *,
    entry_point_groups: Iterable[str] = (),
    hosts: Mapping[str, tuple[str, ...]] = HOST_PACKAGES,
) -> list[Dependency]:
    """The host dependencies of ``sources`` (display path, text), sorted by host, symbol, source.

    The pure core of the scan: no file system, no metadata, so every rule can be tested on a
    few lines of inline source. Sites of the same (host, kind, symbol, source) merge into one
    row with all their locations and call shapes; a row is guarded only if every site is.
    """
    acc = Accumulator(distribution)
    for path, text in sources:
        # Each file into its own accumulator: a file the reader gives up on halfway (a syntax
        # error, an expression nested too deep) contributes nothing rather than half its rows.
        one_file = Accumulator(distribution)
        try:
            scan_tree(path, ast.parse(text, filename=path), hosts, one_file)
        except (SyntaxError, ValueError, RecursionError) as exc:
            logger.warning(
                "Cannot parse %s of %s (%s): its host dependencies are not recorded.",
                path,
                distribution,
                exc,
            )
            continue
        acc.merge(one_file)
    packages = {pkg: host for host, pkgs in hosts.items() for pkg in pkgs}
    for group in sorted(set(entry_point_groups)):
        host = next((h for pkg, h in packages.items() if group.startswith(pkg + ".")), None)
        if host is not None:
            key: Key = (host, "entry-point-group", group, "entry-point-group")
            acc.add(key, _ENTRY_POINTS, guarded=False)
    return acc.dependencies()
