"""MkDocs hook: generate the environment-variable table from the packages' typed registries.

Every cardcage distribution declares the variables it reads in one ``EnvRegistry`` named
``ENV_VARS`` in its ``envs`` module (``cardcage.hooks.envs`` and ``cardcage.platforms.envs``
today). This hook replaces the marker ``<!-- cardcage:env-table -->`` in a page with a Markdown
table built from those registries, so the documented names, kinds, defaults and meanings are the
ones the code uses and cannot drift.

Which registries are read:

* ``cardcage.hooks.envs`` must import: without it the build fails.
* the registries of packages that are planned but not built yet (``KNOWN_MODULES``) are skipped
  while their source is absent from ``packages/``;
* any ``packages/*/src/cardcage/<name>/envs.py`` in the repository is read too. If its package is
  not installed in the docs environment, its ``src`` folder is put on ``sys.path`` (``cardcage``
  is a PEP 420 namespace, so the portions merge) rather than leaving it out of the table.

Build-time only; not shipped in any distribution.
"""

from __future__ import annotations

import importlib
import logging
import sys
from pathlib import Path
from typing import Any

from mkdocs.exceptions import PluginError

MARKER = "<!-- cardcage:env-table -->"
PLANNED_MARKER = "<!-- cardcage:env-planned -->"
REQUIRED_MODULE = "cardcage.hooks.envs"
# Registries of packages that DESIGN.md plans; each is skipped until its source exists.
KNOWN_MODULES = (
    REQUIRED_MODULE,
    "cardcage.platforms.envs",
    "cardcage.shm.envs",
    "cardcage.diffusion.envs",
)

# Variables DESIGN.md names for packages that are not built yet: listed under PLANNED_MARKER only
# while no registry declares them, so the page never shows a variable twice.
PLANNED = {
    "SGLANG_DIFFUSION_PLATFORM_OVERRIDE": (
        "cardcage-diffusion-runtime",
        "Diffusion: a built-in alias (`cpu`, `cuda`, `rocm`, `mps`, `npu`, `musa`; `xpu` is "
        "automatic-only) or a platform entry-point name.",
    ),
}

log = logging.getLogger("mkdocs.hooks.cardcage_env_table")
_REPO = Path(__file__).resolve().parents[2]


def _source_modules() -> dict[str, Path]:
    """``{module name: src folder}`` for every ``envs.py`` of a ``cardcage.*`` package here."""
    found: dict[str, Path] = {}
    for path in sorted(_REPO.glob("packages/*/src/cardcage/*/envs.py")):
        src = path.parents[2]
        found[f"cardcage.{path.parent.name}.envs"] = src
    return found


def _is_missing(exc: ModuleNotFoundError, module: str) -> bool:
    """True when ``module`` itself (or a parent package) is absent, not one of its imports."""
    return exc.name is not None and (module == exc.name or module.startswith(exc.name + "."))


def _import(module: str, src: Path | None) -> Any | None:
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if not _is_missing(exc, module):
            raise
    if src is None:
        return None
    log.info("%s is not installed; reading it from %s", module, src)
    sys.path.append(str(src))
    importlib.invalidate_caches()
    return importlib.import_module(module)


def _registries() -> list[Any]:
    sources = _source_modules()
    registries = []
    for module in dict.fromkeys((*KNOWN_MODULES, *sorted(sources))):
        loaded = _import(module, sources.get(module))
        if loaded is None:
            if module == REQUIRED_MODULE:
                raise PluginError(
                    f"{REQUIRED_MODULE} cannot be imported: install cardcage-core-hooks into the "
                    "docs environment (nox -s docs does)."
                )
            log.debug("Skipping %s: package not built yet", module)
            continue
        registry = getattr(loaded, "ENV_VARS", None)
        if registry is None:
            raise PluginError(f"{module} has no ENV_VARS registry to document.")
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
                    f"{var.name} is declared by both {seen[var.name]} and {registry.distribution}."
                )
            seen[var.name] = registry.distribution
            rows.append(
                f"| `{var.name}` | {_cell(var.kind)} | {_default(var.default)} | "
                f"{_cell(registry.distribution)} | {_cell(var.description)} |"
            )
    return "\n".join(rows)


def render_planned(registries: list[Any]) -> str:
    """The planned variables that no registry declares yet, or a sentence saying there are none."""
    declared = {var.name for registry in registries for var in registry}
    rows = [
        f"| `{name}` | {package} | {meaning} |"
        for name, (package, meaning) in PLANNED.items()
        if name not in declared
    ]
    if not rows:
        return "None: every variable that DESIGN.md names is declared in a registry above."
    return "\n".join(["| Variable | Package (planned) | Meaning |", "|---|---|---|", *rows])


def on_page_markdown(markdown: str, page: Any, **kwargs: Any) -> str:
    if MARKER not in markdown and PLANNED_MARKER not in markdown:
        return markdown
    registries = _registries()
    markdown = markdown.replace(MARKER, render_table(registries))
    return markdown.replace(PLANNED_MARKER, render_planned(registries))
