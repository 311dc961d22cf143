"""What each installed host release will do with the installed plugins (doctor and platform).

cardcage's own selection decides what ``cardcage platform`` and ``cardcage doctor`` report; a
plugin built with cardcage is also selected and loaded by each host, whose releases differ in
what they can take. What a host's release does is that host's knowledge, so it lives in the
host's room (``cardcage.platforms.hosts.<host>.diagnosis``); this module only defines the rows
the commands report and asks every room that has something to say:

* ``release_findings(snapshot, selected)``: the findings about the host's installed release and
  the release itself (or nothing, where the host is not installed);
* ``runtime_hosts(runtime, plugin)``: whether the installed release selects what cardcage
  selected for one of cardcage's runtimes.

A room's diagnosis reads metadata only: no host is imported here.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cardcage.hooks.snapshot import EntryPointSnapshot
    from cardcage.platforms.findings import DistRef, Finding

__all__ = ["HostRelease", "RuntimeHost", "release_findings", "runtime_hosts"]


@dataclass(frozen=True)
class HostRelease:
    """An installed host runtime, by release, as the diagnostics read it from its metadata."""

    host: str
    version: str
    #: The release-table row that describes it (the measured release at or below it).
    release: str
    supported: bool
    #: The first and last supported release.
    supported_range: tuple[str, str]
    #: Whether the release selects out-of-tree diffusion platforms and loads diffusion plugins.
    diffusion_plugins: bool


@dataclass(frozen=True)
class RuntimeHost:
    """Whether an installed host release can select what cardcage selected for one runtime."""

    host: str
    version: str
    selects: bool
    detail: str


def _diagnoses(function: str) -> Iterator[ModuleType]:
    """Every host room's diagnosis module that offers ``function``, in the rooms' order."""
    from cardcage.platforms import hosts

    for host in hosts.ROOMS:
        module = hosts.diagnosis(host)
        if module is not None and hasattr(module, function):
            yield module


def runtime_hosts(runtime: str, plugin: str | None) -> tuple[RuntimeHost, ...]:
    """What each installed host does with cardcage's choice for ``runtime``: ``plugin`` is the
    selected platform plugin's name, None for a built-in platform."""
    rows = (m.runtime_hosts(runtime, plugin) for m in _diagnoses("runtime_hosts"))
    return tuple(row for found in rows for row in found)


def release_findings(
    snapshot: EntryPointSnapshot,
    selected: dict[str, tuple[str, DistRef, str | None]],
) -> tuple[list[Finding], tuple[HostRelease, ...]]:
    """The findings about every installed host release, and the releases themselves.

    ``selected`` maps a runtime name to the platform plugin cardcage's start-up selects there:
    ``(entry-point name, distribution, class qualname or None)``.
    """
    findings: list[Finding] = []
    releases: list[HostRelease] = []
    for module in _diagnoses("release_findings"):
        found, hosts = module.release_findings(snapshot, selected)
        findings += found
        releases += hosts
    return findings, tuple(releases)
