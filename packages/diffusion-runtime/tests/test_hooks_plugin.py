"""``hooks_plugin(..., runtime="diffusion")``: a diffusion general plugin's hooks land on the
diffusion registry, through the runtime's real two-phase loader, and never on SRT's.

The SRT paths of ``cardcage.platforms.plugin`` are tested with core-platforms
(``test_plugin.py``); this is the part that needs the diffusion runtime installed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
from diffusion_support import PLUGINS

from cardcage.diffusion.runtime.platforms.plugins import (
    HookRegistry,
    HookType,
    apply_plugin_hooks,
)
from cardcage.hooks import HookRegistry as SRTHookRegistry
from cardcage.hooks.host import Host, rehearsing
from cardcage.hooks.testing import on_sys_path, write_distribution
from cardcage.platforms.plugin import around, hooks_plugin

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

PLATFORM = "vendor_pkg.diffusion.platform:VendorPlatform"
CARDCAGE_TARGET = "cardcage.diffusion.runtime.layers.custom_op.CustomOp.dispatch_forward"
SGLANG_TARGET = "sglang.multimodal_gen.runtime.layers.custom_op.CustomOp.dispatch_forward"

TRIPLING = """
from cardcage.platforms.plugin import after, hooks_plugin


def tripled(result, *args, **kwargs):
    return result * 3


register = hooks_plugin(
    None, runtime="diffusion", cardcage=[after("dhp_target.compute", tripled)]
)
"""


def on_dispatch(original: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    return original(*args, **kwargs)


@pytest.fixture(autouse=True)
def builtin_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SGLANG_DIFFUSION_PLATFORM_OVERRIDE", "cpu")


def _found() -> dict[str, list[tuple[HookType, object]]]:
    return {
        target: [(record.hook_type, record.hook) for record in records]
        for target, records in HookRegistry.registrations().items()
    }


def test_the_diffusion_loader_registers_and_applies_on_the_diffusion_registry(site: Path) -> None:
    write_distribution(
        site,
        "dhp-tripling",
        entry_points={PLUGINS: {"tripling": "dhp_tripling:register"}},
        modules={"dhp_tripling": TRIPLING, "dhp_target": "def compute(x):\n    return x + 1\n"},
    )
    with on_sys_path(site):
        report = apply_plugin_hooks()
        import dhp_target  # type: ignore[import-not-found]

        assert report.names("executed") == ["tripling"]
        assert dhp_target.compute(1) == 6
        assert SRTHookRegistry.registrations() == {}


def test_register_is_idempotent_on_the_diffusion_registry() -> None:
    register = hooks_plugin(
        PLATFORM, runtime="diffusion", cardcage=[around(CARDCAGE_TARGET, on_dispatch)]
    )
    register()
    register()
    assert _found() == {CARDCAGE_TARGET: [(HookType.AROUND, on_dispatch)]}
    assert SRTHookRegistry.registrations() == {}


def test_sglang_s_diffusion_selection_decides_under_sglang() -> None:
    register = hooks_plugin(
        PLATFORM,
        runtime="diffusion",
        cardcage=[around(CARDCAGE_TARGET, on_dispatch)],
        sglang=[around(SGLANG_TARGET, on_dispatch)],
    )
    with rehearsing(Host.SGLANG, selected="other.platform:Other"):
        register()
    assert _found() == {}
    with rehearsing(Host.SGLANG, selected=PLATFORM):
        register()
    assert _found() == {SGLANG_TARGET: [(HookType.AROUND, on_dispatch)]}
