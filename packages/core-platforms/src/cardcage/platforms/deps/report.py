"""``cardcage deps``: collect, check against each requested release, and say it.

The report is one document (``cardcage.deps/1``, schema shipped as ``deps.schema.json``): the
plugins and their dependencies, then one block per release checked, each verdict with what was
found and the fix, and a summary per release. ``--strict`` turns any break into exit status 1.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from .check import Verdict, check_release, date_removals, version_key
from .model import HOST_NAMES

if TYPE_CHECKING:
    from collections.abc import Sequence

    from .collect import PluginDeps
    from .host_source import HostSource
    from .lock import LockBaseline, ReleaseBaseline
    from .model import Dependency

__all__ = ["DepsReport", "ReleaseCheck", "build_report", "render"]


@dataclass(frozen=True)
class ReleaseCheck:
    """One release, and every applicable dependency of every plugin decided on it."""

    host: str
    distribution: str
    version: str
    origin: str
    #: The release cardcage's table reads it as, and whether cardcage supports it as a host.
    table_release: str | None
    supported: bool | None
    baseline: str | None
    verdicts: tuple[Verdict, ...]

    def summary(self) -> dict[str, int]:
        counts = dict.fromkeys(("present", "missing", "changed", "moved", "unknown"), 0)
        for verdict in self.verdicts:
            counts[verdict.status] += 1
        counts["breaks"] = sum(v.breaks for v in self.verdicts)
        return counts


@dataclass(frozen=True)
class DepsReport:
    """The plugins, their dependencies, and each release checked."""

    plugins: tuple[PluginDeps, ...]
    checks: tuple[ReleaseCheck, ...]
    notes: tuple[str, ...] = field(default=())

    @property
    def breaks(self) -> int:
        return sum(c.summary()["breaks"] for c in self.checks)

    def as_json(self) -> dict[str, Any]:
        from cardcage.platforms.diagnostics._common import to_json

        return {
            "schema": "cardcage.deps/1",
            "ok": self.breaks == 0,
            "plugins": [
                {**to_json(p), "dependencies": [dependency_json(d) for d in p.dependencies]}
                for p in self.plugins
            ],
            "releases": [
                {
                    **to_json(c),
                    "verdicts": [_verdict_json(v) for v in c.verdicts],
                    "summary": c.summary(),
                }
                for c in self.checks
            ],
            "notes": list(self.notes),
        }


def dependency_json(dependency: Dependency) -> dict[str, Any]:
    """One dependency as JSON: locations as plain strings."""
    return {
        "host": dependency.host,
        "kind": dependency.kind,
        "symbol": dependency.symbol,
        "source": dependency.source,
        "distribution": dependency.distribution,
        "where": [w.location for w in dependency.where],
        "calls": [
            {
                "positional": c.positional,
                "keywords": list(c.keywords),
                "star_args": c.star_args,
                "star_kwargs": c.star_kwargs,
                "where": c.where.location,
            }
            for c in dependency.calls
        ],
        "guarded": dependency.guarded,
        "releases": list(dependency.releases) if dependency.releases else None,
    }


def _verdict_json(verdict: Verdict) -> dict[str, Any]:
    from cardcage.platforms.diagnostics._common import to_json

    dep = verdict.dependency
    document: dict[str, Any] = {
        "symbol": dep.symbol,
        "kind": dep.kind,
        "source": dep.source,
        "distribution": dep.distribution,
        "guarded": dep.guarded,
        "where": [w.location for w in dep.where],
    }
    document.update({k: v for k, v in to_json(verdict).items() if k != "dependency"})
    return document


def _table_release(host: str, version: str) -> tuple[str | None, bool | None]:
    if host == "sglang":
        from cardcage.platforms.hosts.sglang.releases import release_for as sglang_release_for

        release, supported = sglang_release_for(version)
        return release.version, supported
    if host == "vllm":
        from cardcage.platforms.hosts.vllm.releases import release_for as vllm_release_for

        vllm_release, vllm_supported = vllm_release_for(version)
        return vllm_release.version, vllm_supported
    return None, None


def build_report(
    plugins: Sequence[PluginDeps],
    releases: Sequence[HostSource],
    baselines: dict[str, ReleaseBaseline | LockBaseline],
    notes: Sequence[str] = (),
) -> DepsReport:
    """Decide every plugin's dependencies on every release; date removals across releases of
    the same host (``removed_in``). ``baselines`` maps host -> its baseline."""
    dependencies = [d for p in plugins for d in p.dependencies]
    checks: list[ReleaseCheck] = []
    for release in releases:
        table, supported = _table_release(release.host, release.version)
        baseline = baselines.get(release.host)
        if baseline is not None and baseline.version == release.version:
            baseline = None  # a release compared with itself changes nothing
        verdicts = check_release(dependencies, release, baseline=baseline, table_version=table)
        checks.append(
            ReleaseCheck(
                host=release.host,
                distribution=release.distribution,
                version=release.version,
                origin=release.origin,
                table_release=table,
                supported=supported,
                baseline=baseline.version if baseline is not None else None,
                verdicts=tuple(verdicts),
            )
        )
    return DepsReport(tuple(plugins), tuple(_dated(checks)), tuple(notes))


def _dated(checks: list[ReleaseCheck]) -> list[ReleaseCheck]:
    """``checks`` with removals dated across the releases of each host (``date_removals``);
    a host checked twice at the same version is left undated: "since when" would be ambiguous."""
    out = list(checks)
    for host in {c.host for c in checks}:
        mine = [i for i, c in enumerate(checks) if c.host == host]
        versions = {checks[i].version: list(checks[i].verdicts) for i in mine}
        if len(versions) != len(mine):
            continue
        dated = date_removals(versions)
        for i in mine:
            out[i] = replace(checks[i], verdicts=tuple(dated[checks[i].version]))
    return out


# -- text --------------------------------------------------------------------------------------


def _plugin_text(plugin: PluginDeps, verbose: int) -> list[str]:
    lines = [f"{plugin.distribution} {plugin.version}"]
    if plugin.platform:
        lines.append(f"  platform class: {plugin.platform}")
    for dep in plugin.dependencies:
        flags = []
        if dep.guarded:
            flags.append("guarded")
        if dep.releases:
            flags.append(f"releases {dep.releases[0]}-{dep.releases[1]}")
        suffix = f" [{', '.join(flags)}]" if flags else ""
        lines.append(
            f"  {HOST_NAMES.get(dep.host, dep.host):7} {dep.source:17} {dep.symbol}{suffix}"
        )
        if verbose:
            lines += [f"      at {w.location}" for w in dep.where]
    lines += [f"  note: {note}" for note in plugin.notes]
    return lines


def _check_text(check: ReleaseCheck, verbose: int) -> list[str]:
    host = HOST_NAMES.get(check.host, check.host)
    head = f"{host} {check.version} ({check.distribution}, {check.origin})"
    if check.supported is False:
        head += f"; outside cardcage's supported releases, read as {check.table_release}"
    lines = [head]
    lines.append(
        f"  baseline: {check.baseline}"
        if check.baseline
        else "  baseline: none (signatures are not compared; pass --baseline)"
    )
    summary = check.summary()
    lines.append(
        "  "
        + ", ".join(f"{n} {k}" for k, n in summary.items() if k != "breaks")
        + f"; {summary['breaks']} break(s)"
    )
    for verdict in check.verdicts:
        if verdict.status == "present" and not verbose:
            continue
        mark = "BREAK" if verdict.breaks else verdict.status
        dep = verdict.dependency
        lines.append(f"  {mark:8} {dep.symbol} ({dep.source}) - {verdict.status}: {verdict.detail}")
        for misfit in verdict.misfits:
            lines.append(f"           call at {misfit}")
        if verdict.moved_to:
            lines.append(f"           found at: {', '.join(verdict.moved_to[:3])}")
        if verdict.fix:
            lines.append(f"           fix: {verdict.fix}")
        if verbose:
            lines += [f"           used at {w.location}" for w in dep.where]
    return lines


def render(report: DepsReport, verbose: int) -> str:
    """The report as text: each plugin's dependencies, then each release's verdicts."""
    lines: list[str] = []
    for plugin in report.plugins:
        lines += _plugin_text(plugin, verbose)
    if not report.plugins:
        lines.append("no host plugin distribution is installed here")
    for check in sorted(report.checks, key=lambda c: (c.host, version_key(c.version))):
        lines.append("")
        lines += _check_text(check, verbose)
    lines += [f"note: {note}" for note in report.notes]
    return "\n".join(lines)
