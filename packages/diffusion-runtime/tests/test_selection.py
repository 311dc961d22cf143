"""Diffusion platform selection with real distributions and injected probes (no GPU needed)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from diffusion_support import platform_dist

from cardcage.diffusion.runtime import platforms
from cardcage.diffusion.runtime.platforms import current
from cardcage.diffusion.runtime.platforms.accelerators import (
    MpsPlatform,
    MusaPlatform,
    NpuPlatform,
    XpuPlatform,
)
from cardcage.diffusion.runtime.platforms.cpu import CpuPlatform
from cardcage.diffusion.runtime.platforms.cuda import CudaPlatform, RocmPlatform
from cardcage.diffusion.runtime.platforms.probes import DiffusionProbes
from cardcage.diffusion.runtime.platforms.testing import use_probes
from cardcage.hooks.errors import DuplicatePluginError, PhaseFailedError
from cardcage.hooks.testing import on_sys_path
from cardcage.platforms.errors import (
    InvalidPlatformClassError,
    MultiplePlatformsError,
    PlatformActivationError,
    PlatformNotFoundError,
    PlatformUnavailableError,
    ReservedPlatformNameError,
    UnsupportedSelectorError,
)

OVERRIDE = "SGLANG_DIFFUSION_PLATFORM_OVERRIDE"


def _never() -> bool:
    raise AssertionError("probe must not run")


NO_PROBES = DiffusionProbes(*([_never] * 7))


@pytest.mark.parametrize(
    ("alias", "cls"),
    [
        ("cpu", CpuPlatform),
        ("cuda", CudaPlatform),
        ("rocm", RocmPlatform),
        ("mps", MpsPlatform),
        ("npu", NpuPlatform),
        ("musa", MusaPlatform),
    ],
)
def test_override_alias_selects_builtin_without_probing_or_loading(
    alias: str, cls: type, site: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    platform_dist(site, "vendor-a", "vendor_a", "dv_alias_a", activate="raise RuntimeError('x')")
    monkeypatch.setenv(OVERRIDE, alias)
    use_probes(NO_PROBES)
    with on_sys_path(site):
        assert type(platforms.get_current_platform()) is cls
        assert "dv_alias_a" not in sys.modules
        assert platforms.get_selected_platform_dist() is None


def test_override_by_entry_point_name_loads_only_that_one(
    site: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    platform_dist(site, "vendor-a", "vendor_a", "dv_name_a")
    platform_dist(site, "vendor-b", "vendor_b", "dv_name_b")
    monkeypatch.setenv(OVERRIDE, "vendor_a")
    use_probes(NO_PROBES)
    with on_sys_path(site):
        selected = platforms.get_current_platform()
        assert type(selected).__module__ == "dv_name_a"
        assert "dv_name_b" not in sys.modules
        assert platforms.get_selected_platform_dist() == "vendor-a"
        record = platforms.get_selection_record()
        assert record is not None
        assert record.mode == "explicit"


@pytest.mark.parametrize("alias", ["CPU", "Cpu"])
def test_override_alias_ignores_case(alias: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(OVERRIDE, alias)
    use_probes(NO_PROBES)
    assert type(platforms.get_current_platform()) is CpuPlatform
    record = platforms.get_selection_record()
    assert record is not None
    assert record.builtin == "cpu"


@pytest.mark.parametrize("value", ["xpu", "XPU"])
def test_xpu_override_is_rejected_as_automatic_only(
    value: str, site: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Even a plugin that calls itself "xpu" cannot be reached by the override: it is reserved.
    platform_dist(site, "vendor-a", "vendor_a", "dv_xpu_a")
    monkeypatch.setenv(OVERRIDE, value)
    use_probes(NO_PROBES)
    with on_sys_path(site), pytest.raises(UnsupportedSelectorError) as info:
        platforms.get_current_platform()
    assert isinstance(info.value, PlatformNotFoundError)  # still "that selector finds nothing"
    message = str(info.value)
    assert f"{OVERRIDE}={value!r} is not supported" in message
    assert "detected automatically only" in message
    assert f"Unset {OVERRIDE}" in message
    assert "dv_xpu_a" not in sys.modules


@pytest.mark.parametrize(
    ("selector", "activate", "error", "match"),
    [
        ("vendor_x", "", PlatformNotFoundError, "Did you mean 'vendor_a'"),
        ("vendor_a", "return None", PlatformUnavailableError, "returned None"),
        ("vendor_a", "return 42", PlatformActivationError, "non-empty str"),
    ],
)
def test_explicit_selection_errors(
    selector: str,
    activate: str,
    error: type[Exception],
    match: str,
    site: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    platform_dist(site, "vendor-a", "vendor_a", "dv_err_a", activate=activate)
    monkeypatch.setenv(OVERRIDE, selector)
    with on_sys_path(site), pytest.raises(error, match=match):
        platforms.get_current_platform()
    # A failed selection is sticky and nothing was published.
    assert platforms.get_selection_record() is None
    with pytest.raises(PhaseFailedError):
        platforms.get_current_platform()


def test_automatic_single_activation_wins(site: Path) -> None:
    platform_dist(site, "vendor-a", "vendor_a", "dv_auto_a")
    platform_dist(site, "vendor-b", "vendor_b", "dv_auto_b", activate="return None")
    use_probes(NO_PROBES)
    with on_sys_path(site):
        assert type(platforms.get_current_platform()).__module__ == "dv_auto_a"
        assert platforms.get_selected_platform_dist() == "vendor-a"


def test_automatic_several_activations_fail(site: Path) -> None:
    platform_dist(site, "vendor-a", "vendor_a", "dv_many_a")
    platform_dist(site, "vendor-b", "vendor_b", "dv_many_b")
    with on_sys_path(site), pytest.raises(MultiplePlatformsError, match=OVERRIDE):
        platforms.get_current_platform()


def test_raising_activate_aborts_instead_of_falling_back(site: Path) -> None:
    platform_dist(site, "vendor-a", "vendor_a", "dv_raise_a", activate="raise OSError('no')")
    use_probes(NO_PROBES)
    with on_sys_path(site), pytest.raises(PlatformActivationError, match="OSError: no"):
        platforms.get_current_platform()


@pytest.mark.parametrize("selector", ["", "vendor_a"])
def test_duplicate_names_fail_before_any_import(
    selector: str, site: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    platform_dist(site, "vendor-a", "vendor_a", "dv_dup_a")
    platform_dist(site, "vendor-b", "vendor_a", "dv_dup_b")
    if selector:
        monkeypatch.setenv(OVERRIDE, selector)
    with on_sys_path(site):
        with pytest.raises(DuplicatePluginError):
            platforms.get_current_platform()
        assert "dv_dup_a" not in sys.modules
        assert "dv_dup_b" not in sys.modules


@pytest.mark.parametrize("name", ["xpu", "cuda", "cpu", "XPU", "Cuda"])
def test_reserved_names_fail_before_any_import(name: str, site: Path) -> None:
    platform_dist(site, "vendor-a", name, "dv_reserved")
    with on_sys_path(site):
        with pytest.raises(ReservedPlatformNameError, match=repr(name)):
            platforms.get_current_platform()
        assert "dv_reserved" not in sys.modules


@pytest.mark.parametrize(
    ("available", "expected", "called"),
    [
        ({"xpu"}, XpuPlatform, ["mps", "xpu"]),
        ({"cuda", "rocm"}, RocmPlatform, ["mps", "xpu", "rocm"]),
        ({"musa", "npu"}, NpuPlatform, ["mps", "xpu", "rocm", "cuda", "npu"]),
        ({"mps", "cuda"}, MpsPlatform, ["mps"]),
        (set(), CpuPlatform, ["mps", "xpu", "rocm", "cuda", "npu", "musa", "cpu"]),
    ],
)
def test_builtin_probe_order(available: set[str], expected: type, called: list[str]) -> None:
    calls: list[str] = []

    def probe(name: str) -> Callable[[], bool]:
        def run() -> bool:
            calls.append(name)
            return name in available or name == "cpu"

        return run

    use_probes(DiffusionProbes(*(probe(n) for n in DiffusionProbes.__match_args__)))
    assert type(platforms.get_current_platform()) is expected
    assert calls == called
    record = platforms.get_selection_record()
    assert record is not None
    assert record.mode == "automatic"


def test_external_plugin_must_be_oot(site: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    qualname = "cardcage.diffusion.runtime.platforms.cpu:CpuPlatform"
    platform_dist(site, "vendor-a", "vendor_a", "dv_notoot", activate=f"return {qualname!r}")
    monkeypatch.setenv(OVERRIDE, "vendor_a")
    with on_sys_path(site), pytest.raises(InvalidPlatformClassError, match=r"PlatformEnum\.OOT"):
        platforms.get_current_platform()
    assert platforms.get_selection_record() is None


def test_module_attribute_is_lazy_and_cached() -> None:
    no = lambda: False  # noqa: E731
    use_probes(DiffusionProbes(no, no, no, no, no, no, cpu=lambda: True))
    first = platforms.current_platform
    assert isinstance(first, CpuPlatform)
    assert platforms.current_platform is first


def test_package_import_is_torch_free() -> None:
    code = (
        "import sys, cardcage.diffusion.runtime.platforms as p\n"
        "from cardcage.diffusion.runtime.platforms import plugins\n"
        "p.Platform, p.PlatformEnum, p.initialize_current_platform\n"
        "import cardcage.diffusion.runtime.platforms.policy\n"
        "assert 'torch' not in sys.modules, 'torch imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


class _Counting(CpuPlatform):
    calls = 0
    fail = False

    def init_backend(self) -> None:
        type(self).calls += 1
        if self.fail:
            raise RuntimeError("backend broke")


def test_initialize_current_platform_runs_once() -> None:
    from cardcage.diffusion.runtime.platforms.testing import set_current_platform

    class Once(_Counting):
        calls = 0

    set_current_platform(Once())
    platforms.initialize_current_platform()
    platforms.initialize_current_platform()
    assert Once.calls == 1


def test_initialize_current_platform_failure_is_sticky() -> None:
    from cardcage.diffusion.runtime.platforms.testing import set_current_platform

    class Broken(_Counting):
        calls = 0
        fail = True

    set_current_platform(Broken())
    with pytest.raises(RuntimeError, match="backend broke"):
        platforms.initialize_current_platform()
    with pytest.raises(PhaseFailedError) as info:
        platforms.initialize_current_platform()
    assert isinstance(info.value.__cause__, RuntimeError)
    assert Broken.calls == 1


def test_a_failing_selection_makes_initialization_fail_for_good(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(OVERRIDE, "nothing_here")
    with pytest.raises(PlatformNotFoundError):
        platforms.initialize_current_platform()
    with pytest.raises(PhaseFailedError):
        platforms.initialize_current_platform()


def test_reset_state_is_module_level() -> None:
    assert current._state.platform is None
