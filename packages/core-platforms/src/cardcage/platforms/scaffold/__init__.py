"""``cardcage new``: a vendor platform plugin, generated under the vendor's own names.

The generated project stands alone (its own ``pyproject.toml``, README, tests; dependency ranges
on this cardcage's distributions), so it can live in the vendor's repository from its first
commit. Its ``activate()`` asks one small probe module (``_probe.py``) that the vendor replaces
with a real device probe, and its tests fake the device through one fixture, so they keep
passing on machines with and without the device once the probe is real.

Only ``cardcage new`` imports this package (the CLI imports it lazily): rendering reads the
templates shipped as package data under ``templates/``. Stdlib only.

    spec = plan_plugin(Path("acme-npu-plugin"), targets=["diffusion"])
    write_plugin(spec, Path("acme-npu-plugin"))
"""

from __future__ import annotations

from ._render import render_plugin, write_plugin
from ._spec import TARGETS, Author, PluginSpec, compatible_range, plan_plugin
from .errors import (
    DestinationNotAFolderError,
    DestinationNotEmptyError,
    InvalidPluginNameError,
    ScaffoldError,
)

__all__ = [
    "TARGETS",
    "Author",
    "DestinationNotAFolderError",
    "DestinationNotEmptyError",
    "InvalidPluginNameError",
    "PluginSpec",
    "ScaffoldError",
    "compatible_range",
    "plan_plugin",
    "render_plugin",
    "write_plugin",
]
