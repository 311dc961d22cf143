"""MkDocs hook: the ``cardcage`` command's help texts and JSON schemas, generated from the package.

Two markers are replaced in any page, so the CLI reference cannot drift from the code:

* ``<!-- cardcage:cli-help plugins list -->`` becomes a ``text`` code block holding the help of
  that sub-command, rendered by ``cardcage.platforms.cli.build_parser()`` at a fixed width of 100
  columns (no terminal involved).
* ``<!-- cardcage:schema doctor -->`` becomes a ``json`` code block holding
  ``packages/core-platforms/src/cardcage/platforms/schemas/doctor.schema.json`` as shipped.

The marker's indentation is kept on every line of the block, so a marker can sit inside an
admonition or a collapsible block.

The schema files are also added to the site as ``schemas/<command>.schema.json``. That is the
address their ``$id`` names (``https://cardcage.readthedocs.io/schemas/...``), and pages can link
to them like any other file.

``cardcage.platforms.cli`` is imported from the installed package (``nox -s docs`` installs the
wheel); if it is not installed, its ``src`` folder is put on ``sys.path`` instead, as the
environment-variable hook does. Build-time only; not shipped in any distribution.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import re
import sys
from pathlib import Path
from typing import Any

from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files

log = logging.getLogger("mkdocs.hooks.cardcage_cli_reference")

_REPO = Path(__file__).resolve().parents[2]
_SRC = _REPO / "packages" / "core-platforms" / "src"
SCHEMA_DIR = _SRC / "cardcage" / "platforms" / "schemas"
HELP_WIDTH = "100"

_HELP = re.compile(r"^(?P<indent>[ \t]*)<!-- cardcage:cli-help(?P<args>[^>]*?) -->[ \t]*$", re.M)
_SCHEMA = re.compile(r"^(?P<indent>[ \t]*)<!-- cardcage:schema (?P<name>[a-z]+) -->[ \t]*$", re.M)


def _cli() -> Any:
    module = "cardcage.platforms.cli"
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name is None or not (module + ".").startswith(exc.name + "."):
            raise
    log.info("%s is not installed; reading it from %s", module, _SRC)
    sys.path.append(str(_SRC))
    importlib.invalidate_caches()
    return importlib.import_module(module)


def _subparser(parser: argparse.ArgumentParser, words: list[str]) -> argparse.ArgumentParser:
    for word in words:
        actions = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        choices = actions[0].choices if actions else {}
        if word not in choices:
            raise PluginError(
                f"cardcage has no sub-command {' '.join(words)!r} (at {word!r}; "
                f"known: {', '.join(choices) or 'none'})"
            )
        parser = choices[word]
    return parser


def render_help(words: list[str]) -> str:
    """The help text of ``cardcage <words...>``, at a fixed width."""
    previous = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = HELP_WIDTH
    try:
        return _subparser(_cli().build_parser(), words).format_help().rstrip()
    finally:
        if previous is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = previous


def _schema_path(name: str) -> Path:
    path = SCHEMA_DIR / f"{name}.schema.json"
    if not path.is_file():
        raise PluginError(f"No JSON schema for 'cardcage {name}': {path} does not exist.")
    return path


def _block(indent: str, language: str, text: str) -> str:
    lines = [f"```{language}", *text.splitlines(), "```"]
    return "\n".join((indent + line).rstrip() for line in lines)


def on_files(files: Files, config: Any, **kwargs: Any) -> Files:
    """Publish the schema files at ``schemas/<command>.schema.json``, the address of their $id."""
    if not SCHEMA_DIR.is_dir():
        raise PluginError(f"The CLI's JSON schemas are missing: {SCHEMA_DIR} does not exist.")
    for path in sorted(SCHEMA_DIR.glob("*.schema.json")):
        files.append(File.generated(config, f"schemas/{path.name}", abs_src_path=str(path)))
    return files


def on_page_markdown(markdown: str, page: Any, **kwargs: Any) -> str:
    if "<!-- cardcage:" not in markdown:
        return markdown

    def help_block(match: re.Match[str]) -> str:
        return _block(match["indent"], "text", render_help(match["args"].split()))

    def schema_block(match: re.Match[str]) -> str:
        text = _schema_path(match["name"]).read_text(encoding="utf-8")
        return _block(match["indent"], "json", text)

    markdown = _HELP.sub(help_block, markdown)
    return _SCHEMA.sub(schema_block, markdown)
