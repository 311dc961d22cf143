"""Rendering a ``PluginSpec`` into the generated plugin's files, and writing them.

The templates are package data (``templates/**/*.tmpl``, shipped in the wheel) with
``{{ name }}`` placeholders; a placeholder the spec does not define is an error, never an empty
string, so a template cannot silently lose a name. A file that only some targets need (the
diffusion half, the vLLM section) is listed with its target in ``_FILES``; the few lines of a
shared file that depend on a target are placeholders computed here.
"""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path

from ._spec import TORCH_CPU_INSTALL, PluginSpec, toml_string
from .errors import DestinationNotAFolderError, DestinationNotEmptyError

__all__ = ["render_plugin", "write_plugin"]

_PLACEHOLDER = re.compile(r"\{\{ *([a-z_]+) *\}\}")
# A placeholder alone on its line stands for whole lines: its value brings its own newline, and
# an empty value leaves no blank line behind.
_LINE_PLACEHOLDER = re.compile(r"^\{\{ *([a-z_]+) *\}\}\n", re.MULTILINE)

# (template under templates/, where it goes in the plugin, the target it needs or None)
_FILES: tuple[tuple[str, str, str | None], ...] = (
    ("pyproject.toml", "pyproject.toml", None),
    ("README.md", "README.md", None),
    ("gitignore", ".gitignore", None),
    ("package/__init__.py", "src/{package}/__init__.py", None),
    ("package/_probe.py", "src/{package}/_probe.py", None),
    ("package/envs.py", "src/{package}/envs.py", None),
    ("package/device.py", "src/{package}/device.py", None),
    ("package/platform.py", "src/{package}/platform.py", None),
    ("package/hooks.py", "src/{package}/hooks.py", None),
    ("package/kernels.py", "src/{package}/kernels.py", None),
    ("package/py.typed", "src/{package}/py.typed", None),
    ("package/vllm_section.py", "src/{package}/vllm_section.py", "vllm"),
    ("package/diffusion/__init__.py", "src/{package}/diffusion/__init__.py", "diffusion"),
    ("package/diffusion/platform.py", "src/{package}/diffusion/platform.py", "diffusion"),
    ("package/diffusion/hooks.py", "src/{package}/diffusion/hooks.py", "diffusion"),
    ("tests/conftest.py", "tests/conftest.py", None),
    ("tests/test_activate.py", "tests/test_activate.py", None),
    ("tests/test_platform.py", "tests/test_platform.py", None),
    ("tests/test_hooks.py", "tests/test_hooks.py", None),
    ("tests/test_kernels.py", "tests/test_kernels.py", None),
    ("tests/test_vllm_section.py", "tests/test_vllm_section.py", "vllm"),
    ("tests/test_diffusion.py", "tests/test_diffusion.py", "diffusion"),
)


def _values(spec: PluginSpec) -> dict[str, str]:
    """Every placeholder's text for ``spec``."""
    ep, pkg, prefix = spec.entry_point, spec.package, spec.class_prefix
    diffusion, vllm = "diffusion" in spec.targets, "vllm" in spec.targets
    values = {
        "distribution": spec.distribution,
        "package": pkg,
        "entry_point": ep,
        "device": spec.device,
        "device_type": spec.device_type,
        "prefix": prefix,
        "env_prefix": spec.env_prefix,
        "description": spec.description,
        "description_toml": toml_string(spec.description),
        "license_toml": toml_string(spec.license),
        "core_hooks_requirement": spec.requirement("cardcage-core-hooks"),
        "core_platforms_requirement": spec.requirement("cardcage-core-platforms"),
        "targets": ", ".join(t for t in ("srt", "diffusion", "vllm") if t in spec.targets),
        "hosts": _hosts(diffusion, vllm),
        "authors_line": _authors_line(spec),
        "urls_table": _urls_table(spec),
        "diffusion_extra": "",
        "diffusion_entry_points": "",
        "vllm_entry_points": "",
        "vllm_section_attribute": "",
        "vllm_hook": "",
        "vllm_hooks_argument": "",
        "vllm_readme": "",
        "diffusion_readme": "",
        "diffusion_install": "",
        "torch_install": "",
    }
    if diffusion:
        runtime = spec.requirement("cardcage-diffusion-runtime")
        values["diffusion_extra"] = (
            f"# The diffusion half (src/{pkg}/diffusion): its runtime brings torch.\n"
            f'diffusion = ["{runtime}"]\n'
        )
        values["diffusion_entry_points"] = (
            '\n[project.entry-points."sglang.multimodal_gen.platforms"]\n'
            f'{ep} = "{pkg}.diffusion:activate"\n'
            '\n[project.entry-points."sglang.multimodal_gen.plugins"]\n'
            f'{ep} = "{pkg}.diffusion.hooks:register"\n'
        )
        values["diffusion_readme"] = _render_text(_template("snippets/diffusion.md"), values)
        values["diffusion_install"] = ",diffusion"
        values["torch_install"] = (
            f"{TORCH_CPU_INSTALL}  # the diffusion runtime needs torch: the CPU build here\n"
        )
    if vllm:
        values["vllm_entry_points"] = (
            "\n# vLLM 0.33 loads these groups: the same activate() and register().\n"
            '[project.entry-points."vllm.platform_plugins"]\n'
            f'{ep} = "{pkg}:activate"\n'
            '\n[project.entry-points."vllm.general_plugins"]\n'
            f'{ep} = "{pkg}.hooks:register"\n'
        )
        values["vllm_section_attribute"] = (
            "    #: What only vLLM asks (attention backend, worker class), imported under vLLM.\n"
            f'    vllm_section = "{pkg}.vllm_section:{prefix}VllmSection"\n'
        )
        values["vllm_hook"] = _render_text(_template("snippets/vllm_hook.py"), values)
        values["vllm_hooks_argument"] = "    vllm=[around(VLLM_RESOLVE, log_vllm_resolve)],\n"
        values["vllm_readme"] = _render_text(_template("snippets/vllm.md"), values)
    return values


def _hosts(diffusion: bool, vllm: bool) -> str:
    """The hosts the README may name: what cardcage's host rooms support for these targets."""
    sglang = "SGLang 0.5.12 to 0.5.23" + (" (diffusion from 0.5.22)" if diffusion else "")
    return f"{sglang} and vLLM 0.33" if vllm else sglang


def _authors_line(spec: PluginSpec) -> str:
    if not spec.authors:
        return ""
    entries = []
    for author in spec.authors:
        entry = f"name = {toml_string(author.name)}"
        if author.email:
            entry += f", email = {toml_string(author.email)}"
        entries.append("{ " + entry + " }")
    return f"authors = [{', '.join(entries)}]\n"


def _urls_table(spec: PluginSpec) -> str:
    if not spec.urls:
        return ""
    lines = ["[project.urls]", *(f"{toml_string(k)} = {toml_string(v)}" for k, v in spec.urls)]
    return "\n".join(lines) + "\n\n"


def _template(name: str) -> str:
    return (
        resources.files("cardcage.platforms.scaffold") / "templates" / f"{name}.tmpl"
    ).read_text(encoding="utf-8")


def _render_text(text: str, values: dict[str, str]) -> str:
    def value(match: re.Match[str]) -> str:
        key = match[1]
        if key not in values:
            raise KeyError(f"template placeholder {{{{ {key} }}}} has no value")
        return values[key]

    def lines(match: re.Match[str]) -> str:
        text = value(match)
        return text if not text or text.endswith("\n") else text + "\n"

    return _PLACEHOLDER.sub(value, _LINE_PLACEHOLDER.sub(lines, text))


def render_plugin(spec: PluginSpec) -> dict[str, str]:
    """The generated plugin: each file's path (relative, POSIX) -> its text."""
    values = _values(spec)
    files: dict[str, str] = {}
    for template, target, needs in _FILES:
        if needs is not None and needs not in spec.targets:
            continue
        text = _render_text(_template(template), values)
        files[target.format(package=spec.package)] = text
    return files


def write_plugin(spec: PluginSpec, destination: Path, *, force: bool = False) -> list[Path]:
    """Write the plugin into ``destination`` (created if needed); return the files written.

    A destination that is, or lies under, a file is refused (``DestinationNotAFolderError``);
    an existing non-empty folder is refused (``DestinationNotEmptyError``) unless ``force``:
    everything is rendered before the first file is written, so a bad template leaves nothing
    half-written behind.
    """
    files = render_plugin(spec)
    blocker = next((p for p in (destination, *destination.parents) if p.exists()), None)
    if blocker is not None and not blocker.is_dir():
        raise DestinationNotAFolderError(
            str(destination), str(blocker), distribution=spec.distribution
        )
    if destination.is_dir() and not force:
        entries = sorted(p.name for p in destination.iterdir())
        if entries:
            raise DestinationNotEmptyError(
                str(destination), entries, distribution=spec.distribution
            )
    written = []
    for relative, text in files.items():
        path = destination / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written
