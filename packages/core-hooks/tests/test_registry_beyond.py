"""What cardcage's hook registry does beyond SGLang's (DESIGN §2.4 "Beyond the anchors").

Async targets, inherited descriptors and properties, typed errors, the apply report and strict
mode, late registrations, undo, scoped propagation, separate registries, source attribution,
deferred patching on first import, and thread safety.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import logging
import sys
import threading
from typing import Any

import pytest
from registry_support import (  # noqa: F401 - fixtures
    REGISTRY_LOGGER,
    ModuleTree,
    SyntheticModules,
    messages,
    module_tree_fixture,
    registry_fixture,
    synth_fixture,
    unique_name,
)

from cardcage.hooks._deferred import watcher
from cardcage.hooks.errors import (
    HookApplyError,
    HookRegistrationError,
    HookResultError,
    HookTargetError,
    InvalidTargetError,
)
from cardcage.hooks.registry import (
    ApplyReport,
    BaseHookRegistry,
    HookRegistry,
    HookSource,
    HookType,
    current_plugin_source,
    plugin_source,
)

Registry = type[BaseHookRegistry]

DOUBLE = """
def f(x):
    return x * 2
"""

ASYNC = """
async def f(x):
    return x * 2
"""

INHERITED = """
class Base:
    @classmethod
    def cm(cls, x):
        return (cls.__name__, x)

    @staticmethod
    def sm(x):
        return ("sm", x)

class Sub(Base):
    pass
"""


def _tag(label: str) -> Any:
    """An AFTER hook that appends ``label`` to a list result."""

    def after(result: list[str], *args: Any) -> list[str]:
        return [*result, label]

    after.__qualname__ = f"tag_{label}"
    return after


# -- async targets ----------------------------------------------------------------------------


def test_async_target_stays_a_coroutine_function_after_patching(
    registry: Registry, synth: SyntheticModules
) -> None:
    mod = synth.make(ASYNC)
    original = mod.f
    registry.register(f"{mod.__name__}.f", lambda result, x: None, HookType.AFTER)

    registry.apply()

    assert mod.f is not original
    assert inspect.iscoroutinefunction(mod.f)


def test_after_hook_on_async_target_receives_the_awaited_result(
    registry: Registry, synth: SyntheticModules
) -> None:
    mod = synth.make(ASYNC)
    seen: list[Any] = []

    def after(result: Any, x: int) -> Any:
        seen.append(result)
        return result + 1

    registry.register(f"{mod.__name__}.f", after, HookType.AFTER)
    registry.apply()

    assert asyncio.run(mod.f(3)) == 7
    assert seen == [6]


def test_after_hook_returning_none_on_async_target_keeps_the_awaited_result(
    registry: Registry, synth: SyntheticModules
) -> None:
    mod = synth.make(ASYNC)
    registry.register(f"{mod.__name__}.f", lambda result, x: None, HookType.AFTER)

    registry.apply()

    assert asyncio.run(mod.f(3)) == 6


async def _async_before(x: int) -> Any:
    return ((x + 1,), {})


async def _async_after(result: int, x: int) -> int:
    return result + 100


async def _async_around(original: Any, x: int) -> Any:
    return (await original(x)) * 10


async def _async_replace(x: int) -> int:
    return -x


@pytest.mark.parametrize(
    ("hook", "hook_type", "expected"),
    [
        (_async_before, HookType.BEFORE, 8),
        (_async_after, HookType.AFTER, 106),
        (_async_around, HookType.AROUND, 60),
        (_async_replace, HookType.REPLACE, -3),
    ],
    ids=["before", "after", "around", "replace"],
)
def test_async_hooks_are_awaited_on_async_targets(
    registry: Registry, synth: SyntheticModules, hook: Any, hook_type: HookType, expected: int
) -> None:
    mod = synth.make(ASYNC)
    registry.register(f"{mod.__name__}.f", hook, hook_type)

    registry.apply()

    assert asyncio.run(mod.f(3)) == expected


def test_async_hook_on_a_sync_target_is_reported_as_failed(
    registry: Registry, synth: SyntheticModules
) -> None:
    mod = synth.make(DOUBLE)
    original = mod.f
    target = f"{mod.__name__}.f"
    registry.register(target, _async_after, HookType.AFTER)

    report = registry.apply()

    error = report.failed[target]
    assert isinstance(error, HookTargetError)
    assert "_async_after" in str(error)
    assert "async" in str(error)
    assert mod.f is original


def test_async_hook_on_a_sync_target_raises_in_strict_mode(
    registry: Registry, synth: SyntheticModules
) -> None:
    mod = synth.make(DOUBLE)
    target = f"{mod.__name__}.f"
    registry.register(target, _async_after, HookType.AFTER)

    with pytest.raises(HookApplyError, match=r"HookTargetError") as info:
        registry.apply(strict=True)

    assert isinstance(info.value.failures[target], HookTargetError)


# -- inherited descriptors and properties -----------------------------------------------------


def test_inherited_classmethod_is_patched_on_the_subclass_only(
    registry: Registry, synth: SyntheticModules
) -> None:
    mod = synth.make(INHERITED)
    base_raw = mod.Base.__dict__["cm"]
    registry.register(
        f"{mod.__name__}.Sub.cm",
        lambda original, cls, x: (*original(cls, x), "hooked"),
        HookType.AROUND,
    )

    registry.apply()

    assert isinstance(mod.Sub.__dict__["cm"], classmethod)
    assert mod.Base.__dict__["cm"] is base_raw
    assert mod.Base.cm(1) == ("Base", 1)


@pytest.mark.parametrize("via", ["class", "instance"])
def test_inherited_classmethod_hook_binds_the_subclass_as_cls(
    registry: Registry, synth: SyntheticModules, via: str
) -> None:
    mod = synth.make(INHERITED)
    registry.register(
        f"{mod.__name__}.Sub.cm",
        lambda original, cls, x: (*original(cls, x), "hooked"),
        HookType.AROUND,
    )
    registry.apply()

    owner = mod.Sub if via == "class" else mod.Sub()

    assert owner.cm(1) == ("Sub", 1, "hooked")


def test_inherited_classmethod_hook_binds_a_later_subclass_as_cls(
    registry: Registry, synth: SyntheticModules
) -> None:
    mod = synth.make(INHERITED)
    registry.register(
        f"{mod.__name__}.Sub.cm",
        lambda original, cls, x: (*original(cls, x), "hooked"),
        HookType.AROUND,
    )
    registry.apply()

    class Later(mod.Sub):  # type: ignore[misc, name-defined]
        pass

    assert Later.cm(1) == ("Later", 1, "hooked")
    assert Later().cm(1) == ("Later", 1, "hooked")


@pytest.mark.parametrize("via", ["class", "instance"])
def test_inherited_staticmethod_hook_receives_no_implicit_argument(
    registry: Registry, synth: SyntheticModules, via: str
) -> None:
    mod = synth.make(INHERITED)
    registry.register(
        f"{mod.__name__}.Sub.sm", lambda original, x: (*original(x), "hooked"), HookType.AROUND
    )
    registry.apply()

    owner = mod.Sub if via == "class" else mod.Sub()

    assert owner.sm(1) == ("sm", 1, "hooked")
    assert isinstance(mod.Sub.__dict__["sm"], staticmethod)
    assert mod.Base.sm(1) == ("sm", 1)


def test_unapply_of_an_inherited_method_hook_removes_the_subclass_attribute(
    registry: Registry, synth: SyntheticModules
) -> None:
    mod = synth.make(INHERITED)
    registry.register(f"{mod.__name__}.Sub.cm", lambda result, cls, x: "hooked", HookType.AFTER)
    registry.apply()

    registry.unapply()

    assert "cm" not in mod.Sub.__dict__
    assert mod.Sub.cm(1) == ("Sub", 1)


def test_after_hook_on_a_property_changes_what_the_getter_returns(
    registry: Registry, synth: SyntheticModules
) -> None:
    mod = synth.make(
        """
        class Box:
            def __init__(self):
                self._size = 5

            @property
            def size(self):
                return self._size

            @size.setter
            def size(self, value):
                self._size = value
        """
    )
    registry.register(f"{mod.__name__}.Box.size", lambda result, self: result * 10, HookType.AFTER)

    registry.apply()

    box = mod.Box()
    assert isinstance(mod.Box.__dict__["size"], property)
    assert box.size == 50
    box.size = 7  # the setter survives the patch
    assert box.size == 70


def test_cached_property_target_is_rejected_with_a_clear_error(
    registry: Registry, synth: SyntheticModules
) -> None:
    mod = synth.make(
        """
        import functools

        class Box:
            @functools.cached_property
            def size(self):
                return 5
        """
    )
    target = f"{mod.__name__}.Box.size"
    raw = mod.Box.__dict__["size"]
    registry.register(target, lambda result, self: result + 1, HookType.AFTER)

    report = registry.apply()

    error = report.failed[target]
    assert isinstance(error, HookTargetError)
    assert "cached_property" in str(error)
    assert target in str(error)
    assert mod.Box.__dict__["size"] is raw
    assert mod.Box().size == 5


# -- REPLACE kind mismatches ------------------------------------------------------------------


def test_function_replace_on_a_class_target_is_rejected(
    registry: Registry, synth: SyntheticModules
) -> None:
    mod = synth.make("class Widget:\n    pass\n")
    original = mod.Widget
    target = f"{mod.__name__}.Widget"

    def make_widget() -> object:
        return object()

    registry.register(target, make_widget, HookType.REPLACE)

    report = registry.apply()

    error = report.failed[target]
    assert isinstance(error, HookTargetError)
    assert "is a class" in str(error)
    assert "make_widget" in str(error)
    assert mod.Widget is original


def test_class_replace_on_a_function_target_is_rejected(
    registry: Registry, synth: SyntheticModules
) -> None:
    mod = synth.make(DOUBLE)
    original = mod.f
    target = f"{mod.__name__}.f"

    class Doubler:
        pass

    registry.register(target, Doubler, HookType.REPLACE)

    report = registry.apply()

    error = report.failed[target]
    assert isinstance(error, HookTargetError)
    assert "Doubler" in str(error)
    assert "not a class" in str(error)
    assert mod.f is original


# -- BEFORE result validation -----------------------------------------------------------------


@pytest.mark.parametrize(
    "returned",
    [{"x": 1}, ((1,), {}, None), (6, 7), (6,)],
    ids=["dict", "three-tuple", "bare-args-pair", "bare-args-single"],
)
def test_before_hook_returning_a_wrong_shape_raises_naming_hook_and_target(
    registry: Registry, synth: SyntheticModules, returned: object
) -> None:
    mod = synth.make("def f(x, y=0):\n    return x + y\n")
    target = f"{mod.__name__}.f"

    def bad_before(*args: Any, **kwargs: Any) -> object:
        return returned

    registry.register(target, bad_before, HookType.BEFORE)
    registry.apply()

    with pytest.raises(HookResultError, match=r"BEFORE hook .*bad_before") as info:
        mod.f(1, 2)

    assert target in str(info.value)
    assert info.value.target == target
    assert info.value.hook is bad_before
    assert isinstance(info.value, TypeError)


def test_async_before_hook_returning_a_wrong_shape_raises(
    registry: Registry, synth: SyntheticModules
) -> None:
    mod = synth.make(ASYNC)

    async def bad_before(x: int) -> object:
        return [x]

    registry.register(f"{mod.__name__}.f", bad_before, HookType.BEFORE)
    registry.apply()

    with pytest.raises(HookResultError, match=r"bad_before"):
        asyncio.run(mod.f(1))


# -- the apply report and strict mode ---------------------------------------------------------


def test_apply_report_lists_applied_failed_and_rebound(
    registry: Registry, synth: SyntheticModules
) -> None:
    home = synth.make(DOUBLE)
    synth.make(f"from {home.__name__} import f\n")
    good = f"{home.__name__}.f"
    bad = f"{home.__name__}.missing"
    registry.register(good, lambda result, x: result, HookType.AFTER)
    registry.register(bad, lambda result, x: result, HookType.AFTER)

    report = registry.apply()

    assert isinstance(report, ApplyReport)
    assert report.applied == (good,)
    assert list(report.failed) == [bad]
    assert isinstance(report.failed[bad], AttributeError)
    assert report.pending == ()
    assert report.rebound == 1
    assert not report.ok


def test_strict_apply_raises_listing_failed_targets_after_applying_the_good_ones(
    registry: Registry, synth: SyntheticModules
) -> None:
    mod = synth.make(DOUBLE)
    good = f"{mod.__name__}.f"
    bad = f"{mod.__name__}.missing"
    registry.register(good, lambda result, x: result + 1, HookType.AFTER)
    registry.register(bad, lambda result, x: result, HookType.AFTER, source=HookSource("pl"))

    with pytest.raises(HookApplyError) as info:
        registry.apply(strict=True)

    message = str(info.value)
    assert bad in message
    assert "plugin=pl" in message
    assert "AttributeError" in message
    assert set(info.value.failures) == {bad}
    assert isinstance(info.value, RuntimeError)
    assert mod.f(1) == 3
    assert registry.applied_targets() == (good,)


# -- late registrations -----------------------------------------------------------------------


def test_hook_registered_after_apply_waits_for_the_next_apply(
    registry: Registry, synth: SyntheticModules
) -> None:
    mod = synth.make("def f():\n    return []\n")
    target = f"{mod.__name__}.f"
    registry.register(target, _tag("first"), HookType.AFTER)
    registry.apply()

    registry.register(target, _tag("late"), HookType.AFTER)

    assert mod.f() == ["first"]


def test_late_registration_is_applied_by_the_next_apply_without_double_wrapping(
    registry: Registry, synth: SyntheticModules
) -> None:
    mod = synth.make("def f():\n    return []\n")
    original = mod.f
    target = f"{mod.__name__}.f"
    registry.register(target, _tag("first"), HookType.AFTER)
    registry.apply()
    registry.register(target, _tag("late"), HookType.AFTER)

    report = registry.apply()

    assert report.applied == (target,)
    assert mod.f() == ["first", "late"]
    assert mod.f.__wrapped__.__wrapped__ is original


def test_late_registration_on_a_re_exported_target_keeps_the_other_target_hooks(
    registry: Registry, synth: SyntheticModules
) -> None:
    home = synth.make("def f():\n    return []\n")
    alias = synth.make(f"from {home.__name__} import f\n")
    registry.register(f"{home.__name__}.f", _tag("home"), HookType.AFTER)
    registry.register(f"{alias.__name__}.f", _tag("alias"), HookType.AFTER)
    registry.apply()

    registry.register(f"{alias.__name__}.f", _tag("late"), HookType.AFTER)
    registry.apply()

    result = alias.f()
    assert sorted(result) == ["alias", "home", "late"]


# -- queries ----------------------------------------------------------------------------------


def test_is_hook_applied_is_false_until_the_target_is_applied(
    registry: Registry, synth: SyntheticModules
) -> None:
    mod = synth.make(DOUBLE)
    target = f"{mod.__name__}.f"

    def hook(result: int, x: int) -> int:
        return result

    assert not registry.is_hook_applied(target, hook)
    registry.register(target, hook, HookType.AFTER)
    assert not registry.is_hook_applied(target, hook)

    registry.apply()

    assert registry.is_hook_applied(target, hook)
    assert registry.is_hook_applied(target, hook, HookType.AFTER)


def test_is_hook_applied_matches_only_the_exact_callback_type_and_target(
    registry: Registry, synth: SyntheticModules
) -> None:
    mod = synth.make("def f(x):\n    return x\n\ndef g(x):\n    return x\n")
    target = f"{mod.__name__}.f"
    hook = lambda result, x: result  # noqa: E731
    twin = lambda result, x: result  # noqa: E731
    registry.register(target, hook, HookType.AFTER)
    registry.register(f"{mod.__name__}.g", twin, HookType.AFTER)
    registry.apply()

    assert registry.is_hook_applied(target, hook, HookType.AFTER)
    assert not registry.is_hook_applied(target, hook, HookType.BEFORE)
    assert not registry.is_hook_applied(target, twin, HookType.AFTER)
    assert not registry.is_hook_applied(f"{mod.__name__}.g", hook, HookType.AFTER)


def test_is_hook_applied_distinguishes_an_applied_hook_from_a_late_one(
    registry: Registry, synth: SyntheticModules
) -> None:
    mod = synth.make(DOUBLE)
    target = f"{mod.__name__}.f"
    first = lambda result, x: result  # noqa: E731
    late = lambda result, x: result  # noqa: E731
    registry.register(target, first, HookType.AFTER)
    registry.apply()

    registry.register(target, late, HookType.AFTER)

    assert registry.is_hook_applied(target, first)
    assert not registry.is_hook_applied(target, late)


def test_is_hook_applied_is_false_after_reset(registry: Registry, synth: SyntheticModules) -> None:
    mod = synth.make(DOUBLE)
    target = f"{mod.__name__}.f"
    hook = lambda result, x: result  # noqa: E731
    registry.register(target, hook, HookType.AFTER)
    registry.apply()

    registry.reset()

    assert not registry.is_hook_applied(target, hook)


# -- undo -------------------------------------------------------------------------------------


def test_unapply_restores_originals_and_rebound_aliases(
    registry: Registry, synth: SyntheticModules
) -> None:
    home = synth.make(DOUBLE)
    alias = synth.make(f"from {home.__name__} import f\n")
    original = home.f
    target = f"{home.__name__}.f"
    registry.register(target, lambda result, x: result + 1, HookType.AFTER)
    registry.apply()
    assert alias.f is not original

    undone = registry.unapply()

    assert undone == (target,)
    assert home.f is original
    assert alias.f is original
    assert registry.applied_targets() == ()


def test_unapply_restores_aliases_of_a_replaced_class(
    registry: Registry, synth: SyntheticModules
) -> None:
    home = synth.make("class Widget:\n    pass\n")
    alias = synth.make(f"from {home.__name__} import Widget\n")
    original = home.Widget

    class Replacement(original):  # type: ignore[misc, valid-type]
        pass

    registry.register(f"{home.__name__}.Widget", Replacement, HookType.REPLACE)
    registry.apply()
    assert alias.Widget is Replacement

    registry.unapply()

    assert home.Widget is original
    assert alias.Widget is original


def test_unapply_of_one_target_leaves_the_others_patched(
    registry: Registry, synth: SyntheticModules
) -> None:
    mod = synth.make("def f(x):\n    return x\n\ndef g(x):\n    return x\n")
    original_f = mod.f
    registry.register(f"{mod.__name__}.f", lambda result, x: result + 1, HookType.AFTER)
    registry.register(f"{mod.__name__}.g", lambda result, x: result + 1, HookType.AFTER)
    registry.apply()

    undone = registry.unapply(f"{mod.__name__}.f")

    assert undone == (f"{mod.__name__}.f",)
    assert mod.f is original_f
    assert mod.g(1) == 2


def test_unapplied_hooks_stay_registered_for_the_next_apply(
    registry: Registry, synth: SyntheticModules
) -> None:
    mod = synth.make(DOUBLE)
    registry.register(f"{mod.__name__}.f", lambda result, x: result + 1, HookType.AFTER)
    registry.apply()
    registry.unapply()

    registry.apply()

    assert mod.f(1) == 3


def test_reset_restores_originals_and_forgets_registrations(
    registry: Registry, synth: SyntheticModules
) -> None:
    mod = synth.make(DOUBLE)
    original = mod.f
    registry.register(f"{mod.__name__}.f", lambda result, x: result + 1, HookType.AFTER)
    registry.apply()

    registry.reset()
    report = registry.apply()

    assert mod.f is original
    assert registry.registrations() == {}
    assert report.applied == ()


def test_sandbox_undoes_registrations_and_patches_made_inside(
    registry: Registry, synth: SyntheticModules
) -> None:
    mod = synth.make(DOUBLE)
    original = mod.f
    target = f"{mod.__name__}.f"

    with registry.sandbox() as sandboxed:
        sandboxed.register(target, lambda result, x: result + 1, HookType.AFTER)
        sandboxed.apply()
        assert mod.f(1) == 3

    assert sandboxed is registry
    assert mod.f is original
    assert registry.registrations() == {}


def test_sandbox_keeps_patches_made_before_it(registry: Registry, synth: SyntheticModules) -> None:
    mod = synth.make("def f(x):\n    return x\n\ndef g(x):\n    return x\n")
    registry.register(f"{mod.__name__}.f", lambda result, x: result + 1, HookType.AFTER)
    registry.apply()
    patched_f = mod.f

    with registry.sandbox():
        registry.register(f"{mod.__name__}.g", lambda result, x: result + 1, HookType.AFTER)
        registry.apply()

    assert mod.f is patched_f
    assert registry.applied_targets() == (f"{mod.__name__}.f",)


def test_sandbox_restores_a_patch_rebuilt_inside_it(
    registry: Registry, synth: SyntheticModules
) -> None:
    mod = synth.make("def f():\n    return []\n")
    target = f"{mod.__name__}.f"
    registry.register(target, _tag("outside"), HookType.AFTER)
    registry.apply()

    with registry.sandbox():
        registry.register(target, _tag("inside"), HookType.AFTER)
        registry.apply()
        assert mod.f() == ["outside", "inside"]

    assert mod.f() == ["outside"]
    assert registry.applied_targets() == (target,)


def test_discard_source_drops_only_that_plugins_registrations(registry: Registry) -> None:
    broken = HookSource("broken", "broken-dist")
    fine = HookSource("fine")
    registry.register("pkg.mod.f", lambda r: r, HookType.AFTER, source=broken)
    registry.register("pkg.mod.f", lambda r: r, HookType.AFTER, source=fine)
    registry.register("pkg.mod.g", lambda r: r, HookType.AFTER, source=broken)

    dropped = registry.discard_source(broken)

    assert dropped == 2
    remaining = registry.registrations()
    assert list(remaining) == ["pkg.mod.f"]
    assert [r.source for r in remaining["pkg.mod.f"]] == [fine]


def test_discard_source_removes_an_applied_plugins_hooks_at_the_next_apply(
    registry: Registry, synth: SyntheticModules
) -> None:
    mod = synth.make("def f():\n    return []\n")
    target = f"{mod.__name__}.f"
    broken = HookSource("broken")
    registry.register(target, _tag("broken"), HookType.AFTER, source=broken)
    registry.register(target, _tag("fine"), HookType.AFTER, source=HookSource("fine"))
    registry.apply()

    registry.discard_source(broken)
    registry.apply()

    assert mod.f() == ["fine"]


# -- propagation ------------------------------------------------------------------------------


def test_plugin_subclassing_the_class_it_replaces_keeps_seeing_the_original(
    registry: Registry, synth: SyntheticModules
) -> None:
    home = synth.make(
        """
        class Greeter:
            def greet(self):
                return "original"
        """
    )
    original = home.Greeter
    user = synth.make(f"from {home.__name__} import Greeter\n")
    plugin = synth.make(
        f"""
        from {home.__name__} import Greeter

        class LoudGreeter(Greeter):
            def greet(self):
                return Greeter.greet(self).upper()
        """
    )
    registry.register(f"{home.__name__}.Greeter", plugin.LoudGreeter, HookType.REPLACE)

    registry.apply()

    assert plugin.Greeter is original
    assert user.Greeter is plugin.LoudGreeter
    assert home.Greeter().greet() == "ORIGINAL"


def test_propagation_skips_every_module_of_the_hooking_plugins_package(
    registry: Registry, synth: SyntheticModules
) -> None:
    home = synth.make(DOUBLE)
    original = home.f
    package = unique_name()
    # A plugin package: the hook lives in one module, another module imported the original.
    plugin_pkg = synth.make("", name=package)
    helpers = synth.make(f"from {home.__name__} import f\n", name=f"{package}.helpers")
    hooks = synth.make("def add_one(result, x):\n    return result + 1\n", name=f"{package}.hooks")
    user = synth.make(f"from {home.__name__} import f\n")
    registry.register(
        f"{home.__name__}.f", hooks.add_one, HookType.AFTER, source=HookSource("plug", "plug-dist")
    )

    registry.apply()

    assert plugin_pkg.__name__ == package
    assert helpers.f is original  # the plugin's own code keeps the original
    assert user.f is home.f  # everyone else sees the patch
    assert user.f(1) == 3


def test_propagate_false_leaves_other_modules_alone(
    registry: Registry, synth: SyntheticModules
) -> None:
    home = synth.make(DOUBLE)
    alias = synth.make(f"from {home.__name__} import f\n")
    original = home.f
    registry.register(f"{home.__name__}.f", lambda result, x: result + 1, HookType.AFTER)

    report = registry.apply(propagate=False)

    assert home.f(1) == 3
    assert alias.f is original
    assert report.rebound == 0


def test_propagate_prefixes_limit_which_modules_are_rebound(
    registry: Registry, synth: SyntheticModules
) -> None:
    home = synth.make(DOUBLE)
    inside = synth.make(f"from {home.__name__} import f\n")
    outside = synth.make(f"from {home.__name__} import f\n")
    original = home.f
    registry.register(f"{home.__name__}.f", lambda result, x: result + 1, HookType.AFTER)

    report = registry.apply(propagate=[inside.__name__])

    assert inside.f is home.f
    assert outside.f is original
    assert report.rebound == 1


@pytest.mark.parametrize("home_sorts_first", [True, False], ids=["home-first", "alias-first"])
def test_hooks_on_a_function_and_its_re_export_both_run_through_the_re_export(
    registry: Registry, synth: SyntheticModules, home_sorts_first: bool
) -> None:
    stem = unique_name()
    home_name, alias_name = (f"{stem}_a", f"{stem}_b")
    if not home_sorts_first:
        home_name, alias_name = alias_name, home_name
    home = synth.make("def f():\n    return []\n", name=home_name)
    alias = synth.make(f"from {home_name} import f\n", name=alias_name)
    registry.register(f"{home_name}.f", _tag("home"), HookType.AFTER)
    registry.register(f"{alias_name}.f", _tag("alias"), HookType.AFTER)

    report = registry.apply()

    assert set(report.applied) == {f"{home_name}.f", f"{alias_name}.f"}
    assert sorted(alias.f()) == ["alias", "home"]
    assert home.f().count("home") == 1


@pytest.mark.parametrize("base_sorts_first", [True, False], ids=["base-first", "sub-first"])
def test_hooks_on_a_base_method_and_its_inheriting_subclass_stay_scoped(
    registry: Registry, synth: SyntheticModules, base_sorts_first: bool
) -> None:
    base_name, sub_name = ("Alpha", "Beta") if base_sorts_first else ("Beta", "Alpha")
    mod = synth.make(
        f"""
        class {base_name}:
            def run(self):
                return []

        class {sub_name}({base_name}):
            pass
        """
    )
    registry.register(f"{mod.__name__}.{base_name}.run", _tag("base"), HookType.AFTER)
    registry.register(f"{mod.__name__}.{sub_name}.run", _tag("sub"), HookType.AFTER)

    registry.apply()

    assert getattr(mod, base_name)().run() == ["base"]
    assert getattr(mod, sub_name)().run() == ["base", "sub"]


def test_hooks_on_sibling_subclasses_inheriting_one_method_stay_separate(
    registry: Registry, synth: SyntheticModules
) -> None:
    mod = synth.make(
        """
        class Base:
            def run(self):
                return []

        class Left(Base):
            pass

        class Right(Base):
            pass
        """
    )
    registry.register(f"{mod.__name__}.Left.run", _tag("left"), HookType.AFTER)
    registry.register(f"{mod.__name__}.Right.run", _tag("right"), HookType.AFTER)

    registry.apply()

    assert mod.Left().run() == ["left"]
    assert mod.Right().run() == ["right"]
    assert mod.Base().run() == []


# -- registration validation ------------------------------------------------------------------


@pytest.mark.parametrize(
    "target", ["nodots", "a..b", "a:", ":b", "a.", "a.b-c", 42, None], ids=repr
)
def test_invalid_target_is_rejected_at_registration(registry: Registry, target: Any) -> None:
    with pytest.raises(InvalidTargetError) as info:
        registry.register(target, lambda r: r, HookType.AFTER)

    assert isinstance(info.value, ValueError)
    assert registry.registrations() == {}


def test_invalid_target_message_shows_the_expected_form(registry: Registry) -> None:
    with pytest.raises(InvalidTargetError, match=r"need at least module\.attr.*'nodots'"):
        registry.register("nodots", lambda r: r, HookType.AFTER)


@pytest.mark.parametrize("hook_type", ["after", None, 1], ids=repr)
def test_hook_type_that_is_not_a_hook_type_member_is_rejected(
    registry: Registry, hook_type: Any
) -> None:
    with pytest.raises(HookRegistrationError, match=r"hook_type must be a HookType member"):
        registry.register("pkg.mod.f", lambda r: r, hook_type)

    assert registry.registrations() == {}


def test_non_callable_hook_is_rejected(registry: Registry) -> None:
    with pytest.raises(HookRegistrationError, match=r"must be callable"):
        registry.register("pkg.mod.f", 42, HookType.AFTER)  # type: ignore[arg-type]


# -- separate registries and sources ----------------------------------------------------------


def test_separate_registries_do_not_see_each_others_hooks(
    registry: Registry, synth: SyntheticModules
) -> None:
    mod = synth.make(DOUBLE)
    original = mod.f
    target = f"{mod.__name__}.f"

    class Other(BaseHookRegistry):
        pass

    registry.register(target, lambda result, x: result + 1, HookType.AFTER)

    report = Other.apply()

    assert Other.registrations() == {}
    assert report.applied == ()
    assert mod.f is original
    assert target not in HookRegistry.registrations()


def test_explicit_source_is_recorded_and_reported(
    registry: Registry, synth: SyntheticModules, caplog: pytest.LogCaptureFixture
) -> None:
    mod = synth.make(DOUBLE)
    target = f"{mod.__name__}.f"
    source = HookSource("vendor", "vendor-dist")
    caplog.set_level(logging.DEBUG, logger=REGISTRY_LOGGER)

    registry.register(target, lambda result, x: result, HookType.AFTER, source=source)
    registry.apply()

    assert registry.registrations()[target][0].source == source
    assert [m for m in messages(caplog, logging.DEBUG) if m.startswith("Applied")] == [
        f"Applied 1 hook(s) to {target} (from: plugin=vendor, dist=vendor-dist)"
    ]


def test_plugin_source_context_attributes_registrations_inside_it(registry: Registry) -> None:
    source = HookSource("ctx-plugin", "ctx-dist")

    with plugin_source(source):
        assert current_plugin_source() == source
        registry.register("pkg.mod.f", lambda r: r, HookType.AFTER)
    registry.register("pkg.mod.g", lambda r: r, HookType.AFTER)

    records = registry.registrations()
    assert records["pkg.mod.f"][0].source == source
    assert records["pkg.mod.g"][0].source is None
    assert current_plugin_source() is None


def test_explicit_source_wins_over_the_plugin_source_context(registry: Registry) -> None:
    explicit = HookSource("explicit")

    with plugin_source(HookSource("ambient")):
        registry.register("pkg.mod.f", lambda r: r, HookType.AFTER, source=explicit)

    assert registry.registrations()["pkg.mod.f"][0].source == explicit


# -- deferred mode ----------------------------------------------------------------------------


def test_deferred_apply_does_not_import_the_target_module(
    registry: Registry, module_tree: ModuleTree
) -> None:
    name = unique_name()
    module_tree.write({f"{name}.py": DOUBLE})
    target = f"{name}.f"
    registry.register(target, lambda result, x: result + 1, HookType.AFTER)

    report = registry.apply(deferred=True)

    assert name not in sys.modules
    assert report.pending == (target,)
    assert report.applied == ()
    assert registry.pending_targets() == {target: name}


def test_deferred_target_is_patched_when_its_module_is_first_imported(
    registry: Registry, module_tree: ModuleTree
) -> None:
    name = unique_name()
    module_tree.write({f"{name}.py": DOUBLE})
    target = f"{name}.f"
    registry.register(target, lambda result, x: result + 1, HookType.AFTER)
    registry.apply(deferred=True)

    module = importlib.import_module(name)

    assert module.f(1) == 3
    assert registry.pending_targets() == {}
    assert registry.applied_targets() == (target,)


def test_deferred_target_in_a_subpackage_waits_for_the_subpackage_import(
    registry: Registry, module_tree: ModuleTree
) -> None:
    name = unique_name()
    module_tree.write(
        {
            f"{name}/__init__.py": "",
            f"{name}/sub/__init__.py": "",
            f"{name}/sub/leaf.py": DOUBLE,
        }
    )
    target = f"{name}.sub.leaf.f"
    registry.register(target, lambda result, x: result + 1, HookType.AFTER)
    registry.apply(deferred=True)

    importlib.import_module(name)
    assert f"{name}.sub" not in sys.modules
    assert target in registry.pending_targets()

    leaf = importlib.import_module(f"{name}.sub.leaf")

    assert leaf.f(1) == 3
    assert registry.pending_targets() == {}


def test_deferred_target_already_imported_is_patched_at_once(
    registry: Registry, synth: SyntheticModules
) -> None:
    mod = synth.make(DOUBLE)
    target = f"{mod.__name__}.f"
    registry.register(target, lambda result, x: result + 1, HookType.AFTER)

    report = registry.apply(deferred=True)

    assert report.applied == (target,)
    assert report.pending == ()
    assert mod.f(1) == 3


def test_unapply_stops_waiting_for_deferred_targets(
    registry: Registry, module_tree: ModuleTree
) -> None:
    name = unique_name()
    module_tree.write({f"{name}.py": DOUBLE})
    registry.register(f"{name}.f", lambda result, x: result + 1, HookType.AFTER)
    registry.apply(deferred=True)

    registry.unapply()
    module = importlib.import_module(name)

    assert module.f(1) == 2
    assert registry.pending_targets() == {}
    assert name not in watcher.watched()


def test_import_watcher_leaves_sys_meta_path_once_nothing_is_pending(
    registry: Registry, module_tree: ModuleTree
) -> None:
    name = unique_name()
    module_tree.write({f"{name}.py": DOUBLE})
    registry.register(f"{name}.f", lambda result, x: result + 1, HookType.AFTER)
    registry.apply(deferred=True)
    assert watcher in sys.meta_path

    registry.unapply()

    # The finder stays only while some registry still waits for a module.
    assert watcher not in sys.meta_path or watcher.watched() != ()


# -- thread safety ----------------------------------------------------------------------------


def _apply_after(
    registry: Registry, barrier: threading.Barrier, reports: list[ApplyReport]
) -> None:
    barrier.wait()
    reports.append(registry.apply())


def test_concurrent_applies_patch_each_target_exactly_once(
    registry: Registry, synth: SyntheticModules
) -> None:
    # Threads race on fresh targets over several rounds; without the registry lock some
    # round patches a target twice (a doubled tag) or reports it twice.
    threads_count, targets_count, rounds = 8, 10, 30
    old_interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        for _ in range(rounds):
            mod = synth.make("".join(f"def f{i}():\n    return []\n" for i in range(targets_count)))
            targets = [f"{mod.__name__}.f{i}" for i in range(targets_count)]
            for target in targets:
                registry.register(target, _tag("hooked"), HookType.AFTER)
            barrier = threading.Barrier(threads_count)
            reports: list[ApplyReport] = []
            threads = [
                threading.Thread(target=_apply_after, args=(registry, barrier, reports))
                for _ in range(threads_count)
            ]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()

            applied = [t for report in reports for t in report.applied]
            assert sorted(applied) == sorted(targets)
            assert [getattr(mod, f"f{i}")() for i in range(targets_count)] == [
                ["hooked"]
            ] * targets_count
    finally:
        sys.setswitchinterval(old_interval)


def test_a_forked_child_can_register_while_a_parent_thread_held_the_registry_lock(
    registry: Registry, synth: SyntheticModules
) -> None:
    import os
    import signal

    mod = synth.make(DOUBLE)
    holding, release = threading.Event(), threading.Event()

    def hold_the_lock() -> None:
        with registry._lock:
            holding.set()
            release.wait()

    holder = threading.Thread(target=hold_the_lock)
    holder.start()
    holding.wait()
    try:
        pid = os.fork()
        if pid == 0:  # child: only this thread exists; the held lock must not block it
            signal.alarm(10)
            try:
                registry.register(f"{mod.__name__}.f", lambda r, x: r + 1, HookType.AFTER)
                registry.apply()
                os._exit(0 if mod.f(1) == 3 else 1)
            except BaseException:
                os._exit(2)
        _, status = os.waitpid(pid, 0)
    finally:
        release.set()
        holder.join()

    assert os.waitstatus_to_exitcode(status) == 0
