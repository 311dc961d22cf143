"""The error hierarchy: one root, the builtin SGLang raises, structured fields, advice."""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
import types
import uuid
import warnings
from typing import TYPE_CHECKING

import pytest

from cardcage.hooks import errors
from cardcage.hooks.errors import (
    CardcageError,
    DuplicatePluginError,
    EarlyPatchError,
    HookApplyError,
    HookApplyWarning,
    HookError,
    HookRegistrationError,
    HookResultError,
    HookTargetError,
    InvalidEnvVarError,
    InvalidTargetError,
    MalformedEntryPointError,
    PhaseFailedError,
    PluginError,
    PluginLoadError,
    RuntimeRegistrationError,
    SGLangPluginLoadError,
    TargetsSGLangError,
    format_plugin,
)
from cardcage.hooks.loader import load_plugins_by_group
from cardcage.hooks.registry import BaseHookRegistry, HookType
from cardcage.hooks.testing import write_distribution

if TYPE_CHECKING:
    from pathlib import Path

    from dist_support import DistFactory

    from cardcage.hooks.profile import RuntimeProfile
    from cardcage.hooks.registry import BaseHookRegistry

pytest_plugins = ["dist_support"]

# DESIGN §2.5: every concrete error also subclasses the builtin the seed's runtime raises.
BUILTIN = {
    InvalidEnvVarError: ValueError,
    PhaseFailedError: RuntimeError,
    DuplicatePluginError: RuntimeError,
    MalformedEntryPointError: ValueError,
    PluginLoadError: RuntimeError,
    SGLangPluginLoadError: RuntimeError,
    EarlyPatchError: RuntimeError,
    RuntimeRegistrationError: TypeError,
    HookRegistrationError: TypeError,
    InvalidTargetError: ValueError,
    HookTargetError: TypeError,
    HookResultError: TypeError,
    HookApplyError: RuntimeError,
}
ABSTRACT = {CardcageError, PluginError, HookError, TargetsSGLangError}


def _error_classes() -> set[type[BaseException]]:
    return {
        obj
        for _, obj in inspect.getmembers(errors, inspect.isclass)
        if issubclass(obj, BaseException)
        and not issubclass(obj, Warning)  # warning categories are not errors
        and obj.__module__ == errors.__name__
    }


@pytest.fixture
def target_module(monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    """A throw-away module in ``sys.modules`` to hang hooks on."""
    module = types.ModuleType(f"_cc_errors_target_{uuid.uuid4().hex[:10]}")
    module.greet = lambda name: f"hello {name}"  # type: ignore[attr-defined]
    module.VALUE = 3  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, module.__name__, module)
    return module


# -- hierarchy ----------------------------------------------------------------------------------


def test_every_error_class_is_listed_with_its_builtin() -> None:
    assert _error_classes() == set(BUILTIN) | ABSTRACT


def test_every_error_class_is_exported() -> None:
    assert {cls.__name__ for cls in _error_classes()} <= set(errors.__all__)


@pytest.mark.parametrize(("cls", "builtin"), BUILTIN.items(), ids=lambda x: x.__name__)
def test_each_concrete_error_is_a_cardcage_error_and_its_documented_builtin(
    cls: type[BaseException], builtin: type[BaseException]
) -> None:
    assert issubclass(cls, CardcageError)
    assert issubclass(cls, builtin)


@pytest.mark.parametrize(
    "cls",
    [DuplicatePluginError, PluginLoadError, SGLangPluginLoadError, TargetsSGLangError],
    ids=lambda x: x.__name__,
)
def test_plugin_errors_share_the_plugin_error_base(cls: type[BaseException]) -> None:
    assert issubclass(cls, PluginError)


@pytest.mark.parametrize(
    "cls",
    [HookRegistrationError, InvalidTargetError, HookTargetError, HookResultError, HookApplyError],
    ids=lambda x: x.__name__,
)
def test_hook_errors_share_the_hook_error_base(cls: type[BaseException]) -> None:
    assert issubclass(cls, HookError)


def test_the_root_is_an_exception_not_a_base_exception_only() -> None:
    assert issubclass(CardcageError, Exception)


# -- fields and messages built here -------------------------------------------------------------


def test_invalid_env_var_error_carries_variable_value_and_expectation() -> None:
    error = InvalidEnvVarError("MY_FLAG", "yes", "one of 0, 1, true, false")

    assert (error.variable, error.value, error.expected) == (
        "MY_FLAG",
        "yes",
        "one of 0, 1, true, false",
    )
    assert str(error) == (
        "MY_FLAG='yes' is not valid: expected one of 0, 1, true, false. "
        "Fix the value or unset MY_FLAG."
    )


def test_phase_failed_error_carries_the_phase_and_cause_and_says_to_restart() -> None:
    cause = ValueError("bad metadata")

    error = PhaseFailedError("SRT plugin registration", cause)

    assert (error.phase, error.cause) == ("SRT plugin registration", cause)
    assert str(error).startswith(
        "SRT plugin registration previously failed: ValueError: bad metadata."
    )
    assert "restart the process" in str(error)


def test_duplicate_plugin_error_names_every_distribution_and_how_to_resolve_it() -> None:
    error = DuplicatePluginError("grp", "shared", ["dist-a", "dist-b"])

    assert (error.group, error.plugin, error.distributions, error.distribution) == (
        "grp",
        "shared",
        ("dist-a", "dist-b"),
        "dist-a",
    )
    assert "dist-a, dist-b" in str(error)
    assert "Uninstall all but one" in str(error)


def test_plugin_load_error_carries_group_plugin_distribution_and_targets() -> None:
    error = PluginLoadError(
        "msg", group="grp", plugin="p", distribution="d", targets=["m.f", "m.g"]
    )

    assert (error.group, error.plugin, error.distribution, error.targets) == (
        "grp",
        "p",
        "d",
        ("m.f", "m.g"),
    )


def test_hook_apply_error_names_the_target_when_exactly_one_failed() -> None:
    error = HookApplyError("msg", failures={"m.f": AttributeError("f")})

    assert (error.target, list(error.failures)) == ("m.f", ["m.f"])


def test_hook_apply_error_has_no_single_target_when_several_failed() -> None:
    error = HookApplyError("msg", failures={"m.f": AttributeError(), "m.g": AttributeError()})

    assert (error.target, sorted(error.failures)) == (None, ["m.f", "m.g"])


@pytest.mark.parametrize(
    ("plugin", "distribution", "expected"),
    [
        (None, None, "an unknown plugin"),
        ("p", None, "plugin 'p'"),
        ("p", "d", "plugin 'p' (distribution d)"),
    ],
)
def test_format_plugin(plugin: str | None, distribution: str | None, expected: str) -> None:
    assert format_plugin(plugin, distribution) == expected


# -- messages from the places that raise them say what to do -----------------------------------


def test_a_fatal_plugin_import_error_says_to_fix_or_reinstall_the_distribution(
    dists: DistFactory, plugin_profile: RuntimeProfile
) -> None:
    dists.add("vendor-a", plugins={"broken": "raise ImportError('no libfoo')"})

    with pytest.raises(PluginLoadError) as info:
        load_plugins_by_group(
            plugin_profile.plugin_group, profile=plugin_profile, fatal_dists=["vendor-a"]
        )

    assert "ImportError: no libfoo" in str(info.value)
    assert "fix or reinstall vendor-a, or select another platform" in str(info.value)


def test_registering_a_class_as_a_wrapper_hook_says_to_use_a_function(
    plugin_registry: type[BaseHookRegistry], target_module: types.ModuleType
) -> None:
    with pytest.raises(HookRegistrationError, match="Use a function") as info:
        plugin_registry.register(f"{target_module.__name__}.greet", dict, HookType.AFTER)

    assert (info.value.target, info.value.hook) == (f"{target_module.__name__}.greet", dict)


def test_a_malformed_target_says_how_to_write_one(
    plugin_registry: type[BaseHookRegistry],
) -> None:
    with pytest.raises(InvalidTargetError, match="Write it as") as info:
        plugin_registry.register("nodots", lambda result: result)

    assert info.value.target == "nodots"


def test_a_non_callable_target_fails_with_hook_target_error_naming_it(
    plugin_registry: type[BaseHookRegistry], target_module: types.ModuleType
) -> None:
    target = f"{target_module.__name__}.VALUE"
    plugin_registry.register(target, lambda result: result)

    report = plugin_registry.apply()

    error = report.failed[target]
    assert isinstance(error, HookTargetError)
    assert error.target == target
    assert "hooks can only wrap callables" in str(error)


def test_strict_apply_error_lists_each_failed_target_and_says_how_to_fix_it(
    plugin_registry: type[BaseHookRegistry], target_module: types.ModuleType
) -> None:
    target = f"{target_module.__name__}.missing"
    plugin_registry.register(target, lambda result: result)

    with pytest.raises(HookApplyError) as info:
        plugin_registry.apply(strict=True)

    assert f"  - {target} (from: unknown): AttributeError" in str(info.value)
    assert "Fix the target path" in str(info.value)


def test_a_badly_shaped_before_result_says_what_shape_is_expected(
    plugin_registry: type[BaseHookRegistry], target_module: types.ModuleType
) -> None:
    target = f"{target_module.__name__}.greet"

    def bad_before(name: str) -> object:
        return ["not", "a", "pair"]

    plugin_registry.register(target, bad_before, HookType.BEFORE)
    plugin_registry.apply(propagate=False)

    with pytest.raises(HookResultError, match="must return None") as info:
        target_module.greet("x")

    assert (info.value.target, info.value.hook) == (target, bad_before)


# -- a non-strict apply() that leaves targets unpatched -----------------------------------------


def test_a_failed_apply_is_a_warning_a_plain_script_sees_without_logging() -> None:
    # The warning reaches stderr by default, whatever the script did with logging.
    script = (
        "from cardcage.hooks.registry import BaseHookRegistry, HookType\n"
        "class Registry(BaseHookRegistry): pass\n"
        "Registry.register('json.no_such_function', lambda r, *a, **k: r, HookType.AFTER)\n"
        "report = Registry.apply()\n"
        "print('failed:', sorted(report.failed))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )

    assert "failed: ['json.no_such_function']" in done.stdout
    assert "HookApplyWarning" in done.stderr
    assert "json.no_such_function" in done.stderr
    assert "strict=True" in done.stderr


def test_the_warning_carries_the_failures_and_strict_mode_raises_instead(
    target_module: types.ModuleType,
) -> None:
    class Registry(BaseHookRegistry):
        pass

    target = f"{target_module.__name__}.missing"
    Registry.register(target, lambda result, *a, **k: result, HookType.AFTER)
    with pytest.warns(HookApplyWarning) as caught:
        Registry.apply()
    assert set(caught[0].message.failures) == {target}  # type: ignore[union-attr]

    Registry.register(target, lambda result, *a, **k: result, HookType.AFTER)
    with warnings.catch_warnings():
        warnings.simplefilter("error", HookApplyWarning)  # strict raises; it does not also warn
        with pytest.raises(HookApplyError):
            Registry.apply(strict=True)
    Registry.unapply()


# -- a broken plugin is never silent --------------------------------------------------------------


def _embedding_runtime(site: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """A runtime that configures no logging: it loads the SRT plugins and prints the report."""
    script = (
        "from cardcage.hooks import load_plugins\n"
        "report = load_plugins()\n"
        "print('executed:', report.names('executed'))\n"
    )
    return subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(site), **env},
    )


def test_a_raising_register_reaches_stderr_in_a_runtime_that_configured_no_logging(
    tmp_path: Path,
) -> None:
    write_distribution(
        tmp_path,
        "cc-noisy",
        entry_points={"sglang.srt.plugins": {"noisy": "cc_noisy:register"}},
        modules={"cc_noisy": "def register():\n    raise RuntimeError('register exploded')\n"},
    )
    done = _embedding_runtime(tmp_path)

    assert "executed: []" in done.stdout
    assert "general plugin: noisy (distribution cc-noisy)" in done.stderr
    assert "RuntimeError: register exploded" in done.stderr  # with its traceback


def test_an_allowlist_name_matching_nothing_reaches_stderr_without_logging_configured(
    tmp_path: Path,
) -> None:
    write_distribution(
        tmp_path,
        "cc-quiet",
        entry_points={"sglang.srt.plugins": {"quiet": "cc_quiet:register"}},
        modules={"cc_quiet": "def register():\n    pass\n"},
    )
    done = _embedding_runtime(tmp_path, SGLANG_PLUGINS="quiet,quite")

    assert "executed: ['quiet']" in done.stdout
    assert "'quite'" in done.stderr
