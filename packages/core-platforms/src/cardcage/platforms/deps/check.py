"""Decide each dependency against one host release: present, missing, changed, moved or unknown.

The release is read statically (``HostSource``); the baseline, when there is one, is the release
the plugin was tested on (the installed host, or a lock written from it), and is what tells a
*changed* signature from one that was always so. A verdict *breaks* the plugin when the release
takes away what the plugin's own code needs: a module or name it imports (unless the plugin
guards the import itself), an entry point group or variable it relies on, or a signature its own
call sites no longer fit. Everything the reader cannot decide is ``unknown``, never ``present``.

Import-safe: stdlib only; never imports a host.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Protocol

from .model import HOST_NAMES, CallShape, Dependency, Lookup, Signature

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence

__all__ = [
    "Baseline",
    "ReleaseSymbols",
    "Verdict",
    "VerdictStatus",
    "call_fits",
    "check_release",
    "lookup",
    "version_key",
]

VerdictStatus = Literal["present", "missing", "changed", "moved", "unknown"]


class ReleaseSymbols(Protocol):
    """What the checker asks of a release (``HostSource`` is the real one; a lock is another)."""

    @property
    def host(self) -> str: ...

    @property
    def version(self) -> str: ...

    def lookup(self, module: str, qualname: str | None = None) -> Lookup: ...

    def env_var(self, name: str) -> Lookup: ...

    def mentions_string(self, literal: str) -> bool: ...

    def defining_modules(self, name: str, near: str | None = None) -> tuple[str, ...]: ...


class Baseline(Protocol):
    """The release a plugin was tested on, as far as the checker needs it: lookups only."""

    @property
    def version(self) -> str: ...

    def lookup_symbol(self, dependency: Dependency) -> Lookup | None: ...


@dataclass(frozen=True)
class Verdict:
    """One dependency, decided against one release."""

    dependency: Dependency
    status: VerdictStatus
    #: Whether the plugin breaks on this release because of it (see the module docstring).
    breaks: bool
    #: What the reader found (the kind, or why it cannot decide), in words.
    detail: str
    #: What to do about it; empty when nothing needs doing.
    fix: str
    #: For ``moved`` (and ``missing`` with hints): where the same name is defined in the release.
    moved_to: tuple[str, ...] = ()
    #: The signature in this release and in the baseline (``changed``), as source text.
    signature: str | None = None
    baseline_signature: str | None = None
    #: Call sites of the plugin that no longer fit this release's signature.
    misfits: tuple[str, ...] = ()
    #: The newest checked release that still had it, and the first checked one without it.
    last_present: str | None = None
    removed_in: str | None = None


_VERSION = re.compile(r"\s*v?(\d+)\.(\d+)(?:\.(\d+))?")


def version_key(version: str) -> tuple[int, int, int]:
    """``"0.5.23.post1"`` -> ``(0, 5, 23)``; a version without a release number sorts first."""
    found = _VERSION.match(version)
    if found is None:
        return (-1, -1, -1)
    major, minor, patch = found.groups()
    return int(major), int(minor), int(patch or 0)


def split_symbol(symbol: str) -> tuple[str, str | None]:
    """``"a.b:C.d"`` -> ``("a.b", "C.d")``; a bare module -> ``(module, None)``."""
    module, sep, qualname = symbol.partition(":")
    return module, (qualname if sep else None)


def lookup(release: ReleaseSymbols, dependency: Dependency) -> Lookup:
    """What ``release`` has of ``dependency``'s symbol, by its kind."""
    if dependency.kind == "env-var":
        return release.env_var(dependency.symbol)
    if dependency.kind == "entry-point-group":
        if release.mentions_string(dependency.symbol):
            return Lookup("present", kind="entry-point-group")
        return Lookup("missing")
    module, qualname = split_symbol(dependency.symbol)
    return release.lookup(module, qualname)


# -- call sites against a signature ------------------------------------------------------------


def _callable_params(signature: Signature, *, method: bool) -> Sequence[tuple[str, str, bool]]:
    params = [(p.name, p.kind, p.has_default) for p in signature.params]
    if method and params and params[0][0] in ("self", "cls") and params[0][1] != "keyword-only":
        params = params[1:]
    return params


def call_fits(signature: Signature, call: CallShape, *, method: bool) -> str | None:
    """None when ``call`` binds to ``signature``; else why not, in words.

    ``method``: the callee is reached through a class or instance (``Foo(...)`` runs
    ``__init__``, ``obj.meth(...)`` a method), so a leading ``self``/``cls`` is bound already.
    A call with ``*args``/``**kwargs`` is only a lower bound: what it spells out is checked,
    required parameters it may fill are not.
    """
    params = _callable_params(signature, method=method)
    positional = [p for p in params if p[1] in ("positional-only", "positional-or-keyword")]
    var_positional = any(p[1] == "var-positional" for p in params)
    var_keyword = any(p[1] == "var-keyword" for p in params)
    if call.positional > len(positional) and not var_positional:
        return f"passes {call.positional} positional arguments; it takes {len(positional)}"
    bound = {p[0] for p in positional[: call.positional]}
    by_keyword = {p[0] for p in params if p[1] in ("positional-or-keyword", "keyword-only")}
    for keyword in call.keywords:
        if keyword in bound:
            return f"passes {keyword!r} twice (by position and by keyword)"
        if keyword not in by_keyword and not var_keyword:
            return f"passes {keyword!r}, which it no longer accepts"
    if call.star_args or call.star_kwargs:
        return None
    given = bound | set(call.keywords)
    required = [
        p[0]
        for p in params
        if not p[2] and p[1] not in ("var-positional", "var-keyword") and p[0] not in given
    ]
    if required:
        return f"does not pass the required {', '.join(repr(r) for r in required)}"
    return None


def _misfits(dependency: Dependency, lookup: Lookup) -> tuple[str, ...]:
    if lookup.signature is None or not dependency.calls:
        return ()
    method = lookup.kind == "class" or "." in (split_symbol(dependency.symbol)[1] or "")
    out = []
    for call in dependency.calls:
        why = call_fits(lookup.signature, call, method=method)
        if why is not None:
            out.append(f"{call.where.location}: {why}")
    return tuple(out)


# -- verdicts ------------------------------------------------------------------------------------


def _host_name(host: str) -> str:
    return HOST_NAMES.get(host, host)


def _hints(dependency: Dependency, release: ReleaseSymbols) -> tuple[str, ...]:
    """Where the release defines what the dependency names, when not where the plugin looks.

    A module: the release's modules with the same last component. A name: the modules that
    define its first component (a class that moved takes its members along); none when that
    first component is still where it was (only a member went away).
    """
    module, qualname = split_symbol(dependency.symbol)
    if qualname is None:
        names = getattr(release, "module_names", None)
        if not callable(names):
            return ()
        leaf = module.rsplit(".", 1)[-1]
        return tuple(sorted(m for m in names() if m.rsplit(".", 1)[-1] == leaf and m != module))[:5]
    top = qualname.split(".", 1)[0]
    if "." in qualname and release.lookup(module, top).status != "missing":
        return ()
    return tuple(h for h in release.defining_modules(top, near=module) if h != f"{module}:{top}")


def _missing(
    dependency: Dependency, release: ReleaseSymbols, lookup: Lookup, baseline: Lookup | None
) -> Verdict:
    host = f"{_host_name(release.host)} {release.version}"
    hints = _hints(dependency, release) if dependency.kind in ("module", "name") else ()
    breaks = not dependency.guarded
    what = {
        "module": "the module does not exist",
        "name": "the name is not defined",
        "env-var": "the variable is not read",
        "entry-point-group": "no code loads this entry point group",
    }[dependency.kind]
    detail = f"{what} in {host}" + (f"; {lookup.reason}" if lookup.reason else "")
    if baseline is not None and baseline.status == "present":
        detail += " (present in the baseline)"
    if dependency.guarded:
        fix = "none needed: the plugin guards this use itself; check the fallback it takes"
    elif hints:
        fix = f"import it from {hints[0]} on {host} (the same name is defined there)"
    elif dependency.kind == "env-var":
        fix = f"stop relying on {dependency.symbol} on {host}; see the release notes"
    elif dependency.kind == "entry-point-group":
        fix = (
            f"{host} never reads this group, so what the plugin registers there does not load "
            "on it: require a release that reads it for that part of the plugin"
        )
    else:
        fix = f"stop using {dependency.symbol} on {host}, or guard it by release"
    return Verdict(
        dependency,
        "moved" if hints and not dependency.guarded else "missing",
        breaks,
        detail,
        fix,
        moved_to=hints,
    )


def _decide(dependency: Dependency, release: ReleaseSymbols, baseline: Lookup | None) -> Verdict:
    found = lookup(release, dependency)
    if found.status == "missing":
        return _missing(dependency, release, found, baseline)
    if found.status == "unknown":
        return Verdict(
            dependency,
            "unknown",
            False,
            f"unknown, checked at run time only: {found.reason or 'not decidable from source'}",
            "",
        )
    misfits = _misfits(dependency, found)
    now = found.signature.text() if found.signature else None
    before = baseline.signature.text() if baseline and baseline.signature else None
    kind = found.kind or "symbol"
    if misfits or (before is not None and now is not None and before != now):
        host = f"{_host_name(release.host)} {release.version}"
        detail = (
            f"{kind} signature {before} became {now} in {host}"
            if before
            else (f"{kind} signature {now} in {host}")
        )
        fix = (
            "update the call sites listed to the new signature"
            if misfits
            else _CHANGED_FIX.get(dependency.source, "check the plugin's use of it")
        )
        return Verdict(
            dependency,
            "changed",
            bool(misfits) and not dependency.guarded,
            detail,
            fix,
            signature=now,
            baseline_signature=before,
            misfits=misfits,
        )
    where = f" (defined at {found.defined_at})" if found.defined_at else ""
    return Verdict(dependency, "present", False, f"{kind}{where}", "", signature=now)


#: What a changed signature asks of the plugin, by why it depends on the symbol.
_CHANGED_FIX = {
    "hook": "check the hook: it receives the new parameters (AROUND and REPLACE hooks must "
    "accept them)",
    "early-patch": "check the early patch: it receives the new parameters",
    "platform-method": "the host calls the platform with the new parameters: make the "
    "platform's method accept them (cardcage's adapter bridges only the contract's own names)",
    "kernel": "nothing, unless the kernel reads the op's attributes: kernels receive the op's "
    "forward arguments, and cardcage checks its op table against every release it supports",
}


def applies(dependency: Dependency, table_version: str | None) -> bool:
    """Whether ``dependency`` concerns the release cardcage's table reads ``table_version`` as."""
    if dependency.releases is None or table_version is None:
        return True
    low, high = (version_key(v) for v in dependency.releases)
    return low <= version_key(table_version) <= high


def check_release(
    dependencies: Iterable[Dependency],
    release: ReleaseSymbols,
    *,
    baseline: Baseline | None = None,
    table_version: str | None = None,
) -> list[Verdict]:
    """Decide every dependency on ``release``'s host that applies to it (see ``applies``)."""
    verdicts = []
    for dependency in dependencies:
        if dependency.host != release.host or not applies(dependency, table_version):
            continue
        before = baseline.lookup_symbol(dependency) if baseline is not None else None
        verdicts.append(_decide(dependency, release, before))
    return verdicts


def date_removals(checked: Mapping[str, Sequence[Verdict]]) -> dict[str, list[Verdict]]:
    """Each release's verdicts, with ``last_present``/``removed_in`` filled from the others.

    ``checked`` maps release version to its verdicts; a symbol missing in one release and
    present in an older checked one gets the newest such release as ``last_present`` and the
    first checked release after it where it is missing as ``removed_in``.
    """
    order = sorted(checked, key=version_key)
    present: dict[tuple[str, str, str], list[str]] = {}
    for version in order:
        for verdict in checked[version]:
            if verdict.status in ("present", "changed"):
                present.setdefault(_key(verdict.dependency), []).append(version)
    out: dict[str, list[Verdict]] = {}
    for version in order:
        out[version] = [
            _dated(verdict, version, order, present.get(_key(verdict.dependency), []))
            for verdict in checked[version]
        ]
    return out


def _dated(verdict: Verdict, version: str, order: Sequence[str], present: Sequence[str]) -> Verdict:
    """``verdict`` with the removal dated, when it is missing here and present in an older
    checked release."""
    if verdict.status not in ("missing", "moved"):
        return verdict
    seen = [v for v in present if version_key(v) < version_key(version)]
    if not seen:
        return verdict
    last = seen[-1]
    first_gone = next(
        v for v in order if version_key(last) < version_key(v) <= version_key(version)
    )
    return _with_removal(verdict, last, first_gone)


def _key(dependency: Dependency) -> tuple[str, str, str]:
    return (dependency.host, dependency.kind, dependency.symbol)


def _with_removal(verdict: Verdict, last: str, removed: str) -> Verdict:
    from dataclasses import replace

    detail = f"{verdict.detail}; last present in {last}, gone since {removed}"
    return replace(verdict, detail=detail, last_present=last, removed_in=removed)
