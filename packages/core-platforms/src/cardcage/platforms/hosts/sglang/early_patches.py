"""Early patches' failure policy where SGLang, not cardcage, selects the platform.

cardcage's ``load_plugins()`` applies the rule once its selection is known (DESIGN §2): a
recorded failure of an early patch shipped by the distribution that supplied the selected
platform aborts start-up with ``EarlyPatchError``. SGLang's loaders know nothing of cardcage's
record, so this room applies the same rule at the moment SGLang's selection resolves the name a
cardcage platform's ``activate()`` returned (the adapter lookup): the error propagates out of
SGLang's ``current_platform``, where SGLang reports any platform that cannot start. From then on
a failure of that distribution found later fails the import that reveals it, as under cardcage.

A process that neither ran early patches nor asks for them imports nothing here beyond this
module (``cardcage.hooks.early`` stays unimported).
"""

from __future__ import annotations

import sys

from cardcage.hooks.envs import CARDCAGE_EARLY_PATCHES
from cardcage.hooks.profile import SGLANG_PROFILES

__all__ = ["check_selected_class", "supplying_entry_point"]


def supplying_entry_point(vendor: type) -> tuple[str | None, str | None]:
    """(entry-point name, distribution) of the SGLang platform entry point behind ``vendor``.

    SGLang keeps no record of it in automatic mode, so it is the platform entry point (SRT or
    diffusion) whose module shares the longest package prefix with the class's module, the
    top-level package at least (two parts under the shared ``cardcage`` namespace). (None, None)
    when none matches, or when entry points of several distributions match equally well.
    """
    from cardcage.hooks.snapshot import entry_point_snapshot

    parts = vendor.__module__.split(".")
    needed = 2 if parts[0] == "cardcage" else 1
    best = 0
    found: dict[str | None, str] = {}
    snapshot = entry_point_snapshot()
    for profile in SGLANG_PROFILES:
        for ep in snapshot.group(profile.platform_group):
            theirs = ep.module.split(".")
            shared = next(
                (i for i, (a, b) in enumerate(zip(parts, theirs, strict=False)) if a != b),
                min(len(parts), len(theirs)),
            )
            if shared < needed or shared < best:
                continue
            if shared > best:
                best, found = shared, {}
            found.setdefault(ep.dist_name, ep.name)
    if len(found) != 1:
        return None, None
    ((dist, name),) = found.items()
    return name, dist


def check_selected_class(vendor: type) -> None:
    """SGLang selected the cardcage platform class ``vendor``: apply early patches' policy.

    Raises ``EarlyPatchError`` naming the plugin, the distribution and the fix when an early
    patch of the distribution that supplied ``vendor`` failed, and the recorded configuration
    error when ``CARDCAGE_EARLY_PATCHES`` does not parse or names a duplicate.
    """
    asked = (CARDCAGE_EARLY_PATCHES.raw() or "").strip()
    if not asked and "cardcage.hooks.early" not in sys.modules:
        return
    from cardcage.hooks import early

    name, dist = supplying_entry_point(vendor)
    qualname = f"{vendor.__module__}.{vendor.__qualname__}"
    who = f"platform entry point {name!r}" if name else qualname
    early.check_selected_platform(dist, f"{who}, {qualname}, selected by SGLang")
