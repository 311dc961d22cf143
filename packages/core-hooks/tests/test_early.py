"""Early patches (``cardcage.hooks.early``): hooks, values, stand-ins armed before the host imports.

In-process tests write real distributions with ``cardcage.early_patches`` entry points
(``dist_support``) and call ``early.run()``, which is what the ``.pth`` line's ``boot()`` does at
interpreter start; the last tests start real interpreters to check the ``.pth`` line itself.
"""

from __future__ import annotations

import importlib
import logging
import os
import site
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from cardcage.hooks import early, load_plugins
from cardcage.hooks.early import EARLY_PATCHES_GROUP
from cardcage.hooks.envs import CARDCAGE_EARLY_PATCHES, parse_names
from cardcage.hooks.errors import (
    DuplicatePluginError,
    EarlyPatchError,
    InvalidEnvVarError,
    InvalidTargetError,
    PluginLoadError,
)

if TYPE_CHECKING:
    from collections.abc import Iterator

    from dist_support import DistFactory

pytest_plugins = ["dist_support"]

PTH = "zz_cardcage_early_patches.pth"


@pytest.fixture(autouse=True)
def clean_early(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv(CARDCAGE_EARLY_PATCHES.name, raising=False)
    early.reset()
    yield
    early.reset()


def early_dist(
    dists: DistFactory,
    name: str,
    body: str,
    *,
    dist: str = "acme-early",
    platforms: dict[str, str | None] | None = None,
) -> str:
    """A distribution with one early patch ``name`` whose module is ``body``; returns it."""
    module = dists.module_name(f"{dist}_{name}")
    dists.add(
        dist,
        platforms=platforms,
        entry_points={EARLY_PATCHES_GROUP: {name: f"{module}:register"}},
        modules={module: body},
    )
    return module


def plugin_statuses(*names: str) -> dict[str, str]:
    """The report's status of the named early-patch entry points (others may be installed)."""
    return {p.name: p.status for p in early.report().plugins if p.name in names}


def rows(kind: str | None = None) -> dict[str, early.EarlyPatch]:
    return {p.target: p for p in early.report().patches if kind is None or p.kind == kind}


# -- the variable ----------------------------------------------------------------------------


def test_names_parse_in_order_without_repeats() -> None:
    assert parse_names("X", " b, a ,,b ") == ("b", "a")
    assert parse_names("X", "") == ()
    assert parse_names("X", ",") == ()


@pytest.mark.parametrize("raw", ["a b", "a;b", "a=b", "ä/"])
def test_a_name_that_is_no_entry_point_name_is_an_error_naming_the_variable(raw: str) -> None:
    with pytest.raises(InvalidEnvVarError) as caught:
        parse_names(CARDCAGE_EARLY_PATCHES.name, raw)
    assert "CARDCAGE_EARLY_PATCHES" in str(caught.value)


# -- values and hooks, right after their module executes ---------------------------------------


def test_a_value_is_set_before_importers_copy_it(dists: DistFactory) -> None:
    host = dists.module("host_config", "IS_CPU = True\n")
    user = dists.module(
        "host_user", f"from {host} import IS_CPU\nDEVICE = 'cpu' if IS_CPU else 'x'\n"
    )
    early_dist(
        dists,
        "acme",
        f"from cardcage.hooks import early\n\ndef register():\n"
        f"    early.set_value('{host}:IS_CPU', False)\n",
    )
    early.run(["acme"])
    assert rows()[f"{host}:IS_CPU"].status == "pending"
    module = importlib.import_module(user)
    assert (module.IS_CPU, module.DEVICE) == (False, "x")
    patch = rows()[f"{host}:IS_CPU"]
    assert (patch.status, patch.plugin, patch.dist_name) == ("applied", "acme", "acme-early")
    early.unapply()
    assert sys.modules[host].IS_CPU is True


def test_compute_receives_the_value_the_module_computed(dists: DistFactory) -> None:
    host = dists.module("host_limits", "LIMIT = 8\n")
    early.set_value(f"{host}:LIMIT", compute=lambda old: old * 2)
    assert importlib.import_module(host).LIMIT == 16


def test_a_hook_reaches_a_decorator_argument_evaluated_at_import(dists: DistFactory) -> None:
    utils = dists.module("host_utils", "def backend():\n    return 'inductor'\n")
    user = dists.module(
        "host_topk",
        f"from {utils} import backend\n\n"
        "def compile_with(name):\n    return lambda fn: (setattr(fn, 'backend', name), fn)[1]\n\n"
        "@compile_with(backend())\ndef topk():\n    pass\n",
    )
    early.hook(f"{utils}:backend", lambda *a, **k: "vendor", early.HookType.REPLACE)
    assert importlib.import_module(user).topk.backend == "vendor"
    early.unapply()
    assert sys.modules[utils].backend() == "inductor"


def test_an_early_hook_needs_a_colon_target() -> None:
    with pytest.raises(InvalidTargetError, match="colon"):
        early.hook("pkg.mod.func", print)
    with pytest.raises(InvalidTargetError, match="colon"):
        early.set_value("pkg.mod.VALUE", 1)
    with pytest.raises(TypeError, match="exactly one"):
        early.set_value("pkg.mod:VALUE")


def test_a_missing_attribute_fails_alone_and_is_recorded(dists: DistFactory) -> None:
    host = dists.module("host_typo", "REAL = 1\n")
    early.set_value(f"{host}:TYPO", 2)
    early.set_value(f"{host}:REAL", 3)
    assert importlib.import_module(host).REAL == 3
    (failure,) = early.failures()
    assert failure.step == f"setting {host}:TYPO"
    assert rows()[f"{host}:TYPO"].status == "failed"


# -- stand-ins ---------------------------------------------------------------------------------


def test_a_stand_in_is_provided_only_when_the_module_is_missing(dists: DistFactory) -> None:
    missing = dists.module_name("missing_accel")
    real = dists.module("real_accel", "NAME = 'real'\n")
    early.stand_in(missing, lambda m: setattr(m, "NAME", "stand-in"))
    early.stand_in(f"{missing}.ops", lambda m: setattr(m, "gemm", len))
    early.stand_in(real, lambda m: setattr(m, "NAME", "never"))
    assert importlib.import_module(missing).NAME == "stand-in"
    assert importlib.import_module(f"{missing}.ops").gemm is len
    assert importlib.import_module(real).NAME == "real"
    statuses = {t: p.status for t, p in rows("stand-in").items()}
    assert statuses == {missing: "provided", f"{missing}.ops": "provided", real: "real-module"}
    early.unapply()
    assert missing not in sys.modules
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module(missing)


def test_a_stand_in_whose_fill_fails_reads_as_the_missing_module(dists: DistFactory) -> None:
    missing = dists.module_name("missing_lib")

    def fill(module: Any) -> None:
        raise RuntimeError("fill exploded")

    early.stand_in(missing, fill)
    with pytest.raises(ModuleNotFoundError, match="fill exploded"):
        importlib.import_module(missing)
    assert rows()[missing].status == "failed"
    assert early.failures()[0].step == f"filling the stand-in for {missing}"


# -- entry points and the failure policy ---------------------------------------------------------


def test_a_failing_callback_arms_nothing_and_the_others_go_on(
    dists: DistFactory, caplog: pytest.LogCaptureFixture
) -> None:
    host = dists.module("host_iso", "A = 1\nB = 1\n")
    early_dist(
        dists,
        "bad",
        f"from cardcage.hooks import early\n\ndef register():\n"
        f"    early.set_value('{host}:A', 'bad')\n"
        f"    early.hook('{host}:f', print)\n"
        "    raise RuntimeError('bad early patch')\n",
        dist="bad-dist",
    )
    early_dist(
        dists,
        "good",
        f"from cardcage.hooks import early\n\ndef register():\n"
        f"    early.set_value('{host}:B', 'good')\n",
        dist="good-dist",
    )
    with caplog.at_level(logging.ERROR, logger="cardcage.hooks.early"):
        early.run(["bad", "good"])
    module = importlib.import_module(host)
    assert (module.A, module.B) == (1, "good")
    assert set(rows()) == {f"{host}:B"}
    assert plugin_statuses("bad", "good") == {"bad": "failed-register", "good": "executed"}
    assert any("'bad' (distribution bad-dist)" in r.getMessage() for r in caplog.records)


def test_a_name_that_matches_nothing_is_warned_about_with_a_suggestion(
    dists: DistFactory, caplog: pytest.LogCaptureFixture
) -> None:
    early_dist(dists, "acme_fix", "def register():\n    pass\n")
    with caplog.at_level(logging.WARNING, logger="cardcage.hooks.early"):
        early.run(["acme_fxi"])
    assert any("Did you mean 'acme_fix'?" in r.getMessage() for r in caplog.records)
    assert plugin_statuses("acme_fxi") == {"acme_fxi": "not-found"}


def test_an_installed_early_patch_that_is_not_named_is_never_imported(dists: DistFactory) -> None:
    module = early_dist(dists, "quiet", "raise AssertionError('imported')\n")
    early.run([])
    assert module not in sys.modules
    assert plugin_statuses("quiet") == {"quiet": "not-requested"}


def test_a_name_two_distributions_provide_runs_neither(dists: DistFactory) -> None:
    first = early_dist(dists, "twin", "def register():\n    pass\n", dist="one")
    early_dist(dists, "twin", "def register():\n    pass\n", dist="two")
    early.run(["twin"])
    assert first not in sys.modules
    with pytest.raises(DuplicatePluginError):
        early.check_selected_platform(None, "")


def test_the_selected_platforms_failure_is_fatal_once_known(dists: DistFactory) -> None:
    early_dist(
        dists, "vendor", "def register():\n    raise RuntimeError('no driver')\n", dist="acme-npu"
    )
    early.run(["vendor"])
    early.check_selected_platform("other-npu", "'other' selected by X")  # not fatal
    with pytest.raises(EarlyPatchError) as caught:
        early.check_selected_platform("Acme_NPU", "'acme' selected by X")
    error = caught.value
    assert isinstance(error, PluginLoadError)
    assert (error.plugin, error.distribution, error.group) == (
        "vendor",
        "acme-npu",
        EARLY_PATCHES_GROUP,
    )
    assert "no driver" in str(error)
    assert "'acme' selected by X" in str(error)


def test_after_the_selection_a_failure_fails_the_import_that_reveals_it(
    dists: DistFactory,
) -> None:
    host = dists.module("host_late", "VALUE = 1\n")
    early_dist(
        dists,
        "vendor",
        f"from cardcage.hooks import early\n\ndef register():\n"
        f"    early.set_value('{host}:MISSING', 1)\n",
        dist="acme-npu",
    )
    early.run(["vendor"])
    early.check_selected_platform("acme-npu", "'acme' selected by X")
    with pytest.raises(EarlyPatchError, match="MISSING"):
        importlib.import_module(host)


def test_load_plugins_applies_the_policy_with_the_selected_platform(dists: DistFactory) -> None:
    early_dist(
        dists,
        "vendor",
        "def register():\n    raise RuntimeError('no driver')\n",
        dist="acme-npu",
        platforms={"acme": None},
    )
    early.run(["vendor"])
    dists.select("acme")
    with pytest.raises(EarlyPatchError, match="no driver"):
        load_plugins(dists.profile, dists.registry)


# -- the .pth line, in real interpreters --------------------------------------------------------


def _installed_pth() -> Path:
    for folder in site.getsitepackages():
        candidate = Path(folder) / PTH
        if candidate.exists():
            return candidate
    pytest.skip(f"{PTH} is not in site-packages (run through nox: the wheel installs it)")


def _python(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("CARDCAGE_")}
    environ.update(env)
    return subprocess.run(
        [sys.executable, "-c", code], env=environ, capture_output=True, text=True, check=False
    )


LOADED = "import sys; print(sorted(m for m in sys.modules if m.startswith('cardcage')))"


def test_the_pth_line_is_one_gate_on_the_variable() -> None:
    lines = [line for line in _installed_pth().read_text().splitlines() if not line.startswith("#")]
    assert len(lines) == 1
    assert lines[0].startswith('import os; os.environ.get("CARDCAGE_EARLY_PATCHES"')


@pytest.mark.parametrize("value", [None, "", "  "])
def test_unset_or_blank_the_pth_line_imports_nothing(value: str | None) -> None:
    _installed_pth()
    env = {} if value is None else {CARDCAGE_EARLY_PATCHES.name: value}
    done = _python(LOADED, **env)
    assert (done.stdout.strip(), done.stderr) == ("[]", "")


def test_set_the_pth_line_runs_boot_and_reports_problems_on_stderr() -> None:
    _installed_pth()
    done = _python(LOADED, CARDCAGE_EARLY_PATCHES="no_such_early_patch")
    assert "'cardcage.hooks.early'" in done.stdout
    assert "no_such_early_patch" in done.stderr
    invalid = _python("pass", CARDCAGE_EARLY_PATCHES="a b")
    assert invalid.returncode == 0
    assert "CARDCAGE_EARLY_PATCHES='a b' is not valid" in invalid.stderr
