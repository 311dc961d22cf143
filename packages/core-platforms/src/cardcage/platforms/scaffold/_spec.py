"""What ``cardcage new`` generates: one frozen ``PluginSpec``, planned from the user's options.

``plan_plugin`` derives every name the user left out from the one before it (destination folder
-> distribution -> import package -> entry-point name -> device name -> class prefix), checks
each (``_names``) and the metadata (authors, URLs, licence, targets), and computes the dependency
ranges on cardcage's own distributions from the versions installed where it runs: the generated
code uses this cardcage's API, so it asks for this release or a later compatible one.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from cardcage.hooks.spelling import closest

from . import _names
from .errors import InvalidPluginNameError

__all__ = [
    "TARGETS",
    "TORCH_CPU_INSTALL",
    "Author",
    "PluginSpec",
    "compatible_range",
    "plan_plugin",
]

#: What a generated plugin can target: SRT always; the diffusion half and vLLM's section on
#: request. SGLang needs nothing of its own: the same entry points serve it.
TARGETS = ("srt", "diffusion", "vllm")
DEFAULT_LICENSE = "LicenseRef-Proprietary"
#: How a diffusion plugin's next steps and README install torch, exactly as the tutorial does:
#: pinned, from PyTorch's CPU index (an unpinned ``pip install torch`` on Linux takes PyPI's CUDA
#: build, several GB). 2.13.0 is the release cardcage's diffusion runtime is tested with.
TORCH_CPU_INSTALL = "pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu"

_AUTHOR = re.compile(r"^\s*(?P<name>[^<>]*?)\s*(?:<(?P<email>[^<>\s]+@[^<>\s]+)>)?\s*$")
_URL_LABEL = re.compile(r"^[A-Za-z][A-Za-z0-9 ._-]*$")
_LICENSE = re.compile(r"^[A-Za-z0-9.+:() -]+$")


@dataclass(frozen=True)
class Author:
    """One ``[project] authors`` entry."""

    name: str
    email: str | None = None


@dataclass(frozen=True)
class PluginSpec:
    """Everything the templates need, every name already checked."""

    distribution: str
    package: str
    entry_point: str
    device: str
    device_type: str
    class_prefix: str
    description: str
    authors: tuple[Author, ...]
    urls: tuple[tuple[str, str], ...]
    license: str
    targets: frozenset[str]
    #: ``{cardcage distribution: "specifier"}`` for the generated dependencies.
    requirements: tuple[tuple[str, str], ...]

    @property
    def env_prefix(self) -> str:
        """The prefix of the plugin's own variables: ``ACME_NPU``."""
        return self.entry_point.upper()

    def requirement(self, distribution: str) -> str:
        """A cardcage distribution with its range: ``cardcage-core-platforms>=0.1.0,<0.2``."""
        return f"{distribution}{dict(self.requirements)[distribution]}"


def compatible_range(version: str) -> str:
    """``>=0.1.0,<0.2`` for 0.1.0: this release or a later one that keeps its API (a new minor
    version may break a 0.x API, a new major version a 1.x one). Pre-release and local parts are
    dropped from the lower bound."""
    numbers = [int(n) for n in re.findall(r"\d+", version.split("+", maxsplit=1)[0])[:3]]
    major, minor, patch = [*numbers, 0, 0, 0][:3]
    upper = f"{major}.{minor + 1}" if major == 0 else f"{major + 1}"
    return f">={major}.{minor}.{patch},<{upper}"


def _installed_version(distribution: str, fallback: str) -> str:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return fallback


def _requirements(targets: frozenset[str]) -> tuple[tuple[str, str], ...]:
    """Ranges on cardcage's distributions, from the versions installed here. cardcage's
    distributions share one version line, so one not installed here (the diffusion runtime on a
    machine without torch) takes core-platforms' version."""
    from cardcage.hooks import __version__ as hooks_version
    from cardcage.platforms import __version__ as platforms_version

    platforms = _installed_version("cardcage-core-platforms", platforms_version)
    wanted = [
        ("cardcage-core-hooks", _installed_version("cardcage-core-hooks", hooks_version)),
        ("cardcage-core-platforms", platforms),
    ]
    if "diffusion" in targets:
        runtime = _installed_version("cardcage-diffusion-runtime", platforms)
        wanted.append(("cardcage-diffusion-runtime", runtime))
    return tuple((name, compatible_range(version)) for name, version in wanted)


def _targets(values: list[str], distribution: str) -> frozenset[str]:
    chosen = {"srt"}
    for value in values:
        for name in (v.strip() for v in value.split(",")):
            if not name:
                continue
            if name not in TARGETS:
                raise InvalidPluginNameError(
                    "target",
                    name,
                    f"a plugin targets {', '.join(TARGETS)} (srt always)",
                    flag="--targets",
                    suggestion=closest(name, TARGETS),
                    distribution=distribution,
                )
            chosen.add(name)
    return frozenset(chosen)


def _authors(values: list[str], distribution: str) -> tuple[Author, ...]:
    authors = []
    for value in values:
        match = _AUTHOR.match(value)
        if not match or not match["name"] or '"' in value:
            raise InvalidPluginNameError(
                "author",
                value,
                "write an author as 'Name' or 'Name <email@example.com>'",
                flag="--author",
                distribution=distribution,
            )
        authors.append(Author(match["name"], match["email"]))
    return tuple(authors)


def _urls(values: list[str], distribution: str) -> tuple[tuple[str, str], ...]:
    urls = []
    for value in values:
        label, _, url = value.partition("=")
        label, url = label.strip(), url.strip()
        if not _URL_LABEL.match(label) or not re.match(r"^https?://\S+$", url):
            raise InvalidPluginNameError(
                "project URL",
                value,
                "write it as Label=https://... (labels such as Homepage, Source, Documentation, "
                "Issues)",
                flag="--url",
                suggestion=f"Homepage={value}" if re.match(r"^https?://", value) else None,
                distribution=distribution,
            )
        urls.append((label, url))
    return tuple(urls)


def _license(value: str, distribution: str) -> str:
    if not _LICENSE.match(value):
        raise InvalidPluginNameError(
            "licence",
            value,
            "give an SPDX licence expression, such as Apache-2.0, MIT or LicenseRef-Proprietary",
            flag="--license",
            distribution=distribution,
        )
    return value


def plan_plugin(
    destination: Path,
    *,
    distribution: str | None = None,
    package: str | None = None,
    entry_point: str | None = None,
    device: str | None = None,
    device_type: str | None = None,
    class_prefix: str | None = None,
    description: str | None = None,
    authors: list[str] | None = None,
    urls: list[str] | None = None,
    license: str | None = None,  # noqa: A002 - the pyproject field's name
    targets: list[str] | None = None,
) -> PluginSpec:
    """The plugin ``cardcage new`` would write to ``destination``; raises
    ``InvalidPluginNameError`` for the first name or value that cannot be used."""
    dist = _names.check_distribution(distribution or destination.resolve().name)
    pkg = _names.check_package(
        package or _names.package_from(dist), distribution=dist, derived=package is None
    )
    name = _names.check_entry_point(entry_point or _names.entry_point_from(pkg), distribution=dist)
    dev = _names.check_device_name(device or name, distribution=dist)
    dev_type = _names.check_device_name(device_type or dev, distribution=dist, flag="--device-type")
    prefix = _names.check_class_prefix(
        class_prefix or _names.class_prefix_from(dev), distribution=dist
    )
    chosen = _targets(targets or [], dist)
    text = description or f"cardcage and SGLang platform plugin for the {dev} device."
    if "\n" in text:
        raise InvalidPluginNameError(
            "description", text, "a summary is one line", flag="--description", distribution=dist
        )
    return PluginSpec(
        distribution=dist,
        package=pkg,
        entry_point=name,
        device=dev,
        device_type=dev_type,
        class_prefix=prefix,
        description=text,
        authors=_authors(authors or [], dist),
        urls=_urls(urls or [], dist),
        license=_license(license or DEFAULT_LICENSE, dist),
        targets=chosen,
        requirements=_requirements(chosen),
    )


def toml_string(value: str) -> str:
    """``value`` as a TOML basic string (JSON's escapes are TOML's)."""
    return json.dumps(value, ensure_ascii=False)
