"""vLLM's room: hooks registered under vLLM's general-plugin loader are attributed and applied.

vLLM is not installed where these tests run. They put a stand-in ``vllm.plugins`` in
``sys.modules`` with the two loader functions in vLLM 0.33's shape (``load_plugins_by_group``
imports each entry point as ``plugin``; ``load_general_plugins`` calls each loaded ``func``), so
the room's frame detection, its apply-at-once and the failure policy of ``general_plugin`` are
checked here; the ``scenario-vllm`` nox session proves the same against vLLM's own code.
"""

from __future__ import annotations

import logging
import sys
import types
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from cardcage.hooks.host import Host, general_plugin, plugin_host
from cardcage.hooks.registry import HookRegistry, HookSource, HookType


def _stand_in_loader() -> types.ModuleType:
    module = types.ModuleType("vllm.plugins")

    def load_plugins_by_group(group: str, loaders: dict[str, Callable[[], Any]]) -> dict[str, Any]:
        plugins = {}
        for plugin in (
            types.SimpleNamespace(name=n, dist=None, load=f) for n, f in loaders.items()
        ):
            plugins[plugin.name] = plugin.load()
        return plugins

    def load_general_plugins(loaders: dict[str, Callable[[], Any]]) -> None:
        plugins = load_plugins_by_group("vllm.general_plugins", loaders)
        for func in plugins.values():
            func()

    module.load_plugins_by_group = load_plugins_by_group  # type: ignore[attr-defined]
    module.load_general_plugins = load_general_plugins  # type: ignore[attr-defined]
    return module


@pytest.fixture
def vllm_loader(monkeypatch: pytest.MonkeyPatch) -> Iterator[types.ModuleType]:
    loader = _stand_in_loader()
    monkeypatch.setitem(sys.modules, "vllm.plugins", loader)
    target = types.ModuleType("cc_vllm_room_target")
    target.answer = lambda: 1  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "cc_vllm_room_target", target)
    with HookRegistry.sandbox():
        yield loader
        HookRegistry.unapply()


def _add_one(result: int) -> int:
    return result + 1


def test_vllm_is_the_host_inside_its_loader_and_a_hook_applies_at_once(
    vllm_loader: types.ModuleType,
) -> None:
    seen: list[Host | None] = []

    def register() -> None:
        seen.append(plugin_host())
        HookRegistry.register("cc_vllm_room_target.answer", _add_one, HookType.AFTER)

    vllm_loader.load_general_plugins({"cc_plugin": lambda: register})

    assert seen == [Host.VLLM]
    (record,) = HookRegistry.registrations()["cc_vllm_room_target.answer"]
    assert record.source == HookSource("cc_plugin", None)
    assert sys.modules["cc_vllm_room_target"].answer() == 2  # no apply() was called


def test_a_hook_registered_while_vllm_imports_the_plugin_is_attributed_too(
    vllm_loader: types.ModuleType,
) -> None:
    def import_plugin() -> Callable[[], None]:
        HookRegistry.register("cc_vllm_room_target.answer", _add_one, HookType.AFTER)
        return lambda: None

    vllm_loader.load_general_plugins({"cc_import_time": import_plugin})

    (record,) = HookRegistry.registrations()["cc_vllm_room_target.answer"]
    assert record.source == HookSource("cc_import_time", None)
    assert sys.modules["cc_vllm_room_target"].answer() == 2


def test_a_target_in_a_module_not_yet_imported_is_patched_on_its_first_import(
    vllm_loader: types.ModuleType, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "cc_vllm_room_later.py").write_text("def answer():\n    return 10\n")
    monkeypatch.syspath_prepend(str(tmp_path))

    def register() -> None:
        HookRegistry.register("cc_vllm_room_later.answer", _add_one, HookType.AFTER)

    vllm_loader.load_general_plugins({"cc_plugin": lambda: register})
    assert "cc_vllm_room_later" not in sys.modules
    assert HookRegistry.pending_targets() == {"cc_vllm_room_later.answer": "cc_vllm_room_later"}

    import cc_vllm_room_later  # type: ignore[import-not-found]

    try:
        assert cc_vllm_room_later.answer() == 11
    finally:
        HookRegistry.unapply()
        sys.modules.pop("cc_vllm_room_later", None)


def test_a_raising_general_plugin_is_isolated_and_its_hooks_withdrawn(
    vllm_loader: types.ModuleType, caplog: pytest.LogCaptureFixture
) -> None:
    ran: list[str] = []

    @general_plugin
    def broken() -> None:
        HookRegistry.register("cc_vllm_room_target.answer", _add_one, HookType.AFTER)
        raise RuntimeError("boom")

    def later() -> None:
        ran.append("later")

    with caplog.at_level(logging.ERROR, logger="cardcage.hooks.hosts.vllm"):
        vllm_loader.load_general_plugins({"cc_broken": lambda: broken, "cc_later": lambda: later})

    assert ran == ["later"]  # vLLM's loop went on
    assert "cc_vllm_room_target.answer" not in HookRegistry.registrations()
    assert sys.modules["cc_vllm_room_target"].answer() == 1  # the patch was undone
    assert "plugin=cc_broken" in caplog.text
    assert "RuntimeError: boom" in caplog.text


def test_general_plugin_is_transparent_outside_vllm() -> None:
    @general_plugin
    def broken() -> None:
        raise RuntimeError("boom")

    assert broken.__name__ == "broken"
    with pytest.raises(RuntimeError, match="boom"):
        broken()
