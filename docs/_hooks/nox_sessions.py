"""MkDocs hook: fail the build when the contributing page's session table and noxfile.py disagree.

``noxfile.py`` is the one orchestrator, and the table under "nox is the one orchestrator" in
``docs/contributing.md`` is the only place that says what each session installs and proves. A
session added without a row, or a row left behind by a removed or renamed session, is how that
table went stale before; this hook makes either a build error that names the session and the page.

The session names come from ``noxfile.py`` parsed with ``ast``, never imported: importing it would
need nox in the docs environment and would run its module-level code. A session is a function
decorated with ``@session(...)`` (the noxfile's wrapper of ``nox.session``) or ``nox.session``;
its name is the ``name=`` keyword when given, else the function's name, as nox does. The table's
names are the backticked names in the first cell of each row (a row may cover several sessions).
When the ``default`` column says ``yes`` or ``no``, it must match the decorator's ``default=``.

Build-time only; not shipped in any distribution.
"""

from __future__ import annotations

import ast
import logging
import re
from pathlib import Path
from typing import Any

from mkdocs.exceptions import PluginError
from mkdocs.structure.files import Files

log = logging.getLogger("mkdocs.hooks.cardcage_nox_sessions")

_REPO = Path(__file__).resolve().parents[2]
NOXFILE = _REPO / "noxfile.py"
PAGE = "contributing.md"
# The header of the session table: its first cell names the column that holds session names.
TABLE_HEADER = re.compile(r"^\|\s*session\s*\|", re.I)
DECORATORS = frozenset({"session", "nox.session"})
_NAME = re.compile(r"`([^`]+)`")


def _dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        parent = _dotted(node.value)
        return None if parent is None else f"{parent}.{node.attr}"
    return None


def _literal(call: ast.Call, keyword: str, where: str) -> Any:
    for kw in call.keywords:
        if kw.arg == keyword:
            try:
                return ast.literal_eval(kw.value)
            except (ValueError, TypeError, SyntaxError):
                raise PluginError(
                    f"{NOXFILE.name}:{kw.value.lineno}: {where} passes {keyword}= as an "
                    f"expression; docs/_hooks/nox_sessions.py reads only literals. Write the "
                    f"{keyword} out as a literal."
                ) from None
    return None


def noxfile_sessions(path: Path = NOXFILE) -> dict[str, bool]:
    """``{session name: runs by default}`` for every session ``path`` declares, read with ast."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except OSError as exc:
        raise PluginError(f"Cannot read {path} to check the nox session table: {exc}") from exc
    except SyntaxError as exc:
        raise PluginError(
            f"{path.name}:{exc.lineno}: {exc.msg}; the nox session table in {PAGE} cannot be "
            "checked until noxfile.py parses."
        ) from exc
    sessions: dict[str, bool] = {}
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for decorator in node.decorator_list:
            call = decorator if isinstance(decorator, ast.Call) else None
            if _dotted(call.func if call else decorator) not in DECORATORS:
                continue
            where = f"the session function {node.name}()"
            name = _literal(call, "name", where) if call else None
            default = _literal(call, "default", where) if call else None
            if name is None:
                name = node.name
            if not isinstance(name, str):
                raise PluginError(f"{NOXFILE.name}: {where} has a name= that is not a string.")
            sessions[name] = True if default is None else bool(default)
    if not sessions:
        raise PluginError(
            f"Found no nox session in {path}: no function is decorated with "
            f"{' or '.join(f'@{d}' for d in sorted(DECORATORS))}. If the decorator was renamed, "
            "update DECORATORS in docs/_hooks/nox_sessions.py."
        )
    return sessions


def table_rows(markdown: str) -> list[tuple[list[str], str]]:
    """``[(session names, default cell)]`` for each row of the page's session table."""
    lines = markdown.splitlines()
    start = next((i for i, line in enumerate(lines) if TABLE_HEADER.match(line)), None)
    if start is None:
        raise PluginError(
            f"{PAGE} has no nox session table (a Markdown table whose header starts with "
            "'| session |'), so it cannot be checked against noxfile.py. Restore the table under "
            "'nox is the one orchestrator'."
        )
    rows = []
    for line in lines[start + 2 :]:  # skip the header and its |---| line
        if not line.startswith("|"):
            break
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        names = _NAME.findall(cells[0])
        if not names:
            raise PluginError(
                f"{PAGE}: the session table has a row whose first cell names no session in "
                f"backticks: {line[:80]!r}"
            )
        rows.append((names, cells[1].lower() if len(cells) > 1 else ""))
    return rows


def check(markdown: str, sessions: dict[str, bool]) -> list[str]:
    """Every disagreement between the table in ``markdown`` and ``sessions``, as messages."""
    problems = []
    documented: dict[str, str] = {}
    for names, default in table_rows(markdown):
        for name in names:
            if name in documented:
                problems.append(f"the nox session '{name}' has two rows in the table of {PAGE}")
            documented[name] = default
    for name, runs_by_default in sessions.items():
        if name not in documented:
            problems.append(
                f"the nox session '{name}' (noxfile.py) has no row in the session table of "
                f"{PAGE}: add one saying what it installs and what it proves"
            )
            continue
        said = documented[name]
        if said in ("yes", "no") and (said == "yes") != runs_by_default:
            problems.append(
                f"the session table of {PAGE} says the nox session '{name}' runs by default: "
                f"{said!r}, but noxfile.py says {'yes' if runs_by_default else 'no'}"
            )
    for name in documented:
        if name not in sessions:
            problems.append(
                f"the session table of {PAGE} has a row for '{name}', which noxfile.py does not "
                "define: remove the row, or rename it to the session's current name"
            )
    return problems


def on_files(files: Files, config: Any, **kwargs: Any) -> Files:
    """The check runs on the contributing page; fail if that page is gone, not skip silently."""
    if files.get_file_from_path(PAGE) is None:
        raise PluginError(
            f"docs/{PAGE} is missing, so the nox session table cannot be checked. If the page "
            "moved, update PAGE in docs/_hooks/nox_sessions.py."
        )
    return files


def on_page_markdown(markdown: str, page: Any, **kwargs: Any) -> str:
    if page.file.src_uri != PAGE:
        return markdown
    sessions = noxfile_sessions()
    problems = check(markdown, sessions)
    if problems:
        raise PluginError(
            f"docs/{PAGE} is out of step with noxfile.py:\n  - " + "\n  - ".join(problems)
        )
    log.debug("%s documents all %d nox sessions", PAGE, len(sessions))
    return markdown
