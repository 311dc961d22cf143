"""cardcage.hooks.testing: the helpers plugin authors use in their own test suites."""

from __future__ import annotations

import sys
import types
from pathlib import Path

from cardcage.hooks.registry import HookRegistry, HookType
from cardcage.hooks.snapshot import entry_point_snapshot
from cardcage.hooks.testing import (
    hook_sandbox,  # noqa: F401 - the fixture, imported as a plugin's test suite would
    isolated_hooks,
    on_sys_path,
    write_distribution,
)

GROUP = "cardcage.tests.testing-helpers"


def _target_module(name: str) -> types.ModuleType:
    module = types.ModuleType(name)
    exec("def f(x):\n    return x * 2\n", module.__dict__)
    sys.modules[name] = module
    return module


def test_written_distribution_is_discovered_with_its_name_and_version(tmp_path: Path) -> None:
    write_distribution(
        tmp_path,
        "acme-widgets",
        version="2.5.0",
        entry_points={GROUP: {"widget": "acme_widgets.plugin:register"}},
        modules={"acme_widgets.plugin": "def register():\n    return 'registered'\n"},
    )

    with on_sys_path(tmp_path):
        [ep] = entry_point_snapshot().group(GROUP)
        assert (ep.name, ep.dist_name, ep.dist.version if ep.dist else None) == (
            "widget",
            "acme-widgets",
            "2.5.0",
        )
        assert ep.load()() == "registered"  # type: ignore[operator]


def test_leaving_on_sys_path_forgets_the_distribution_and_its_modules(tmp_path: Path) -> None:
    write_distribution(
        tmp_path,
        "acme-gadgets",
        entry_points={GROUP: {"gadget": "acme_gadgets:register"}},
        modules={"acme_gadgets": "def register():\n    pass\n"},
    )
    with on_sys_path(tmp_path):
        entry_point_snapshot().group(GROUP)[0].load()
        assert "acme_gadgets" in sys.modules

    assert "acme_gadgets" not in sys.modules
    assert entry_point_snapshot().group(GROUP) == ()
    assert str(tmp_path) not in sys.path


def test_isolated_hooks_undoes_registrations_and_patches() -> None:
    module = _target_module("cc_testing_helpers_iso")
    original = module.f
    try:
        with isolated_hooks() as registry:
            registry.register(f"{module.__name__}.f", lambda r, x: r + 1, HookType.AFTER)
            registry.apply()
            assert module.f(1) == 3

        assert module.f is original
        assert f"{module.__name__}.f" not in HookRegistry.registrations()
    finally:
        del sys.modules[module.__name__]


def test_hook_sandbox_fixture_hands_out_the_srt_registry(
    hook_sandbox: type[HookRegistry],
) -> None:
    module = _target_module("cc_testing_helpers_fixture")
    try:
        hook_sandbox.register(f"{module.__name__}.f", lambda r, x: -r, HookType.AFTER)
        hook_sandbox.apply()
        assert hook_sandbox is HookRegistry
        assert module.f(2) == -4
    finally:
        del sys.modules[module.__name__]
