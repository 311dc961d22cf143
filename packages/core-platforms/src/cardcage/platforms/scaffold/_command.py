"""``cardcage new``'s command: plan, write, and tell the user what it made and what comes next.

``cardcage.platforms.cli`` declares the options (the docs render their help from it) and imports
this module only when the command runs, so the other commands never pay for the templates.
"""

from __future__ import annotations

import argparse
import shlex
from dataclasses import dataclass
from pathlib import Path

from ._render import write_plugin
from ._spec import PluginSpec, plan_plugin

__all__ = ["NewReport", "create", "render"]


@dataclass(frozen=True)
class NewReport:
    """What ``cardcage new`` wrote."""

    spec: PluginSpec
    destination: Path
    files: tuple[str, ...]


def create(args: argparse.Namespace) -> NewReport:
    """Plan the plugin from the parsed options and write it; raises ``ScaffoldError``."""
    destination = Path(args.destination).expanduser().absolute()
    spec = plan_plugin(
        destination,
        distribution=args.distribution,
        package=args.package,
        entry_point=args.entry_point,
        device=args.device,
        device_type=args.device_type,
        class_prefix=args.class_prefix,
        description=args.description,
        authors=args.author,
        urls=args.url,
        license=args.license,
        targets=args.targets,
    )
    written = write_plugin(spec, destination, force=args.force)
    files = tuple(p.relative_to(destination).as_posix() for p in written)
    return NewReport(spec, destination, files)


def render(report: NewReport, verbose: int) -> str:
    """The files written, then the commands that take the plugin to a passing test run."""
    spec = report.spec
    extras = "test,diffusion" if "diffusion" in spec.targets else "test"
    where = shlex.quote(str(report.destination))
    lines = [
        f"Created {spec.distribution} in {report.destination}",
        f"  import package {spec.package}, entry point {spec.entry_point!r}, device "
        f"{spec.device!r}; targets: {', '.join(sorted(spec.targets))}",
        "",
        *(f"  {name}" for name in report.files),
        "",
        "Next (cardcage is on no package index yet: point --find-links at a folder holding its",
        "wheels, e.g. the dist/ that `python3 -m nox -s build` writes in a cardcage checkout):",
        f"  cd {where}",
        "  python3 -m venv .venv && . .venv/bin/activate",
        *(
            ["  pip install torch --index-url https://download.pytorch.org/whl/cpu  # CPU build"]
            if "diffusion" in spec.targets
            else []
        ),
        f"  pip install --find-links /path/to/cardcage/dist -e '.[{extras}]'",
        "  pytest",
        "  cardcage doctor --strict --hooks",
        f"Then replace the body of src/{spec.package}/_probe.py with your device probe.",
    ]
    return "\n".join(lines)
