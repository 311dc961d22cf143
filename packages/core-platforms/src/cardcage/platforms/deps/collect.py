"""Everything one plugin distribution depends on in its hosts, from every source cardcage knows.

* its own code, read statically (``plugin_scan``): imports, names, call sites, variables,
  hook-target strings, its host entry point groups;
* the hooks its ``register()`` adds, as ``cardcage hooks`` rehearses them (targets computed at
  run time show up only there);
* its platform class (resolved through its platform entry point): the kernels it declares, with
  the host op and the registration mechanism each host release uses (the rooms' tables), and the
  platform methods the host calls on it, per release (SGLang's release table; for vLLM, the
  names of the vendor's vLLM section and the names cardcage's adapter translates).

The plugin is imported (its platform class and its ``register()`` are code); the hosts are not.
"""

from __future__ import annotations

import importlib.metadata
import logging
import pkgutil
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from .errors import UnknownPluginDistributionError
from .model import HOST_PACKAGES, Dependency, Source, Where, colon_target

if TYPE_CHECKING:
    from importlib.metadata import Distribution

__all__ = ["PluginDeps", "collect_plugin", "host_plugin_distributions", "merge"]

logger = logging.getLogger(__name__)


#: Entry point groups that name a platform class (cardcage's SRT group, which SGLang reads too).
_PLATFORM_GROUPS = ("sglang.srt.platforms", "vllm.platform_plugins")

_SGLANG_INTERFACE = "sglang.srt.platforms.interface:SRTPlatform"
_VLLM_INTERFACE = "vllm.platforms.interface:Platform"

#: cardcage contract name -> the vLLM ``Platform`` name the vLLM adapter answers it under.
_VLLM_TRANSLATED = {
    "get_torch_distributed_backend_str": "dist_backend",
    "get_communicator_class": "get_device_communicator_cls",
    "seed_everything": "manual_seed_all",
}


#: Names a vLLM section declares for cardcage (read by its adapter), not for vLLM.
_DECLARATIONS = frozenset({"behaves_as"})


@dataclass(frozen=True)
class PluginDeps:
    """One plugin distribution and its host dependencies."""

    distribution: str
    version: str
    dependencies: tuple[Dependency, ...]
    #: The platform class the dependencies on platform methods and kernels were read from.
    platform: str | None = None
    #: What could not be collected, and why (a platform class that did not resolve here, ...).
    notes: tuple[str, ...] = field(default=())


def _host_of(dotted: str) -> str | None:
    top = dotted.split(".", 1)[0].split(":", 1)[0]
    return next((host for host, tops in HOST_PACKAGES.items() if top in tops), None)


def host_plugin_distributions() -> list[str]:
    """Installed distributions with an entry point in a host's group (``sglang.*``/``vllm.*``),
    hosts and cardcage's own packages excluded, sorted."""
    from .host_source import HOST_DISTRIBUTIONS

    names: set[str] = set()
    for dist in importlib.metadata.distributions():
        name = dist.metadata["Name"] or ""
        normalised = name.lower().replace("_", "-")
        if normalised in HOST_DISTRIBUTIONS or normalised.startswith("cardcage-core"):
            continue
        if any(_host_of(ep.group) for ep in dist.entry_points):
            names.add(name)
    return sorted(names, key=str.lower)


def _distribution(name: str) -> Distribution:
    try:
        return importlib.metadata.distribution(name)
    except importlib.metadata.PackageNotFoundError:
        installed = ", ".join(host_plugin_distributions()) or "none"
        raise UnknownPluginDistributionError(
            f"no distribution named {name!r} is installed here; host plugins installed: {installed}"
        ) from None


def merge(dependencies: Iterable[Dependency]) -> tuple[Dependency, ...]:
    """One row per (host, kind, symbol, source, releases): every site, every call; guarded only
    when every merged row is."""
    merged: dict[tuple[Any, ...], Dependency] = {}
    for dep in dependencies:
        key = (dep.host, dep.kind, dep.symbol, dep.source, dep.releases)
        seen = merged.get(key)
        if seen is None:
            merged[key] = dep
            continue
        merged[key] = replace(
            seen,
            where=tuple(sorted(set(seen.where) | set(dep.where), key=lambda w: w.location)),
            calls=seen.calls + tuple(c for c in dep.calls if c not in seen.calls),
            guarded=seen.guarded and dep.guarded,
        )
    return tuple(
        sorted(merged.values(), key=lambda d: (d.host, d.symbol, d.source, d.releases or ()))
    )


# -- hooks, as register() adds them ------------------------------------------------------------


def rehearsed_hooks(distribution: str) -> list[Dependency]:
    """The host targets of the hooks ``distribution``'s general plugins register, as ``cardcage
    hooks`` rehearses them (every runtime's ``load_plugins()``), and its early patches."""
    from cardcage.platforms.diagnostics.hooks import collect_hooks

    wanted = distribution.lower().replace("_", "-")
    report = collect_hooks()
    out: list[Dependency] = []
    rows: list[tuple[str, str, str | None, str]] = [
        (row.target, row.type, row.distribution, f"{row.type} hook {row.hook}")
        for runtime in report.runtimes
        for row in runtime.hooks
    ]
    if report.early is not None:
        rows += [
            (row.target, row.type, row.distribution, f"early patch ({row.type})")
            for row in report.early.patches
        ]
    for target, _type, dist, location in rows:
        host = _host_of(target)
        if host is None or (dist or "").lower().replace("_", "-") != wanted:
            continue
        module, colon, qualname = colon_target(target).partition(":")
        source: Source = "early-patch" if location.startswith("early patch") else "hook"
        out.append(
            Dependency(
                host=host,
                kind="name" if colon and qualname else "module",
                symbol=f"{module}:{qualname}" if colon and qualname else module,
                source=source,
                distribution=distribution,
                where=(Where(location),),
            )
        )
    return out


# -- the platform class: kernels and platform methods ------------------------------------------


def _platform_class(dist: Distribution) -> tuple[type | None, str | None, list[str]]:
    notes: list[str] = []
    for ep in dist.entry_points:
        if ep.group not in _PLATFORM_GROUPS:
            continue
        try:
            activate = ep.load()
            answer = activate() if callable(activate) else None
        except Exception as exc:  # the plugin's own failure: doctor reports it in full
            notes.append(f"{ep.group} entry point {ep.name}: activate() failed here ({exc!r})")
            continue
        if not answer:
            notes.append(
                f"{ep.group} entry point {ep.name}: activate() declined here (returned None), "
                "so its kernels and platform methods are not listed; run where it activates, "
                f"or select it (SGLANG_PLATFORM={ep.name})"
            )
            continue
        try:
            cls = pkgutil.resolve_name(str(answer))
        except Exception as exc:
            notes.append(f"{ep.group} entry point {ep.name}: {answer!r} does not resolve ({exc})")
            continue
        if isinstance(cls, type):
            return cls, str(answer), notes
    return None, None, notes


def _own_names(cls: type, packages: Sequence[str]) -> dict[str, str]:
    """Public names the vendor's own classes define (not cardcage's bases): name -> class."""
    out: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        top = klass.__module__.split(".", 1)[0]
        if top not in packages:
            continue
        for name in vars(klass):
            if not name.startswith("_"):
                out[name] = f"{klass.__module__}:{klass.__qualname__}"
    return out


def _ranges(versions: Sequence[str], keep: Sequence[bool]) -> list[tuple[str, str]]:
    """Consecutive runs of ``versions`` where ``keep`` holds, as (first, last)."""
    runs: list[tuple[str, str]] = []
    start: str | None = None
    previous: str | None = None
    for version, kept in zip(versions, keep, strict=True):
        if kept and start is None:
            start = version
        if not kept and start is not None and previous is not None:
            runs.append((start, previous))
            start = None
        previous = version
    if start is not None and previous is not None:
        runs.append((start, previous))
    return runs


def platform_dependencies(
    cls: type, distribution: str, packages: Sequence[str]
) -> list[Dependency]:
    """The kernels' host ops and mechanisms, and the platform methods each host calls."""
    from cardcage.platforms.hosts.sglang import releases as sglang_releases
    from cardcage.platforms.hosts.sglang.srt_kernels import SRT_OPS
    from cardcage.platforms.hosts.vllm.kernels import CUSTOM_OP, VLLM_OPS
    from cardcage.platforms.kernels import declared_kernels

    out: list[Dependency] = []
    platform = f"{cls.__module__}:{cls.__qualname__}"
    versions = [r.version for r in sglang_releases.RELEASES]
    for op, kernel in sorted(declared_kernels(cls).items()):
        where = (Where(f"{platform}.kernels[{op!r}] = {kernel!r}"),)
        if op in SRT_OPS:
            out.append(Dependency("sglang", "name", SRT_OPS[op], "kernel", distribution, where))
            bases = [r.fused_op_base for r in sglang_releases.RELEASES]
            for base in dict.fromkeys(bases):
                for low, high in _ranges(versions, [b == base for b in bases]):
                    out.append(
                        Dependency(
                            "sglang",
                            "name",
                            f"{base}.register_oot_forward",
                            "kernel",
                            distribution,
                            where,
                            releases=(low, high),
                        )
                    )
        if op in VLLM_OPS:
            out.append(Dependency("vllm", "name", VLLM_OPS[op], "kernel", distribution, where))
            out.append(
                Dependency(
                    "vllm",
                    "name",
                    f"{CUSTOM_OP}:CustomOp.register_oot",
                    "kernel",
                    distribution,
                    where,
                )
            )
    own = _own_names(cls, packages)
    for name, owner in sorted(own.items()):
        served = [r.host_names_for(name) for r in sglang_releases.RELEASES]
        for host_name in dict.fromkeys(n for names in served for n in names):
            how = "" if host_name == name else f", which cardcage's adapter serves as {host_name}"
            where = (Where(f"{owner}.{name} (platform method{how})"),)
            for low, high in _ranges(versions, [host_name in names for names in served]):
                out.append(
                    Dependency(
                        "sglang",
                        "name",
                        f"{_SGLANG_INTERFACE}.{host_name}",
                        "platform-method",
                        distribution,
                        where,
                        releases=(low, high),
                    )
                )
        out += _vllm_platform_names(name, owner, distribution)
    section = _vllm_section(cls)
    if section is not None:
        names = (n for n in vars(section) if not n.startswith("_") and n not in _DECLARATIONS)
        for name in sorted(names):
            out.append(
                Dependency(
                    "vllm",
                    "name",
                    f"{_VLLM_INTERFACE}.{name}",
                    "platform-method",
                    distribution,
                    (Where(f"{section.__module__}:{section.__qualname__}.{name} (vLLM section)"),),
                )
            )
    return out


def _vllm_platform_names(name: str, owner: str, distribution: str) -> list[Dependency]:
    """The vLLM ``Platform`` name through which vLLM reaches the vendor's ``name`` (its own, or
    the adapter's translation), for the releases of the vLLM table whose ``Platform`` has it."""
    from cardcage.platforms.hosts.vllm import releases as vllm_releases

    host_name = _VLLM_TRANSLATED.get(name, name)
    versions = [r.version for r in vllm_releases.RELEASES]
    has = [host_name in vllm_releases.platform_names(v) for v in versions]
    how = "" if host_name == name else f", which cardcage's adapter serves as {host_name}"
    where = (Where(f"{owner}.{name} (platform method{how})"),)
    return [
        Dependency(
            "vllm",
            "name",
            f"{_VLLM_INTERFACE}.{host_name}",
            "platform-method",
            distribution,
            where,
            releases=None if (low, high) == (versions[0], versions[-1]) else (low, high),
        )
        for low, high in _ranges(versions, has)
    ]


def _vllm_section(cls: type) -> type | None:
    path = getattr(cls, "vllm_section", None)
    if not path:
        return None
    try:
        section = pkgutil.resolve_name(str(path))
    except Exception:  # doctor reports a section that does not resolve
        return None
    return section if isinstance(section, type) else None


def _packages(dist: Distribution) -> list[str]:
    mapping = importlib.metadata.packages_distributions()
    name = (dist.metadata["Name"] or "").lower().replace("_", "-")
    return sorted(
        top
        for top, dists in mapping.items()
        if any(d.lower().replace("_", "-") == name for d in dists)
    )


def collect_plugin(name: str, *, rehearse: bool = True) -> PluginDeps:
    """Every host dependency of the installed distribution ``name``."""
    from .plugin_scan import scan_distribution

    dist = _distribution(name)
    display = dist.metadata["Name"] or name
    deps: list[Dependency] = list(scan_distribution(dist))
    notes: list[str] = []
    if rehearse:
        try:
            deps += rehearsed_hooks(display)
        except Exception as exc:  # a broken rehearsal still leaves the static list
            notes.append(f"the hooks' rehearsal failed ({exc!r}); hook targets are static only")
    cls, qualname, found = _platform_class(dist)
    notes += found
    if cls is not None:
        deps += platform_dependencies(cls, display, _packages(dist))
    return PluginDeps(
        distribution=display,
        version=dist.version,
        dependencies=merge(deps),
        platform=qualname,
        notes=tuple(notes),
    )
