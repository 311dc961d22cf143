"""Real fixture distributions and a real ``cardcage`` subprocess for the CLI tests.

``Site.add`` writes ``<name>-<version>.dist-info/{METADATA,entry_points.txt}`` and the plugin
modules into a temporary folder; ``Site.run`` starts ``python -m cardcage.platforms.cli`` with that
folder on ``PYTHONPATH`` and every ``SGLANG_*``/``CARDCAGE_*``/``VLLM_*`` variable of the test
process removed, so the CLI discovers the fixtures exactly as it would discover installed wheels and
nothing from the developer's shell leaks in. Nothing is mocked.

``Site.marker(label)`` gives a file path a plugin module can touch when it is imported or
called, so a test can tell whether the CLI imported it.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cardcage.platforms.diagnostics import load_schema

if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path

PLATFORMS = "sglang.srt.platforms"
PLUGINS = "sglang.srt.plugins"

#: Prefixes stripped from the subprocess environment (the CLI reads these).
_OWN_PREFIXES = ("SGLANG_", "CARDCAGE_", "VLLM_")

OOT_PLATFORM = """
from cardcage.platforms.device_mixin import PlatformEnum
from cardcage.platforms.interface import SRTPlatform


class {cls}(SRTPlatform):
    _enum = PlatformEnum.OOT
    device_name = "{device}"
    device_type = "{device}"


def activate():
    return "{module}:{cls}"
"""

DECLINING_PLATFORM = """
def activate():
    return None
"""

RAISING_PLATFORM = """
def activate():
    raise RuntimeError("driver exploded")
"""

GOOD_PLUGIN = """
def register():
    pass
"""

BROKEN_PLUGIN = """
raise ImportError("vendor runtime libfoo.so is missing")
"""

#: A platform entry point whose module cannot be imported: activate() is never reached.
UNIMPORTABLE_PLATFORM = """
raise ImportError("libvendor.so: cannot open shared object file")
"""

RAISING_REGISTER = """
def register():
    raise RuntimeError("vendor runtime not initialised")
"""

#: A general plugin that registers one hook with cardcage's SRT registry in register().
HOOKING_PLUGIN = """
from cardcage.hooks import HookRegistry, HookType


def register():
    HookRegistry.register("json.dumps", lambda result, *args, **kwargs: result, HookType.AFTER)
"""

#: A general plugin written for SGLang's own runtime. SGLang is not installed where the tests
#: run and nothing stands in for it, so importing this really fails.
SGLANG_NATIVE_PLUGIN = """
from sglang.srt.plugins.hook_registry import HookRegistry, HookType


def register():
    HookRegistry.register("sglang.srt.utils.common.get_device_memory_capacity", print)
"""


@dataclass
class Result:
    """A finished ``cardcage`` run."""

    args: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        try:
            return json.loads(self.stdout)
        except json.JSONDecodeError as exc:  # pragma: no cover - shown on failure only
            raise AssertionError(f"stdout is not JSON: {exc}\n{self}") from exc

    def __str__(self) -> str:
        return (
            f"cardcage {' '.join(self.args)} -> {self.returncode}\n"
            f"--- stdout\n{self.stdout}\n--- stderr\n{self.stderr}"
        )


def validate(command: str, document: Any) -> None:
    """Validate a ``--json`` document against the schema shipped in the package."""
    import jsonschema

    schema = load_schema(command)
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.Draft202012Validator(schema).validate(document)


def _dist_info_name(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name)


class Site:
    """A folder of fixture distributions, put on ``PYTHONPATH`` for every ``run``."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.root.mkdir(parents=True, exist_ok=True)
        self.env: dict[str, str] = {}

    def module(self, name: str, source: str) -> str:
        """Write module ``name`` into the site (a dotted name gets its packages, each with an
        empty ``__init__.py``); return the module name."""
        *packages, leaf = name.split(".")
        folder = self.root.joinpath(*packages)
        for depth in range(1, len(packages) + 1):
            self.root.joinpath(*packages[:depth]).mkdir(exist_ok=True)
            self.root.joinpath(*packages[:depth], "__init__.py").touch()
        (folder / f"{leaf}.py").write_text(textwrap.dedent(source), encoding="utf-8")
        return name

    def marker(self, label: str) -> Path:
        return self.root / f"{label}.touched"

    def touching(self, label: str, source: str = "") -> str:
        """Module source that touches ``marker(label)`` when imported, followed by ``source``."""
        path = self.marker(label)
        return f"open({str(path)!r}, 'w').close()\n" + textwrap.dedent(source)

    def add(
        self,
        name: str,
        version: str = "1.0",
        *,
        entry_points: Mapping[str, Mapping[str, str]] | None = None,
        modules: Mapping[str, str] | None = None,
    ) -> None:
        """Write distribution ``name`` with its entry points and the modules they point at."""
        for module, source in (modules or {}).items():
            self.module(module, source)
        dist_info = self.root / f"{_dist_info_name(name)}-{version}.dist-info"
        dist_info.mkdir()
        (dist_info / "METADATA").write_text(
            f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n", encoding="utf-8"
        )
        lines: list[str] = []
        for group, entries in (entry_points or {}).items():
            lines.append(f"[{group}]")
            lines.extend(f"{ep} = {value}" for ep, value in entries.items())
            lines.append("")
        (dist_info / "entry_points.txt").write_text("\n".join(lines), encoding="utf-8")

    def platform(self, dist: str, ep: str, source: str, version: str = "1.0") -> str:
        """A distribution with one platform entry point ``ep`` -> ``<module>:activate``."""
        module = f"ccfix_{_dist_info_name(dist).lower()}_{ep}"
        self.add(
            dist,
            version,
            entry_points={PLATFORMS: {ep: f"{module}:activate"}},
            modules={module: source.format(module=module, cls="FixturePlatform", device=ep)},
        )
        return module

    def oot(self, dist: str, ep: str, version: str = "1.0") -> str:
        """A distribution whose platform ``ep`` activates a valid OOT ``SRTPlatform``."""
        return self.platform(dist, ep, OOT_PLATFORM, version)

    def plugin(self, dist: str, ep: str, source: str = GOOD_PLUGIN, version: str = "1.0") -> str:
        """A distribution with one general plugin ``ep`` -> ``<module>:register``."""
        module = f"ccfix_{_dist_info_name(dist).lower()}_{ep}"
        self.add(
            dist,
            version,
            entry_points={PLUGINS: {ep: f"{module}:register"}},
            modules={module: source},
        )
        return module

    def run(self, *args: str, env: Mapping[str, str] | None = None) -> Result:
        """Run ``cardcage *args`` in a fresh interpreter that sees this site's distributions."""
        return run_cli(*args, site=self, env={**self.env, **(env or {})})


def clean_environ(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The test process's environment without cardcage's own variables and ``PYTHONPATH``."""
    environ = {
        k: v for k, v in os.environ.items() if not k.startswith(_OWN_PREFIXES) and k != "PYTHONPATH"
    }
    environ["PYTHONDONTWRITEBYTECODE"] = "1"
    environ.update(extra or {})
    return environ


def run_cli(
    *args: str,
    site: Site | None = None,
    env: Mapping[str, str] | None = None,
    command: list[str] | None = None,
) -> Result:
    environ = clean_environ(env)
    if site is not None:
        environ["PYTHONPATH"] = str(site.root)
    argv = command or [sys.executable, "-m", "cardcage.platforms.cli"]
    done = subprocess.run(
        [*argv, *args],
        env=environ,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    return Result(tuple(args), done.returncode, done.stdout, done.stderr)
