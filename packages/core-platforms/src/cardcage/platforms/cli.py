"""The ``cardcage`` console script: plugins, platform selection, hooks, environment, doctor.

    cardcage plugins list [--group G]   every plugin entry point and what the loader would do
    cardcage platform                   which platform each runtime chose, and why
    cardcage hooks                      run load_plugins() and list every hook and its status
    cardcage env                        interpreter, OS, distributions and every cardcage variable
    cardcage doctor [--strict]          problems that break or silently change start-up
    cardcage new DEST [options]         generate a vendor platform plugin in a new folder

Every command takes ``--runtime NAME`` (a runtime registered in the ``cardcage.runtimes``
entry-point group; default: all of them), so a runtime embedded under its own profile is covered
like SRT and diffusion.

Each command takes ``--json`` (a stable document, ``"schema": "cardcage.<command>/1"``, described
by ``cardcage/platforms/schemas/<command>.schema.json``) and ``-v``/``--verbose`` (log cardcage's
own records to stderr; ``-vv`` for DEBUG). Exit codes: 0 success; 1 the command's subject failed
(platform selection, plugin loading) or ``doctor --strict`` found problems; 2 usage error.

This module parses arguments and renders; ``cardcage.platforms.diagnostics`` collects the facts.
While a command collects, anything a plugin prints is sent to stderr, so ``--json`` output on
stdout stays parseable.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import sys
import textwrap
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TextIO

from . import diagnostics as diag

if TYPE_CHECKING:
    from .diagnostics import (
        DoctorReport,
        EarlyPatches,
        EnvReport,
        ErrorInfo,
        HooksReport,
        PlatformReport,
        PluginsReport,
        RuntimeHooks,
        RuntimePlatform,
    )

__all__ = ["build_parser", "main"]

_WIDTH = 100


# -- rendering helpers -------------------------------------------------------------------------


def _cell(value: object) -> str:
    if value is None or value == "":
        return "-"
    return str(value)


def _table(headers: Sequence[str], rows: Sequence[Sequence[object]], indent: str = "  ") -> str:
    """An aligned plain-text table; the last column is never padded."""
    cells = [[_cell(c) for c in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) for i, h in enumerate(headers)]
    lines = []
    for row in [list(headers), *cells]:
        padded = [c.ljust(w) for c, w in zip(row[:-1], widths[:-1], strict=True)]
        lines.append((indent + "  ".join([*padded, row[-1]])).rstrip())
    return "\n".join(lines)


def _fill(text: str, *, initial: str = "", subsequent: str = "  ") -> str:
    """Wrap at spaces only: a name a user copies (a distribution, an entry point, a path) is
    never split at its hyphens nor cut when it is longer than a line."""
    return textwrap.fill(
        text,
        _WIDTH,
        initial_indent=initial,
        subsequent_indent=subsequent,
        break_on_hyphens=False,
        break_long_words=False,
    )


def _wrap(text: str, indent: str = "  ") -> str:
    return _fill(text, initial=indent, subsequent=indent)


def _dist(name: str | None, version: str | None) -> str:
    if name is None:
        return "an unknown distribution"
    return f"{name} {version or '(version unknown)'}"


def _error_block(error: ErrorInfo) -> str:
    lines = [_fill(f"{error.type}: {error.message}")]
    if error.plugin or error.distribution:
        who = f"plugin {error.plugin!r}" if error.plugin else "plugin unknown"
        if error.distribution:
            who += f", distribution {_dist(error.distribution, error.version)}"
        lines.append(f"  ({who})")
    if error.cause:
        lines.append(f"  caused by: {error.cause}")
    return "\n".join(lines)


# -- plugins list ------------------------------------------------------------------------------


def _allowlist_text(env: str, allowlist: Sequence[str]) -> str:
    """An allowlist as the loader reads it. A value with no names (``,``) allows nothing,
    which an echo of its names (``''``) would hide."""
    if not allowlist:
        return f"{env} is set but names nothing, so it allows no plugin"
    return f"{env}={','.join(allowlist)!r} (allowlist)"


def _render_plugins(report: PluginsReport, verbose: int) -> str:
    lines = []
    for p in report.profiles:
        selector = (
            f"{p.selector_env}={p.selector!r} (explicit selection)"
            if p.selector
            else f"{p.selector_env} not set (automatic selection)"
        )
        if p.allowlist is None:
            allow = f"{p.allowlist_env} not set (no filter)"
        else:
            allow = _allowlist_text(p.allowlist_env, p.allowlist)
        lines.append(f"{p.name.upper()} runtime: {selector}; {allow}")
    lines.append("")
    if not report.plugins:
        lines.append(f"No plugin entry points installed in: {', '.join(report.groups)}.")
        return "\n".join(lines)
    headers = [
        "RUNTIME",
        "GROUP",
        "NAME",
        "KIND",
        "DISTRIBUTION",
        "VERSION",
        "STATUS",
        "VALUE",
        "DETAIL",
    ]
    rows: list[list[object]] = [
        [r.runtime, r.group, r.name, r.kind, r.distribution, r.version, r.status, r.value, r.detail]
        for r in report.plugins
    ]
    if verbose:
        headers.insert(-1, "LOCATION")
        for row, plugin in zip(rows, report.plugins, strict=True):
            row.insert(-1, plugin.location)
    lines.append(_table(headers, rows, indent=""))
    return "\n".join(lines)


# -- platform ----------------------------------------------------------------------------------


def _how(report: RuntimePlatform) -> str:
    if report.how:  # a host's runtime (vLLM) says how its own rules select
        return report.how
    env, allow_env = report.selector_env, report.allowlist_env
    automatic_only = [a for a in report.builtin_chain if a not in report.selector_builtins]
    only = (
        f" {', '.join(repr(a) for a in automatic_only)} is detected automatically only: "
        f"{env} does not accept it."
        if automatic_only
        else ""
    )
    if report.mode == "explicit":
        return (
            f"explicit selection: {env}={report.selector!r}, so only that platform was loaded "
            f"({allow_env} does not apply to explicit selection).{only}"
        )
    if report.allowlist is None:
        allow = ""
    elif report.allowlist_filters_platforms:
        allow = f" allowed by {allow_env}={','.join(report.allowlist)!r}"
    else:
        allow = f" ({allow_env} does not filter {report.runtime} platform discovery)"
    return (
        f"automatic selection: {env} is not set, so every platform plugin{allow} "
        "was asked to activate(). Exactly one activating wins; none falls back to the built-in "
        f"chain ({report.chain}); two or more is an error.{only}"
    )


def _render_runtime_platform(report: RuntimePlatform, verbose: int) -> str:
    runtime = report.runtime.upper()
    if report.error is not None or report.selection is None:
        lines = [f"{runtime} platform selection failed:", ""]
        if report.error is not None:
            lines.append(_error_block(report.error))
        lines += ["", "How:", _wrap(_how(report))]
        return "\n".join(lines)
    sel = report.selection
    if sel.plugin is not None:
        source = f"platform plugin {sel.plugin!r} from {_dist(sel.distribution, sel.version)}"
    elif sel.builtin is not None:
        source = f"the built-in {sel.builtin!r} platform"
    else:
        source = "the base platform (no plugin, no built-in accelerator)"
    lines = [
        f"{runtime} platform: {sel.platform}",
        f"  provided by: {source}",
        f"  device: {_cell(sel.device_name)} (type {_cell(sel.device_type)}, "
        f"PlatformEnum.{_cell(sel.enum)})",
        "",
        "Why:",
        _wrap(sel.reason.rstrip(".") + "."),
        "How:",
        _wrap(_how(report)),
    ]
    for host in report.hosts:  # what the installed host release does with this choice
        name = _HOST_NAMES.get(host.host, host.host)
        lines += [f"Inside {name}:", _wrap(host.detail.rstrip(".") + ".")]
    if sel.candidates:
        lines += ["", "Candidates, in the order they were considered:"]
        lines.append(
            _table(
                ["NAME", "KIND", "DISTRIBUTION", "VERSION", "OUTCOME", "DETAIL"],
                [
                    [c.name, c.kind, c.distribution, c.version, c.outcome, c.detail]
                    for c in sel.candidates
                ],
            )
        )
    if report.first_access_stack:
        lines += ["", "First access to current_platform:", report.first_access_stack.rstrip()]
    return "\n".join(lines)


def _render_platform(report: PlatformReport, verbose: int) -> str:
    return "\n\n".join(_render_runtime_platform(r, verbose) for r in report.runtimes)


# -- hooks -------------------------------------------------------------------------------------


def _render_hooks(report: HooksReport, verbose: int) -> str:
    del verbose
    if len(report.runtimes) == 1:
        text = _render_runtime_hooks(report.runtimes[0])
    else:
        text = "\n\n".join(
            f"== {r.display_name or r.runtime} runtime\n\n{_render_runtime_hooks(r)}"
            for r in report.runtimes
        )
    early = _render_early(report.early) if report.early is not None else ""
    return f"{text}\n\n{early}" if early else text


def _render_early(early: EarlyPatches) -> str:
    """The early-patch section; empty when none is installed and none is asked for."""
    if not early.plugins and not early.requested and early.error is None:
        return ""
    asked = ",".join(early.requested)
    if early.error is not None:
        head = f"Early patches: {early.error}"
    elif not early.requested:
        head = f"Early patches: none requested ({early.variable} is not set); none ran."
    elif early.booted:
        head = f"Early patches ({early.variable}={asked}): ran at interpreter start."
    else:
        head = (
            f"Early patches ({early.variable}={asked}): did NOT run at interpreter start (the "
            ".pth file of cardcage-core-hooks was not processed)."
        )
    lines = [head, "", "Early-patch entry points:"]
    lines.append(
        _table(
            ["NAME", "DISTRIBUTION", "VERSION", "STATUS", "DETAIL"],
            [[p.name, p.distribution, p.version, p.status, p.detail] for p in early.plugins],
        )
        if early.plugins
        else "  none installed"
    )
    if early.patches:
        lines += ["", "Early patches armed:"]
        lines.append(
            _table(
                ["KIND", "TARGET", "TYPE", "PLUGIN", "DISTRIBUTION", "VERSION", "STATUS"],
                [
                    [
                        p.kind,
                        p.target,
                        p.type,
                        p.plugin,
                        p.distribution,
                        p.version,
                        p.status if p.pending_module is None else f"pending ({p.pending_module})",
                    ]
                    for p in early.patches
                ],
            )
        )
        lines += [f"  ! {p.target}: {p.error}" for p in early.patches if p.error]
    return "\n".join(lines)


def _render_runtime_hooks(report: RuntimeHooks) -> str:
    lines = []
    if report.error is not None:
        lines += ["load_plugins() failed:", _error_block(report.error), ""]
    choice = report.selection
    if choice is None and report.error is None:
        lines.append(
            "Platform choice: none known, so no platform distribution's plugins were excluded."
        )
    elif choice is not None:
        if choice.entry_point:
            who = repr(choice.entry_point)
        elif choice.builtin and choice.platform:
            who = f"the built-in platform {choice.builtin!r} ({choice.platform})"
        elif choice.platform:
            who = f"none matched, so the base class {choice.platform}"
        else:
            who = "a built-in platform"
        if choice.distribution:
            who += f" from {_dist(choice.distribution, choice.version)}"
        lines.append(f"Platform choice: {who} ({choice.reason}).")
    lines += ["", "General plugins:"]
    if report.plugins:
        lines.append(
            _table(
                ["GROUP", "NAME", "DISTRIBUTION", "VERSION", "STATUS", "DETAIL"],
                [
                    [p.group, p.name, p.distribution, p.version, p.status, p.detail]
                    for p in report.plugins
                ],
            )
        )
    elif report.error is not None:
        lines.append(
            _wrap(
                "not reported: load_plugins() stopped with the error above, so start-up would "
                "stop here too; the hooks below are what the plugins run before it registered."
            )
        )
    else:
        lines.append("  none")
    lines += ["", "Hooks (per target in chain order; position 1 is innermost):"]
    if report.hooks:
        lines.append(
            _table(
                ["TARGET", "POS", "TYPE", "HOOK", "PLUGIN", "DISTRIBUTION", "VERSION", "STATUS"],
                [
                    [
                        h.target,
                        h.position,
                        h.type,
                        h.hook,
                        h.plugin,
                        h.distribution,
                        h.version,
                        h.status if h.pending_module is None else f"pending ({h.pending_module})",
                    ]
                    for h in report.hooks
                ],
            )
        )
        failures = {h.target: h.error for h in report.hooks if h.error}
        for target, error in failures.items():
            lines.append(f"  ! {target}: {error}")
    else:
        lines.append("  none registered")
    counts = report.counts()
    summary = ", ".join(f"{counts.get(s, 0)} {s}" for s in ("applied", "failed", "pending"))
    if counts.get("registered"):
        summary += f", {counts['registered']} registered but not applied"
    if report.rebound is not None:
        summary += f"; {report.rebound} stale alias(es) rebound"
    if report.error is not None:
        summary += " (left by the failed load_plugins(); start-up would not reach its workload)"
    lines += ["", f"Hooks: {summary}."]
    if report.kernels:
        lines += ["", f"Kernels declared by {report.kernels[0].platform} (registered; whether"]
        lines.append("each is in effect is known only inside the host's process):")
        rows = [
            [k.op, k.kernel, k.status, t.host, t.releases, t.host_op]
            for k in report.kernels
            for t in k.targets
        ]
        rows += [[k.op, k.kernel, k.status, "-", "-", "-"] for k in report.kernels if not k.targets]
        lines.append(_table(["OP", "KERNEL", "STATUS", "HOST", "RELEASES", "HOST OP"], rows))
    return "\n".join(lines)


# -- env ---------------------------------------------------------------------------------------


def _render_env(report: EnvReport, verbose: int) -> str:
    del verbose
    py, os_ = report.python, report.os
    lines = [
        f"Python {py.version} ({py.implementation}) at {py.executable}",
        f"OS: {os_.platform} ({os_.machine})",
        "",
        "cardcage distributions:",
    ]
    if report.distributions:
        lines.append(
            _table(
                ["NAME", "VERSION", "LOCATION"],
                [[d.name, d.version, d.location] for d in report.distributions],
            )
        )
    else:
        lines.append("  none")
    lines += ["", "Plugin distributions:"]
    if report.plugin_distributions:
        lines.append(
            _table(
                ["NAME", "VERSION", "GROUPS"],
                [[d.name, d.version, ", ".join(d.groups)] for d in report.plugin_distributions],
            )
        )
    else:
        lines.append("  none")
    lines += ["", f"Environment variables (from {', '.join(report.registries)}):"]
    for var in report.variables:
        if not var.set:
            state = f"not set (default: {json.dumps(var.default)})"
        elif var.error is not None:
            state = f"INVALID raw {var.raw!r}: {var.error}"
        else:
            state = f"{json.dumps(var.value)} (raw {var.raw!r})"
        lines.append(f"  {var.name} = {state}")
        lines.append(_wrap(f"[{var.kind}; {var.distribution}] {var.description}", "      "))
    if report.other_variables:
        lines += [
            "",
            "Other CARDCAGE_*/SGLANG_* variables set (no cardcage registry declares them):",
        ]
        lines += [f"  {v.name} = {v.raw!r}" for v in report.other_variables]
    return "\n".join(lines)


# -- doctor ------------------------------------------------------------------------------------


#: How the text output names each host.
_HOST_NAMES = {"sglang": "SGLang", "vllm": "vLLM"}


def _render_doctor(report: DoctorReport, verbose: int) -> str:
    lines = [
        f"cardcage doctor: checked {report.entry_points} entry point(s) in "
        f"{len(report.groups)} group(s) (runtimes: {', '.join(report.profiles)})",
    ]
    for startup in report.startup:
        lines.append(_fill(f"{startup.runtime.upper()} startup: {startup.detail}."))
    for host in report.hosts:
        first, last = host.supported_range
        support = "supported" if host.supported else f"NOT supported: read as {host.release}"
        name = _HOST_NAMES.get(host.host, host.host)
        lines.append(f"Host: {name} {host.version} installed ({support}; range {first} - {last})")
    for f in report.findings:
        where = f" [{f.group}]" if f.group else ""
        lines += [
            "",
            f"{f.severity.upper()}: {f.code}{where}",
            _wrap(f.message),
            _wrap("fix: " + f.fix),
        ]
        if verbose and f.traceback:
            lines.append(textwrap.indent(f.traceback.rstrip(), "    "))
    errors, warnings = report.count("error"), report.count("warning")
    lines.append("")
    if report.problems:
        lines.append(
            f"{errors} error(s), {warnings} warning(s). cardcage doctor --strict exits 1 on these."
        )
    else:
        unchecked = sum(f.code == "platform-not-checked" for f in report.findings)
        lines.append(
            "No problems found."
            if not unchecked
            else _fill(
                f"No problems found in what could be checked here; {unchecked} platform "
                "plugin(s) were not checked (platform-not-checked above says how to check them).",
                subsequent="",
            )
        )
    return "\n".join(lines)


# -- commands ----------------------------------------------------------------------------------


class _UsageError(Exception):
    """A request the installed packages cannot serve: reported like an argparse error (exit 2)."""


class _Outcome:
    """A collected report, how to render it, and the exit code it deserves."""

    def __init__(self, report: Any, render: Callable[[Any, int], str], code: int) -> None:
        self.report = report
        self.render = render
        self.code = code


def _runtimes(args: argparse.Namespace) -> list[str] | None:
    """The ``--runtime`` choice: None for every registered runtime."""
    runtime: str | None = args.runtime
    return None if runtime in (None, "all") else [runtime]


def _collect(collect: Callable[[], Any]) -> Any:
    """Run a collector; a runtime that is not registered is a usage error (exit 2)."""
    try:
        return collect()
    except LookupError as exc:
        raise _UsageError(str(exc)) from None


def _cmd_plugins(args: argparse.Namespace) -> _Outcome:
    report = _collect(lambda: diag.collect_plugins(args.group, _runtimes(args)))
    return _Outcome(report, _render_plugins, 0)


def _cmd_platform(args: argparse.Namespace) -> _Outcome:
    runtimes = _runtimes(args)
    report = _collect(lambda: diag.collect_platform(runtimes, with_stack=bool(args.verbose)))
    return _Outcome(report, _render_platform, 0 if report.ok else 1)


def _cmd_hooks(args: argparse.Namespace) -> _Outcome:
    report = _collect(lambda: diag.collect_hooks(_runtimes(args)))
    return _Outcome(report, _render_hooks, 0 if report.ok else 1)


def _cmd_env(args: argparse.Namespace) -> _Outcome:
    return _Outcome(_collect(lambda: diag.collect_env(_runtimes(args))), _render_env, 0)


def _cmd_doctor(args: argparse.Namespace) -> _Outcome:
    report = _collect(lambda: diag.run_doctor(_runtimes(args), check_hooks=args.hooks))
    return _Outcome(report, _render_doctor, 1 if args.strict and report.problems else 0)


def _cmd_new(args: argparse.Namespace) -> _Outcome:
    # Imported here: the templates and their rendering cost the other commands nothing.
    from .scaffold import ScaffoldError, _command

    try:
        report = _command.create(args)
    except ScaffoldError as exc:
        raise _UsageError(str(exc)) from None
    return _Outcome(report, _command.render, 0)


def _cmd_deps(args: argparse.Namespace) -> _Outcome:
    # Imported here: reading host releases costs the other commands nothing.
    from .deps import command
    from .deps.errors import DepsError
    from .deps.report import render

    try:
        report = command.run(args)
    except DepsError as exc:
        raise _UsageError(str(exc)) from None
    return _Outcome(report, render, 1 if args.strict and report.breaks else 0)


def _add_new(commands: Any) -> None:
    """``cardcage new``: every value a flag, so CI runs it as is; nothing is prompted."""
    new = commands.add_parser(
        "new",
        help="generate a vendor platform plugin in a new folder, under the vendor's names",
        description=(
            "Generate a standalone vendor platform plugin in DEST: pyproject.toml, README, the "
            "platform, a device probe to replace, a general plugin and tests. Every name left "
            "out is derived from the one before it: DEST's folder name -> distribution -> "
            "import package -> entry-point name -> device name -> class prefix."
        ),
    )
    new.add_argument("destination", metavar="DEST", help="the folder to create")
    names = new.add_argument_group("names")
    names.add_argument(
        "--distribution", metavar="NAME", help="distribution name (default: DEST's folder name)"
    )
    names.add_argument(
        "--package",
        metavar="NAME",
        help="import package (default: the distribution name, lower case, with _)",
    )
    names.add_argument(
        "--entry-point",
        metavar="NAME",
        help="entry-point name, what users type in SGLANG_PLATFORM (default: the package "
        "without a _plugin suffix)",
    )
    names.add_argument(
        "--device", metavar="NAME", help="the platform's device_name (default: the entry point)"
    )
    names.add_argument(
        "--device-type",
        metavar="NAME",
        help="the torch device type of the device's tensors (default: the device name)",
    )
    names.add_argument(
        "--class-prefix",
        metavar="NAME",
        help="prefix of the platform classes' names (default: the device name in CamelCase)",
    )
    meta = new.add_argument_group("metadata")
    meta.add_argument("--description", metavar="TEXT", help="one-line summary")
    meta.add_argument(
        "--author",
        metavar="'NAME <EMAIL>'",
        action="append",
        help="an author (repeat for several)",
    )
    meta.add_argument(
        "--url",
        metavar="LABEL=URL",
        action="append",
        help="a project URL, e.g. Source=https://... (repeat for several)",
    )
    meta.add_argument(
        "--license",
        metavar="SPDX",
        help="licence expression (default: LicenseRef-Proprietary, until you choose one)",
    )
    new.add_argument(
        "--targets",
        metavar="LIST",
        action="append",
        help="what it targets, comma-separated: srt (always), diffusion (the diffusion half), "
        "vllm (the vLLM section); default: srt",
    )
    new.add_argument(
        "--force",
        action="store_true",
        help="write into DEST even if it holds files (same names are replaced)",
    )
    new.set_defaults(run=_cmd_new, json=False, verbose=0)


def _version() -> str:
    from cardcage.hooks import __version__ as hooks_version

    from . import __version__

    return f"cardcage (cardcage-core-platforms {__version__}, cardcage-core-hooks {hooks_version})"


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (also used by the docs to render the CLI reference)."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--json", action="store_true", help="print the stable JSON document instead of text"
    )
    common.add_argument(
        "-v",
        "--verbose",
        action="count",
        default=0,
        help="log cardcage's records to stderr (-vv: debug) and show more detail",
    )
    common.add_argument(
        "--runtime",
        metavar="NAME",
        default=None,
        help=(
            "only this runtime (a name registered in the cardcage.runtimes entry-point group, "
            "e.g. srt); default: every registered runtime"
        ),
    )
    parser = argparse.ArgumentParser(
        prog="cardcage",
        description="Inspect cardcage plugins, platform selection, hooks and configuration.",
    )
    parser.add_argument("--version", action="version", version=_version())
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    plugins = commands.add_parser("plugins", help="inspect plugin entry points")
    plugin_commands = plugins.add_subparsers(
        dest="plugins_command", required=True, metavar="ACTION"
    )
    listing = plugin_commands.add_parser(
        "list",
        parents=[common],
        help="list every plugin entry point and its status (imports nothing)",
    )
    listing.add_argument("--group", help="only this entry-point group")
    listing.set_defaults(run=_cmd_plugins)

    platform = commands.add_parser(
        "platform", parents=[common], help="explain which platform each runtime selects and why"
    )
    platform.set_defaults(run=_cmd_platform)

    hooks = commands.add_parser(
        "hooks",
        parents=[common],
        help="run each runtime's load_plugins() and list every hook with its status",
    )
    hooks.set_defaults(run=_cmd_hooks)

    env = commands.add_parser(
        "env", parents=[common], help="interpreter, OS, distributions and cardcage variables"
    )
    env.set_defaults(run=_cmd_env)

    doctor = commands.add_parser(
        "doctor", parents=[common], help="find problems that break or silently change start-up"
    )
    doctor.add_argument(
        "--strict", action="store_true", help="exit 1 when any error or warning is found"
    )
    doctor.add_argument(
        "--hooks",
        action="store_true",
        help=(
            "also apply, and at once undo, every hook the general plugins register, and report "
            "each target that cannot be patched (imports the targets' modules: slower)"
        ),
    )
    doctor.set_defaults(run=_cmd_doctor)
    from .deps.command import add_parser as add_deps

    add_deps(commands, common).set_defaults(run=_cmd_deps)
    _add_new(commands)
    return parser


def _configure_logging(verbose: int) -> None:
    """With -v, send cardcage's log records to stderr; without, leave logging alone."""
    if not verbose:
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger("cardcage")
    root.addHandler(handler)
    root.setLevel(logging.DEBUG if verbose > 1 else logging.INFO)


def _emit(outcome: _Outcome, as_json: bool, verbose: int, out: TextIO) -> None:
    if as_json:
        json.dump(outcome.report.as_json(), out, indent=2)
        out.write("\n")
    else:
        out.write(outcome.render(outcome.report, verbose) + "\n")


def main(argv: list[str] | None = None) -> int:
    """Run the ``cardcage`` command line; return its exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    _configure_logging(args.verbose)
    _quiet_torch_without_numpy()
    out = sys.stdout
    try:
        with contextlib.redirect_stdout(sys.stderr):
            outcome: _Outcome = args.run(args)
    except _UsageError as exc:
        parser.exit(2, f"cardcage {args.command}: error: {exc}\n")
    try:
        _emit(outcome, args.json, args.verbose, out)
        out.flush()
    except BrokenPipeError:
        return _reader_went_away(out)
    return outcome.code


def _quiet_torch_without_numpy() -> None:
    """Hide torch's "Failed to initialize NumPy" warning, which importing a plugin that imports
    torch prints where NumPy is not installed: the commands never hand torch a NumPy array, so
    the warning says nothing about the plugins they diagnose. Set by the command, an
    application, never by the library modules."""
    import warnings

    warnings.filterwarnings("ignore", message="Failed to initialize NumPy", category=UserWarning)


#: What a Unix tool exits with when its reader closes the pipe (128 + SIGPIPE).
EXIT_BROKEN_PIPE = 141


def _reader_went_away(out: Any) -> int:
    """``cardcage platform --json | head``: the reader closed the pipe, which is not an error of
    ours. Point the stream at /dev/null so the interpreter's final flush does not print a
    ``BrokenPipeError`` traceback either, and exit as a Unix tool killed by SIGPIPE would."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, out.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass  # not a real file descriptor (a test's StringIO): nothing will be flushed later
    return EXIT_BROKEN_PIPE


if __name__ == "__main__":
    raise SystemExit(main())
