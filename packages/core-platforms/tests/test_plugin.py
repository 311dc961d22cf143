"""``hooks_plugin()``: a general plugin declares its hooks per host; cardcage does the plumbing.

Each host path runs the real ``register()`` against the real SRT registry: cardcage's own loader
over a real distribution on ``sys.path``, SGLang's and vLLM's through ``rehearsing`` (what
``cardcage doctor`` does where the host is not installed; neither is installed here). The hand-off
to SGLang's and vLLM's real loaders is proven by the ``scenario-sglang`` and ``scenario-vllm`` nox
sessions with the demo plugins; the diffusion registry by ``tests-diffusion-runtime``
(``test_hooks_plugin.py`` there), where that runtime is installed.
"""

from __future__ import annotations

import logging
import subprocess
import sys
from typing import TYPE_CHECKING, Any

import pytest

from cardcage.hooks import load_plugins
from cardcage.hooks.errors import HookRegistrationError, InvalidTargetError
from cardcage.hooks.host import Host, rehearsing
from cardcage.hooks.registry import BaseHookRegistry, HookType
from cardcage.hooks.testing import hook_sandbox, on_sys_path, write_distribution
from cardcage.platforms.errors import PluginDeclarationError
from cardcage.platforms.plugin import HookSpec, after, around, before, hooks_plugin, replace

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

__all__ = ["hook_sandbox"]  # the fixture, imported so pytest finds it

PLATFORM = "vendor_pkg.platform:VendorSRTPlatform"
CARDCAGE_TARGET = "cardcage.platforms.current.get_current_platform"
SGLANG_TARGET = "sglang.srt.utils.common.get_device_memory_capacity"
VLLM_TARGET = "vllm.utils.import_utils.resolve_obj_by_qualname"


def on_cardcage(original: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    return original(*args, **kwargs)


def on_sglang(original: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    return original(*args, **kwargs)


def on_vllm(original: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    return original(*args, **kwargs)


def _plugin(**extra: Any) -> Callable[[], None]:
    return hooks_plugin(
        PLATFORM,
        cardcage=[around(CARDCAGE_TARGET, on_cardcage)],
        sglang=[around(SGLANG_TARGET, on_sglang)],
        vllm=[around(VLLM_TARGET, on_vllm)],
        **extra,
    )


def _found(registry: type[BaseHookRegistry]) -> dict[str, list[tuple[HookType, object]]]:
    return {
        target: [(record.hook_type, record.hook) for record in records]
        for target, records in registry.registrations().items()
    }


# -- the declaration ----------------------------------------------------------------------------


def test_the_four_kinds_build_specs_of_their_hook_type() -> None:
    assert [spec.type for spec in (before("a.b", on_cardcage), after("a.b", on_cardcage))] == [
        HookType.BEFORE,
        HookType.AFTER,
    ]
    assert around("a.b", on_cardcage) == HookSpec("a.b", on_cardcage, HookType.AROUND)
    assert replace("a.b", on_cardcage).type is HookType.REPLACE


def test_declaring_registers_nothing(hook_sandbox: type[BaseHookRegistry]) -> None:
    _plugin()
    assert hook_sandbox.registrations() == {}


def test_register_keeps_the_declaring_module_for_loaders_and_doctor() -> None:
    register = _plugin()
    assert register.__module__ == __name__
    assert register.__name__ == "register"


# -- cardcage's loader ----------------------------------------------------------------------------

HOOKS_ONLY = """
from cardcage.platforms.plugin import after, hooks_plugin

CALLS = []


def answer():
    return 41


def plus_one(result, *args, **kwargs):
    CALLS.append(result)
    return result + 1


register = hooks_plugin(None, cardcage=[after("ccplug_only.hooks.answer", plus_one)])
"""


def test_cardcage_s_loader_registers_and_applies_the_cardcage_hooks(
    tmp_path: Path, hook_sandbox: type[BaseHookRegistry]
) -> None:
    write_distribution(
        tmp_path,
        "ccplug-only",
        entry_points={"sglang.srt.plugins": {"only": "ccplug_only.hooks:register"}},
        modules={"ccplug_only.hooks": HOOKS_ONLY},
    )
    with on_sys_path(tmp_path):
        report = load_plugins()
        module = sys.modules["ccplug_only.hooks"]
        registered = _found(hook_sandbox)
        answer = module.answer()

    assert report.names("executed") == ["only"]
    assert registered == {"ccplug_only.hooks.answer": [(HookType.AFTER, module.plus_one)]}
    assert (answer, module.CALLS) == (42, [41])


def test_without_a_loader_register_takes_cardcage_s_hooks(
    hook_sandbox: type[BaseHookRegistry],
) -> None:
    _plugin()()
    assert _found(hook_sandbox) == {CARDCAGE_TARGET: [(HookType.AROUND, on_cardcage)]}


def test_a_second_register_registers_nothing_twice(hook_sandbox: type[BaseHookRegistry]) -> None:
    register = _plugin()
    register()
    register()
    assert _found(hook_sandbox) == {CARDCAGE_TARGET: [(HookType.AROUND, on_cardcage)]}


def test_a_registry_emptied_since_gets_the_hooks_again(
    hook_sandbox: type[BaseHookRegistry],
) -> None:
    register = _plugin()
    register()
    hook_sandbox.reset()
    register()
    assert _found(hook_sandbox) == {CARDCAGE_TARGET: [(HookType.AROUND, on_cardcage)]}


def test_on_registered_hears_each_hook_of_the_host_each_call(
    hook_sandbox: type[BaseHookRegistry],
) -> None:
    heard: list[tuple[Host, str]] = []
    register = _plugin(on_registered=lambda host, spec: heard.append((host, spec.target)))
    register()
    register()
    assert heard == [(Host.CARDCAGE, CARDCAGE_TARGET)] * 2


# -- SGLang and vLLM (rehearsed) ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("host", "target", "hook"),
    [(Host.SGLANG, SGLANG_TARGET, on_sglang), (Host.VLLM, VLLM_TARGET, on_vllm)],
)
def test_a_host_that_selected_the_platform_gets_its_own_hooks(
    hook_sandbox: type[BaseHookRegistry], host: Host, target: str, hook: object
) -> None:
    register = _plugin()
    with rehearsing(host, selected="vendor_pkg.platform.VendorSRTPlatform"):  # either spelling
        register()
        register()
    assert _found(hook_sandbox) == {target: [(HookType.AROUND, hook)]}


@pytest.mark.parametrize("host", [Host.SGLANG, Host.VLLM])
@pytest.mark.parametrize("selected", [None, "other_vendor.platform:OtherPlatform"])
def test_a_host_that_selected_another_platform_gets_no_hooks(
    hook_sandbox: type[BaseHookRegistry],
    caplog: pytest.LogCaptureFixture,
    host: Host,
    selected: str | None,
) -> None:
    heard: list[object] = []
    register = _plugin(on_registered=lambda host, spec: heard.append(spec))
    with (
        caplog.at_level(logging.INFO, logger="cardcage.platforms.plugin"),
        rehearsing(host, selected=selected),
    ):
        register()
    assert hook_sandbox.registrations() == {}
    assert heard == []
    assert f"{host.value} did not select {PLATFORM}; no srt hooks registered" in caplog.text


def test_a_hooks_only_plugin_registers_whatever_the_host_selected(
    hook_sandbox: type[BaseHookRegistry],
) -> None:
    register = hooks_plugin(None, vllm=[around(VLLM_TARGET, on_vllm)])
    with rehearsing(Host.VLLM, selected="other_vendor.platform:OtherPlatform"):
        register()
    assert _found(hook_sandbox) == {VLLM_TARGET: [(HookType.AROUND, on_vllm)]}


def test_a_host_without_declared_hooks_gets_none(hook_sandbox: type[BaseHookRegistry]) -> None:
    register = hooks_plugin(PLATFORM, cardcage=[around(CARDCAGE_TARGET, on_cardcage)])
    with rehearsing(Host.SGLANG, selected=PLATFORM):
        register()
    assert hook_sandbox.registrations() == {}


# -- validation, at declaration -----------------------------------------------------------------


def test_a_malformed_target_fails_at_declaration() -> None:
    with pytest.raises(InvalidTargetError, match=r"hooks_plugin\(sglang=\.\.\.\).*'nodots'") as e:
        hooks_plugin(PLATFORM, sglang=[around("nodots", on_sglang)])
    assert e.value.target == "nodots"
    assert "package.module.attr" in str(e.value)  # the fix


def test_a_hook_that_is_not_callable_fails_at_declaration() -> None:
    with pytest.raises(HookRegistrationError, match=r"is not callable\. Pass a function"):
        hooks_plugin(PLATFORM, cardcage=[around(CARDCAGE_TARGET, 42)])  # type: ignore[arg-type]


def test_a_class_outside_replace_fails_at_declaration() -> None:
    with pytest.raises(HookRegistrationError, match="class HookSpec can only be a REPLACE hook"):
        hooks_plugin(PLATFORM, cardcage=[around(CARDCAGE_TARGET, HookSpec)])


def test_something_else_than_a_spec_fails_at_declaration() -> None:
    with pytest.raises(HookRegistrationError, match=r"not a HookSpec. Build each hook with around"):
        hooks_plugin(PLATFORM, cardcage=[(CARDCAGE_TARGET, on_cardcage)])  # type: ignore[list-item]


def test_an_unknown_runtime_fails_at_declaration() -> None:
    with pytest.raises(PluginDeclarationError, match=r"runtime='video'.*Fix: pass runtime='srt'"):
        hooks_plugin(PLATFORM, runtime="video")  # type: ignore[arg-type]


def test_vllm_hooks_for_the_diffusion_runtime_fail_at_declaration() -> None:
    with pytest.raises(PluginDeclarationError, match="vllm does not run diffusion plugins"):
        hooks_plugin(PLATFORM, runtime="diffusion", vllm=[around(VLLM_TARGET, on_vllm)])


@pytest.mark.parametrize("platform", ["", "nodots", "pkg.mod:", 42])
def test_a_platform_that_names_no_class_fails_at_declaration(platform: Any) -> None:
    with pytest.raises(PluginDeclarationError, match="does not name a class"):
        hooks_plugin(platform)


def test_a_declaration_error_names_the_entry_point_and_its_distribution(tmp_path: Path) -> None:
    write_distribution(
        tmp_path,
        "ccplug-broken",
        entry_points={"vllm.general_plugins": {"broken": "ccplug_broken.hooks:register"}},
        modules={
            "ccplug_broken.hooks": (
                "from cardcage.platforms.plugin import around, hooks_plugin\n"
                "register = hooks_plugin('ccplug_broken.platform:Broken', runtime='diffusion',\n"
                "                        vllm=[around('vllm.x.y', print)])\n"
            )
        },
    )
    with on_sys_path(tmp_path), pytest.raises(PluginDeclarationError) as e:
        import ccplug_broken.hooks  # noqa: F401

    assert (e.value.plugin, e.value.distribution) == ("broken", "ccplug-broken")
    assert str(e.value).startswith("plugin 'broken' (distribution ccplug-broken): ")
    assert "Fix: remove vllm=" in str(e.value)


def test_hooks_for_a_runtime_nobody_registered_name_the_runtime_and_the_fix(
    hook_sandbox: type[BaseHookRegistry],
) -> None:
    # This venv holds no diffusion runtime: its record in cardcage.runtimes is what the plugin's
    # hooks would go to, and core-platforms names no runtime's registry module of its own.
    register = hooks_plugin(
        None, runtime="diffusion", cardcage=[around(CARDCAGE_TARGET, on_cardcage)]
    )
    with pytest.raises(PluginDeclarationError) as e:
        register()

    assert "the 'diffusion' runtime, which no installed distribution registers" in str(e.value)
    assert "Fix: install the distribution that provides the 'diffusion' runtime" in str(e.value)
    assert hook_sandbox.registrations() == {}


# -- import cost --------------------------------------------------------------------------------


def test_declaring_a_plugin_imports_no_torch_no_host_and_no_diffusion_runtime() -> None:
    code = (
        "import sys\n"
        "from cardcage.platforms.plugin import around, hooks_plugin\n"
        "register = hooks_plugin('a.b:C', runtime='diffusion',\n"
        "                        sglang=[around('sglang.x.y', print)])\n"
        "heavy = {'torch', 'numpy', 'zmq', 'sglang', 'vllm'} & set(sys.modules)\n"
        "heavy |= {m for m in sys.modules if m.startswith('cardcage.diffusion')}\n"
        "assert not heavy, heavy\n"
        "assert 'cardcage.platforms.selection' not in sys.modules\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
