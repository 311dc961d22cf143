"""MkDocs hook: generate the environment-variable table from the packages' typed registries.

Every cardcage distribution declares the variables it reads in one ``EnvRegistry`` named
``ENV_VARS`` in its ``envs`` module (``cardcage.hooks.envs``, ``cardcage.platforms.envs``,
``cardcage.shm.envs``, ``cardcage.diffusion.envs``). This hook replaces the marker
``<!-- cardcage:env-table -->``, on a line of its own in a page, with a Markdown table built from
those registries, so the documented names, kinds, defaults and meanings are the ones the code uses
and cannot drift.

Which registries are read: every ``packages/*/src/cardcage/<name>/envs.py`` in the repository,
in the order of their package folders. Each one must import, or the build fails naming the module
and the fix; a registry that could be skipped would let its variables vanish from the page
silently. A package installed in the docs environment is imported from there; one that is not
(``nox -s docs`` installs only the core wheels) is imported from its ``src`` folder, put on
``sys.path`` (``cardcage`` is a PEP 420 namespace, so the portions merge). A variable that two
registries declare fails the build too.

Build-time only; not shipped in any distribution.
"""

from __future__ import annotations

import importlib
import logging
import re
import sys
from pathlib import Path
from typing import Any

from mkdocs.exceptions import PluginError

MARKER = "<!-- cardcage:env-table -->"
# Only a marker on a line of its own is replaced: one quoted in a sentence (as the contributing
# page does, in backticks) stays text.
_MARKER_LINE = re.compile(r"^[ \t]*" + re.escape(MARKER) + r"[ \t]*$", re.M)
ENVS_GLOB = "packages/*/src/cardcage/*/envs.py"

log = logging.getLogger("mkdocs.hooks.cardcage_env_table")
_REPO = Path(__file__).resolve().parents[2]


def _source_modules() -> dict[str, Path]:
    """``{module name: envs.py}`` for every ``cardcage.*`` package in the repository."""
    found: dict[str, Path] = {}
    for path in sorted(_REPO.glob(ENVS_GLOB)):
        module = f"cardcage.{path.parent.name}.envs"
        if module in found:
            raise PluginError(
                f"{module} exists twice: {found[module].relative_to(_REPO)} and "
                f"{path.relative_to(_REPO)}. Two distributions cannot share a cardcage sub-package."
            )
        found[module] = path
    if not found:
        raise PluginError(
            f"No environment-variable registry found: nothing matches {ENVS_GLOB} under {_REPO}. "
            "Build the docs from the repository root (mkdocs.yml is there)."
        )
    return found


def _is_missing(exc: ModuleNotFoundError, module: str) -> bool:
    """True when ``module`` itself (or a parent package) is absent, not one of its imports."""
    return exc.name is not None and (module == exc.name or module.startswith(exc.name + "."))


def _import(module: str, path: Path) -> Any:
    """Import ``module``, installed or else from the ``src`` folder holding ``path``."""
    src = path.parents[2]
    try:
        try:
            return importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if not _is_missing(exc, module):
                raise
        log.info("%s is not installed; reading it from %s", module, src)
        if str(src) not in sys.path:
            sys.path.append(str(src))
        importlib.invalidate_caches()
        return importlib.import_module(module)
    except Exception as exc:
        raise PluginError(
            f"{module} ({path.relative_to(_REPO)}) cannot be imported: "
            f"{type(exc).__name__}: {exc}. Every envs module must import in the docs "
            "environment (it is import-safe by contract: stdlib and cardcage.hooks.envs only). "
            "Fix the import, or install the distribution it needs into the docs environment "
            "(the docs session in noxfile.py)."
        ) from exc


def _registries() -> list[Any]:
    registries = []
    for module, path in _source_modules().items():
        registry = getattr(_import(module, path), "ENV_VARS", None)
        if registry is None:
            raise PluginError(
                f"{module} ({path.relative_to(_REPO)}) has no ENV_VARS registry to document: "
                'declare ENV_VARS = EnvRegistry("<distribution name>") in it.'
            )
        registries.append(registry)
    return registries


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _code(text: str) -> str:
    return f"`` {text} ``" if "`" in text else f"`{text}`"


def _default(value: object) -> str:
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return _code("1" if value else "0")
    if isinstance(value, str):
        return _code(value) if value else "empty"
    if isinstance(value, (frozenset, set, tuple, list)):
        return ", ".join(_code(str(v)) for v in sorted(value, key=str)) or "empty"
    return _code(repr(value))


def render_table(registries: list[Any]) -> str:
    """The Markdown table of every documented variable, registry by registry."""
    rows = [
        "| Variable | Kind | Default | Read by | Meaning |",
        "|---|---|---|---|---|",
    ]
    seen: dict[str, str] = {}
    for registry in registries:
        for var in registry:
            if var.name in seen:
                raise PluginError(
                    f"{var.name} is declared by both {seen[var.name]} and {registry.distribution}: "
                    "a variable belongs to one registry; remove it from the other."
                )
            seen[var.name] = registry.distribution
            rows.append(
                f"| `{var.name}` | {_cell(var.kind)} | {_default(var.default)} | "
                f"{_cell(registry.distribution)} | {_cell(var.description)} |"
            )
    return "\n".join(rows)


def on_page_markdown(markdown: str, page: Any, **kwargs: Any) -> str:
    if not _MARKER_LINE.search(markdown):
        return markdown
    table = render_table(_registries())
    return _MARKER_LINE.sub(lambda _: table, markdown)
