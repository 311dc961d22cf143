"""The hook registry's core contract: hook types, chaining order, descriptors, diagnostics.

These cover the behaviours SGLang's own hook-registry tests pin down, written against
cardcage's API (an isolated ``BaseHookRegistry`` subclass per test, ``apply()`` reports).
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
from registry_support import (  # noqa: F401 - fixtures
    REGISTRY_LOGGER,
    SyntheticModules,
    messages,
    registry_fixture,
    synth_fixture,
)

from cardcage.hooks.errors import HookRegistrationError, InvalidTargetError
from cardcage.hooks.registry import (
    BaseHookRegistry,
    HookSource,
    HookType,
    check_target,
    plugin_hook,
)

Registry = type[BaseHookRegistry]

DOUBLE = """
def f(x):
    return x * 2
"""

ADD = """
def f(x, y=0):
    return x + y
"""

GREETER = """
class Original:
    def greet(self):
        return "original"
"""

DESCRIPTORS = """
class MyClass:
    @classmethod
    def cm(cls, x):
        return ("cm", cls.__name__, x)

    @staticmethod
    def sm(x):
        return ("sm", x)
"""


# -- the four hook types ---------------------------------------------------------------------


def test_around_hook_wraps_the_original_and_returns_its_own_result(
    registry: Registry, synth: SyntheticModules
) -> None:
    mod = synth.make(DOUBLE)
    registry.register(f"{mod.__name__}.f", lambda original, x: original(x) + 1, HookType.AROUND)

    registry.apply()

    assert mod.f(3) == 7


def test_before_hook_returning_a_pair_replaces_the_call_arguments(
    registry: Registry, synth: SyntheticModules
) -> None:
    mod = synth.make(ADD)
    registry.register(f"{mod.__name__}.f", lambda x, y=0: ((x * 2,), {"y": y + 1}), HookType.BEFORE)

    registry.apply()

    assert mod.f(3, y=1) == 8


def test_before_hook_returning_none_keeps_the_call_arguments(
    registry: Registry, synth: SyntheticModules
) -> None:
    mod = synth.make(ADD)
    seen: list[tuple[Any, ...]] = []
    registry.register(f"{mod.__name__}.f", lambda x, y=0: seen.append((x, y)), HookType.BEFORE)

    registry.apply()

    assert mod.f(2, y=4) == 6
    assert seen == [(2, 4)]


def test_after_hook_return_value_replaces_the_result(
    registry: Registry, synth: SyntheticModules
) -> None:
    mod = synth.make(DOUBLE)
    registry.register(f"{mod.__name__}.f", lambda result, x: result + 10, HookType.AFTER)

    registry.apply()

    assert mod.f(3) == 16


def test_after_hook_returning_none_keeps_the_result(
    registry: Registry, synth: SyntheticModules
) -> None:
    mod = synth.make(DOUBLE)
    seen: list[tuple[int, int]] = []
    registry.register(
        f"{mod.__name__}.f", lambda result, x: seen.append((result, x)), HookType.AFTER
    )

    registry.apply()

    assert mod.f(3) == 6
    assert seen == [(6, 3)]


def test_function_replace_runs_instead_of_the_original(
    registry: Registry, synth: SyntheticModules
) -> None:
    mod = synth.make(
        """
        calls = []
        def f(x):
            calls.append(x)
            return x * 2
        """
    )
    registry.register(f"{mod.__name__}.f", lambda x: x * 100, HookType.REPLACE)

    registry.apply()

    assert mod.f(3) == 300
    assert mod.calls == []


def test_class_replace_installs_the_replacement_class_itself(
    registry: Registry, synth: SyntheticModules
) -> None:
    mod = synth.make(GREETER)
    original = mod.Original

    class Replacement(original):  # type: ignore[misc, valid-type]
        def greet(self) -> str:
            return "replaced"

    registry.register(f"{mod.__name__}.Original", Replacement, HookType.REPLACE)

    registry.apply()

    assert mod.Original is Replacement
    instance = mod.Original()
    assert type(instance) is Replacement
    assert isinstance(instance, original)
    assert instance.greet() == "replaced"


def test_plugin_hook_registers_at_decoration_and_returns_the_object_unchanged(
    registry: Registry, synth: SyntheticModules
) -> None:
    mod = synth.make(DOUBLE)

    def answer(x: int) -> int:
        return 42

    decorated = plugin_hook(f"{mod.__name__}.f", type=HookType.REPLACE, registry=registry)(answer)

    assert decorated is answer
    assert decorated.__name__ == "answer"
    assert mod.f(0) == 0  # registered, not applied yet
    registry.apply()
    assert mod.f(0) == 42


def test_wrapper_looks_like_the_original_and_points_back_to_it(
    registry: Registry, synth: SyntheticModules
) -> None:
    mod = synth.make(
        """
        def f(x):
            "Double x."
            return x * 2
        """
    )
    original = mod.f
    registry.register(f"{mod.__name__}.f", lambda result, x: result, HookType.AFTER)

    registry.apply()

    assert mod.f is not original
    assert mod.f.__wrapped__ is original
    assert mod.f.__name__ == "f"
    assert mod.f.__qualname__ == "f"
    assert mod.f.__doc__ == "Double x."


# -- classmethod / staticmethod ---------------------------------------------------------------


def test_around_on_a_classmethod_receives_cls_and_keeps_the_descriptor(
    registry: Registry, synth: SyntheticModules
) -> None:
    mod = synth.make(DESCRIPTORS)
    registry.register(
        f"{mod.__name__}.MyClass.cm",
        lambda original, cls, x: (*original(cls, x), "around"),
        HookType.AROUND,
    )

    registry.apply()

    assert mod.MyClass.cm(1) == ("cm", "MyClass", 1, "around")
    assert isinstance(mod.MyClass.__dict__["cm"], classmethod)


def test_replace_of_a_classmethod_is_bound_to_cls(
    registry: Registry, synth: SyntheticModules
) -> None:
    mod = synth.make(DESCRIPTORS)
    registry.register(
        f"{mod.__name__}.MyClass.cm",
        lambda cls, x: ("replaced_cm", cls.__name__, x),
        HookType.REPLACE,
    )

    registry.apply()

    assert mod.MyClass.cm(1) == ("replaced_cm", "MyClass", 1)
    assert mod.MyClass().cm(1) == ("replaced_cm", "MyClass", 1)


def test_around_on_a_staticmethod_receives_no_implicit_argument(
    registry: Registry, synth: SyntheticModules
) -> None:
    mod = synth.make(DESCRIPTORS)
    registry.register(
        f"{mod.__name__}.MyClass.sm",
        lambda original, x: (*original(x), "around"),
        HookType.AROUND,
    )

    registry.apply()

    assert mod.MyClass.sm(1) == ("sm", 1, "around")
    assert mod.MyClass().sm(1) == ("sm", 1, "around")
    assert isinstance(mod.MyClass.__dict__["sm"], staticmethod)


def test_replace_of_a_staticmethod_receives_no_implicit_argument(
    registry: Registry, synth: SyntheticModules
) -> None:
    mod = synth.make(DESCRIPTORS)
    registry.register(f"{mod.__name__}.MyClass.sm", lambda x: ("replaced_sm", x), HookType.REPLACE)

    registry.apply()

    assert mod.MyClass.sm(1) == ("replaced_sm", 1)
    assert mod.MyClass().sm(1) == ("replaced_sm", 1)


def test_subclass_created_after_patching_gets_its_own_cls(
    registry: Registry, synth: SyntheticModules
) -> None:
    mod = synth.make(DESCRIPTORS)
    registry.register(
        f"{mod.__name__}.MyClass.cm",
        lambda original, cls, x: (*original(cls, x), "around"),
        HookType.AROUND,
    )
    registry.apply()

    class Sub(mod.MyClass):  # type: ignore[misc, name-defined]
        pass

    assert Sub.cm(1) == ("cm", "Sub", 1, "around")


# -- chain order ------------------------------------------------------------------------------


def test_replace_registered_first_is_wrapped_by_a_later_around(
    registry: Registry, synth: SyntheticModules
) -> None:
    mod = synth.make(DOUBLE)
    target = f"{mod.__name__}.f"
    registry.register(target, lambda x: x * 10, HookType.REPLACE)
    registry.register(target, lambda original, x: original(x) + 1, HookType.AROUND)

    registry.apply()

    assert mod.f(3) == 31


def test_replace_is_innermost_even_when_registered_after_an_around(
    registry: Registry, synth: SyntheticModules
) -> None:
    mod = synth.make(DOUBLE)
    target = f"{mod.__name__}.f"
    registry.register(target, lambda original, x: original(x) + 1, HookType.AROUND)
    registry.register(target, lambda x: x * 10, HookType.REPLACE)

    registry.apply()

    assert mod.f(3) == 31


def test_replace_before_after_compose_around_the_replacement(
    registry: Registry, synth: SyntheticModules
) -> None:
    mod = synth.make(DOUBLE)
    target = f"{mod.__name__}.f"
    registry.register(target, lambda x: x * 10, HookType.REPLACE)
    registry.register(target, lambda x: ((x * 2,), {}), HookType.BEFORE)
    registry.register(target, lambda result, x: result + 100, HookType.AFTER)

    registry.apply()

    assert mod.f(3) == 160


def test_chain_runs_before_around_replace_after_in_that_order(
    registry: Registry, synth: SyntheticModules
) -> None:
    mod = synth.make(DOUBLE)
    target = f"{mod.__name__}.f"
    events: list[str] = []

    def replace(x: int) -> int:
        events.append("replace")
        return x

    def around(original: Any, x: int) -> Any:
        events.append("around-pre")
        result = original(x)
        events.append("around-post")
        return result

    registry.register(target, replace, HookType.REPLACE)
    registry.register(target, around, HookType.AROUND)
    registry.register(target, lambda x: events.append("before"), HookType.BEFORE)
    registry.register(target, lambda result, x: events.append("after"), HookType.AFTER)
    registry.apply()

    mod.f(1)

    assert events == ["before", "around-pre", "replace", "around-post", "after"]


def test_two_arounds_nest_with_the_first_registered_innermost(
    registry: Registry, synth: SyntheticModules
) -> None:
    mod = synth.make(
        """
        def f(x, events):
            events.append("orig")
            return x + 1
        """
    )
    target = f"{mod.__name__}.f"

    def make_around(label: str) -> Any:
        def around(original: Any, x: int, events: list[str]) -> Any:
            events.append(f"{label}-pre")
            result = original(x, events)
            events.append(f"{label}-post")
            return result + 5

        return around

    registry.register(target, make_around("a1"), HookType.AROUND)
    registry.register(target, make_around("a2"), HookType.AROUND)
    registry.apply()

    events: list[str] = []
    assert mod.f(0, events) == 11
    assert events == ["a2-pre", "a1-pre", "orig", "a1-post", "a2-post"]


def test_two_arounds_on_one_target_log_a_warning_naming_the_target(
    registry: Registry, synth: SyntheticModules, caplog: pytest.LogCaptureFixture
) -> None:
    mod = synth.make(DOUBLE)
    target = f"{mod.__name__}.f"
    registry.register(target, lambda o, x: o(x), HookType.AROUND, source=HookSource("p1"))
    registry.register(target, lambda o, x: o(x), HookType.AROUND, source=HookSource("p2"))
    caplog.set_level(logging.WARNING, logger=REGISTRY_LOGGER)

    registry.apply()

    (warning,) = messages(caplog, logging.WARNING)
    assert "Multiple AROUND hooks" in warning
    assert target in warning
    assert "plugin=p1" in warning
    assert "plugin=p2" in warning


def test_targets_with_a_class_replace_are_applied_first(
    registry: Registry, synth: SyntheticModules
) -> None:
    mod = synth.make(
        """
        def afunc(x):
            return x

        class zclass:
            pass
        """
    )

    class Replacement(mod.zclass):  # type: ignore[misc, name-defined]
        pass

    function_target = f"{mod.__name__}.afunc"
    class_target = f"{mod.__name__}.zclass"
    registry.register(function_target, lambda r, x: r, HookType.AFTER)
    registry.register(class_target, Replacement, HookType.REPLACE)

    report = registry.apply()

    assert report.applied == (class_target, function_target)


def test_method_hook_resolves_against_the_class_replacement(
    registry: Registry, synth: SyntheticModules
) -> None:
    mod = synth.make(
        """
        class Zeta:
            def greet(self):
                return "original"
        """
    )

    class Replacement(mod.Zeta):  # type: ignore[misc, name-defined]
        def greet(self) -> str:
            return "replaced"

    # "<mod>.Zeta.greet" sorts before "<mod>:Zeta" ("." < ":"): only the class-first rule
    # makes the method hook land on the replacement class.
    registry.register(
        f"{mod.__name__}.Zeta.greet", lambda result, self: result + "!", HookType.AFTER
    )
    registry.register(f"{mod.__name__}:Zeta", Replacement, HookType.REPLACE)

    registry.apply()

    assert mod.Zeta is Replacement
    assert mod.Zeta().greet() == "replaced!"


# -- diagnostics ------------------------------------------------------------------------------


def test_method_replace_on_a_class_replaced_owner_warns_that_it_will_override(
    registry: Registry, synth: SyntheticModules, caplog: pytest.LogCaptureFixture
) -> None:
    mod = synth.make(
        """
        class Original:
            def foo(self):
                return "original"
        """
    )

    class Replacement(mod.Original):  # type: ignore[misc, name-defined]
        def foo(self) -> str:
            return "class replacement"

    registry.register(f"{mod.__name__}.Original", Replacement, HookType.REPLACE)
    registry.register(f"{mod.__name__}.Original.foo", lambda self: "method", HookType.REPLACE)
    caplog.set_level(logging.WARNING, logger=REGISTRY_LOGGER)

    registry.apply()

    (warning,) = messages(caplog, logging.WARNING)
    assert "will override" in warning
    assert f"{mod.__name__}.Original.foo" in warning
    assert mod.Original().foo() == "method"


def test_second_replace_on_a_target_warns_at_registration(
    registry: Registry, caplog: pytest.LogCaptureFixture
) -> None:
    def first(x: int) -> int:
        return 1

    def second(x: int) -> int:
        return 2

    caplog.set_level(logging.WARNING, logger=REGISTRY_LOGGER)
    registry.register("pkg.mod.f", first, HookType.REPLACE, source=HookSource("a", "dist-a"))
    assert messages(caplog, logging.WARNING) == []

    registry.register("pkg.mod.f", second, HookType.REPLACE, source=HookSource("b"))

    (warning,) = messages(caplog, logging.WARNING)
    assert "Multiple REPLACE hooks on 'pkg.mod.f'" in warning
    assert "first" in warning
    assert "plugin=a, dist=dist-a" in warning
    assert "second" in warning
    assert "plugin=b" in warning
    assert "last registered REPLACE takes effect" in warning


def test_last_registered_replace_wins(registry: Registry, synth: SyntheticModules) -> None:
    mod = synth.make(DOUBLE)
    target = f"{mod.__name__}.f"
    registry.register(target, lambda x: "first", HookType.REPLACE)
    registry.register(target, lambda x: "second", HookType.REPLACE)

    registry.apply()

    assert mod.f(1) == "second"


def test_last_registered_class_replace_wins(registry: Registry, synth: SyntheticModules) -> None:
    mod = synth.make(GREETER)

    class First(mod.Original):  # type: ignore[misc, name-defined]
        pass

    class Second(mod.Original):  # type: ignore[misc, name-defined]
        pass

    registry.register(f"{mod.__name__}.Original", First, HookType.REPLACE)
    registry.register(f"{mod.__name__}.Original", Second, HookType.REPLACE)

    registry.apply()

    assert mod.Original is Second


def test_successful_apply_logs_a_debug_line_with_count_target_and_sources(
    registry: Registry, synth: SyntheticModules, caplog: pytest.LogCaptureFixture
) -> None:
    mod = synth.make(DOUBLE)
    target = f"{mod.__name__}.f"
    registry.register(target, lambda r, x: r, HookType.AFTER, source=HookSource("zeta", "z-d"))
    registry.register(target, lambda r, x: r, HookType.AFTER, source=HookSource("alpha"))
    registry.register(target, lambda r, x: r, HookType.AFTER, source=HookSource("alpha"))
    caplog.set_level(logging.DEBUG, logger=REGISTRY_LOGGER)

    registry.apply()

    # Per-target lines are DEBUG: the loader logs the one INFO line per process (DESIGN 2.6).
    assert messages(caplog, logging.INFO) == []
    assert [m for m in messages(caplog, logging.DEBUG) if m.startswith("Applied")] == [
        f"Applied 3 hook(s) to {target} (from: plugin=alpha, plugin=zeta, dist=z-d)"
    ]


# -- registration errors ----------------------------------------------------------------------


@pytest.mark.parametrize("hook_type", [HookType.BEFORE, HookType.AFTER, HookType.AROUND])
def test_class_hook_with_a_non_replace_type_is_rejected_at_registration(
    registry: Registry, hook_type: HookType
) -> None:
    class Hook:
        pass

    # "some.target" does not exist: the check must not need the target.
    with pytest.raises(HookRegistrationError, match=r"Class Hook can only be used with"):
        registry.register("some.target", Hook, hook_type)

    assert registry.registrations() == {}


def test_class_hook_registration_error_is_a_type_error(registry: Registry) -> None:
    class Hook:
        pass

    with pytest.raises(TypeError, match=r"HookType\.REPLACE"):
        registry.register("some.target", Hook, HookType.AFTER)


# -- apply bookkeeping ------------------------------------------------------------------------


def test_second_apply_does_not_patch_again(registry: Registry, synth: SyntheticModules) -> None:
    mod = synth.make(DOUBLE)
    calls: list[int] = []
    registry.register(f"{mod.__name__}.f", lambda r, x: calls.append(x), HookType.AFTER)

    first = registry.apply()
    second = registry.apply()
    mod.f(5)

    assert first.applied == (f"{mod.__name__}.f",)
    assert second.applied == ()
    assert calls == [5]


def test_failed_target_stays_unpatched_and_is_retried_by_the_next_apply(
    registry: Registry, synth: SyntheticModules, caplog: pytest.LogCaptureFixture
) -> None:
    mod = synth.make(DOUBLE)
    target = f"{mod.__name__}.later"
    registry.register(target, lambda r, x: r + 1, HookType.AFTER)
    caplog.set_level(logging.ERROR, logger=REGISTRY_LOGGER)

    first = registry.apply()

    assert isinstance(first.failed[target], AttributeError)
    assert first.applied == ()
    (error,) = messages(caplog, logging.ERROR)
    assert error.startswith(f"Failed to apply hooks to {target}")
    assert not registry.is_hook_applied(target, registry.registrations()[target][0].hook)

    mod.later = lambda x: x * 3
    second = registry.apply()

    assert second.applied == (target,)
    assert second.failed == {}
    assert mod.later(2) == 7


def test_patch_reaches_another_module_holding_the_same_function(
    registry: Registry, synth: SyntheticModules
) -> None:
    home = synth.make(DOUBLE)
    user = synth.make(f"from {home.__name__} import f\n")
    registry.register(f"{home.__name__}.f", lambda original, x: original(x) + 1, HookType.AROUND)

    report = registry.apply()

    assert user.f(3) == 7
    assert user.f is home.f
    assert report.rebound == 1


def test_check_target_gives_the_registry_s_key_and_rejects_what_register_rejects(
    registry: type[BaseHookRegistry],
) -> None:
    assert check_target(" pkg.mod:Cls.method ") == "pkg.mod:Cls.method"
    with pytest.raises(InvalidTargetError, match=r"need at least module\.attr"):
        check_target("nodots")
    with pytest.raises(InvalidTargetError):
        registry.register("nodots", lambda: None)
