"""Early patches: what a plugin must do before the host imports, opt-in and by name.

Hooks take effect on functions a host calls after its plugins load. What the host evaluates
while its modules import is out of their reach: a module constant (``_is_cpu =
current_platform.is_cpu()``), a decorator argument (``@torch.compile(backend=
get_compiler_backend())``), a ``from x import f`` copy made before plugins load, an ``import
aiter`` of an optional dependency that is not installed. An early patch runs at interpreter
start instead, and arms three kinds of patch, each applied at the one moment it must:

* ``hook(target, fn, hook_type)``: a BEFORE / AFTER / AROUND / REPLACE hook on ``module:attr``,
  installed right after ``module``'s body executes, before any importer copies ``attr``
  (``EarlyPatchRegistry``, cardcage's registry in deferred mode);
* ``set_value(target, value)`` (or ``compute=fn``): a module attribute set right after the
  module executes, the same way, for values a hook cannot wrap;
* ``stand_in(module, fill)``: a module provided only when no finder can import the real one.

What runs is named, never discovered: ``CARDCAGE_EARLY_PATCHES=name,...`` lists entry points of
the ``cardcage.early_patches`` group. cardcage-core-hooks ships a ``.pth`` file whose one line
reads that variable and imports nothing when it is unset or empty; when it is set, ``boot()``
runs each named entry point's callback with the plugin recorded as the source of every patch it
arms (``HookSource``, as ordinary hooks). Child processes inherit the variable, so a spawned
worker runs the same patches.

Failure policy (DESIGN §2): a failing early patch (its import, its callback, a target that
cannot be patched, a stand-in's ``fill``) is logged with its traceback and isolated: its other
patches are discarded or left alone, the others go on, a stand-in that fails reads as the
missing module it stood in for. Nothing can be aborted cleanly at interpreter start, so every
failure is also recorded: when cardcage's ``load_plugins()`` (under SGLang: cardcage's adapter
lookup, as SGLang's selection resolves a cardcage platform) learns the selected platform, a
recorded failure of that platform's distribution raises ``EarlyPatchError`` naming plugin,
distribution and fix (``check_selected_platform``); one that happens later fails the import
that reveals it. ``cardcage doctor`` reports both kinds.

Import cost: nothing for a process that does not opt in (this package is not imported). An
opted-in process pays for one entry-point scan (the process-wide snapshot, reused later by the
loader) and for the registry's modules.

This module is the public face; each job lives in a private sibling: ``_records`` (what
``report()`` and ``failures()`` return), ``_state`` (the one state object), ``_arming`` (the
three calls a callback makes), ``_registry`` (``EarlyPatchRegistry``, its hooks applied in
deferred mode), ``_values`` and ``_stand_ins`` (the other two kinds of patch), ``_running``
(``boot()`` and ``run()``), ``_policy`` (the failure policy), ``_undo`` and ``_report``.
"""

from __future__ import annotations

# ``early.HookType``: the types ``hook()`` takes, for a callback that imports only ``early``.
from cardcage.hooks.registry import HookType as HookType

from ._arming import hook, set_value, stand_in
from ._policy import check_selected_platform, failures
from ._records import EarlyFailure, EarlyPatch, EarlyPatchReport, EarlyPlugin
from ._registry import EarlyPatchRegistry
from ._report import report
from ._running import EARLY_PATCHES_GROUP, boot, run
from ._undo import reset, unapply

__all__ = [
    "EARLY_PATCHES_GROUP",
    "EarlyFailure",
    "EarlyPatch",
    "EarlyPatchRegistry",
    "EarlyPatchReport",
    "EarlyPlugin",
    "boot",
    "check_selected_platform",
    "failures",
    "hook",
    "report",
    "reset",
    "run",
    "set_value",
    "stand_in",
    "unapply",
]
