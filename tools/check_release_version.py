"""Check that a release tag (``v0.2.0``) names the version every package declares.

Each distribution has one version source, ``__version__`` in its top-level module, read by
hatch (``[tool.hatch.version]``); a release publishes all of them at one version, so the tag
and every ``__version__`` must agree, and the core ranges between the packages (``>=0.1,<0.2``)
must admit it. Run by the release workflow before anything is built; runnable by hand:
``python tools/check_release_version.py v0.1.0``.
"""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ROOT / "packages"
_VERSION = re.compile(r'^__version__ = "([^"]+)"$', re.MULTILINE)
_CORE_RANGE = re.compile(r'"(cardcage-[a-z-]+)>=([0-9.]+),<([0-9.]+)"')


def _declared(package: Path) -> tuple[str, str]:
    project = tomllib.loads((package / "pyproject.toml").read_text())
    name = project["project"]["name"]
    source = package / project["tool"]["hatch"]["version"]["path"]
    match = _VERSION.search(source.read_text())
    if match is None:
        raise SystemExit(f"{name}: no __version__ in {source.relative_to(ROOT)}")
    return name, match.group(1)


def _release(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


def main(tag: str) -> int:
    if not re.fullmatch(r"v\d+\.\d+\.\d+", tag):
        print(f"{tag!r} is not a release tag: expected v<major>.<minor>.<patch>", file=sys.stderr)
        return 1
    wanted = tag[1:]
    problems = []
    for package in sorted(p for p in PACKAGES.iterdir() if (p / "pyproject.toml").exists()):
        name, version = _declared(package)
        if version != wanted:
            problems.append(f"{name} declares {version}, the tag says {wanted}")
        text = (package / "pyproject.toml").read_text()
        for dependency, low, high in _CORE_RANGE.findall(text):
            if not _release(low) <= _release(wanted) < _release(high):
                problems.append(f"{name} requires {dependency}>={low},<{high}, not {wanted}")
    for problem in problems:
        print(problem, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1] if len(sys.argv) > 1 else ""))
