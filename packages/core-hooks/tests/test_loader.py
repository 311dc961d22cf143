"""The general-plugin loader: discovery, filters, failure policy, once-per-process phases.

Plugins are real distributions on ``sys.path`` (see ``dist_support``); every test has its own
entry-point groups, environment variables and hook registry.
"""

from __future__ import annotations

import importlib
import logging
import sys
from typing import TYPE_CHECKING

import pytest

from cardcage.hooks import errors as errors_module
from cardcage.hooks.errors import (
    DuplicatePluginError,
    HookApplyError,
    PhaseFailedError,
    PluginLoadError,
    SGLangPluginLoadError,
    TargetsSGLangError,
    missing_sglang_module,
)
from cardcage.hooks.loader import (
    GENERAL_PLUGINS_GROUP,
    PLATFORM_PLUGINS_GROUP,
    LoadedPlugin,
    PlatformChoice,
    execute_plugin_callbacks,
    load_plugins,
    load_plugins_by_group,
    reset_plugin_state,
)
from cardcage.hooks.profile import DIFFUSION_PROFILE, SRT_PROFILE
from cardcage.hooks.registry import HookSource, HookType, current_plugin_source

if TYPE_CHECKING:
    from dist_support import DistFactory

    from cardcage.hooks.profile import RuntimeProfile
    from cardcage.hooks.registry import BaseHookRegistry

pytest_plugins = ["dist_support"]

LOADER = "cardcage.hooks.loader"

#: How error messages name the porting guide (a page title a wheel-only user can look up).
PORTING_GUIDE_NAMED = 'the porting guide: the page "Porting a plugin between SGLang and cardcage"'


def _records(caplog: pytest.LogCaptureFixture, level: int, name: str = LOADER) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == name and r.levelno == level]


def _traceback(record: logging.LogRecord) -> str:
    assert record.exc_info is not None
    return logging.Formatter().formatException(record.exc_info)


def _boom() -> None:
    raise RuntimeError("boom")


def _greeter(dists: DistFactory) -> str:
    """A hook target module (not imported yet); returns its name."""
    return dists.module("target", "def greet(name):\n    return f'hello {name}'\n")


def _shout(target: str, *, attr: str = "greet") -> str:
    """A plugin body whose register() adds an AFTER hook upper-casing ``target.attr``."""
    return f"""
        def register():
            REGISTRY.register("{target}.{attr}", lambda result, name: result.upper())
    """


def test_group_constants_are_the_srt_wire_contract() -> None:
    assert (PLATFORM_PLUGINS_GROUP, GENERAL_PLUGINS_GROUP) == (
        "sglang.srt.platforms",
        "sglang.srt.plugins",
    )


# -- load_plugins_by_group: discovery ---------------------------------------------------------


def test_load_by_group_returns_each_callback_with_its_distribution(
    dists: DistFactory, plugin_profile: RuntimeProfile
) -> None:
    dist = dists.add("dist-a", plugins={"alpha": None})

    loaded = load_plugins_by_group(plugin_profile.plugin_group, profile=plugin_profile)

    assert loaded == {"alpha": LoadedPlugin(dist.loaded("alpha").register, "dist-a")}


def test_load_by_group_returns_a_loaded_plugin_tuple_unpackable_as_the_seed_pair(
    dists: DistFactory, plugin_profile: RuntimeProfile
) -> None:
    dists.add("dist-a", plugins={"alpha": None})

    [(callback, dist_name)] = load_plugins_by_group(
        plugin_profile.plugin_group, profile=plugin_profile
    ).values()

    assert (callable(callback), dist_name) == (True, "dist-a")


def test_load_by_group_returns_an_empty_dict_for_a_group_nobody_provides(
    dists: DistFactory, plugin_profile: RuntimeProfile
) -> None:
    dists.add("dist-a", platforms={"a": None})

    assert load_plugins_by_group(plugin_profile.plugin_group, profile=plugin_profile) == {}


# -- load_plugins_by_group: allowlist -----------------------------------------------------------


@pytest.mark.parametrize(
    ("allowlist", "expected"),
    [
        (None, ["alpha", "beta", "gamma"]),
        ("", ["alpha", "beta", "gamma"]),
        ("   ", ["alpha", "beta", "gamma"]),
        (",", []),
        (" alpha , gamma ", ["alpha", "gamma"]),
        ("gamma,,", ["gamma"]),
    ],
    ids=["unset", "empty", "blank", "comma-only", "padded", "trailing-commas"],
)
def test_allowlist_selects_which_plugins_load(
    dists: DistFactory,
    plugin_profile: RuntimeProfile,
    allowlist: str | None,
    expected: list[str],
) -> None:
    dists.add("dist-a", plugins=dict.fromkeys(["alpha", "beta", "gamma"]))
    if allowlist is not None:
        dists.allow(allowlist)

    loaded = load_plugins_by_group(plugin_profile.plugin_group, profile=plugin_profile)

    assert list(loaded) == expected


def test_plugins_outside_the_allowlist_are_never_imported(
    dists: DistFactory, plugin_profile: RuntimeProfile
) -> None:
    dist = dists.add("dist-a", plugins=dict.fromkeys(["alpha", "beta"]))
    dists.allow("alpha")

    load_plugins_by_group(plugin_profile.plugin_group, profile=plugin_profile)

    assert (dist.imported("alpha"), dist.imported("beta")) == (True, False)


def test_allowlist_is_read_live_from_the_environment(
    dists: DistFactory, plugin_profile: RuntimeProfile
) -> None:
    dists.add("dist-a", plugins=dict.fromkeys(["alpha", "beta"]))
    dists.allow("alpha")
    load_plugins_by_group(plugin_profile.plugin_group, profile=plugin_profile)
    dists.allow("beta")

    loaded = load_plugins_by_group(plugin_profile.plugin_group, profile=plugin_profile)

    assert list(loaded) == ["beta"]


# -- load_plugins_by_group: excluded distributions ---------------------------------------------


def test_plugins_of_excluded_distributions_are_never_imported(
    dists: DistFactory, plugin_profile: RuntimeProfile
) -> None:
    dists.add("dist-a", plugins={"alpha": None})
    other = dists.add("dist-b", plugins={"beta": None})

    loaded = load_plugins_by_group(plugin_profile.plugin_group, ["dist-b"], profile=plugin_profile)

    assert list(loaded) == ["alpha"]
    assert not other.imported("beta")


def test_excluded_distribution_names_match_after_normalisation(
    dists: DistFactory, plugin_profile: RuntimeProfile
) -> None:
    dists.add("Dist.B", plugins={"beta": None})

    loaded = load_plugins_by_group(plugin_profile.plugin_group, ["dist_b"], profile=plugin_profile)

    assert loaded == {}


def test_exclusion_is_logged_with_the_reason_given(
    dists: DistFactory, plugin_profile: RuntimeProfile, caplog: pytest.LogCaptureFixture
) -> None:
    dists.add("dist-b", plugins={"beta": None})
    caplog.set_level(logging.DEBUG, logger=LOADER)

    load_plugins_by_group(
        plugin_profile.plugin_group,
        ["dist-b"],
        exclusion_reason="MY_SELECTOR",
        profile=plugin_profile,
    )

    assert "Skipping plugin beta (dist dist-b excluded by MY_SELECTOR)" in _records(
        caplog, logging.DEBUG
    )


# -- load_plugins_by_group: duplicates and order ------------------------------------------------


def test_duplicate_plugin_names_raise_naming_both_distributions(
    dists: DistFactory, plugin_profile: RuntimeProfile
) -> None:
    dists.add("dist-a", plugins={"shared": None})
    dists.add("dist-b", plugins={"shared": None})

    with pytest.raises(DuplicatePluginError) as info:
        load_plugins_by_group(plugin_profile.plugin_group, profile=plugin_profile)

    assert sorted(map(str, info.value.distributions)) == ["dist-a", "dist-b"]
    assert info.value.plugin == "shared"
    assert "dist-a" in str(info.value)
    assert "dist-b" in str(info.value)


def test_duplicate_plugin_names_are_detected_before_any_plugin_is_imported(
    dists: DistFactory, plugin_profile: RuntimeProfile
) -> None:
    first = dists.add("dist-a", plugins={"aaa_first": None, "shared": None})
    second = dists.add("dist-b", plugins={"shared": None})

    with pytest.raises(DuplicatePluginError):
        load_plugins_by_group(plugin_profile.plugin_group, profile=plugin_profile)

    assert [first.imported("aaa_first"), first.imported("shared"), second.imported("shared")] == [
        False,
        False,
        False,
    ]


def test_a_duplicate_name_removed_by_the_allowlist_is_not_an_error(
    dists: DistFactory, plugin_profile: RuntimeProfile
) -> None:
    dists.add("dist-a", plugins={"shared": None, "alpha": None})
    dists.add("dist-b", plugins={"shared": None})
    dists.allow("alpha")

    loaded = load_plugins_by_group(plugin_profile.plugin_group, profile=plugin_profile)

    assert list(loaded) == ["alpha"]


def test_a_duplicate_name_removed_by_distribution_exclusion_is_not_an_error(
    dists: DistFactory, plugin_profile: RuntimeProfile
) -> None:
    dists.add("dist-a", plugins={"shared": None})
    dists.add("dist-b", plugins={"shared": None})

    loaded = load_plugins_by_group(plugin_profile.plugin_group, ["dist-b"], profile=plugin_profile)

    assert [(name, p.dist_name) for name, p in loaded.items()] == [("shared", "dist-a")]


@pytest.mark.parametrize("zeta_first", [True, False], ids=["zeta-first", "alpha-first"])
def test_plugins_load_in_distribution_then_name_order_whatever_the_path_order(
    dists: DistFactory, plugin_profile: RuntimeProfile, zeta_first: bool
) -> None:
    early, late = dists.site(), dists.site()  # ``late`` is prepended last: searched first
    dists.add("zeta-dist", plugins={"z2": None, "z1": None}, site=late if zeta_first else early)
    dists.add("alpha-dist", plugins={"a2": None, "a1": None}, site=early if zeta_first else late)
    discovered = [ep.name for ep in dists.refresh().group(plugin_profile.plugin_group)]
    assert discovered[0] == ("z2" if zeta_first else "a2")  # the scan order really differs

    loaded = load_plugins_by_group(plugin_profile.plugin_group, profile=plugin_profile)

    assert list(loaded) == ["a1", "a2", "z1", "z2"]
    assert dists.events("import") == ["a1", "a2", "z1", "z2"]


# -- load_plugins_by_group: import failures ----------------------------------------------------

_BROKEN = 'raise RuntimeError("kaput")'


def test_a_plugin_that_fails_to_import_is_skipped_and_the_rest_load(
    dists: DistFactory, plugin_profile: RuntimeProfile
) -> None:
    dists.add("dist-a", plugins={"broken": _BROKEN, "fine": None})

    loaded = load_plugins_by_group(plugin_profile.plugin_group, profile=plugin_profile)

    assert list(loaded) == ["fine"]


def test_an_import_failure_is_logged_at_error_with_its_traceback(
    dists: DistFactory, plugin_profile: RuntimeProfile, caplog: pytest.LogCaptureFixture
) -> None:
    dists.add("dist-a", plugins={"broken": _BROKEN})
    caplog.set_level(logging.DEBUG, logger=LOADER)

    load_plugins_by_group(plugin_profile.plugin_group, profile=plugin_profile)

    [record] = [r for r in caplog.records if r.name == LOADER and r.levelno == logging.ERROR]
    assert "broken" in record.getMessage()
    assert "dist-a" in record.getMessage()
    assert 'raise RuntimeError("kaput")' in _traceback(record)


def test_hooks_a_plugin_registered_before_its_import_failed_are_discarded(
    dists: DistFactory,
    plugin_profile: RuntimeProfile,
    plugin_registry: type[BaseHookRegistry],
) -> None:
    target = _greeter(dists)
    register_at_import = f'REGISTRY.register("{target}.greet", lambda result, name: result)\n'
    dists.add(
        "dist-a",
        plugins={
            "broken": register_at_import + _BROKEN,
            "fine": register_at_import + "def register():\n    pass\n",
        },
    )

    load_plugins_by_group(
        plugin_profile.plugin_group, profile=plugin_profile, registry=plugin_registry
    )

    sources = [r.source for r in plugin_registry.registrations()[f"{target}.greet"]]
    assert sources == [HookSource("fine", "dist-a")]


def test_an_import_failure_in_a_fatal_distribution_raises_plugin_load_error(
    dists: DistFactory, plugin_profile: RuntimeProfile
) -> None:
    dists.add("vendor-a", plugins={"broken": _BROKEN})

    with pytest.raises(PluginLoadError) as info:
        load_plugins_by_group(
            plugin_profile.plugin_group, profile=plugin_profile, fatal_dists=["vendor-a"]
        )

    error = info.value
    assert (error.plugin, error.distribution, error.group) == (
        "broken",
        "vendor-a",
        plugin_profile.plugin_group,
    )
    assert "'broken'" in str(error)
    assert "vendor-a" in str(error)


def test_a_fatal_import_failure_is_chained_from_the_original_exception(
    dists: DistFactory, plugin_profile: RuntimeProfile
) -> None:
    dists.add("vendor-a", plugins={"broken": _BROKEN})

    with pytest.raises(PluginLoadError) as info:
        load_plugins_by_group(
            plugin_profile.plugin_group, profile=plugin_profile, fatal_dists=["Vendor_A"]
        )

    assert isinstance(info.value.__cause__, RuntimeError)
    assert str(info.value.__cause__) == "kaput"


def test_an_entry_point_naming_something_not_callable_is_skipped(
    dists: DistFactory, plugin_profile: RuntimeProfile, caplog: pytest.LogCaptureFixture
) -> None:
    module = dists.module_name("constants")
    dists.add(
        "dist-a",
        entry_points={plugin_profile.plugin_group: {"constant": f"{module}:VALUE"}},
        modules={module: "VALUE = 42\n"},
    )
    caplog.set_level(logging.DEBUG, logger=LOADER)

    loaded = load_plugins_by_group(plugin_profile.plugin_group, profile=plugin_profile)

    assert loaded == {}
    assert any("not callable" in m for m in _records(caplog, logging.ERROR))


# -- execute_plugin_callbacks ---------------------------------------------------------------


def test_a_callback_runs_with_its_plugin_as_the_current_hook_source(
    plugin_registry: type[BaseHookRegistry],
) -> None:
    seen: list[HookSource | None] = []

    execute_plugin_callbacks(
        {"spy": LoadedPlugin(lambda: seen.append(current_plugin_source()), "spy-dist")},
        plugin_registry,
    )

    assert seen == [HookSource("spy", "spy-dist")]


def test_the_current_hook_source_is_none_after_the_callbacks_return(
    plugin_registry: type[BaseHookRegistry],
) -> None:
    execute_plugin_callbacks({"spy": LoadedPlugin(lambda: None, "spy-dist")}, plugin_registry)

    assert current_plugin_source() is None


def test_the_current_hook_source_is_none_after_a_callback_raised(
    plugin_registry: type[BaseHookRegistry],
) -> None:
    execute_plugin_callbacks({"bad": LoadedPlugin(_boom, "bad-dist")}, plugin_registry)

    assert current_plugin_source() is None


def test_a_raising_callback_is_logged_at_error_with_its_traceback(
    plugin_registry: type[BaseHookRegistry], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger=LOADER)

    execute_plugin_callbacks({"bad": LoadedPlugin(_boom, "bad-dist")}, plugin_registry)

    [record] = [r for r in caplog.records if r.name == LOADER and r.levelno == logging.ERROR]
    assert "bad" in record.getMessage()
    assert "RuntimeError: boom" in _traceback(record)


def test_the_next_plugin_still_runs_after_a_callback_raised(
    plugin_registry: type[BaseHookRegistry],
) -> None:
    ran: list[str] = []

    execute_plugin_callbacks(
        {"bad": LoadedPlugin(_boom, None), "good": LoadedPlugin(lambda: ran.append("good"), None)},
        plugin_registry,
    )

    assert ran == ["good"]


def test_hooks_registered_by_a_raising_callback_are_discarded(
    plugin_registry: type[BaseHookRegistry],
) -> None:
    def partial() -> None:
        plugin_registry.register("json.dumps", lambda result, *a, **k: result)
        plugin_registry.register("json.loads", lambda result, *a, **k: result)
        raise RuntimeError("boom")

    def fine() -> None:
        plugin_registry.register("json.dumps", lambda result, *a, **k: result)

    execute_plugin_callbacks(
        {"partial": LoadedPlugin(partial, "d"), "fine": LoadedPlugin(fine, "d")}, plugin_registry
    )

    registrations = plugin_registry.registrations()
    assert list(registrations) == ["json.dumps"]
    assert [r.source for r in registrations["json.dumps"]] == [HookSource("fine", "d")]


def test_a_raising_callback_of_a_fatal_distribution_raises_plugin_load_error(
    plugin_registry: type[BaseHookRegistry],
) -> None:
    with pytest.raises(PluginLoadError) as info:
        execute_plugin_callbacks(
            {"bad": LoadedPlugin(_boom, "vendor-a")},
            plugin_registry,
            group="grp",
            fatal_dists=["vendor-a"],
        )

    error = info.value
    assert (error.plugin, error.distribution, error.group) == ("bad", "vendor-a", "grp")
    assert isinstance(error.__cause__, RuntimeError)


def test_execute_accepts_plain_seed_pairs_and_ignores_return_values(
    plugin_registry: type[BaseHookRegistry],
) -> None:
    ran: list[str] = []

    def returns_something() -> str:
        ran.append("called")
        return "ignored"

    execute_plugin_callbacks({"p": (returns_something, None)}, plugin_registry)

    assert ran == ["called"]


def test_execute_leaves_hook_application_to_its_own_phase(
    plugin_registry: type[BaseHookRegistry],
) -> None:
    def register() -> None:
        plugin_registry.register("json.dumps", lambda result, *a, **k: result)

    execute_plugin_callbacks({"p": LoadedPlugin(register, None)}, plugin_registry)

    assert plugin_registry.applied_targets() == ()


# -- load_plugins: once per process ------------------------------------------------------------


def test_load_plugins_runs_each_register_once_however_often_it_is_called(
    dists: DistFactory,
    plugin_profile: RuntimeProfile,
    plugin_registry: type[BaseHookRegistry],
) -> None:
    dist = dists.add("dist-a", plugins={"alpha": None})

    load_plugins(plugin_profile, plugin_registry)
    load_plugins(plugin_profile, plugin_registry)

    assert dist.loaded("alpha").CALLS == 1


def test_a_second_load_plugins_call_does_not_apply_again(
    dists: DistFactory,
    plugin_profile: RuntimeProfile,
    plugin_registry: type[BaseHookRegistry],
) -> None:
    target = _greeter(dists)
    load_plugins(plugin_profile, plugin_registry)
    plugin_registry.register(f"{target}.greet", lambda result, name: result.upper())

    load_plugins(plugin_profile, plugin_registry)

    assert plugin_registry.applied_targets() == ()


def test_reset_plugin_state_lets_load_plugins_run_again(
    dists: DistFactory,
    plugin_profile: RuntimeProfile,
    plugin_registry: type[BaseHookRegistry],
) -> None:
    dist = dists.add("dist-a", plugins={"alpha": None})
    load_plugins(plugin_profile, plugin_registry)

    reset_plugin_state(plugin_profile, plugin_registry)
    load_plugins(plugin_profile, plugin_registry)

    assert dist.loaded("alpha").CALLS == 2


def test_load_plugins_applies_plugin_hooks_to_the_real_target(
    dists: DistFactory,
    plugin_profile: RuntimeProfile,
    plugin_registry: type[BaseHookRegistry],
) -> None:
    target = _greeter(dists)
    dists.add("dist-a", plugins={"shout": _shout(target)})

    load_plugins(plugin_profile, plugin_registry)

    assert importlib.import_module(target).greet("x") == "HELLO X"


def test_hooks_registered_in_register_are_attributed_to_their_plugin(
    dists: DistFactory,
    plugin_profile: RuntimeProfile,
    plugin_registry: type[BaseHookRegistry],
) -> None:
    target = _greeter(dists)
    dists.add("dist-a", plugins={"shout": _shout(target)})

    load_plugins(plugin_profile, plugin_registry)

    [record] = plugin_registry.registrations()[f"{target}.greet"]
    assert (record.hook_type, record.source) == (HookType.AFTER, HookSource("shout", "dist-a"))


def test_the_current_hook_source_is_none_after_load_plugins(
    dists: DistFactory,
    plugin_profile: RuntimeProfile,
    plugin_registry: type[BaseHookRegistry],
) -> None:
    dists.add("dist-a", plugins={"alpha": None})

    load_plugins(plugin_profile, plugin_registry)

    assert current_plugin_source() is None


def test_a_reentrant_load_plugins_from_register_returns_without_applying(
    dists: DistFactory,
    plugin_profile: RuntimeProfile,
    plugin_registry: type[BaseHookRegistry],
) -> None:
    target = _greeter(dists)
    dists.add(
        "dist-a",
        plugins={
            "nested": f"""
                from cardcage.hooks.loader import load_plugins

                def register():
                    REGISTRY.register("{target}.greet", lambda result, name: result.upper())
                    load_plugins(PROFILE, REGISTRY)
                    journal.record("applied-inside", REGISTRY.applied_targets())
            """
        },
    )

    load_plugins(plugin_profile, plugin_registry)

    assert dists.events("applied-inside") == [()]
    assert importlib.import_module(target).greet("x") == "HELLO X"


def test_deferred_mode_applies_hooks_without_importing_the_target(
    dists: DistFactory,
    plugin_profile: RuntimeProfile,
    plugin_registry: type[BaseHookRegistry],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    target = _greeter(dists)
    dists.add("dist-a", plugins={"shout": _shout(target)})
    monkeypatch.setenv("CARDCAGE_DEFERRED_HOOKS", "1")

    load_plugins(plugin_profile, plugin_registry)
    assert target not in sys.modules

    assert importlib.import_module(target).greet("x") == "HELLO X"


def test_deferred_hook_of_the_selected_platform_that_cannot_apply_fails_the_import(
    dists: DistFactory,
    plugin_profile: RuntimeProfile,
    plugin_registry: type[BaseHookRegistry],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    target = _greeter(dists)
    dists.add(
        "vendor-a",
        platforms={"a": None},
        plugins={"a_general": _shout(target, attr="no_such_function")},
    )
    dists.select("a")
    monkeypatch.setenv("CARDCAGE_DEFERRED_HOOKS", "1")

    load_plugins(plugin_profile, plugin_registry)  # nothing imported yet, nothing failed yet

    with pytest.raises(PluginLoadError, match=r"vendor-a") as info:
        importlib.import_module(target)
    assert info.value.targets == (f"{target}.no_such_function",)


def test_deferred_hook_of_another_distribution_that_cannot_apply_is_only_logged(
    dists: DistFactory,
    plugin_profile: RuntimeProfile,
    plugin_registry: type[BaseHookRegistry],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    target = _greeter(dists)
    dists.add("vendor-a", platforms={"a": None})
    dists.add("third-party", plugins={"stale": _shout(target, attr="no_such_function")})
    dists.select("a")
    monkeypatch.setenv("CARDCAGE_DEFERRED_HOOKS", "1")

    load_plugins(plugin_profile, plugin_registry)

    assert importlib.import_module(target).greet("x") == "hello x"


# -- load_plugins: platform exclusion ----------------------------------------------------------


def _vendors(dists: DistFactory) -> None:
    dists.add("vendor-a", platforms={"a": None}, plugins={"a_general": None})
    dists.add("vendor-b", platforms={"b": None}, plugins={"b_general": None})
    dists.add("neutral", plugins={"c_general": None})


def _executed(dists: DistFactory) -> list[str]:
    return dists.events("register")


def test_selecting_a_platform_runs_its_and_platform_neutral_plugins(
    dists: DistFactory,
    plugin_profile: RuntimeProfile,
    plugin_registry: type[BaseHookRegistry],
) -> None:
    _vendors(dists)
    dists.select("a")

    load_plugins(plugin_profile, plugin_registry)

    assert _executed(dists) == ["c_general", "a_general"]


def test_selecting_a_platform_never_imports_other_platform_distributions_plugins(
    dists: DistFactory,
    plugin_profile: RuntimeProfile,
    plugin_registry: type[BaseHookRegistry],
) -> None:
    dists.add("vendor-a", platforms={"a": None})
    other = dists.add("vendor-b", platforms={"b": None}, plugins={"b_general": None})
    dists.select("a")

    load_plugins(plugin_profile, plugin_registry)

    assert not other.imported("b_general")


def test_load_plugins_never_imports_platform_entry_points(
    dists: DistFactory,
    plugin_profile: RuntimeProfile,
    plugin_registry: type[BaseHookRegistry],
) -> None:
    vendor = dists.add("vendor-a", platforms={"a": None}, plugins={"a_general": None})
    dists.select("a")

    load_plugins(plugin_profile, plugin_registry)

    assert (vendor.imported("a"), vendor.imported("a_general")) == (False, True)


def test_the_selected_distribution_is_kept_even_if_it_provides_another_platform(
    dists: DistFactory,
    plugin_profile: RuntimeProfile,
    plugin_registry: type[BaseHookRegistry],
) -> None:
    dists.add("vendor-a", platforms={"a": None, "a_sim": None}, plugins={"a_general": None})
    dists.select("a")

    load_plugins(plugin_profile, plugin_registry)

    assert _executed(dists) == ["a_general"]


def test_an_unknown_selector_skips_every_platform_distribution(
    dists: DistFactory,
    plugin_profile: RuntimeProfile,
    plugin_registry: type[BaseHookRegistry],
) -> None:
    _vendors(dists)
    dists.select("nonexistent")

    load_plugins(plugin_profile, plugin_registry)

    assert _executed(dists) == ["c_general"]


def test_an_unknown_selector_is_warned_about_with_the_available_names(
    dists: DistFactory,
    plugin_profile: RuntimeProfile,
    plugin_registry: type[BaseHookRegistry],
    caplog: pytest.LogCaptureFixture,
) -> None:
    _vendors(dists)
    dists.select("nonexistent")
    caplog.set_level(logging.DEBUG, logger=LOADER)

    load_plugins(plugin_profile, plugin_registry)

    [warning] = _records(caplog, logging.WARNING)
    assert f"{plugin_profile.selector_env}='nonexistent'" in warning
    assert "'a', 'b'" in warning


def test_no_selection_excludes_nothing(
    dists: DistFactory,
    plugin_profile: RuntimeProfile,
    plugin_registry: type[BaseHookRegistry],
) -> None:
    _vendors(dists)

    load_plugins(plugin_profile, plugin_registry)

    assert _executed(dists) == ["c_general", "a_general", "b_general"]


def test_an_explicit_selection_overrides_the_selector_variable(
    dists: DistFactory,
    plugin_profile: RuntimeProfile,
    plugin_registry: type[BaseHookRegistry],
) -> None:
    _vendors(dists)
    dists.select("b")

    load_plugins(plugin_profile, plugin_registry, selection=PlatformChoice("a", "vendor-a"))

    assert _executed(dists) == ["c_general", "a_general"]


def test_an_explicit_selection_of_none_excludes_nothing_despite_the_selector(
    dists: DistFactory,
    plugin_profile: RuntimeProfile,
    plugin_registry: type[BaseHookRegistry],
) -> None:
    _vendors(dists)
    dists.select("b")

    load_plugins(plugin_profile, plugin_registry, selection=None)

    assert _executed(dists) == ["c_general", "a_general", "b_general"]


def test_the_selected_distribution_is_matched_after_name_normalisation(
    dists: DistFactory,
    plugin_profile: RuntimeProfile,
    plugin_registry: type[BaseHookRegistry],
) -> None:
    dists.add("Vendor_A", platforms={"a": None}, plugins={"a_general": None})
    dists.add("vendor-b", platforms={"b": None}, plugins={"b_general": None})

    load_plugins(plugin_profile, plugin_registry, selection=PlatformChoice("a", "vendor.a"))

    assert _executed(dists) == ["a_general"]


def test_a_builtin_selection_excludes_every_platform_distribution(
    dists: DistFactory,
    plugin_profile: RuntimeProfile,
    plugin_registry: type[BaseHookRegistry],
) -> None:
    _vendors(dists)

    load_plugins(plugin_profile, plugin_registry, selection=PlatformChoice(None, None))

    assert _executed(dists) == ["c_general"]


def test_the_report_records_the_selection(
    dists: DistFactory,
    plugin_profile: RuntimeProfile,
    plugin_registry: type[BaseHookRegistry],
) -> None:
    _vendors(dists)
    dists.select("a")

    report = load_plugins(plugin_profile, plugin_registry)

    assert report.selection == PlatformChoice("a", "vendor-a", plugin_profile.selector_env)


# -- load_plugins: the selection of a registered runtime ----------------------------------------


def _register_runtime(dists: DistFactory, profile: RuntimeProfile, accessor: str) -> None:
    """Register a runtime for ``profile`` (``cardcage.runtimes``) whose accessor is ``accessor``."""
    module = dists.module(
        "runtime",
        f"""
        from cardcage.hooks.profile import RuntimeProfile
        from cardcage.hooks.runtimes import Runtime

        RUNTIME = Runtime(
            profile=RuntimeProfile(
                {profile.name!r},
                {profile.platform_group!r},
                {profile.plugin_group!r},
                {profile.selector_env!r},
                {profile.allowlist_env!r},
            ),
            display_name="test",
            distribution="test-runtime",
            policy="unused:policy",
            accessor={accessor!r},
        )
        """,
    )
    dists.add(
        "test-runtime", entry_points={"cardcage.runtimes": {profile.name: f"{module}:RUNTIME"}}
    )


_ACCESSOR = """
class _Record:
    mode = "automatic"
    selector_env = "UNUSED"
    selector = ""
    plugin_name = "b"
    dist_name = "vendor-b"


def get_current_platform():
    return object()


def get_selection_record():
    return _Record()
"""


def test_a_registered_runtime_decides_which_platform_distributions_are_excluded(
    dists: DistFactory,
    plugin_profile: RuntimeProfile,
    plugin_registry: type[BaseHookRegistry],
) -> None:
    _vendors(dists)
    _register_runtime(dists, plugin_profile, dists.module("accessor", _ACCESSOR))
    dists.select("a")  # the runtime's own selection wins over the variable read from metadata

    report = load_plugins(plugin_profile, plugin_registry)

    assert _executed(dists) == ["c_general", "b_general"]
    assert report.selection == PlatformChoice("b", "vendor-b", "automatic platform selection")


def test_without_a_registered_runtime_the_selector_is_read_from_metadata(
    dists: DistFactory,
    plugin_profile: RuntimeProfile,
    plugin_registry: type[BaseHookRegistry],
) -> None:
    _vendors(dists)
    dists.select("a")

    load_plugins(plugin_profile, plugin_registry)

    assert _executed(dists) == ["c_general", "a_general"]


def test_a_registered_runtime_for_another_profile_of_the_same_name_is_not_used(
    dists: DistFactory,
    plugin_profile: RuntimeProfile,
    plugin_registry: type[BaseHookRegistry],
) -> None:
    _vendors(dists)
    other = type(plugin_profile)(
        plugin_profile.name, "other.platforms", "other.plugins", "OTHER_SEL", "OTHER_ALLOW"
    )
    _register_runtime(dists, other, dists.module("accessor", _ACCESSOR))
    dists.select("a")

    load_plugins(plugin_profile, plugin_registry)

    assert _executed(dists) == ["c_general", "a_general"]


def test_a_registered_runtime_whose_accessor_misses_a_dependency_raises(
    dists: DistFactory,
    plugin_profile: RuntimeProfile,
    plugin_registry: type[BaseHookRegistry],
) -> None:
    _vendors(dists)
    dependency = dists.module_name("dep")  # never written
    accessor = dists.write_module(f"{dependency}_accessor", f"import {dependency}\n")
    _register_runtime(dists, plugin_profile, accessor)
    dists.select("a")

    with pytest.raises(ModuleNotFoundError) as info:
        load_plugins(plugin_profile, plugin_registry)

    assert info.value.name == dependency


# -- load_plugins: failure policy ---------------------------------------------------------------


def test_a_failing_register_of_the_selected_distribution_aborts_load_plugins(
    dists: DistFactory,
    plugin_profile: RuntimeProfile,
    plugin_registry: type[BaseHookRegistry],
) -> None:
    dists.add(
        "vendor-a",
        platforms={"a": None},
        plugins={"a_general": "def register():\n    raise RuntimeError('boom')\n"},
    )
    dists.select("a")

    with pytest.raises(PluginLoadError) as info:
        load_plugins(plugin_profile, plugin_registry)

    assert (info.value.plugin, info.value.distribution) == ("a_general", "vendor-a")


def test_a_failing_import_of_the_selected_distribution_aborts_load_plugins(
    dists: DistFactory,
    plugin_profile: RuntimeProfile,
    plugin_registry: type[BaseHookRegistry],
) -> None:
    dists.add("vendor-a", platforms={"a": None}, plugins={"a_general": _BROKEN})
    dists.select("a")

    with pytest.raises(PluginLoadError) as info:
        load_plugins(plugin_profile, plugin_registry)

    assert (info.value.plugin, info.value.distribution) == ("a_general", "vendor-a")


def test_a_failing_register_of_another_distribution_is_logged_and_skipped(
    dists: DistFactory,
    plugin_profile: RuntimeProfile,
    plugin_registry: type[BaseHookRegistry],
    caplog: pytest.LogCaptureFixture,
) -> None:
    dists.add("vendor-a", platforms={"a": None}, plugins={"a_general": None})
    dists.add("neutral", plugins={"bad": "def register():\n    raise RuntimeError('boom')\n"})
    dists.select("a")
    caplog.set_level(logging.DEBUG, logger=LOADER)

    load_plugins(plugin_profile, plugin_registry)

    assert _executed(dists) == ["a_general"]
    assert any("bad" in m for m in _records(caplog, logging.ERROR))


def test_a_selected_platform_hook_that_fails_to_apply_raises_plugin_load_error(
    dists: DistFactory,
    plugin_profile: RuntimeProfile,
    plugin_registry: type[BaseHookRegistry],
) -> None:
    target = _greeter(dists)
    dists.add("vendor-a", platforms={"a": None}, plugins={"a_general": _shout(target, attr="nope")})
    dists.select("a")

    with pytest.raises(PluginLoadError) as info:
        load_plugins(plugin_profile, plugin_registry)

    error = info.value
    assert (error.distribution, error.plugin, error.targets) == (
        "vendor-a",
        "a_general",
        (f"{target}.nope",),
    )
    assert "vendor-a" in str(error)
    assert f"{target}.nope" in str(error)


def test_a_failing_hook_of_another_distribution_is_only_logged(
    dists: DistFactory,
    plugin_profile: RuntimeProfile,
    plugin_registry: type[BaseHookRegistry],
    caplog: pytest.LogCaptureFixture,
) -> None:
    target = _greeter(dists)
    dists.add("vendor-a", platforms={"a": None})
    dists.add("neutral", plugins={"shout": _shout(target, attr="nope")})
    dists.select("a")
    caplog.set_level(logging.DEBUG, logger="cardcage.hooks.registry")

    report = load_plugins(plugin_profile, plugin_registry)

    assert report.apply is not None
    assert list(report.apply.failed) == [f"{target}.nope"]
    assert any(
        f"{target}.nope" in m for m in _records(caplog, logging.ERROR, "cardcage.hooks.registry")
    )


def test_the_selected_platform_does_not_make_other_hook_failures_fatal(
    dists: DistFactory,
    plugin_profile: RuntimeProfile,
    plugin_registry: type[BaseHookRegistry],
) -> None:
    target = _greeter(dists)
    dists.add("vendor-a", platforms={"a": None}, plugins={"a_general": _shout(target)})
    dists.add("neutral", plugins={"shout": _shout(target, attr="nope")})
    dists.select("a")

    load_plugins(plugin_profile, plugin_registry)

    assert importlib.import_module(target).greet("x") == "HELLO X"


@pytest.mark.parametrize("how", ["argument", "environment"])
def test_strict_mode_raises_hook_apply_error_for_any_failed_target(
    dists: DistFactory,
    plugin_profile: RuntimeProfile,
    plugin_registry: type[BaseHookRegistry],
    monkeypatch: pytest.MonkeyPatch,
    how: str,
) -> None:
    target = _greeter(dists)
    dists.add("neutral", plugins={"shout": _shout(target, attr="nope")})
    if how == "environment":
        monkeypatch.setenv("CARDCAGE_STRICT_HOOKS", "1")

    with pytest.raises(HookApplyError) as info:
        load_plugins(plugin_profile, plugin_registry, strict=True if how == "argument" else None)

    assert list(info.value.failures) == [f"{target}.nope"]


def test_strict_false_overrides_the_strict_variable(
    dists: DistFactory,
    plugin_profile: RuntimeProfile,
    plugin_registry: type[BaseHookRegistry],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    target = _greeter(dists)
    dists.add("neutral", plugins={"shout": _shout(target, attr="nope")})
    monkeypatch.setenv("CARDCAGE_STRICT_HOOKS", "1")

    report = load_plugins(plugin_profile, plugin_registry, strict=False)

    assert report.apply is not None
    assert list(report.apply.failed) == [f"{target}.nope"]


def test_after_a_fatal_failure_the_next_call_raises_phase_failed_error(
    dists: DistFactory,
    plugin_profile: RuntimeProfile,
    plugin_registry: type[BaseHookRegistry],
) -> None:
    dists.add("vendor-a", platforms={"a": None}, plugins={"a_general": _BROKEN})
    dists.select("a")
    with pytest.raises(PluginLoadError):
        load_plugins(plugin_profile, plugin_registry)

    with pytest.raises(PhaseFailedError, match="previously failed") as info:
        load_plugins(plugin_profile, plugin_registry)

    assert isinstance(info.value.__cause__, PluginLoadError)


def test_a_duplicate_name_aborts_load_plugins(
    dists: DistFactory,
    plugin_profile: RuntimeProfile,
    plugin_registry: type[BaseHookRegistry],
) -> None:
    dists.add("dist-a", plugins={"shared": None})
    dists.add("dist-b", plugins={"shared": None})

    with pytest.raises(DuplicatePluginError):
        load_plugins(plugin_profile, plugin_registry)


# -- load_plugins: allowlist warnings and the report -------------------------------------------


def test_allowlist_names_that_match_nothing_are_warned_about(
    dists: DistFactory,
    plugin_profile: RuntimeProfile,
    plugin_registry: type[BaseHookRegistry],
    caplog: pytest.LogCaptureFixture,
) -> None:
    dists.add("dist-a", plugins={"alpha": None})
    dists.allow("alpha,ghost,phantom")
    caplog.set_level(logging.DEBUG, logger=LOADER)

    load_plugins(plugin_profile, plugin_registry)

    [warning] = _records(caplog, logging.WARNING)
    assert warning.startswith(f"{plugin_profile.allowlist_env} names 'ghost', 'phantom', which")


def test_allowlist_names_of_platform_entry_points_are_not_warned_about(
    dists: DistFactory,
    plugin_profile: RuntimeProfile,
    plugin_registry: type[BaseHookRegistry],
    caplog: pytest.LogCaptureFixture,
) -> None:
    dists.add("vendor-a", platforms={"a": None}, plugins={"alpha": None})
    dists.allow("alpha,a")
    caplog.set_level(logging.DEBUG, logger=LOADER)

    load_plugins(plugin_profile, plugin_registry)

    assert _records(caplog, logging.WARNING) == []


def test_allowlist_names_of_the_other_runtime_are_not_warned_about(
    dists: DistFactory,
    plugin_registry: type[BaseHookRegistry],
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # SGLANG_PLUGINS filters SRT and diffusion plugins alike: naming one of each is correct.
    srt_module = dists.module("srt_only", "def register():\n    pass\n")
    diffusion_module = dists.module("diffusion_only", "def register():\n    pass\n")
    dists.add(
        "both-runtimes",
        entry_points={
            SRT_PROFILE.plugin_group: {"srt_only": f"{srt_module}:register"},
            DIFFUSION_PROFILE.plugin_group: {"diffusion_only": f"{diffusion_module}:register"},
        },
    )
    monkeypatch.setenv(SRT_PROFILE.allowlist_env, "srt_only,diffusion_only,ghost")
    caplog.set_level(logging.DEBUG, logger=LOADER)
    try:
        load_plugins(SRT_PROFILE, plugin_registry, selection=None)
    finally:
        reset_plugin_state(SRT_PROFILE, plugin_registry)

    [warning] = _records(caplog, logging.WARNING)
    assert warning.startswith(f"{SRT_PROFILE.allowlist_env} names 'ghost', which")
    assert DIFFUSION_PROFILE.plugin_group in warning


def test_the_report_gives_each_discovered_plugin_its_status(
    dists: DistFactory,
    plugin_profile: RuntimeProfile,
    plugin_registry: type[BaseHookRegistry],
) -> None:
    dists.add("vendor-a", platforms={"a": None}, plugins={"a_general": None})
    dists.add("vendor-b", platforms={"b": None}, plugins={"b_general": None})
    dists.add(
        "neutral",
        plugins={
            "good": None,
            "broken_import": _BROKEN,
            "broken_register": "def register():\n    raise RuntimeError('boom')\n",
            "unlisted": None,
        },
    )
    dists.select("a")
    dists.allow("a_general,b_general,good,broken_import,broken_register")

    report = load_plugins(plugin_profile, plugin_registry)

    assert {p.name: (p.status, p.dist_name) for p in report.plugins} == {
        "a_general": ("executed", "vendor-a"),
        "b_general": ("excluded", "vendor-b"),
        "good": ("executed", "neutral"),
        "broken_import": ("failed-import", "neutral"),
        "broken_register": ("failed-register", "neutral"),
        "unlisted": ("not-allowed", "neutral"),
    }


def test_the_report_keeps_the_error_of_a_failed_plugin(
    dists: DistFactory,
    plugin_profile: RuntimeProfile,
    plugin_registry: type[BaseHookRegistry],
) -> None:
    dists.add("neutral", plugins={"broken_import": _BROKEN})

    report = load_plugins(plugin_profile, plugin_registry)

    [status] = report.plugins
    assert status.detail == "RuntimeError: kaput"


def test_load_plugins_logs_one_info_line_naming_loaded_and_failed_plugins(
    dists: DistFactory,
    plugin_profile: RuntimeProfile,
    plugin_registry: type[BaseHookRegistry],
    caplog: pytest.LogCaptureFixture,
) -> None:
    dists.add("neutral", plugins={"good": None, "broken": _BROKEN})
    caplog.set_level(logging.DEBUG, logger=LOADER)

    load_plugins(plugin_profile, plugin_registry)
    load_plugins(plugin_profile, plugin_registry)

    assert _records(caplog, logging.INFO) == [
        f"{plugin_profile.name.upper()} plugins: 1 loaded (good), 1 failed (broken)"
    ]


# -- plugins written for SGLang's own runtime (SGLang is not installed here) ---------------------

#: Really imports SGLang's hook registry, as a plugin written for SGLang does. The test
#: environment has no SGLang and nothing stands in for it, so the import really fails.
_SGLANG_NATIVE = """
from sglang.srt.plugins.hook_registry import HookRegistry, HookType


def register():
    HookRegistry.register("sglang.srt.utils.common.get_device_memory_capacity", print)
"""

_SGLANG_AT_REGISTER = """
def register():
    import sglang.srt.plugins.hook_registry  # noqa: F401
"""


def test_sglang_is_not_installed_in_this_environment() -> None:
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("sglang")


@pytest.mark.parametrize(
    ("body", "status", "step"),
    [
        (_SGLANG_NATIVE, "failed-import", "importing it ("),
        (_SGLANG_AT_REGISTER, "failed-register", "its general plugin callback"),
    ],
    ids=["import", "register"],
)
def test_a_plugin_that_needs_missing_sglang_is_skipped_as_targeting_sglangs_runtime(
    dists: DistFactory,
    plugin_profile: RuntimeProfile,
    plugin_registry: type[BaseHookRegistry],
    caplog: pytest.LogCaptureFixture,
    body: str,
    status: str,
    step: str,
) -> None:
    dists.add("sglang-tools", plugins={"native": body, "fine": None})
    caplog.set_level(logging.DEBUG, logger=LOADER)

    report = load_plugins(plugin_profile, plugin_registry)

    statuses = {p.name: (p.status, p.detail) for p in report.plugins}
    assert statuses["fine"][0] == "executed"
    assert statuses["native"][0] == status
    detail = statuses["native"][1]
    assert detail.startswith("targets SGLang's runtime: ModuleNotFoundError: No module named")
    assert "docs/platforms/porting.md" in detail
    [warning] = _records(caplog, logging.WARNING)
    assert "Plugin 'native' (distribution sglang-tools)" in warning
    assert f"targets SGLang's runtime: {step}" in warning
    assert "SGLang is not installed in this environment" in warning
    assert "Skipping it." in warning
    assert "install SGLang (pip install sglang) and start SGLang's own runtime" in warning
    assert PORTING_GUIDE_NAMED in warning
    assert not _records(caplog, logging.ERROR), "a known cause is a warning, not an error"


def test_a_sglang_plugin_failure_keeps_its_traceback_at_debug_only(
    dists: DistFactory,
    plugin_profile: RuntimeProfile,
    plugin_registry: type[BaseHookRegistry],
    caplog: pytest.LogCaptureFixture,
) -> None:
    dists.add("sglang-tools", plugins={"native": _SGLANG_NATIVE})
    caplog.set_level(logging.INFO, logger=LOADER)
    load_plugins(plugin_profile, plugin_registry)
    [quiet] = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert not quiet.exc_info

    reset_plugin_state(plugin_profile, plugin_registry)
    caplog.clear()
    caplog.set_level(logging.DEBUG, logger=LOADER)
    load_plugins(plugin_profile, plugin_registry)
    [verbose] = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert "No module named 'sglang'" in _traceback(verbose)


@pytest.mark.parametrize(
    ("body", "step"),
    [(_SGLANG_NATIVE, "importing it ("), (_SGLANG_AT_REGISTER, "its general plugin callback")],
    ids=["import", "register"],
)
def test_a_plugin_of_the_selected_platform_that_needs_missing_sglang_aborts_start_up(
    dists: DistFactory,
    plugin_profile: RuntimeProfile,
    plugin_registry: type[BaseHookRegistry],
    body: str,
    step: str,
) -> None:
    dists.add("vendor-sg", platforms={"sg": None}, plugins={"sg_hooks": body})
    dists.select("sg")

    with pytest.raises(SGLangPluginLoadError) as info:
        load_plugins(plugin_profile, plugin_registry)

    error = info.value
    assert isinstance(error, PluginLoadError)
    assert isinstance(error, TargetsSGLangError)
    assert (error.plugin, error.distribution, error.group) == (
        "sg_hooks",
        "vendor-sg",
        plugin_profile.plugin_group,
    )
    assert error.sglang_module == "sglang"
    assert isinstance(error.__cause__, ModuleNotFoundError)
    message = str(error)
    assert message == f"{error.problem} {error.fix}"
    assert "Plugin 'sg_hooks' (distribution vendor-sg)" in message
    assert f"targets SGLang's runtime: {step}" in message
    assert "It ships with the selected platform, so the runtime cannot start without it" in message
    assert "pip install sglang" in message
    assert "docs/platforms/porting.md" in message
    assert message.endswith("; or select another platform.")


def test_a_plugin_of_an_excluded_platform_distribution_is_never_imported_even_if_it_needs_sglang(
    dists: DistFactory,
    plugin_profile: RuntimeProfile,
    plugin_registry: type[BaseHookRegistry],
    caplog: pytest.LogCaptureFixture,
) -> None:
    dists.add("vendor-a", platforms={"a": None}, plugins={"a_general": None})
    native = dists.add("vendor-sg", platforms={"sg": None}, plugins={"sg_hooks": _SGLANG_NATIVE})
    dists.select("a")
    caplog.set_level(logging.DEBUG, logger=LOADER)

    report = load_plugins(plugin_profile, plugin_registry)

    assert {p.name: p.status for p in report.plugins}["sg_hooks"] == "excluded"
    assert not native.imported("sg_hooks")
    assert not _records(caplog, logging.WARNING)


@pytest.mark.parametrize(
    ("raised", "expected"),
    [
        (ModuleNotFoundError("No module named 'sglang'", name="sglang"), "sglang"),
        (
            ModuleNotFoundError("No module named 'sglang.srt'", name="sglang.srt"),
            "sglang.srt",
        ),
        (ModuleNotFoundError("No module named 'sglangish'", name="sglangish"), None),
        (ModuleNotFoundError("No module named 'torch'", name="torch"), None),
        (ImportError("cannot import name 'x' from 'sglang'", name="sglang"), None),
        (RuntimeError("boom"), None),
    ],
    ids=["sglang", "submodule", "lookalike", "other", "not-a-missing-module", "other-error"],
)
def test_missing_sglang_module_recognises_only_a_missing_sglang(
    raised: BaseException, expected: str | None
) -> None:
    assert missing_sglang_module(raised) == expected


def _vendor_set_up() -> None:
    try:
        importlib.import_module("sglang.srt.platforms.interface")
    except ImportError as exc:
        raise RuntimeError("vendor set-up failed") from exc


def test_missing_sglang_module_follows_the_chain_of_causes() -> None:
    with pytest.raises(RuntimeError) as info:
        _vendor_set_up()

    assert missing_sglang_module(info.value) == "sglang"


def test_missing_sglang_module_is_none_where_sglang_is_installed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A missing submodule of an installed SGLang is a version problem, not a host problem.
    monkeypatch.setattr(errors_module, "_sglang_installed", lambda: True)

    assert missing_sglang_module(ModuleNotFoundError("x", name="sglang.srt.gone")) is None
