"""What every wrapper keeps, whichever layer the registry builds for a target and hook type.

The registry builds the cheapest layer that fits (a ``functools.partial``, a function specialised
to the target's arity, or a generic closure; see docs/hooks/api.md#wrappers). These tests hold
each kind to the same contract: hooks see the arguments exactly as the caller passed them,
methods bind, the layer looks like and unwraps to the original, pickles like a function, shows
its lines in a traceback, and ``unapply()`` restores the original object.
"""

from __future__ import annotations

import inspect
import pickle
import traceback
from typing import Any

import pytest
from registry_support import (  # noqa: F401 - fixtures
    SyntheticModules,
    registry_fixture,
    synth_fixture,
)

from cardcage.hooks.errors import HookResultError
from cardcage.hooks.registry import BaseHookRegistry, HookSource, HookType

Registry = type[BaseHookRegistry]

TARGETS = """
def f(x, y=10, *more, **options):
    return ("f", x, y, more, options)

def plain(x, y):
    return x + y

class C:
    def m(self, x, y=10, *more, **options):
        return ("m", x, y, more, options)

    @classmethod
    def cm(cls, x, y=10):
        return ("cm", cls.__name__, x, y)

    @staticmethod
    def sm(x, y=10):
        return ("sm", x, y)

    @property
    def p(self):
        return "p"
"""

# (positional, keyword) as the caller passes them; the hook must see exactly these.
CALLS = [
    pytest.param((1, 2), {}, id="all-positional"),
    pytest.param((1,), {"y": 2}, id="keyword"),
    pytest.param((), {"x": 1, "y": 2}, id="all-keyword"),
    pytest.param((1,), {}, id="default-left-out"),
    pytest.param((1, 2, 3, 4), {}, id="extra-positional"),
    pytest.param((1, 2), {"flag": True}, id="extra-keyword"),
]

HOOK_TYPES = [HookType.BEFORE, HookType.AFTER, HookType.AROUND, HookType.REPLACE]


def recording_hook(hook_type: HookType, seen: list[tuple[tuple[Any, ...], dict[str, Any]]]) -> Any:
    """A hook of ``hook_type`` that records the (args, kwargs) it received and changes nothing."""
    if hook_type is HookType.BEFORE:

        def before(*args: Any, **kwargs: Any) -> None:
            seen.append((args, kwargs))

        return before
    if hook_type is HookType.AFTER:

        def after(result: Any, *args: Any, **kwargs: Any) -> None:
            seen.append((args, kwargs))

        return after
    if hook_type is HookType.AROUND:

        def around(original: Any, *args: Any, **kwargs: Any) -> Any:
            seen.append((args, kwargs))
            return original(*args, **kwargs)

        return around

    def replace(*args: Any, **kwargs: Any) -> Any:
        seen.append((args, kwargs))
        return "replaced"

    return replace


@pytest.mark.parametrize("hook_type", HOOK_TYPES, ids=lambda t: t.name)
@pytest.mark.parametrize(("args", "kwargs"), CALLS)
def test_function_hooks_see_the_arguments_as_the_caller_passed_them(
    registry: Registry,
    synth: SyntheticModules,
    hook_type: HookType,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> None:
    mod = synth.make(TARGETS)
    expected = mod.f(*args, **kwargs)
    seen: list[tuple[tuple[Any, ...], dict[str, Any]]] = []
    registry.register(f"{mod.__name__}.f", recording_hook(hook_type, seen), hook_type)
    registry.apply(strict=True)

    result = mod.f(*args, **kwargs)

    assert seen == [(args, kwargs)]
    assert result == ("replaced" if hook_type is HookType.REPLACE else expected)


@pytest.mark.parametrize("hook_type", HOOK_TYPES, ids=lambda t: t.name)
@pytest.mark.parametrize(("args", "kwargs"), CALLS)
def test_method_hooks_see_self_and_the_arguments_as_passed(
    registry: Registry,
    synth: SyntheticModules,
    hook_type: HookType,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> None:
    mod = synth.make(TARGETS)
    obj = mod.C()
    expected = obj.m(*args, **kwargs)
    seen: list[tuple[tuple[Any, ...], dict[str, Any]]] = []
    registry.register(f"{mod.__name__}.C.m", recording_hook(hook_type, seen), hook_type)
    registry.apply(strict=True)

    bound_result = obj.m(*args, **kwargs)
    unbound_result = mod.C.m(obj, *args, **kwargs)

    assert seen == [((obj, *args), kwargs)] * 2
    replaced = hook_type is HookType.REPLACE
    assert bound_result == unbound_result == ("replaced" if replaced else expected)


@pytest.mark.parametrize("hook_type", HOOK_TYPES, ids=lambda t: t.name)
def test_classmethod_and_staticmethod_hooks_see_the_arguments_as_passed(
    registry: Registry, synth: SyntheticModules, hook_type: HookType
) -> None:
    mod = synth.make(TARGETS)
    class_seen: list[tuple[tuple[Any, ...], dict[str, Any]]] = []
    static_seen: list[tuple[tuple[Any, ...], dict[str, Any]]] = []
    registry.register(f"{mod.__name__}.C.cm", recording_hook(hook_type, class_seen), hook_type)
    registry.register(f"{mod.__name__}.C.sm", recording_hook(hook_type, static_seen), hook_type)
    registry.apply(strict=True)

    mod.C.cm(1, y=2)
    mod.C().cm(1)
    mod.C.sm(1, 2)
    mod.C().sm(x=1)

    assert class_seen == [((mod.C, 1), {"y": 2}), ((mod.C, 1), {})]
    assert static_seen == [((1, 2), {}), ((), {"x": 1})]


@pytest.mark.parametrize("hook_type", HOOK_TYPES, ids=lambda t: t.name)
def test_property_hooks_see_the_instance(
    registry: Registry, synth: SyntheticModules, hook_type: HookType
) -> None:
    mod = synth.make(TARGETS)
    obj = mod.C()
    seen: list[tuple[tuple[Any, ...], dict[str, Any]]] = []
    registry.register(f"{mod.__name__}.C.p", recording_hook(hook_type, seen), hook_type)
    registry.apply(strict=True)

    value = obj.p

    assert seen == [((obj,), {})]
    assert value == ("replaced" if hook_type is HookType.REPLACE else "p")
    assert isinstance(mod.C.__dict__["p"], property)


def test_a_chain_of_every_hook_type_runs_in_order_and_unwraps_to_the_original(
    registry: Registry, synth: SyntheticModules
) -> None:
    mod = synth.make(TARGETS)
    original = mod.plain
    calls: list[str] = []

    def replace(x: int, y: int) -> int:
        calls.append("replace")
        return x * y

    def around(inner: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append("around")
        return inner(*args, **kwargs) + 1

    def before(x: int, y: int) -> tuple[tuple[int, int], dict[str, Any]]:
        calls.append("before")
        return (x + 1, y), {}

    def after(result: int, x: int, y: int) -> int:
        calls.append("after")
        return result * 10

    target = f"{mod.__name__}.plain"
    for hook, hook_type in [
        (around, HookType.AROUND),
        (before, HookType.BEFORE),
        (after, HookType.AFTER),
        (replace, HookType.REPLACE),
    ]:
        registry.register(target, hook, hook_type)
    registry.apply(strict=True)

    assert mod.plain(2, 3) == ((2 + 1) * 3 + 1) * 10
    assert calls == ["before", "around", "replace", "after"]
    assert inspect.unwrap(mod.plain) is original
    registry.unapply()
    assert mod.plain is original


@pytest.mark.parametrize("hook_type", HOOK_TYPES, ids=lambda t: t.name)
def test_hooked_callables_keep_the_originals_signature_and_metadata(
    registry: Registry, synth: SyntheticModules, hook_type: HookType
) -> None:
    mod = synth.make(TARGETS)
    function_signature = inspect.signature(mod.f)
    method_signature = inspect.signature(mod.C.m)
    registry.register(f"{mod.__name__}.f", recording_hook(hook_type, []), hook_type)
    registry.register(f"{mod.__name__}.C.m", recording_hook(hook_type, []), hook_type)
    registry.apply(strict=True)

    assert inspect.signature(mod.f) == function_signature
    assert inspect.signature(mod.C.m) == method_signature
    assert (mod.f.__name__, mod.f.__qualname__, mod.f.__module__) == ("f", "f", mod.__name__)
    assert mod.C.m.__qualname__ == "C.m"
    assert not inspect.iscoroutinefunction(mod.f)


@pytest.mark.parametrize("hook_type", HOOK_TYPES, ids=lambda t: t.name)
def test_hooked_functions_and_staticmethods_pickle_by_reference_like_functions(
    registry: Registry, synth: SyntheticModules, hook_type: HookType
) -> None:
    # multiprocessing's spawn start method pickles a Process target this way.
    mod = synth.make(TARGETS)
    registry.register(f"{mod.__name__}.f", recording_hook(hook_type, []), hook_type)
    registry.register(f"{mod.__name__}.C.sm", recording_hook(hook_type, []), hook_type)
    registry.apply(strict=True)

    assert pickle.loads(pickle.dumps(mod.f)) is mod.f
    assert pickle.loads(pickle.dumps(mod.C.sm)) is mod.C.sm


def test_a_traceback_through_the_wrappers_shows_a_line_for_every_frame(
    registry: Registry, synth: SyntheticModules
) -> None:
    mod = synth.make(
        """
        def fails(x, y):
            raise ValueError("from the original")
        """
    )
    target = f"{mod.__name__}.fails"
    registry.register(target, lambda *args: None, HookType.BEFORE)
    registry.register(target, lambda result, *args: None, HookType.AFTER)
    registry.apply(strict=True)

    with pytest.raises(ValueError, match="from the original") as info:
        mod.fails(1, 2)

    frames = traceback.extract_tb(info.value.__traceback__)
    assert [frame.name for frame in frames[-3:]] == ["after", "before", "fails"]
    wrapper_lines = [frame.line for frame in frames[-3:-1]]
    assert all("inner(" in line for line in wrapper_lines)


def test_a_before_hook_returning_a_wrong_shape_names_its_plugin(
    registry: Registry, synth: SyntheticModules
) -> None:
    mod = synth.make(TARGETS)
    target = f"{mod.__name__}.plain"
    registry.register(
        target, lambda x, y: [x, y], HookType.BEFORE, source=HookSource("vendor", "vendor-dist")
    )
    registry.apply(strict=True)

    with pytest.raises(HookResultError, match="vendor-dist") as info:
        mod.plain(1, 2)

    assert (info.value.plugin, info.value.distribution) == ("vendor", "vendor-dist")


def test_a_before_hook_may_rewrite_arguments_into_keywords(
    registry: Registry, synth: SyntheticModules
) -> None:
    mod = synth.make(TARGETS)
    registry.register(
        f"{mod.__name__}.f", lambda x, y: ((x,), {"y": y, "extra": 1}), HookType.BEFORE
    )
    registry.apply(strict=True)

    assert mod.f(1, 2) == ("f", 1, 2, (), {"extra": 1})


def test_a_method_taking_star_args_gets_the_generic_layer_and_sees_its_arguments(
    registry: Registry, synth: SyntheticModules
) -> None:
    # CustomOp.forward(self, *args, **kwargs) is called as forward(self, x): a layer specialised
    # to its one named parameter would send every such call down its slower rebuilding path.
    mod = synth.make("class Op:\n    def forward(self, *args, **kwargs):\n        return args\n")
    seen: list[tuple[Any, ...]] = []

    def around(original: Any, *args: Any, **kwargs: Any) -> Any:
        seen.append(args[1:])
        return original(*args, **kwargs)

    registry.register(f"{mod.__name__}.Op.forward", around, HookType.AROUND)
    registry.apply(strict=True)

    layer = mod.Op.__dict__["forward"]
    assert not layer.__code__.co_filename.startswith("<cardcage.hooks")
    assert mod.Op().forward(1, 2) == (1, 2)
    assert seen == [(1, 2)]
