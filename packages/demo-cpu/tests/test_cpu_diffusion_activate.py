"""The diffusion ``activate()``: the SRT half's opt-in, with the diffusion selector; no torch.

These tests need neither torch nor the diffusion runtime: the entry point is loaded on machines
that have neither, so it must work (and stay cheap) there.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

import cardcage_demo_cpu
from cardcage.hooks.errors import InvalidEnvVarError
from cardcage_demo_cpu.diffusion import ENTRY_POINT_NAME, PLATFORM_QUALNAME, activate

OVERRIDE = "SGLANG_DIFFUSION_PLATFORM_OVERRIDE"


def test_activate_declines_when_nothing_asks_for_it() -> None:
    assert activate() is None


@pytest.mark.parametrize("value", ["1", "true", " True "])
def test_activate_returns_the_diffusion_platform_when_opted_in(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv("CARDCAGE_DEMO_CPU", value)
    assert activate() == PLATFORM_QUALNAME


@pytest.mark.parametrize("value", [ENTRY_POINT_NAME, f" {ENTRY_POINT_NAME} "])
def test_naming_demo_cpu_in_the_diffusion_override_counts_as_asking(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv(OVERRIDE, value)
    assert activate() == PLATFORM_QUALNAME


def test_the_override_matches_the_entry_point_name_case_sensitively(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The runtime matches entry-point names exactly; a name it would not select must not opt in.
    monkeypatch.setenv(OVERRIDE, ENTRY_POINT_NAME.upper())
    assert activate() is None


def test_an_explicit_opt_out_wins_over_the_override(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(OVERRIDE, ENTRY_POINT_NAME)
    monkeypatch.setenv("CARDCAGE_DEMO_CPU", "0")
    assert activate() is None


@pytest.mark.parametrize("other", ["cpu", "cuda", "demo_cuda"])
def test_overriding_to_another_platform_does_not_activate_demo_cpu(
    monkeypatch: pytest.MonkeyPatch, other: str
) -> None:
    monkeypatch.setenv(OVERRIDE, other)
    assert activate() is None


def test_the_srt_selector_does_not_select_the_diffusion_platform(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SGLANG_PLATFORM", ENTRY_POINT_NAME)
    assert activate() is None
    assert cardcage_demo_cpu.activate() == cardcage_demo_cpu.PLATFORM_QUALNAME


@given(
    st.text(max_size=8).filter(
        lambda s: "\x00" not in s and s.strip().lower() not in {"0", "1", "true", "false"}
    )
)
def test_a_malformed_opt_in_is_an_error_naming_the_variable(value: str) -> None:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("CARDCAGE_DEMO_CPU", value)
        with pytest.raises(InvalidEnvVarError, match="CARDCAGE_DEMO_CPU"):
            activate()


def test_the_diffusion_and_srt_halves_name_different_classes() -> None:
    module, _, cls = PLATFORM_QUALNAME.partition(":")
    assert module == "cardcage_demo_cpu.diffusion.platform"
    assert cls.isidentifier()
    assert PLATFORM_QUALNAME != cardcage_demo_cpu.PLATFORM_QUALNAME


def test_importing_and_activating_imports_no_torch_runtime_or_platform() -> None:
    code = (
        "import json, sys; import cardcage_demo_cpu.diffusion as d; q = d.activate(); "
        "print(json.dumps([q, sorted(m for m in sys.modules if m.split('.')[0] in "
        "('torch', 'numpy', 'sglang') or m.startswith(('cardcage.diffusion', 'cardcage.platforms', "
        "'cardcage_demo_cpu.')))]))"
    )
    env = {**os.environ, OVERRIDE: ENTRY_POINT_NAME}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    ).stdout
    qualname, imported = json.loads(out)
    assert qualname == PLATFORM_QUALNAME
    # The host check (cardcage.platforms.host, with the rooms' index) is the only platform-side
    # code it may import
    # (a set: a renamed copy of this template sorts its own modules elsewhere).
    assert set(imported) == {
        "cardcage.platforms",
        "cardcage.platforms.host",
        "cardcage.platforms.hosts",  # the rooms' index; no host's room
        "cardcage_demo_cpu.diffusion",
        "cardcage_demo_cpu.envs",
    }


def test_the_hook_plugin_module_imports_without_the_diffusion_runtime() -> None:
    """``cardcage doctor`` imports every plugin module, also where the runtime is absent."""
    code = (
        "import json, sys; import cardcage_demo_cpu.diffusion.hooks; "
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] == 'torch' "
        "or m.startswith('cardcage.diffusion'))))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert json.loads(out) == []


def test_cardcage_doctor_accepts_the_installed_package() -> None:
    """Both halves pass the doctor's checks, with or without the diffusion runtime installed."""
    env = {**os.environ, "CARDCAGE_DEMO_CPU": "1"}
    run = subprocess.run(
        [sys.executable, "-m", "cardcage.platforms.cli", "doctor", "--strict"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 0, run.stdout + run.stderr
