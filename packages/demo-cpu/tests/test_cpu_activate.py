"""``activate()``: opt-in, honest, cheap, and free of torch."""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

import cardcage_demo_cpu
from cardcage.hooks.errors import InvalidEnvVarError
from cardcage_demo_cpu import ENTRY_POINT_NAME, PLATFORM_QUALNAME, activate

RESERVED = {"cpu", "cuda", "rocm", "xpu"}


def test_activate_declines_when_nothing_asks_for_it() -> None:
    assert activate() is None


@pytest.mark.parametrize("value", ["1", "true", "TRUE", " True "])
def test_activate_returns_the_platform_when_opted_in(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv("CARDCAGE_DEMO_CPU", value)
    assert activate() == PLATFORM_QUALNAME


@pytest.mark.parametrize("value", ["0", "false", "False"])
def test_activate_declines_when_opted_out(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("CARDCAGE_DEMO_CPU", value)
    assert activate() is None


def test_selecting_demo_cpu_by_name_counts_as_asking(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SGLANG_PLATFORM", ENTRY_POINT_NAME)
    assert activate() == PLATFORM_QUALNAME


def test_an_explicit_opt_out_wins_over_selection_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SGLANG_PLATFORM", ENTRY_POINT_NAME)
    monkeypatch.setenv("CARDCAGE_DEMO_CPU", "0")
    assert activate() is None


def test_selecting_another_platform_does_not_activate_demo_cpu(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SGLANG_PLATFORM", "demo_cuda")
    assert activate() is None


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


def test_activate_returns_a_str_naming_a_module_of_this_package() -> None:
    module, _, cls = PLATFORM_QUALNAME.partition(":")
    assert module.startswith(f"{cardcage_demo_cpu.__name__}.")
    assert cls.isidentifier()


def test_entry_points_use_the_documented_names_and_no_reserved_alias() -> None:
    eps = importlib.metadata.distribution("cardcage-demo-cpu").entry_points
    found = {(ep.group, ep.name): ep.value for ep in eps}
    assert found == {
        ("sglang.srt.platforms", ENTRY_POINT_NAME): "cardcage_demo_cpu:activate",
        ("sglang.srt.plugins", ENTRY_POINT_NAME): "cardcage_demo_cpu.hooks:register",
        (
            "sglang.multimodal_gen.platforms",
            ENTRY_POINT_NAME,
        ): "cardcage_demo_cpu.diffusion:activate",
        ("sglang.multimodal_gen.plugins", ENTRY_POINT_NAME): (
            "cardcage_demo_cpu.diffusion.hooks:register"
        ),
        # The vLLM section: the same activate() and register(), in vLLM's groups.
        ("vllm.platform_plugins", ENTRY_POINT_NAME): "cardcage_demo_cpu:activate",
        ("vllm.general_plugins", ENTRY_POINT_NAME): "cardcage_demo_cpu.hooks:register",
        # Its variables, for `cardcage env` and `cardcage doctor`.
        ("cardcage.env_registries", ENTRY_POINT_NAME): "cardcage_demo_cpu.envs:ENV_VARS",
    }
    assert ENTRY_POINT_NAME not in RESERVED


def test_importing_and_activating_imports_neither_torch_nor_the_platform() -> None:
    code = (
        "import json, sys; import cardcage_demo_cpu as p; q = p.activate(); "
        "print(json.dumps([q, sorted(m for m in sys.modules if m.split('.')[0] in "
        "('torch', 'numpy', 'sglang') or "
        "m.startswith(('cardcage.platforms', 'cardcage_demo_cpu.')))]))"
    )
    env = {**os.environ, "CARDCAGE_DEMO_CPU": "1"}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    ).stdout
    qualname, imported = json.loads(out)
    assert qualname == PLATFORM_QUALNAME
    # The host check (cardcage.platforms.host, and its stdlib-only table of hosts,
    # cardcage.platforms.hosts) is the only platform-side code it may import; no host's room
    # (cardcage.platforms.hosts.sglang) without that host. A set: a renamed copy of this
    # template sorts its own modules elsewhere.
    assert set(imported) == {
        "cardcage.platforms",
        "cardcage.platforms.host",
        "cardcage.platforms.hosts",
        "cardcage_demo_cpu.envs",
    }
