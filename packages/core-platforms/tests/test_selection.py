"""The SRT selection chain end to end: ``select_platform(srt_policy(probes))`` over real dists.

Every platform plugin is a real distribution (``*.dist-info`` plus module files) written into a
temporary site by ``cardcage.hooks.testing.write_distribution`` and put on ``sys.path`` with
``on_sys_path``; nothing mocks entry points. Hardware probes are injected as ``HardwareProbes``
of plain lambdas, so every branch of the chain runs on any machine.

Covers DESIGN §2.2 and reference §9 P12-P20, §7 F/H/J (selection parts) and §11 E1-E9, with our
deliberate differences: activation errors abort in both modes, typos get a suggestion, names are
validated before anything is loaded, and the class is validated before it is published.
"""

from __future__ import annotations

import importlib
import json
import logging
import re
import sys
from contextlib import ExitStack
from typing import TYPE_CHECKING, Any

import pytest

from cardcage.hooks.errors import (
    CardcageError,
    DuplicatePluginError,
    InvalidEnvVarError,
    TargetsSGLangError,
)
from cardcage.hooks.snapshot import refresh
from cardcage.hooks.testing import on_sys_path, write_distribution
from cardcage.platforms import probes as probes_module
from cardcage.platforms.cpu import CpuSRTPlatform
from cardcage.platforms.cuda import CudaSRTPlatform
from cardcage.platforms.envs import ENV_VARS
from cardcage.platforms.errors import (
    InvalidActivateResultError,
    InvalidPlatformClassError,
    MultiplePlatformsError,
    PlatformActivationError,
    PlatformError,
    PlatformNotFoundError,
    PlatformReentrancyError,
    PlatformUnavailableError,
    ReservedPlatformNameError,
    SGLangPlatformActivationError,
    SGLangPlatformClassError,
    UnsupportedSelectorError,
)
from cardcage.platforms.interface import SRTPlatform
from cardcage.platforms.probes import HardwareProbes
from cardcage.platforms.rocm import RocmSRTPlatform
from cardcage.platforms.selection import SelectionRecord, select_platform
from cardcage.platforms.srt import srt_policy
from cardcage.platforms.xpu import XpuSRTPlatform

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path

PLATFORMS = "sglang.srt.platforms"
OWN_ENV = ("SGLANG_PLATFORM", "SGLANG_PLUGINS", "SGLANG_USE_CPU_ENGINE")

#: How error messages name the porting guide (a page title a wheel-only user can look up).
PORTING_GUIDE_NAMED = 'the porting guide: the page "Porting a plugin between SGLang and cardcage"'


def _never() -> bool:
    raise AssertionError("a built-in hardware probe was consulted")


NO_HARDWARE = HardwareProbes(
    cpu_engine_requested=lambda: False,
    cuda=lambda: False,
    rocm=lambda: False,
    xpu=lambda: False,
)
PROBES_FORBIDDEN = HardwareProbes(cpu_engine_requested=_never, cuda=_never, rocm=_never, xpu=_never)

OOT_CLASS = """
from cardcage.platforms.device_mixin import PlatformEnum
from cardcage.platforms.interface import SRTPlatform


class VendorPlatform(SRTPlatform):
    _enum = PlatformEnum.OOT
    device_name = "vendor"
    device_type = "vendor"
"""


def activating(returns: str = "'@MODULE@:VendorPlatform'", prelude: str = OOT_CLASS) -> str:
    """A platform module whose ``activate()`` counts its calls and returns ``returns``."""
    return (
        prelude
        + f"""

CALLS = []


def activate():
    CALLS.append(1)
    return {returns}
"""
    )


DECLINING = activating("None", prelude="")


def raising(exc: str) -> str:
    return f"""
def activate():
    raise {exc}
"""


class Site:
    """Real distributions in one temporary site, put on ``sys.path`` on first use."""

    def __init__(self, root: Path, stack: ExitStack) -> None:
        self.root = root
        self.root.mkdir()
        self._stack = stack
        self._installed = False

    def module_name(self, dist: str, ep: str) -> str:
        return "ccsel_" + re.sub(r"\W+", "_", f"{dist}_{ep}").lower()

    def platform(self, dist: str, ep: str, source: str, *, version: str = "1.0") -> str:
        """Distribution ``dist`` with one platform entry point ``ep = <module>:activate``."""
        module = self.module_name(dist, ep)
        self.add(
            dist,
            version=version,
            entry_points={PLATFORMS: {ep: f"{module}:activate"}},
            modules={module: source.replace("@MODULE@", module).replace("@EP@", ep)},
        )
        return module

    def oot(self, dist: str, ep: str, *, version: str = "1.0") -> str:
        """A platform plugin that activates a valid out-of-tree ``SRTPlatform``."""
        return self.platform(dist, ep, activating(), version=version)

    def add(
        self,
        dist: str,
        *,
        version: str = "1.0",
        entry_points: dict[str, dict[str, str]] | None = None,
        modules: dict[str, str] | None = None,
    ) -> None:
        write_distribution(
            self.root, dist, version=version, entry_points=entry_points, modules=modules
        )
        if self._installed:
            refresh()

    def module(self, name: str, source: str) -> None:
        (self.root / f"{name}.py").write_text(source, encoding="utf-8")

    def install(self) -> None:
        if not self._installed:
            self._stack.enter_context(on_sys_path(self.root))
            self._installed = True


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Site]:
    for variable in OWN_ENV:
        monkeypatch.delenv(variable, raising=False)
    with ExitStack() as stack:
        yield Site(tmp_path / "site", stack)


def select(site: Site, probes: HardwareProbes = NO_HARDWARE) -> tuple[Any, SelectionRecord]:
    site.install()
    return select_platform(srt_policy(probes))


def imported(module: str) -> bool:
    return module in sys.modules


def fail(site: Site, error: type[BaseException], probes: HardwareProbes = NO_HARDWARE) -> Any:
    """Run selection, expecting ``error``; return the exception."""
    with pytest.raises(error) as info:
        select(site, probes)
    return info.value


# -- explicit mode (SGLANG_PLATFORM = an entry-point name) ----------------------------------------


def test_explicit_selection_returns_the_named_plugins_platform(
    site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    alpha = site.oot("vendor-a", "alpha")
    site.oot("vendor-b", "beta")
    monkeypatch.setenv("SGLANG_PLATFORM", "alpha")

    platform, _ = select(site, PROBES_FORBIDDEN)

    assert (type(platform).__module__, type(platform).__qualname__) == (alpha, "VendorPlatform")
    assert platform.is_out_of_tree()


def test_explicit_selection_never_imports_another_platform_entry_point(
    site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    site.oot("vendor-a", "alpha")
    beta = site.oot("vendor-b", "beta")
    monkeypatch.setenv("SGLANG_PLATFORM", "alpha")

    select(site)

    assert not imported(beta)


def test_explicit_selection_calls_activate_exactly_once(
    site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    alpha = site.oot("vendor-a", "alpha")
    monkeypatch.setenv("SGLANG_PLATFORM", "alpha")

    select(site)

    assert sys.modules[alpha].CALLS == [1]


def test_explicit_selection_strips_surrounding_whitespace(
    site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    alpha = site.oot("vendor-a", "alpha")
    monkeypatch.setenv("SGLANG_PLATFORM", "  alpha ")

    platform, _ = select(site)

    assert type(platform).__module__ == alpha


def test_explicit_selection_ignores_the_allowlist(
    site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    site.oot("vendor-a", "alpha")
    beta = site.oot("vendor-b", "beta")
    monkeypatch.setenv("SGLANG_PLUGINS", "alpha")
    monkeypatch.setenv("SGLANG_PLATFORM", "beta")

    platform, _ = select(site)

    assert type(platform).__module__ == beta


def test_unknown_selector_raises_platform_not_found_error_as_a_runtime_error(
    site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    site.oot("vendor-a", "alpha")
    monkeypatch.setenv("SGLANG_PLATFORM", "gaudi")

    error = fail(site, PlatformNotFoundError)

    assert isinstance(error, RuntimeError)
    assert "SGLANG_PLATFORM='gaudi' not found" in str(error)


def test_not_found_lists_every_name_sorted_with_its_distribution(
    site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    site.oot("vendor-z", "zeta")
    site.oot("vendor-a", "alpha")
    monkeypatch.setenv("SGLANG_PLATFORM", "gaudi")

    error = fail(site, PlatformNotFoundError)

    assert (
        "(available: 'alpha' (vendor-a), 'cpu', 'cuda', 'rocm', 'xpu', 'zeta' (vendor-z))"
        in str(error)
    )


def test_not_found_suggests_a_close_plugin_name(
    site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    site.oot("vendor-a", "alpha")
    monkeypatch.setenv("SGLANG_PLATFORM", "alpah")

    error = fail(site, PlatformNotFoundError)

    assert "Did you mean 'alpha'?" in str(error)


def test_not_found_suggests_a_close_builtin_alias(
    site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SGLANG_PLATFORM", "cdua")

    error = fail(site, PlatformNotFoundError)

    assert "Did you mean 'cuda'?" in str(error)


def test_not_found_makes_no_suggestion_when_nothing_is_close(
    site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    site.oot("vendor-a", "alpha")
    monkeypatch.setenv("SGLANG_PLATFORM", "zzzzzz")

    error = fail(site, PlatformNotFoundError)

    assert "Did you mean" not in str(error)


def test_not_found_carries_the_selector_and_the_available_names(
    site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    site.oot("vendor-a", "alpha")
    monkeypatch.setenv("SGLANG_PLATFORM", "gaudi")

    error = fail(site, PlatformNotFoundError)

    assert (error.selected, error.group) == ("gaudi", PLATFORMS)
    assert ("alpha", "vendor-a") in error.available


def test_not_found_imports_no_platform_module(site: Site, monkeypatch: pytest.MonkeyPatch) -> None:
    alpha = site.oot("vendor-a", "alpha")
    monkeypatch.setenv("SGLANG_PLATFORM", "gaudi")

    fail(site, PlatformNotFoundError)

    assert not imported(alpha)


def test_explicit_activate_returning_none_raises_platform_unavailable_error(
    site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    site.platform("vendor-a", "alpha", DECLINING)
    monkeypatch.setenv("SGLANG_PLATFORM", "alpha")

    error = fail(site, PlatformUnavailableError)

    assert isinstance(error, RuntimeError)
    assert "returned None" in str(error)
    assert (error.plugin, error.distribution) == ("alpha", "vendor-a")


@pytest.mark.parametrize("mode", ["explicit", "automatic"])
def test_activate_raising_aborts_with_platform_activation_error_chained_from_the_original(
    site: Site, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    site.platform("vendor-a", "alpha", raising("OSError('driver exploded')"))
    if mode == "explicit":
        monkeypatch.setenv("SGLANG_PLATFORM", "alpha")

    error = fail(site, PlatformActivationError, PROBES_FORBIDDEN)

    assert isinstance(error, RuntimeError)
    assert isinstance(error.__cause__, OSError)
    assert str(error.__cause__) == "driver exploded"


@pytest.mark.parametrize("mode", ["explicit", "automatic"])
def test_activation_error_names_the_plugin_and_its_distribution(
    site: Site, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    site.platform("vendor-a", "alpha", raising("OSError('driver exploded')"))
    if mode == "explicit":
        monkeypatch.setenv("SGLANG_PLATFORM", "alpha")

    error = fail(site, PlatformActivationError)

    assert "'alpha'" in str(error)
    assert "vendor-a" in str(error)
    assert "driver exploded" in str(error)
    assert (error.plugin, error.distribution, error.group) == ("alpha", "vendor-a", PLATFORMS)


def test_automatic_activation_error_aborts_even_when_another_plugin_activates(
    site: Site,
) -> None:
    site.platform("vendor-a", "alpha", raising("RuntimeError('no device')"))
    site.oot("vendor-b", "beta")

    error = fail(site, PlatformActivationError, PROBES_FORBIDDEN)

    assert error.plugin == "alpha"


@pytest.mark.parametrize("mode", ["explicit", "automatic"])
def test_plugin_module_failing_to_import_raises_platform_activation_error(
    site: Site, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    site.platform("vendor-a", "alpha", "raise ImportError('libvendor.so missing')\n")
    if mode == "explicit":
        monkeypatch.setenv("SGLANG_PLATFORM", "alpha")

    error = fail(site, PlatformActivationError)

    assert isinstance(error.__cause__, ImportError)
    assert "libvendor.so missing" in str(error)


@pytest.mark.parametrize(
    "returns",
    ["42", "''", "'   '", "b'mod:Cls'", "VendorPlatform", "['@MODULE@:VendorPlatform']"],
    ids=["int", "empty", "blank", "bytes", "class-object", "list"],
)
def test_activate_returning_anything_but_a_non_empty_string_or_none_is_an_activation_error(
    site: Site, returns: str
) -> None:
    site.platform("vendor-a", "alpha", activating(returns))

    error = fail(site, PlatformActivationError, PROBES_FORBIDDEN)

    assert "non-empty str" in str(error)
    assert (error.plugin, error.distribution) == ("alpha", "vendor-a")


def test_explicit_activate_returning_a_non_string_is_an_activation_error(
    site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    site.platform("vendor-a", "alpha", activating("True"))
    monkeypatch.setenv("SGLANG_PLATFORM", "alpha")

    fail(site, PlatformActivationError)


def test_platform_constructor_raising_is_an_activation_error_chained_from_it(site: Site) -> None:
    broken = OOT_CLASS + (
        "\n\nclass BrokenPlatform(VendorPlatform):\n"
        "    def __init__(self):\n"
        "        raise RuntimeError('no context')\n"
    )
    site.platform("vendor-a", "alpha", activating("'@MODULE@:BrokenPlatform'", prelude=broken))

    error = fail(site, PlatformActivationError)

    assert isinstance(error.__cause__, RuntimeError)
    assert "no context" in str(error)
    assert error.plugin == "alpha"


# -- explicit mode with a built-in alias -----------------------------------------------------------


def test_cpu_alias_selects_the_cpu_platform_without_probing(
    site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SGLANG_PLATFORM", "cpu")

    platform, _ = select(site, PROBES_FORBIDDEN)

    assert type(platform) is CpuSRTPlatform


@pytest.mark.parametrize("selector", ["CPU", "Cpu"])
def test_builtin_alias_ignores_case(
    site: Site, monkeypatch: pytest.MonkeyPatch, selector: str
) -> None:
    monkeypatch.setenv("SGLANG_PLATFORM", selector)

    platform, record = select(site, PROBES_FORBIDDEN)

    assert type(platform) is CpuSRTPlatform
    assert record.builtin == "cpu"


def test_builtin_alias_loads_no_platform_plugin(
    site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    alpha = site.oot("vendor-a", "alpha")
    monkeypatch.setenv("SGLANG_PLATFORM", "cpu")

    select(site)

    assert not imported(alpha)


@pytest.mark.parametrize(
    ("alias", "cls"),
    [("cuda", CudaSRTPlatform), ("rocm", RocmSRTPlatform), ("xpu", XpuSRTPlatform)],
)
def test_accelerator_alias_selects_its_builtin_when_the_probe_matches(
    site: Site, monkeypatch: pytest.MonkeyPatch, alias: str, cls: type[SRTPlatform]
) -> None:
    monkeypatch.setenv("SGLANG_PLATFORM", alias)
    probes = HardwareProbes(
        cpu_engine_requested=_never,
        cuda=lambda: alias == "cuda",
        rocm=lambda: alias == "rocm",
        xpu=lambda: alias == "xpu",
    )

    platform, _ = select(site, probes)

    assert type(platform) is cls


@pytest.mark.parametrize("alias", ["cuda", "rocm", "xpu"])
def test_accelerator_alias_without_its_hardware_raises_platform_unavailable_error(
    site: Site, monkeypatch: pytest.MonkeyPatch, alias: str
) -> None:
    monkeypatch.setenv("SGLANG_PLATFORM", alias)

    error = fail(site, PlatformUnavailableError, NO_HARDWARE)

    assert isinstance(error, RuntimeError)
    assert f"SGLANG_PLATFORM={alias!r} selects an in-tree platform" in str(error)


def test_cuda_alias_does_not_fall_back_to_another_builtin(
    site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SGLANG_PLATFORM", "cuda")
    probes = HardwareProbes(
        cpu_engine_requested=lambda: True, cuda=lambda: False, rocm=lambda: True, xpu=lambda: True
    )

    fail(site, PlatformUnavailableError, probes)


# -- automatic mode --------------------------------------------------------------------------------


def test_automatic_selects_the_only_plugin_that_activates_without_probing_builtins(
    site: Site,
) -> None:
    alpha = site.oot("vendor-a", "alpha")

    platform, _ = select(site, PROBES_FORBIDDEN)

    assert type(platform).__module__ == alpha


def test_automatic_skips_plugins_whose_activate_returns_none(site: Site) -> None:
    site.platform("vendor-a", "alpha", DECLINING)
    beta = site.oot("vendor-b", "beta")

    platform, _ = select(site, PROBES_FORBIDDEN)

    assert type(platform).__module__ == beta


def test_automatic_activates_every_platform_plugin(site: Site) -> None:
    alpha = site.platform("vendor-a", "alpha", DECLINING)
    beta = site.oot("vendor-b", "beta")

    select(site)

    assert (sys.modules[alpha].CALLS, sys.modules[beta].CALLS) == ([1], [1])


def test_two_activated_plugins_raise_multiple_platforms_error(site: Site) -> None:
    site.oot("vendor-a", "alpha")
    site.oot("vendor-b", "beta")

    error = fail(site, MultiplePlatformsError, PROBES_FORBIDDEN)

    assert isinstance(error, RuntimeError)
    assert str(error).startswith("Multiple platform plugins activated")


def test_multiple_platforms_error_names_each_plugin_its_distribution_and_the_selector(
    site: Site,
) -> None:
    site.oot("vendor-b", "beta")
    site.oot("vendor-a", "alpha")

    error = fail(site, MultiplePlatformsError)

    assert "'alpha' (vendor-a), 'beta' (vendor-b)" in str(error)
    assert "Set SGLANG_PLATFORM" in str(error)
    assert error.candidates == (("alpha", "vendor-a"), ("beta", "vendor-b"))


def test_automatic_activates_in_distribution_then_entry_point_order(site: Site) -> None:
    site.module("ccsel_journal", "EVENTS = []\n")
    journaled = (
        "import ccsel_journal\n\n\ndef activate():\n    ccsel_journal.EVENTS.append('@EP@')\n"
    )
    site.platform("vendor-c", "aaa", journaled)
    site.platform("vendor-a", "zzz", journaled)
    site.add(
        "vendor-b",
        entry_points={PLATFORMS: {"b2": "ccsel_b:activate2", "b1": "ccsel_b:activate1"}},
        modules={
            "ccsel_b": journaled.replace("def activate()", "def activate1()").replace("@EP@", "b1")
            + "\n\ndef activate2():\n    ccsel_journal.EVENTS.append('b2')\n"
        },
    )

    select(site)

    assert sys.modules["ccsel_journal"].EVENTS == ["zzz", "b1", "b2", "aaa"]


def test_allowlist_filters_automatic_platform_discovery(
    site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    alpha = site.oot("vendor-a", "alpha")
    beta = site.oot("vendor-b", "beta")
    monkeypatch.setenv("SGLANG_PLUGINS", "beta, some-general-plugin")

    platform, _ = select(site, PROBES_FORBIDDEN)

    assert type(platform).__module__ == beta
    assert not imported(alpha)


def test_allowlist_naming_nothing_skips_every_platform_plugin(
    site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    alpha = site.oot("vendor-a", "alpha")
    monkeypatch.setenv("SGLANG_PLUGINS", ",")

    platform, _ = select(site)

    assert type(platform) is SRTPlatform
    assert not imported(alpha)


@pytest.mark.parametrize(
    ("cpu", "cuda", "rocm", "xpu", "expected"),
    [
        (True, True, True, True, CpuSRTPlatform),
        (False, True, True, True, CudaSRTPlatform),
        (False, False, True, True, RocmSRTPlatform),
        (False, False, False, True, XpuSRTPlatform),
        (False, False, False, False, SRTPlatform),
    ],
    ids=["cpu-opt-in-first", "then-cuda", "then-rocm", "then-xpu", "else-base"],
)
def test_without_activated_plugins_the_first_matching_builtin_wins(
    site: Site, cpu: bool, cuda: bool, rocm: bool, xpu: bool, expected: type[SRTPlatform]
) -> None:
    site.platform("vendor-a", "alpha", DECLINING)
    probes = HardwareProbes(
        cpu_engine_requested=lambda: cpu, cuda=lambda: cuda, rocm=lambda: rocm, xpu=lambda: xpu
    )

    platform, _ = select(site, probes)

    assert type(platform) is expected


def test_builtin_probes_run_in_chain_order(site: Site) -> None:
    calls: list[str] = []

    def probe(name: str) -> Callable[[], bool]:
        def run() -> bool:
            calls.append(name)
            return False

        return run

    select(
        site,
        HardwareProbes(
            cpu_engine_requested=probe("cpu"),
            cuda=probe("cuda"),
            rocm=probe("rocm"),
            xpu=probe("xpu"),
        ),
    )

    assert calls == ["cpu", "cuda", "rocm", "xpu"]


def test_builtin_chain_stops_at_the_first_matching_probe(site: Site) -> None:
    probes = HardwareProbes(
        cpu_engine_requested=lambda: False, cuda=lambda: True, rocm=_never, xpu=_never
    )

    platform, _ = select(site, probes)

    assert type(platform) is CudaSRTPlatform


def test_base_fallback_is_not_out_of_tree(site: Site) -> None:
    platform, _ = select(site)

    assert platform.is_out_of_tree() is False


def test_fallback_with_no_platform_plugins_installed_is_the_base_platform(site: Site) -> None:
    platform, _ = select(site)

    assert type(platform) is SRTPlatform


# -- SGLANG_USE_CPU_ENGINE (the real probe, strict boolean) ---------------------------------------


ACCELERATORS_ABSENT = HardwareProbes(cuda=lambda: False, rocm=lambda: False, xpu=lambda: False)


@pytest.mark.parametrize("value", ["1", "true", "TRUE", " 1 "])
def test_cpu_engine_opt_in_selects_the_cpu_platform_on_x86(
    site: Site, monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setattr(probes_module._platform, "machine", lambda: "x86_64")
    monkeypatch.setenv("SGLANG_USE_CPU_ENGINE", value)

    platform, _ = select(site, ACCELERATORS_ABSENT)

    assert type(platform) is CpuSRTPlatform


@pytest.mark.parametrize("value", ["0", "false", "False"])
def test_cpu_engine_explicitly_off_leaves_the_chain_to_the_base_platform(
    site: Site, monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setattr(probes_module._platform, "machine", lambda: "x86_64")
    monkeypatch.setenv("SGLANG_USE_CPU_ENGINE", value)

    platform, _ = select(site, ACCELERATORS_ABSENT)

    assert type(platform) is SRTPlatform


def test_cpu_engine_opt_in_is_ignored_on_an_unsupported_architecture(
    site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(probes_module._platform, "machine", lambda: "riscv64")
    monkeypatch.setenv("SGLANG_USE_CPU_ENGINE", "1")

    platform, _ = select(site, ACCELERATORS_ABSENT)

    assert type(platform) is SRTPlatform


@pytest.mark.parametrize("value", ["yes", "2", "on", ""])
def test_cpu_engine_value_outside_the_strict_booleans_raises_invalid_env_var_error(
    site: Site, monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv("SGLANG_USE_CPU_ENGINE", value)

    error = fail(site, InvalidEnvVarError, ACCELERATORS_ABSENT)

    assert isinstance(error, ValueError)
    assert error.variable == "SGLANG_USE_CPU_ENGINE"
    assert f"SGLANG_USE_CPU_ENGINE={value!r}" in str(error)


def test_cpu_engine_variable_is_declared_as_a_boolean_defaulting_to_false() -> None:
    variable = ENV_VARS["SGLANG_USE_CPU_ENGINE"]

    assert (ENV_VARS.distribution, variable.kind, variable.default) == (
        "cardcage-core-platforms",
        "boolean",
        False,
    )


# -- validation before anything is loaded or published ---------------------------------------------


@pytest.mark.parametrize("selector", [None, "alpha", "beta"])
def test_duplicate_entry_point_names_raise_before_any_import(
    site: Site, monkeypatch: pytest.MonkeyPatch, selector: str | None
) -> None:
    first = site.platform("vendor-a", "alpha", activating())
    second = site.platform("vendor-b", "alpha", activating())
    site.oot("vendor-c", "beta")
    if selector is not None:
        monkeypatch.setenv("SGLANG_PLATFORM", selector)

    error = fail(site, DuplicatePluginError)

    assert isinstance(error, RuntimeError)
    assert "'alpha'" in str(error)
    assert {"vendor-a", "vendor-b"} <= set(error.distributions)
    assert not any(imported(m) for m in (first, second, site.module_name("vendor-c", "beta")))


@pytest.mark.parametrize("alias", ["cpu", "cuda", "rocm", "xpu"])
def test_platform_entry_point_named_like_a_builtin_raises_reserved_platform_name_error(
    site: Site, alias: str
) -> None:
    module = site.oot("vendor-a", alias)

    error = fail(site, ReservedPlatformNameError, PROBES_FORBIDDEN)

    assert isinstance(error, RuntimeError)
    assert (error.plugin, error.distribution) == (alias, "vendor-a")
    assert f"built-in name {alias!r}" in str(error)
    assert not imported(module)


@pytest.mark.parametrize("name", ["CPU", "Cuda"])
def test_reserved_names_ignore_case(site: Site, name: str) -> None:
    module = site.oot("vendor-a", name)

    error = fail(site, ReservedPlatformNameError, PROBES_FORBIDDEN)

    assert (error.plugin, error.distribution) == (name, "vendor-a")
    assert not imported(module)


def test_reserved_name_is_rejected_even_when_selecting_that_builtin(
    site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    site.oot("vendor-a", "cuda")
    monkeypatch.setenv("SGLANG_PLATFORM", "cuda")

    fail(site, ReservedPlatformNameError, PROBES_FORBIDDEN)


NOT_A_PLATFORM = """
class Plain:
    pass


def factory():
    return None


NAME = "just a string"
"""


@pytest.mark.parametrize(
    "qualname",
    ["builtins.dict", "builtins.str", "@MODULE@:Plain", "@MODULE@:factory", "@MODULE@:NAME"],
    ids=["dict", "str", "plain-class", "function", "string-constant"],
)
def test_activate_naming_something_other_than_an_srt_platform_subclass_is_rejected(
    site: Site, qualname: str
) -> None:
    site.platform("vendor-a", "alpha", activating(repr(qualname), prelude=NOT_A_PLATFORM))

    error = fail(site, InvalidPlatformClassError)

    assert isinstance(error, TypeError)
    assert "Expected a SRTPlatform subclass" in str(error)
    assert (error.plugin, error.distribution) == ("alpha", "vendor-a")


@pytest.mark.parametrize(
    ("body", "complaint"),
    [
        ("    device_name = 'v'\n    device_type = 'v'\n", "_enum = PlatformEnum.OOT"),
        (
            "    _enum = PlatformEnum.CUDA\n    device_name = 'v'\n    device_type = 'v'\n",
            "_enum = PlatformEnum.OOT",
        ),
        ("    _enum = PlatformEnum.OOT\n    device_type = 'v'\n", "non-empty device_name"),
        (
            "    _enum = PlatformEnum.OOT\n    device_name = 'unknown'\n    device_type = 'v'\n",
            "non-empty device_name",
        ),
        (
            "    _enum = PlatformEnum.OOT\n    device_name = 'v'\n    device_type = ''\n",
            "non-empty device_type",
        ),
        ("    _enum = PlatformEnum.OOT\n    device_name = 'v'\n", "non-empty device_type"),
    ],
    ids=[
        "enum-unspecified",
        "enum-cuda",
        "name-inherited",
        "name-unknown",
        "type-empty",
        "type-inherited",
    ],
)
def test_external_platform_class_must_declare_an_oot_identity(
    site: Site, body: str, complaint: str
) -> None:
    prelude = (
        "from cardcage.platforms.device_mixin import PlatformEnum\n"
        "from cardcage.platforms.interface import SRTPlatform\n\n\n"
        "class VendorPlatform(SRTPlatform):\n" + body
    )
    site.platform("vendor-a", "alpha", activating(prelude=prelude))

    error = fail(site, InvalidPlatformClassError)

    assert complaint in str(error)
    assert (error.plugin, error.distribution) == ("alpha", "vendor-a")


LAYERED = """
from cardcage.platforms.device_mixin import DeviceMixin, PlatformEnum
from cardcage.platforms.interface import SRTPlatform


class VendorDeviceMixin(DeviceMixin):
    _enum = PlatformEnum.OOT
    device_name = "vendor"
    device_type = "vendor"


class VendorPlatform(@BASES@):
    pass
"""


@pytest.mark.parametrize(
    "bases", ["SRTPlatform, VendorDeviceMixin", "VendorDeviceMixin, SRTPlatform"]
)
def test_identity_declared_on_the_vendors_device_mixin_is_accepted_in_either_base_order(
    site: Site, bases: str
) -> None:
    site.platform("vendor-a", "alpha", activating(prelude=LAYERED.replace("@BASES@", bases)))

    platform, _ = select(site, PROBES_FORBIDDEN)

    assert (platform.is_out_of_tree(), platform.device_name, platform.device_type) == (
        True,
        "vendor",
        "vendor",
    )


def test_a_builtin_class_returned_by_a_plugin_is_rejected_as_not_oot(site: Site) -> None:
    site.platform(
        "vendor-a", "alpha", activating("'cardcage.platforms.cuda:CudaSRTPlatform'", prelude="")
    )

    error = fail(site, InvalidPlatformClassError)

    assert "_enum = PlatformEnum.OOT" in str(error)


@pytest.mark.parametrize(
    "qualname",
    ["ccsel_vendor.platform.VendorPlatform", "ccsel_vendor.platform:VendorPlatform"],
    ids=["dotted", "colon"],
)
def test_both_qualname_forms_resolve_the_platform_class(site: Site, qualname: str) -> None:
    site.add(
        "vendor-a",
        entry_points={PLATFORMS: {"alpha": "ccsel_vendor.activation:activate"}},
        modules={
            "ccsel_vendor.platform": OOT_CLASS,
            "ccsel_vendor.activation": f"def activate():\n    return {qualname!r}\n",
        },
    )

    platform, record = select(site, PROBES_FORBIDDEN)

    assert type(platform).__module__ == "ccsel_vendor.platform"
    assert record.qualname == "ccsel_vendor.platform.VendorPlatform"


def test_activate_does_not_import_the_platform_class_module_itself(site: Site) -> None:
    # The engine imports the class module only after activate(); a cheap activate stays cheap.
    site.add(
        "vendor-a",
        entry_points={PLATFORMS: {"alpha": "ccsel_vendor.activation:activate"}},
        modules={
            "ccsel_vendor.platform": OOT_CLASS,
            "ccsel_vendor.activation": (
                "import sys\n\nSEEN = []\n\n\ndef activate():\n"
                "    SEEN.append('ccsel_vendor.platform' in sys.modules)\n"
                "    return 'ccsel_vendor.platform:VendorPlatform'\n"
            ),
        },
    )

    select(site)

    assert sys.modules["ccsel_vendor.activation"].SEEN == [False]


@pytest.mark.parametrize(
    ("returns", "cause"),
    [
        ("'ccsel_missing_module:Platform'", ModuleNotFoundError),
        ("'@MODULE@:DoesNotExist'", AttributeError),
    ],
    ids=["missing-module", "missing-attribute"],
)
def test_unimportable_qualname_is_an_invalid_class_error_chained_from_the_import_failure(
    site: Site, returns: str, cause: type[BaseException]
) -> None:
    site.platform("vendor-a", "alpha", activating(returns))

    error = fail(site, InvalidPlatformClassError)

    assert isinstance(error.__cause__, cause)
    assert (error.plugin, error.distribution) == ("alpha", "vendor-a")


# -- dotted qualnames: the module part is imported first, and its failure is the cause -------------


def _vendor_package(site: Site, platform_module: str, returns: str) -> None:
    """``ccsel_vendor``: an activation module returning ``returns``, and ``ccsel_vendor.platform``
    with ``platform_module`` as its source."""
    site.add(
        "vendor-a",
        entry_points={PLATFORMS: {"alpha": "ccsel_vendor.activation:activate"}},
        modules={
            "ccsel_vendor.platform": platform_module,
            "ccsel_vendor.activation": f"def activate():\n    return {returns!r}\n",
        },
    )


QUALNAMES = pytest.mark.parametrize(
    "qualname",
    ["ccsel_vendor.platform.VendorPlatform", "ccsel_vendor.platform:VendorPlatform"],
    ids=["dotted", "colon"],
)


@QUALNAMES
def test_a_class_module_that_fails_to_import_is_the_cause_in_either_qualname_form(
    site: Site, qualname: str
) -> None:
    _vendor_package(
        site, "raise ImportError('libvendor.so: cannot open shared object')\n", qualname
    )

    error = fail(site, InvalidPlatformClassError)

    # pkgutil.resolve_name reports the dotted form as "module 'ccsel_vendor' has no attribute
    # 'platform'", hiding this.
    assert type(error.__cause__) is ImportError
    assert "libvendor.so: cannot open shared object" in str(error)
    assert "has no attribute" not in str(error)
    assert (error.plugin, error.distribution) == ("alpha", "vendor-a")


@QUALNAMES
def test_a_missing_dependency_of_the_class_module_is_the_cause_in_either_form(
    site: Site, qualname: str
) -> None:
    _vendor_package(site, "import ccsel_no_such_dependency\n" + OOT_CLASS, qualname)

    error = fail(site, InvalidPlatformClassError)

    assert isinstance(error.__cause__, ModuleNotFoundError)
    assert error.__cause__.name == "ccsel_no_such_dependency"
    assert "No module named 'ccsel_no_such_dependency'" in str(error)


def test_a_dotted_qualname_walks_attributes_below_the_longest_importable_module(
    site: Site,
) -> None:
    nested = OOT_CLASS.replace("class VendorPlatform", "class Holder:\n  class VendorPlatform")
    nested = nested.replace("\n    _enum", "\n      _enum").replace(
        "\n    device", "\n      device"
    )
    _vendor_package(site, nested, "ccsel_vendor.platform.Holder.VendorPlatform")

    platform, record = select(site, PROBES_FORBIDDEN)

    assert type(platform).__qualname__ == "Holder.VendorPlatform"
    assert record.qualname == "ccsel_vendor.platform.Holder.VendorPlatform"


@pytest.mark.parametrize(
    "qualname",
    ["ccsel_vendor.platform.DoesNotExist", "ccsel_vendor.nomodule.VendorPlatform"],
    ids=["missing-class", "missing-submodule"],
)
def test_a_dotted_qualname_naming_nothing_is_still_a_missing_attribute(
    site: Site, qualname: str
) -> None:
    _vendor_package(site, OOT_CLASS, qualname)

    error = fail(site, InvalidPlatformClassError)

    assert isinstance(error.__cause__, AttributeError)


# -- plugins written for SGLang's own runtime (SGLang is not installed here) ----------------------

#: Really imports SGLang, which the test environment does not have: nothing stands in for it.
SGLANG_NATIVE_CLASS = """
from sglang.srt.platforms.device_mixin import PlatformEnum
from sglang.srt.platforms.interface import SRTPlatform


class VendorPlatform(SRTPlatform):
    _enum = PlatformEnum.OOT
    device_name = "vendor"
    device_type = "vendor"
"""


def test_sglang_is_not_installed_in_this_environment() -> None:
    # Every test below relies on `import sglang` failing for real.
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("sglang")


def _assert_targets_sglang(error: Exception, step: str) -> None:
    message = str(error)
    assert "'alpha' (vendor-a) targets SGLang's runtime" in message
    assert step in message
    assert "No module named 'sglang'" in message
    assert "SGLang is not installed in this environment" in message
    assert "install SGLang (pip install sglang) and start SGLang's own runtime" in message
    assert (
        "port it to cardcage's API (the porting guide: the page \"Porting a plugin between SGLang "
        in message
    )
    assert "select another platform with SGLANG_PLATFORM, or uninstall vendor-a" in message
    assert isinstance(error, TargetsSGLangError)
    assert error.sglang_module == "sglang"
    assert error.problem
    assert error.fix
    assert message == f"{error.problem} {error.fix}"
    assert isinstance(error.__cause__, ModuleNotFoundError)
    assert error.__cause__.name == "sglang"


@pytest.mark.parametrize("mode", ["explicit", "automatic"])
@QUALNAMES
def test_a_platform_class_that_imports_missing_sglang_targets_sglangs_runtime(
    site: Site, monkeypatch: pytest.MonkeyPatch, mode: str, qualname: str
) -> None:
    _vendor_package(site, SGLANG_NATIVE_CLASS, qualname)
    if mode == "explicit":
        monkeypatch.setenv("SGLANG_PLATFORM", "alpha")

    error = fail(site, SGLangPlatformClassError, PROBES_FORBIDDEN)

    assert isinstance(error, InvalidPlatformClassError)
    assert isinstance(error, TypeError)
    assert (error.plugin, error.distribution, error.group) == ("alpha", "vendor-a", PLATFORMS)
    _assert_targets_sglang(error, "importing the class its activate() named (ccsel_vendor.platform")


@pytest.mark.parametrize("mode", ["explicit", "automatic"])
def test_a_platform_entry_point_that_imports_missing_sglang_targets_sglangs_runtime(
    site: Site, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    module = site.platform("vendor-a", "alpha", SGLANG_NATIVE_CLASS + DECLINING)
    if mode == "explicit":
        monkeypatch.setenv("SGLANG_PLATFORM", "alpha")

    error = fail(site, SGLangPlatformActivationError, PROBES_FORBIDDEN)

    assert isinstance(error, PlatformActivationError)
    assert isinstance(error, RuntimeError)
    _assert_targets_sglang(error, f"importing it ({module}:activate)")


def test_an_activate_that_imports_missing_sglang_targets_sglangs_runtime(site: Site) -> None:
    site.platform("vendor-a", "alpha", activating("__import__('sglang') and None", prelude=""))

    error = fail(site, SGLangPlatformActivationError, PROBES_FORBIDDEN)

    _assert_targets_sglang(error, "its activate() needs sglang")


def test_a_missing_module_that_only_looks_like_sglang_is_an_ordinary_failure(site: Site) -> None:
    _vendor_package(site, "import sglangish\n" + OOT_CLASS, "ccsel_vendor.platform.VendorPlatform")

    error = fail(site, InvalidPlatformClassError)

    assert not isinstance(error, TargetsSGLangError)
    assert "No module named 'sglangish'" in str(error)


def test_importing_an_entry_point_and_calling_activate_fail_with_different_messages(
    site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = site.platform("vendor-a", "alpha", "raise ImportError('libvendor.so missing')\n")
    monkeypatch.setenv("SGLANG_PLATFORM", "alpha")
    imported = fail(site, PlatformActivationError)
    assert f"could not be imported ({module}:activate): ImportError: libvendor.so" in str(imported)

    site.platform("vendor-b", "beta", raising("RuntimeError('no device')"))
    monkeypatch.setenv("SGLANG_PLATFORM", "beta")
    activated = fail(site, PlatformActivationError)
    assert "failed to activate: RuntimeError: no device" in str(activated)
    assert not isinstance(activated, TargetsSGLangError)


def test_a_users_bad_variable_reads_as_one_sentence_in_the_activation_error(
    site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 35: a plugin's ``InvalidEnvVarError`` ends with a period, and the activation error
    goes on after it; the user read "unset ACME_NPU_PRESENT.. Startup stops here"."""
    site.platform(
        "vendor-a",
        "alpha",
        raising(
            "__import__('cardcage.hooks.errors').hooks.errors.InvalidEnvVarError("
            "'ACME_NPU_PRESENT', 'yes', 'one of 0, 1, true, false')"
        ),
    )
    monkeypatch.setenv("SGLANG_PLATFORM", "alpha")

    message = str(fail(site, PlatformActivationError))

    assert "Fix the value or unset ACME_NPU_PRESENT. Startup stops here" in message
    assert ".." not in message


#: A platform class whose base carries the identity of SGLang's own ``SRTPlatform`` (its module
#: name). No ``sglang`` module is created: ``import sglang`` still fails in this process. With
#: SGLang installed, the same rule sees the real class (tests_integration/sglang).
SGLANG_IDENTITY_CLASS = """
class SRTPlatform:
    pass


SRTPlatform.__module__ = "sglang.srt.platforms.interface"


class VendorPlatform(SRTPlatform):
    device_name = "vendor"
    device_type = "cpu"
"""


def test_an_sglang_native_platform_class_is_rejected_naming_sglang_and_the_porting_guide(
    site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    _vendor_package(site, SGLANG_IDENTITY_CLASS, "ccsel_vendor.platform.VendorPlatform")
    monkeypatch.setenv("SGLANG_PLATFORM", "alpha")

    error = fail(site, SGLangPlatformClassError, PROBES_FORBIDDEN)

    message = str(error)
    assert isinstance(error, InvalidPlatformClassError)
    assert "'alpha' (vendor-a) targets SGLang's runtime" in message
    assert "a subclass of sglang.srt.platforms.interface.SRTPlatform" in message
    assert "cardcage.platforms.interface.SRTPlatform and does not adapt SGLang's own" in message
    assert "start SGLang's own runtime" in message
    assert "pip install sglang" not in message  # its class resolved: SGLang is there
    assert PORTING_GUIDE_NAMED in message
    assert error.sglang_module == "sglang.srt.platforms.interface"
    assert (error.plugin, error.distribution) == ("alpha", "vendor-a")
    assert "sglang" not in sys.modules


# -- the selection record --------------------------------------------------------------------------


def test_explicit_record_names_mode_selector_and_reason(
    site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    site.oot("vendor-a", "alpha", version="2.3.4")
    monkeypatch.setenv("SGLANG_PLATFORM", "alpha")

    _, record = select(site)

    assert (record.runtime, record.mode, record.selector_env, record.selector) == (
        "srt",
        "explicit",
        "SGLANG_PLATFORM",
        "alpha",
    )
    assert "SGLANG_PLATFORM='alpha'" in record.reason


def test_record_names_the_selected_plugin_its_distribution_version_and_class(
    site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    alpha = site.oot("vendor-a", "alpha", version="2.3.4")
    monkeypatch.setenv("SGLANG_PLATFORM", "alpha")

    _, record = select(site)

    assert (
        record.plugin_name,
        record.dist_name,
        record.dist_version,
        record.qualname,
        record.builtin,
    ) == ("alpha", "vendor-a", "2.3.4", f"{alpha}.VendorPlatform", None)


def test_explicit_record_lists_unloaded_candidates_with_their_versions(
    site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    alpha = site.oot("vendor-a", "alpha", version="2.3.4")
    site.oot("vendor-b", "beta", version="0.9")
    monkeypatch.setenv("SGLANG_PLATFORM", "alpha")

    _, record = select(site)

    summary = {
        c.name: (c.kind, c.outcome, c.dist_name, c.dist_version, c.value) for c in record.candidates
    }
    assert summary == {
        "alpha": ("entry-point", "selected", "vendor-a", "2.3.4", f"{alpha}:activate"),
        "beta": (
            "entry-point",
            "not-loaded",
            "vendor-b",
            "0.9",
            f"{site.module_name('vendor-b', 'beta')}:activate",
        ),
    }


def test_automatic_record_gives_each_candidate_its_outcome(
    site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    site.oot("vendor-a", "alpha")
    site.platform("vendor-b", "beta", DECLINING)
    site.oot("vendor-c", "gamma")
    monkeypatch.setenv("SGLANG_PLUGINS", "alpha,beta")

    _, record = select(site)

    assert record.mode == "automatic"
    assert record.selector == ""
    assert {c.name: c.outcome for c in record.candidates} == {
        "alpha": "selected",
        "beta": "declined",
        "gamma": "not-allowed",
    }
    assert "only one that activated" in record.reason


def test_record_of_a_detected_builtin_lists_the_probes_that_did_not_match(site: Site) -> None:
    probes = HardwareProbes(
        cpu_engine_requested=lambda: False, cuda=lambda: False, rocm=lambda: True, xpu=_never
    )

    _, record = select(site, probes)

    assert [(c.name, c.kind, c.outcome) for c in record.candidates] == [
        ("cpu", "built-in", "unavailable"),
        ("cuda", "built-in", "unavailable"),
        ("rocm", "built-in", "selected"),
    ]
    assert (record.builtin, record.plugin_name, record.dist_name) == ("rocm", None, None)
    assert record.qualname == "cardcage.platforms.rocm.RocmSRTPlatform"


def test_record_of_the_base_fallback_explains_that_nothing_matched(site: Site) -> None:
    _, record = select(site)

    assert record.qualname == "cardcage.platforms.interface.SRTPlatform"
    assert record.builtin is None
    assert "no platform plugin activated" in record.reason
    assert [c.outcome for c in record.candidates] == ["unavailable"] * 4


def test_record_of_a_builtin_alias_marks_plugins_not_loaded(
    site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    site.oot("vendor-a", "alpha")
    monkeypatch.setenv("SGLANG_PLATFORM", "cpu")

    _, record = select(site)

    assert record.builtin == "cpu"
    assert [(c.name, c.outcome) for c in record.candidates] == [
        ("alpha", "not-loaded"),
        ("cpu", "selected"),
    ]


def test_record_as_dict_is_json_serialisable_and_names_the_platform(
    site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    alpha = site.oot("vendor-a", "alpha", version="2.3.4")
    monkeypatch.setenv("SGLANG_PLATFORM", "alpha")

    _, record = select(site)
    document = json.loads(json.dumps(record.as_dict()))

    assert (document["platform"], document["plugin"], document["distribution"]) == (
        f"{alpha}.VendorPlatform",
        "alpha",
        "vendor-a",
    )
    assert document["candidates"][0]["outcome"] == "selected"


def test_selection_logs_one_info_line_naming_platform_plugin_and_distribution(
    site: Site, caplog: pytest.LogCaptureFixture
) -> None:
    alpha = site.oot("vendor-a", "alpha", version="2.3.4")

    with caplog.at_level(logging.INFO, logger="cardcage.platforms.selection"):
        select(site)

    lines = [
        r.getMessage()
        for r in caplog.records
        if r.name == "cardcage.platforms.selection" and r.levelno == logging.INFO
    ]
    assert len(lines) == 1
    assert f"{alpha}.VendorPlatform" in lines[0]
    assert "alpha" in lines[0]
    assert "vendor-a 2.3.4" in lines[0]


def test_multiple_platforms_error_carries_the_record_of_what_was_seen(site: Site) -> None:
    site.oot("vendor-a", "alpha")
    site.oot("vendor-b", "beta")

    error = fail(site, MultiplePlatformsError)

    record = error.selection_record
    assert isinstance(record, SelectionRecord)
    assert (record.mode, [(c.name, c.outcome) for c in record.candidates]) == (
        "automatic",
        [("alpha", "activated"), ("beta", "activated")],
    )


def test_unavailable_error_carries_the_record_with_the_declined_candidate(
    site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    site.platform("vendor-a", "alpha", DECLINING)
    monkeypatch.setenv("SGLANG_PLATFORM", "alpha")

    error = fail(site, PlatformUnavailableError)

    record = error.selection_record
    assert isinstance(record, SelectionRecord)
    assert [(c.name, c.outcome) for c in record.candidates] == [("alpha", "declined")]


# -- the error hierarchy ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("error", "builtin"),
    [
        (PlatformNotFoundError, RuntimeError),
        (PlatformNotFoundError, ValueError),
        (UnsupportedSelectorError, ValueError),
        (InvalidActivateResultError, PlatformActivationError),
        (InvalidActivateResultError, TypeError),
        (PlatformUnavailableError, RuntimeError),
        (PlatformActivationError, RuntimeError),
        (MultiplePlatformsError, RuntimeError),
        (ReservedPlatformNameError, RuntimeError),
        (PlatformReentrancyError, RuntimeError),
        (InvalidPlatformClassError, TypeError),
        (SGLangPlatformClassError, InvalidPlatformClassError),
        (SGLangPlatformClassError, TypeError),
        (SGLangPlatformClassError, TargetsSGLangError),
        (SGLangPlatformActivationError, PlatformActivationError),
        (SGLangPlatformActivationError, RuntimeError),
        (SGLangPlatformActivationError, TargetsSGLangError),
    ],
)
def test_each_selection_error_is_a_platform_error_and_the_builtin_sglang_raises(
    error: type[Exception], builtin: type[Exception]
) -> None:
    assert issubclass(error, PlatformError)
    assert issubclass(error, CardcageError)
    assert issubclass(error, builtin)
