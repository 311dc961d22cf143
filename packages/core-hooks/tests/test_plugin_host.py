"""Which host runs a plugin: what ``cardcage.hooks.host`` tells a plugin and the registry.

SGLang is not installed where these tests run, so they check cardcage's side of the contract:
inside cardcage's loader the host is cardcage, outside any loader there is none, and a process
that never imported SGLang keeps every hook in cardcage's registry. The SGLang side (its loader
running a cardcage-built plugin, hooks handed to its registry) is proven against SGLang's own
code by the ``scenario-sglang`` nox session.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import TYPE_CHECKING

import pytest

from cardcage.hooks._targets import parse_target
from cardcage.hooks.host import Host, plugin_host, sglang_plugin_source
from cardcage.hooks.loader import LoadedPlugin, execute_plugin_callbacks
from cardcage.hooks.registry import HookRegistry, HookType

if TYPE_CHECKING:
    from cardcage.hooks.registry import BaseHookRegistry

pytest_plugins = ["dist_support"]


def test_no_host_runs_plugin_code_outside_a_loader() -> None:
    assert plugin_host() is None


def test_cardcage_is_the_host_inside_its_loader(
    plugin_registry: type[BaseHookRegistry],
) -> None:
    seen: list[Host | None] = []

    execute_plugin_callbacks(
        {"spy": LoadedPlugin(lambda: seen.append(plugin_host()), "spy-dist")}, plugin_registry
    )

    assert seen == [Host.CARDCAGE]
    assert plugin_host() is None


def test_sglang_is_never_the_host_in_a_process_that_did_not_import_it() -> None:
    assert "sglang" not in sys.modules
    assert sglang_plugin_source() is None


def test_without_sglang_a_registration_stays_in_cardcage_registry() -> None:
    target = "cardcage_host_test_module.function"
    with HookRegistry.sandbox():
        HookRegistry.register(target, lambda *a, **k: None, HookType.BEFORE)

        assert [r.hook_type for r in HookRegistry.registrations()[target]] == [HookType.BEFORE]


def test_the_registry_names_sglang_counterpart_only_for_the_srt_registry(
    plugin_registry: type[BaseHookRegistry],
) -> None:
    # A registry of another runtime (an embedder's) has no SGLang counterpart: nothing is handed on.
    assert HookRegistry.host_registries == {
        "sglang": "sglang.srt.plugins.hook_registry:HookRegistry"
    }
    assert not plugin_registry.host_registries


def test_importing_the_host_module_imports_neither_sglang_nor_the_registry_nor_a_room() -> None:
    # The rooms' index (cardcage.hooks.hosts) and the value types (cardcage.hooks._model, which
    # holds cardcage's plugin-source variable) come along; no host's room does.
    code = (
        "import json, sys; import cardcage.hooks.host as h; h.plugin_host(); "
        "print(json.dumps(sorted(m for m in sys.modules "
        "if m.startswith(('sglang', 'cardcage.hooks.')))))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout

    assert json.loads(out) == [
        "cardcage.hooks._model",
        "cardcage.hooks.host",
        "cardcage.hooks.hosts",
    ]


@pytest.mark.parametrize(
    ("target", "dotted"),
    [
        ("pkg.mod.Cls.method", "pkg.mod.Cls.method"),
        ("pkg.mod:Cls.method", "pkg.mod.Cls.method"),
        ("pkg.mod:function", "pkg.mod.function"),
    ],
)
def test_a_target_has_the_dotted_spelling_sglang_resolves(target: str, dotted: str) -> None:
    assert parse_target(target).dotted == dotted
