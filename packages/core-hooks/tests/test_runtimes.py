"""The runtime registry: runtimes registered in ``cardcage.runtimes``, found lazily and checked.

Registrations are real distributions in a temporary site (``dist_support``); nothing is mocked.
"""

from __future__ import annotations

import logging
import sys
from typing import TYPE_CHECKING

import pytest

from cardcage.hooks.errors import DuplicatePluginError, RuntimeRegistrationError
from cardcage.hooks.loader import load_plugins
from cardcage.hooks.runtimes import (
    RUNTIMES_GROUP,
    Runtime,
    broken_runtimes,
    get_runtime,
    registered_runtime_names,
    registered_runtimes,
    runtime_for,
)

if TYPE_CHECKING:
    from dist_support import DistFactory

    from cardcage.hooks.profile import RuntimeProfile
    from cardcage.hooks.registry import BaseHookRegistry

pytest_plugins = ["dist_support"]


def _record_source(profile: RuntimeProfile, policy: str = "unused:policy") -> str:
    return f"""
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
    display_name="Test",
    distribution="test-runtime",
    policy={policy!r},
    accessor="unused_accessor",
)
"""


def _register(
    dists: DistFactory,
    profile: RuntimeProfile,
    *,
    dist: str = "test-runtime",
    name: str | None = None,
    source: str | None = None,
) -> str:
    """Register a runtime for ``profile`` from distribution ``dist``; return its module name."""
    module = dists.module_name(f"{dist}_runtime")
    entry = {name or profile.name: f"{module}:RUNTIME"}
    dists.add(
        dist,
        entry_points={RUNTIMES_GROUP: entry},
        modules={module: source if source is not None else _record_source(profile)},
    )
    return module


def test_a_registered_runtime_is_found_by_its_name_and_by_its_profile(
    dists: DistFactory, plugin_profile: RuntimeProfile
) -> None:
    _register(dists, plugin_profile)

    runtime = get_runtime(plugin_profile.name)

    assert isinstance(runtime, Runtime)
    assert runtime.name == plugin_profile.name
    assert runtime.profile == plugin_profile
    assert runtime_for(plugin_profile) == runtime
    assert runtime in registered_runtimes()
    assert get_runtime(f"{plugin_profile.name}-absent") is None


def test_listing_the_names_imports_no_registration(
    dists: DistFactory, plugin_profile: RuntimeProfile
) -> None:
    module = _register(dists, plugin_profile)

    assert plugin_profile.name in registered_runtime_names()
    assert module not in sys.modules


def test_looking_one_runtime_up_imports_only_its_registration(
    dists: DistFactory, plugin_profile: RuntimeProfile
) -> None:
    other = type(plugin_profile)(
        f"{plugin_profile.name}x", "other.platforms", "other.plugins", "OTHER_SEL", "OTHER_ALLOW"
    )
    wanted = _register(dists, plugin_profile)
    unwanted = _register(dists, other, dist="other-runtime")

    get_runtime(plugin_profile.name)

    assert wanted in sys.modules
    assert unwanted not in sys.modules


def test_a_registration_that_fails_to_import_is_a_typed_error_naming_it(
    dists: DistFactory, plugin_profile: RuntimeProfile
) -> None:
    _register(dists, plugin_profile, source='raise ImportError("libruntime.so is missing")\n')

    with pytest.raises(RuntimeRegistrationError) as info:
        get_runtime(plugin_profile.name)

    assert (info.value.plugin, info.value.distribution) == (plugin_profile.name, "test-runtime")
    assert info.value.group == RUNTIMES_GROUP
    assert "libruntime.so is missing" in str(info.value)
    assert isinstance(info.value.__cause__, ImportError)


def test_a_registration_that_is_not_a_runtime_record_is_refused(
    dists: DistFactory, plugin_profile: RuntimeProfile
) -> None:
    _register(dists, plugin_profile, source="RUNTIME = {'name': 'srt'}\n")

    with pytest.raises(RuntimeRegistrationError, match=r"not a cardcage\.hooks\.runtimes\.Runtime"):
        get_runtime(plugin_profile.name)


def test_an_entry_point_named_differently_from_its_profile_is_refused(
    dists: DistFactory, plugin_profile: RuntimeProfile
) -> None:
    _register(dists, plugin_profile, name=f"{plugin_profile.name}-typo")

    with pytest.raises(RuntimeRegistrationError) as info:
        get_runtime(f"{plugin_profile.name}-typo")

    assert f"Name the entry point after the profile: {plugin_profile.name} =" in str(info.value)


def test_broken_registrations_are_skipped_by_the_listing_and_reported_on_their_own(
    dists: DistFactory, plugin_profile: RuntimeProfile, caplog: pytest.LogCaptureFixture
) -> None:
    good = type(plugin_profile)(
        f"{plugin_profile.name}good", "good.platforms", "good.plugins", "GOOD_SEL", "GOOD_ALLOW"
    )
    _register(dists, good, dist="good-runtime")
    _register(dists, plugin_profile, source='raise ImportError("broken")\n')
    caplog.set_level(logging.WARNING, logger="cardcage.hooks.runtimes")

    names = [r.name for r in registered_runtimes()]
    (broken,) = [b for b in broken_runtimes() if b.plugin == plugin_profile.name]

    assert good.name in names
    assert plugin_profile.name not in names
    assert broken.distribution == "test-runtime"
    assert any("broken" in r.getMessage() for r in caplog.records)


def test_two_distributions_registering_one_runtime_name_is_an_error(
    dists: DistFactory, plugin_profile: RuntimeProfile
) -> None:
    _register(dists, plugin_profile, dist="first-runtime")
    _register(dists, plugin_profile, dist="second-runtime")

    with pytest.raises(DuplicatePluginError) as info:
        get_runtime(plugin_profile.name)

    assert set(info.value.distributions) == {"first-runtime", "second-runtime"}


def test_the_fallback_chain_is_read_from_the_policy_built_ins(
    dists: DistFactory, plugin_profile: RuntimeProfile
) -> None:
    policy = dists.module(
        "policy",
        """
        class Builtin:
            def __init__(self, alias):
                self.alias = alias


        class Policy:
            builtins = (Builtin("npu"), Builtin("cpu"))
            default_qualname = "pkg.base:BasePlatform"


        def policy():
            return Policy()
        """,
    )
    _register(dists, plugin_profile, source=_record_source(plugin_profile, f"{policy}:policy"))

    runtime = get_runtime(plugin_profile.name)

    assert runtime is not None
    assert (
        runtime.fallback_chain() == "the first detected of npu, cpu, else the default BasePlatform"
    )


def test_allowlist_names_of_a_registered_runtime_sharing_the_variable_are_not_warned_about(
    dists: DistFactory,
    plugin_profile: RuntimeProfile,
    plugin_registry: type[BaseHookRegistry],
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sibling = type(plugin_profile)(
        f"{plugin_profile.name}sib",
        "sibling.platforms",
        "sibling.plugins",
        "SIBLING_SEL",
        plugin_profile.allowlist_env,  # one allowlist variable for both runtimes
    )
    _register(dists, sibling, dist="sibling-runtime")
    hook = dists.module("sibling_hook", "def register():\n    pass\n")
    dists.add("sibling-plugin", entry_points={"sibling.plugins": {"sib_only": f"{hook}:register"}})
    dists.add("own", plugins={"own_only": None})
    monkeypatch.setenv(plugin_profile.allowlist_env, "own_only,sib_only,ghost")
    caplog.set_level(logging.WARNING, logger="cardcage.hooks.loader")

    load_plugins(plugin_profile, plugin_registry, selection=None)

    (warning,) = [r.getMessage() for r in caplog.records if r.name == "cardcage.hooks.loader"]
    assert "names 'ghost', which match" in warning
    assert "sibling.plugins" in warning


def test_load_plugins_raises_when_its_runtimes_registration_is_broken(
    dists: DistFactory,
    plugin_profile: RuntimeProfile,
    plugin_registry: type[BaseHookRegistry],
) -> None:
    _register(dists, plugin_profile, source='raise ImportError("libruntime.so is missing")\n')
    dists.add("vendor-a", platforms={"a": None}, plugins={"a_general": None})
    dists.select("a")

    with pytest.raises(RuntimeRegistrationError, match=r"libruntime\.so is missing"):
        load_plugins(plugin_profile, plugin_registry)

    assert dists.events("register") == [], "no plugin ran on a guessed selection"
