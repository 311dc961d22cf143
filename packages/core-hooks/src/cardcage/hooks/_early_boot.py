"""Imported by ``zz_cardcage_early_patches.pth`` at interpreter start, only when opted in.

The ``.pth`` line imports this module only when ``CARDCAGE_EARLY_PATCHES`` is set and not
blank; importing it runs the early patches that variable names (``cardcage.hooks.early.boot``,
which never raises). Nothing else imports it.
"""

from __future__ import annotations

from .early import boot

boot()
