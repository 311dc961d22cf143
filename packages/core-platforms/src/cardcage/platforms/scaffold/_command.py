"""``cardcage new``'s command: plan, write, and tell the user what it made and what comes next.

``cardcage.platforms.cli`` declares the options (the docs render their help from it) and imports
this module only when the command runs, so the other commands never pay for the templates.

The next steps are the commands of the vendor tutorial's first section (docs/platforms/
vendor-plugin.md), which its test compares with this output: they run in the environment that
ran ``cardcage new``, which has cardcage, so pip needs no folder of cardcage's wheels unless a
distribution the plugin needs is missing here; the folder is then the one placeholder, named.
"""

from __future__ import annotations

import argparse
import shlex
import textwrap
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from ._render import write_plugin
from ._spec import TORCH_CPU_INSTALL, PluginSpec, plan_plugin

__all__ = ["TORCH_CPU_INSTALL", "NewReport", "create", "next_steps", "render"]

#: What the next steps call the folder of cardcage's wheels, where they need it.
WHEELS_FOLDER = "WHEELS"


@dataclass(frozen=True)
class NewReport:
    """What ``cardcage new`` wrote, and what the environment it ran in lacks for the plugin."""

    spec: PluginSpec
    #: Absolute and resolved: no ``..`` left in what the user is told to ``cd`` to.
    destination: Path
    files: tuple[str, ...]
    #: cardcage distributions the plugin requires that are not installed here.
    missing: tuple[str, ...] = ()
    #: A diffusion plugin, and no torch here: the next steps install the pinned CPU build first.
    needs_torch: bool = False


def _installed(distribution: str) -> bool:
    try:
        metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return False
    return True


def create(args: argparse.Namespace) -> NewReport:
    """Plan the plugin from the parsed options and write it; raises ``ScaffoldError``."""
    destination = Path(args.destination).expanduser().resolve()
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
    missing = tuple(name for name, _ in spec.requirements if not _installed(name))
    needs_torch = "diffusion" in spec.targets and not _installed("torch")
    return NewReport(spec, destination, files, missing, needs_torch)


def next_steps(report: NewReport) -> list[str]:
    """The commands that take the plugin to a passing test run and an accepted selection, in
    this environment: the tutorial's, with the destination spelled out."""
    spec = report.spec
    extras = "test,diffusion" if "diffusion" in spec.targets else "test"
    steps = [f"cd {shlex.quote(str(report.destination))}"]
    if report.needs_torch:
        steps.append(TORCH_CPU_INSTALL)
    if report.missing:
        steps.append(f"pip install --find-links {WHEELS_FOLDER} {' '.join(report.missing)}")
    return [
        *steps,
        f"pip install -e '.[{extras}]'",
        "pytest",
        f"{spec.env_prefix}_PRESENT=1 SGLANG_PLATFORM={spec.entry_point} cardcage platform",
        "cardcage doctor --strict --hooks",
    ]


def render(report: NewReport, verbose: int) -> str:
    """The files written, then the commands that take the plugin to a passing test run."""
    spec = report.spec
    lines = [
        f"Created {spec.distribution} in {report.destination}",
        f"  import package {spec.package}, entry point {spec.entry_point!r}, device "
        f"{spec.device!r}; targets: {', '.join(sorted(spec.targets))}",
        "",
        *(f"  {name}" for name in report.files),
        "",
        'Next, in this environment (it has cardcage), as the tutorial "Writing a vendor plugin" '
        "does:",
    ]
    if report.missing:
        note = (
            f"{WHEELS_FOLDER} below: the folder of cardcage's wheels you installed cardcage "
            f"from. This environment lacks {', '.join(report.missing)}, and cardcage is on no "
            "package index yet."
        )
        lines += textwrap.wrap(note, width=96)
    lines += [f"  {step}" for step in next_steps(report)]
    lines.append(f"Then replace the body of src/{spec.package}/_probe.py with your device probe.")
    return "\n".join(lines)
