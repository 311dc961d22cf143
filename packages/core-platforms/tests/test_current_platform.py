"""The process-wide ``current_platform``: lazy, once, locked, re-entrancy-safe, sticky on failure.

Also the test helpers of ``cardcage.platforms.testing`` and the hand-off of the resolved
selection to ``load_plugins()`` (through the SRT runtime's registration), which makes SRT
exclude the general plugins of platform distributions that were not selected in automatic mode
too. Platform plugins are real distributions on a temporary ``sys.path`` entry; hardware probes
are injected with ``use_probes``.
"""

from __future__ import annotations

import json
import os
import re
import select
import signal
import subprocess
import sys
import textwrap
import threading
from contextlib import ExitStack
from typing import TYPE_CHECKING, Any

import pytest

import cardcage.platforms
from cardcage.hooks.errors import PhaseFailedError, PluginLoadError
from cardcage.hooks.loader import (
    PlatformChoice,
    load_plugins,
    reset_plugin_state,
    runtime_platform_choice,
)
from cardcage.hooks.profile import SRT_PROFILE
from cardcage.hooks.registry import BaseHookRegistry
from cardcage.hooks.runtimes import get_runtime, runtime_for
from cardcage.hooks.snapshot import refresh
from cardcage.hooks.testing import on_sys_path, write_distribution
from cardcage.platforms import current, probes
from cardcage.platforms.cpu import CpuSRTPlatform
from cardcage.platforms.cuda import CudaSRTPlatform
from cardcage.platforms.errors import (
    MultiplePlatformsError,
    PlatformActivationError,
    PlatformError,
    PlatformReentrancyError,
)
from cardcage.platforms.interface import SRTPlatform
from cardcage.platforms.probes import HardwareProbes
from cardcage.platforms.runtime import SRT_RUNTIME
from cardcage.platforms.selection import SelectionRecord
from cardcage.platforms.testing import reset_current_platform, set_current_platform, use_probes

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path

PLATFORMS = "sglang.srt.platforms"
PLUGINS = "sglang.srt.plugins"
OWN_ENV = ("SGLANG_PLATFORM", "SGLANG_PLUGINS", "SGLANG_USE_CPU_ENGINE")
HEAVY = ("torch", "numpy", "zmq")


def _never() -> bool:
    raise AssertionError("a built-in hardware probe was consulted")


NO_HARDWARE = HardwareProbes(
    cpu_engine_requested=lambda: False, cuda=lambda: False, rocm=lambda: False, xpu=lambda: False
)
PROBES_FORBIDDEN = HardwareProbes(cpu_engine_requested=_never, cuda=_never, rocm=_never, xpu=_never)

OOT_PLATFORM = """
from cardcage.platforms.device_mixin import PlatformEnum
from cardcage.platforms.interface import SRTPlatform

CALLS = []


class VendorPlatform(SRTPlatform):
    _enum = PlatformEnum.OOT
    device_name = "vendor"
    device_type = "vendor"


def activate():
    CALLS.append(1)
    return "@MODULE@:VendorPlatform"
"""

DECLINING = """
CALLS = []


def activate():
    CALLS.append(1)
    return None
"""

GENERAL_PLUGIN = """
RAN = []


def register():
    RAN.append(1)
"""


class Site:
    """Real distributions in one temporary site, put on ``sys.path`` on first use."""

    def __init__(self, root: Path, stack: ExitStack) -> None:
        self.root = root
        self.root.mkdir()
        self._stack = stack
        self._installed = False

    def module_name(self, dist: str, ep: str) -> str:
        return "cccur_" + re.sub(r"\W+", "_", f"{dist}_{ep}").lower()

    def dist(
        self,
        name: str,
        *,
        version: str = "1.0",
        platforms: dict[str, str] | None = None,
        plugins: dict[str, str] | None = None,
    ) -> dict[str, str]:
        """Write ``name`` with platform and general entry points; return ep name -> module."""
        entry_points: dict[str, dict[str, str]] = {}
        modules: dict[str, str] = {}
        where: dict[str, str] = {}
        for group, callback, specs in (
            (PLATFORMS, "activate", platforms),
            (PLUGINS, "register", plugins),
        ):
            for ep, source in (specs or {}).items():
                module = self.module_name(name, ep)
                entry_points.setdefault(group, {})[ep] = f"{module}:{callback}"
                modules[module] = source.replace("@MODULE@", module)
                where[ep] = module
        write_distribution(
            self.root, name, version=version, entry_points=entry_points, modules=modules
        )
        if self._installed:
            refresh()
        return where

    def oot(self, dist: str, ep: str, *, version: str = "1.0") -> str:
        return self.dist(dist, version=version, platforms={ep: OOT_PLATFORM})[ep]

    def module(self, name: str, source: str) -> None:
        (self.root / f"{name}.py").write_text(textwrap.dedent(source), encoding="utf-8")

    def install(self) -> None:
        if not self._installed:
            self._stack.enter_context(on_sys_path(self.root))
            self._installed = True


@pytest.fixture
def clean_platform(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No selector variables, no resolved platform, no hardware; forgotten again afterwards."""
    for variable in OWN_ENV:
        monkeypatch.delenv(variable, raising=False)
    reset_current_platform()
    use_probes(NO_HARDWARE)
    yield
    reset_current_platform()


@pytest.fixture
def site(tmp_path: Path, clean_platform: None) -> Iterator[Site]:
    del clean_platform
    with ExitStack() as stack:
        yield Site(tmp_path / "site", stack)


@pytest.fixture
def registry() -> Iterator[type[BaseHookRegistry]]:
    """A hook registry of this test's own; the SRT loader's gates for it are reset afterwards."""

    class _R(BaseHookRegistry):
        pass

    yield _R
    reset_plugin_state(SRT_PROFILE, _R)
    _R.reset()


def subprocess_env(site: Path | None = None, **extra: str) -> dict[str, str]:
    environ = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("SGLANG_", "CARDCAGE_")) and k != "PYTHONPATH"
    }
    environ["PYTHONDONTWRITEBYTECODE"] = "1"
    if site is not None:
        environ["PYTHONPATH"] = str(site)
    environ.update(extra)
    return environ


def run_python(code: str, env: dict[str, str]) -> Any:
    """Run ``code`` in a fresh interpreter; it prints one JSON document."""
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


# -- P11: lazy, once, cached -----------------------------------------------------------------------


def test_first_access_runs_selection_once_and_later_accesses_return_the_same_object(
    site: Site,
) -> None:
    module = site.oot("vendor-a", "alpha")
    site.install()

    accesses = [cardcage.platforms.current_platform for _ in range(3)]

    assert accesses[0] is accesses[1] is accesses[2]
    assert sys.modules[module].CALLS == [1]


def test_from_import_binds_the_resolved_platform(site: Site) -> None:
    site.install()

    from cardcage.platforms import current_platform

    assert current_platform is current.get_current_platform()


def test_get_current_platform_is_exported_from_the_package() -> None:
    assert cardcage.platforms.get_current_platform is current.get_current_platform


def test_current_platform_is_the_selected_platform(site: Site) -> None:
    module = site.oot("vendor-a", "alpha")
    site.install()

    platform = cardcage.platforms.current_platform

    assert type(platform).__module__ == module
    assert platform.is_out_of_tree()


def test_unknown_package_attribute_raises_attribute_error() -> None:
    with pytest.raises(
        AttributeError, match=r"^module 'cardcage.platforms' has no attribute 'no_such_thing'$"
    ):
        cardcage.platforms.no_such_thing


def test_selection_record_is_none_until_first_access(site: Site) -> None:
    site.install()

    before = cardcage.platforms.get_selection_record()
    cardcage.platforms.current_platform

    assert before is None
    assert isinstance(cardcage.platforms.get_selection_record(), SelectionRecord)


def test_import_of_the_package_in_a_fresh_interpreter_imports_nothing_heavy() -> None:
    found = run_python(
        """
        import json, sys
        watched = ("torch", "numpy", "zmq", "importlib.metadata")
        before = {m for m in watched if m in sys.modules}
        import cardcage.platforms
        print(json.dumps(sorted(m for m in watched if m in sys.modules and m not in before)))
        """,
        subprocess_env(),
    )

    assert found == []


@pytest.mark.parametrize("selector", ["alpha", ""], ids=["explicit", "automatic"])
def test_first_access_with_an_oot_platform_imports_no_torch_numpy_or_zmq(
    site: Site, selector: str
) -> None:
    site.oot("vendor-a", "alpha")

    found = run_python(
        """
        import json, sys
        import cardcage.platforms
        platform = cardcage.platforms.current_platform
        print(json.dumps({
            "oot": platform.is_out_of_tree(),
            "heavy": sorted(m for m in ("torch", "numpy", "zmq") if m in sys.modules),
        }))
        """,
        subprocess_env(site.root, SGLANG_PLATFORM=selector),
    )

    assert found == {"oot": True, "heavy": []}


_DRIVER_PRESENT = (
    probes._nvidia_driver_present() or probes._amd_driver_present() or probes._intel_gpu_present()
)


@pytest.mark.skipif(
    _DRIVER_PRESENT, reason="an accelerator driver is present, so probing may import torch"
)
def test_default_probes_import_no_torch_on_a_machine_without_accelerator_drivers() -> None:
    found = run_python(
        """
        import json, sys
        import cardcage.platforms
        platform = cardcage.platforms.current_platform
        print(json.dumps({
            "platform": type(platform).__name__,
            "heavy": sorted(m for m in ("torch", "numpy", "zmq") if m in sys.modules),
        }))
        """,
        subprocess_env(),
    )

    assert found == {"platform": "SRTPlatform", "heavy": []}


@pytest.mark.skipif(
    _DRIVER_PRESENT, reason="an accelerator driver is present, so probing may import torch"
)
def test_a_successful_selection_imports_no_error_path_module(site: Site) -> None:
    # The selection engine's error classes, its findings and the modules that word its problems
    # are imported where a problem is found: every process pays for a successful selection, only
    # a failing one for them. (A vendor class that the contract checks may import the errors.)
    site.dist("vendor-s", platforms={"sleepy": DECLINING})

    found = run_python(
        """
        import json, sys
        error_path = ("cardcage.platforms.errors", "cardcage.platforms.findings", "difflib")
        before = {m for m in error_path if m in sys.modules}
        import cardcage.platforms
        platform = cardcage.platforms.current_platform
        print(json.dumps({
            "platform": type(platform).__name__,
            "imported": sorted(m for m in error_path if m in sys.modules and m not in before),
        }))
        """,
        subprocess_env(site.root),
    )

    assert found == {"platform": "SRTPlatform", "imported": []}


HOOKING_PLUGIN = """
from cardcage.hooks.registry import HookRegistry, HookType


def register():
    HookRegistry.register("json.dumps", lambda *args, **kwargs: None, HookType.BEFORE)
"""


@pytest.mark.skipif(
    _DRIVER_PRESENT, reason="an accelerator driver is present, so probing may import torch"
)
def test_a_start_up_whose_plugins_all_load_imports_no_failure_path_module(site: Site) -> None:
    # The first platform access and load_plugins(), with a platform plugin that declines and a
    # general plugin whose hook is applied: every runtime process pays for these imports. The
    # error classes, the loader's failure policy and the module that tells a plugin which host
    # runs it are for a failing plugin or a plugin that asks; none is here.
    site.dist("vendor-s", platforms={"sleepy": DECLINING})
    site.dist("hooker", plugins={"hooker": HOOKING_PLUGIN})

    found = run_python(
        """
        import json, sys
        from cardcage.platforms import current_platform
        from cardcage.hooks import load_plugins
        report = load_plugins()
        print(json.dumps({
            "executed": report.names("executed"),
            "applied": sorted(report.apply.applied),
            "imported": sorted(
                m for m in sys.modules
                if m.endswith(".errors")
                or m in ("cardcage.hooks._load_failures", "cardcage.hooks.host")
            ),
        }))
        """,
        subprocess_env(site.root),
    )

    assert found == {"executed": ["hooker"], "applied": ["json.dumps"], "imported": []}


# -- re-entrancy ----------------------------------------------------------------------------------


def resolve_guarded(timeout: float = 10) -> object:
    """Resolve in a daemon thread behind a private lock; return the platform or the exception.

    Without a working re-entrancy guard a re-entrant access would wait forever on the selection
    lock; this turns that deadlock into a test failure instead of a hung run.
    """
    outcome: list[object] = []

    def run() -> None:
        try:
            outcome.append(current.get_current_platform())
        except BaseException as exc:  # the caller inspects it
            outcome.append(exc)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(current._state, "lock", threading.Lock())
        worker = threading.Thread(target=run, daemon=True)
        worker.start()
        worker.join(timeout)
        if worker.is_alive():
            pytest.fail("re-entrant access to current_platform deadlocked")
    return outcome[0]


REENTRANT_ACTIVATE = (
    OOT_PLATFORM.replace("def activate():", "def _activate_original():")
    + """

SEEN = []


def activate():
    import cardcage.platforms
    try:
        cardcage.platforms.@ACCESS@
    except BaseException as exc:
        SEEN.append(exc)
        raise
    return _activate_original()
"""
)


@pytest.mark.parametrize(
    "access", ["current_platform", "get_current_platform()"], ids=["attribute", "function"]
)
def test_activate_touching_current_platform_raises_reentrancy_error_naming_the_plugin(
    site: Site, access: str
) -> None:
    module = site.dist(
        "vendor-a", platforms={"alpha": REENTRANT_ACTIVATE.replace("@ACCESS@", access)}
    )["alpha"]
    site.install()

    resolve_guarded()

    [inner] = sys.modules[module].SEEN
    assert isinstance(inner, PlatformReentrancyError)
    assert (inner.plugin, inner.distribution) == ("alpha", "vendor-a")
    assert "'alpha'" in str(inner)


def test_reentrant_access_in_activate_aborts_selection_chained_from_the_reentrancy_error(
    site: Site,
) -> None:
    site.dist(
        "vendor-a",
        platforms={"alpha": REENTRANT_ACTIVATE.replace("@ACCESS@", "current_platform")},
    )
    site.install()

    error = resolve_guarded()

    assert isinstance(error, PlatformActivationError)
    assert isinstance(error.__cause__, PlatformReentrancyError)
    assert not isinstance(error, RecursionError)
    assert "current_platform was accessed while the platform is being resolved" in str(error)


def test_platform_constructor_touching_current_platform_raises_reentrancy_error(
    site: Site,
) -> None:
    source = OOT_PLATFORM.replace(
        '    device_type = "vendor"\n',
        '    device_type = "vendor"\n\n'
        "    def __init__(self):\n"
        "        import cardcage.platforms\n"
        "        cardcage.platforms.current_platform\n",
    )
    site.dist("vendor-a", platforms={"alpha": source})
    site.install()

    error = resolve_guarded()

    assert isinstance(error, PlatformActivationError)
    cause = error.__cause__
    assert isinstance(cause, PlatformReentrancyError)
    assert cause.plugin == "alpha"


def test_platform_module_importing_current_platform_at_import_time_raises_reentrancy_error(
    site: Site,
) -> None:
    site.module(
        "cccur_eager_platform",
        """
        from cardcage.platforms import current_platform
        from cardcage.platforms.device_mixin import PlatformEnum
        from cardcage.platforms.interface import SRTPlatform


        class EagerPlatform(SRTPlatform):
            _enum = PlatformEnum.OOT
            device_name = "eager"
            device_type = "eager"
        """,
    )
    site.dist(
        "vendor-a",
        platforms={"alpha": "def activate():\n    return 'cccur_eager_platform:EagerPlatform'\n"},
    )
    site.install()

    error = resolve_guarded()

    assert isinstance(error, PlatformError)  # the outer type matters less than the chain
    cause = error.__cause__
    assert isinstance(cause, PlatformReentrancyError)
    assert (cause.plugin, cause.distribution) == ("alpha", "vendor-a")


def test_probe_touching_current_platform_raises_reentrancy_error_naming_no_plugin(
    site: Site,
) -> None:
    def touching_probe() -> bool:
        cardcage.platforms.current_platform
        return False

    site.install()
    use_probes(
        HardwareProbes(
            cpu_engine_requested=lambda: False, cuda=touching_probe, rocm=_never, xpu=_never
        )
    )

    error = resolve_guarded()

    assert isinstance(error, PlatformReentrancyError)
    assert error.plugin is None
    assert "code running during platform selection" in str(error)


def test_reentrancy_failure_is_sticky_for_later_accesses(site: Site) -> None:
    site.dist(
        "vendor-a",
        platforms={"alpha": REENTRANT_ACTIVATE.replace("@ACCESS@", "current_platform")},
    )
    site.install()
    first = resolve_guarded()

    with pytest.raises(PhaseFailedError) as later:
        current.get_current_platform()

    assert later.value.cause is first


# -- threads ---------------------------------------------------------------------------------------


class _SignallingLock:
    """A real lock that also says when a second thread had to wait for it (no sleeps needed)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.contended = threading.Event()

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        if self._lock.acquire(blocking=False):
            return True
        self.contended.set()
        return self._lock.acquire(blocking, timeout)

    def release(self) -> None:
        self._lock.release()

    def locked(self) -> bool:
        return self._lock.locked()

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


BLOCKING_ACTIVATE = OOT_PLATFORM.replace(
    "def activate():\n    CALLS.append(1)\n",
    "def activate():\n"
    "    import cccur_sync\n"
    "    CALLS.append(1)\n"
    "    cccur_sync.ENTERED.set()\n"
    "    if not cccur_sync.RELEASE.wait(30):\n"
    "        raise RuntimeError('the test never released activate()')\n",
)


def test_two_threads_resolving_at_once_activate_once_and_share_the_platform(
    site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    site.module(
        "cccur_sync",
        "import threading\nENTERED = threading.Event()\nRELEASE = threading.Event()\n",
    )
    module = site.dist("vendor-a", platforms={"alpha": BLOCKING_ACTIVATE})["alpha"]
    site.install()
    import cccur_sync  # type: ignore[import-not-found]

    lock = _SignallingLock()
    monkeypatch.setattr(current._state, "lock", lock)
    results: dict[str, object] = {}

    def resolve(name: str) -> None:
        try:
            results[name] = current.get_current_platform()
        except BaseException as exc:  # reported by the assertions below
            results[name] = exc

    first = threading.Thread(target=resolve, args=("first",))
    second = threading.Thread(target=resolve, args=("second",))
    first.start()
    assert cccur_sync.ENTERED.wait(30)
    second.start()
    assert lock.contended.wait(30)  # the second thread is waiting for the first
    cccur_sync.RELEASE.set()
    first.join(30)
    second.join(30)

    assert isinstance(results["first"], SRTPlatform)
    assert results["second"] is results["first"]
    assert sys.modules[module].CALLS == [1]


# -- fork -----------------------------------------------------------------------------------------


def run_in_fork(child: Callable[[], str], timeout: float = 10) -> str:
    """Run ``child`` in a forked process; return what it returned (a hung child fails the test)."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        try:
            os.close(read_end)
            try:
                answer = child()
            except BaseException as exc:
                answer = f"error: {type(exc).__name__}: {exc}"
            os.write(write_end, answer.encode())
        finally:
            os._exit(0)
    os.close(write_end)
    try:
        ready, _, _ = select.select([read_end], [], [], timeout)
        if not ready:
            os.kill(pid, signal.SIGKILL)
            pytest.fail("the forked child hung")
        return os.read(read_end, 4096).decode()
    finally:
        os.close(read_end)
        os.waitpid(pid, 0)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_forked_child_keeps_the_parents_platform_without_selecting_again(site: Site) -> None:
    module = site.oot("vendor-a", "alpha")
    site.install()
    parent = cardcage.platforms.current_platform

    def child() -> str:
        platform = cardcage.platforms.current_platform
        return f"{type(platform).__module__} {len(sys.modules[module].CALLS)}"

    assert run_in_fork(child) == f"{type(parent).__module__} 1"


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_child_forked_while_another_thread_resolves_gets_a_usable_lock(site: Site) -> None:
    site.module(
        "cccur_sync",
        "import threading\nENTERED = threading.Event()\nRELEASE = threading.Event()\n",
    )
    site.dist("vendor-a", platforms={"alpha": BLOCKING_ACTIVATE})
    site.install()
    import cccur_sync  # type: ignore[import-not-found]

    resolver = threading.Thread(target=current.get_current_platform, daemon=True)
    resolver.start()
    assert cccur_sync.ENTERED.wait(30)  # the resolver now holds the selection lock

    def child() -> str:
        stand_in = CpuSRTPlatform()
        set_current_platform(stand_in)  # takes the selection lock
        return "ok" if cardcage.platforms.current_platform is stand_in else "wrong platform"

    try:
        answer = run_in_fork(child)
    finally:
        cccur_sync.RELEASE.set()
        resolver.join(30)

    assert answer == "ok"


# -- sticky failure --------------------------------------------------------------------------------


def test_failed_selection_is_sticky_and_chained_to_the_original_error(site: Site) -> None:
    site.oot("vendor-a", "alpha")
    site.oot("vendor-b", "beta")
    site.install()
    with pytest.raises(MultiplePlatformsError) as first:
        current.get_current_platform()

    with pytest.raises(PhaseFailedError) as second:
        current.get_current_platform()

    assert second.value.__cause__ is first.value
    assert second.value.cause is first.value
    assert "SRT platform selection previously failed" in str(second.value)


def test_second_access_after_a_failure_does_not_activate_again(site: Site) -> None:
    alpha = site.oot("vendor-a", "alpha")
    site.oot("vendor-b", "beta")
    site.install()
    with pytest.raises(MultiplePlatformsError):
        current.get_current_platform()

    with pytest.raises(PhaseFailedError):
        cardcage.platforms.current_platform

    assert sys.modules[alpha].CALLS == [1]


def test_failed_selection_publishes_no_record(site: Site) -> None:
    site.oot("vendor-a", "alpha")
    site.oot("vendor-b", "beta")
    site.install()

    with pytest.raises(MultiplePlatformsError):
        current.get_current_platform()

    assert current.get_selection_record() is None


INTERRUPTED_ONCE = OOT_PLATFORM.replace(
    "def activate():\n    CALLS.append(1)\n",
    "def activate():\n"
    "    CALLS.append(1)\n"
    "    if len(CALLS) == 1:\n"
    "        raise KeyboardInterrupt\n",
)


def test_keyboard_interrupt_during_selection_is_not_sticky(site: Site) -> None:
    module = site.dist("vendor-a", platforms={"alpha": INTERRUPTED_ONCE})["alpha"]
    site.install()
    with pytest.raises(KeyboardInterrupt):
        current.get_current_platform()

    platform = current.get_current_platform()

    assert type(platform).__module__ == module
    assert sys.modules[module].CALLS == [1, 1]


# -- the first-access stack ------------------------------------------------------------------------


def _touch_current_platform_for_the_first_time() -> object:
    return cardcage.platforms.current_platform


def _touch_current_platform_again() -> object:
    return cardcage.platforms.current_platform


def test_record_keeps_the_stack_of_the_first_access(site: Site) -> None:
    site.install()

    _touch_current_platform_for_the_first_time()

    record = current.get_selection_record()
    assert record is not None
    assert "in _touch_current_platform_for_the_first_time\n" in record.first_access_stack
    assert "test_current_platform.py" in record.first_access_stack


def test_later_accesses_do_not_replace_the_first_access_stack(site: Site) -> None:
    site.install()
    _touch_current_platform_for_the_first_time()

    _touch_current_platform_again()

    record = current.get_selection_record()
    assert record is not None
    assert "in _touch_current_platform_for_the_first_time\n" in record.first_access_stack
    assert "in _touch_current_platform_again\n" not in record.first_access_stack


# -- cardcage.platforms.testing --------------------------------------------------------------------


def test_set_current_platform_installs_the_given_object_without_selecting(site: Site) -> None:
    module = site.oot("vendor-a", "alpha")
    site.install()
    use_probes(PROBES_FORBIDDEN)
    stand_in = CpuSRTPlatform()

    set_current_platform(stand_in)

    assert cardcage.platforms.current_platform is stand_in
    assert module not in sys.modules


def test_set_current_platform_without_a_record_leaves_the_record_empty(
    clean_platform: None,
) -> None:
    del clean_platform
    set_current_platform(CpuSRTPlatform())

    assert current.get_selection_record() is None


def test_set_current_platform_installs_the_given_record(clean_platform: None) -> None:
    del clean_platform
    record = SelectionRecord("srt", "explicit", "SGLANG_PLATFORM", "cpu", reason="test")

    set_current_platform(CpuSRTPlatform(), record)

    assert current.get_selection_record() is record


def test_reset_current_platform_makes_the_next_access_resolve_again(
    site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    site.install()
    before = cardcage.platforms.current_platform
    monkeypatch.setenv("SGLANG_PLATFORM", "cpu")

    reset_current_platform()

    after = cardcage.platforms.current_platform
    assert type(before) is SRTPlatform
    assert type(after) is CpuSRTPlatform


def test_reset_current_platform_forgets_the_record(site: Site) -> None:
    site.install()
    cardcage.platforms.current_platform

    reset_current_platform()

    assert current.get_selection_record() is None


def test_reset_current_platform_clears_a_sticky_failure(
    site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    site.install()
    monkeypatch.setenv("SGLANG_PLATFORM", "gaudi")
    with pytest.raises(RuntimeError):
        current.get_current_platform()
    monkeypatch.setenv("SGLANG_PLATFORM", "cpu")

    reset_current_platform()

    assert type(current.get_current_platform()) is CpuSRTPlatform


def test_set_current_platform_clears_a_sticky_failure(
    site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    site.install()
    monkeypatch.setenv("SGLANG_PLATFORM", "gaudi")
    with pytest.raises(RuntimeError):
        current.get_current_platform()
    stand_in = SRTPlatform()

    set_current_platform(stand_in)

    assert current.get_current_platform() is stand_in


def test_use_probes_steers_the_next_resolution(site: Site) -> None:
    site.install()

    use_probes(
        HardwareProbes(
            cpu_engine_requested=lambda: False, cuda=lambda: True, rocm=_never, xpu=_never
        )
    )

    assert type(cardcage.platforms.current_platform) is CudaSRTPlatform


# -- hand-off to cardcage.hooks --------------------------------------------------------------------


def test_platform_choice_in_automatic_mode_names_the_activated_plugins_distribution(
    site: Site,
) -> None:
    site.oot("vendor-a", "alpha")
    site.dist("vendor-b", platforms={"beta": DECLINING})
    site.install()

    assert runtime_platform_choice(SRT_RUNTIME) == PlatformChoice(
        "alpha", "vendor-a", reason="automatic platform selection"
    )


def test_platform_choice_in_explicit_mode_names_the_selector(
    site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    site.oot("vendor-a", "alpha")
    site.oot("vendor-b", "beta")
    monkeypatch.setenv("SGLANG_PLATFORM", "beta")
    site.install()

    assert runtime_platform_choice(SRT_RUNTIME) == PlatformChoice(
        "beta", "vendor-b", reason="SGLANG_PLATFORM=beta"
    )


def test_platform_choice_for_a_builtin_has_no_plugin_or_distribution(site: Site) -> None:
    site.dist("vendor-a", platforms={"alpha": DECLINING})
    site.install()

    choice = runtime_platform_choice(SRT_RUNTIME)

    assert (choice.entry_point, choice.dist_name) == (None, None)


def test_platform_choice_resolves_the_platform_when_nothing_resolved_it_yet(site: Site) -> None:
    site.oot("vendor-a", "alpha")
    site.install()

    runtime_platform_choice(SRT_RUNTIME)

    record = current.get_selection_record()
    assert record is not None
    assert record.plugin_name == "alpha"


def test_platform_choice_for_a_harness_installed_platform_names_no_distribution(
    clean_platform: None,
) -> None:
    del clean_platform
    set_current_platform(CpuSRTPlatform())

    choice = runtime_platform_choice(SRT_RUNTIME)

    assert (choice.entry_point, choice.dist_name) == (None, None)
    assert "test harness" in choice.reason


def test_the_srt_runtime_is_registered_through_the_runtimes_entry_point_group() -> None:
    assert get_runtime("srt") == SRT_RUNTIME
    assert runtime_for(SRT_PROFILE) == SRT_RUNTIME
    assert SRT_RUNTIME.accessor_module() is current


def _platform_world(site: Site) -> tuple[dict[str, str], dict[str, str], dict[str, str]]:
    """vendor-a activates, vendor-b declines, tools has no platform; each ships a plugin."""
    selected = site.dist(
        "vendor-a", platforms={"alpha": OOT_PLATFORM}, plugins={"alpha_hooks": GENERAL_PLUGIN}
    )
    other = site.dist(
        "vendor-b", platforms={"beta": DECLINING}, plugins={"beta_hooks": GENERAL_PLUGIN}
    )
    tools = site.dist("tools", plugins={"tool_hooks": GENERAL_PLUGIN})
    site.install()
    return selected, other, tools


def test_load_plugins_in_automatic_mode_skips_plugins_of_a_platform_dist_that_did_not_activate(
    site: Site, registry: type[BaseHookRegistry]
) -> None:
    _, other, _ = _platform_world(site)

    report = load_plugins(SRT_PROFILE, registry)

    assert other["beta_hooks"] not in sys.modules
    assert [(p.name, p.status) for p in report.plugins if p.name == "beta_hooks"] == [
        ("beta_hooks", "excluded")
    ]


def test_load_plugins_in_automatic_mode_runs_the_activated_distributions_plugins(
    site: Site, registry: type[BaseHookRegistry]
) -> None:
    selected, _, tools = _platform_world(site)

    report = load_plugins(SRT_PROFILE, registry)

    assert sorted(report.names("executed")) == ["alpha_hooks", "tool_hooks"]
    assert sys.modules[selected["alpha_hooks"]].RAN == [1]
    assert sys.modules[tools["tool_hooks"]].RAN == [1]


def test_load_plugins_reports_the_automatic_selection(
    site: Site, registry: type[BaseHookRegistry]
) -> None:
    _platform_world(site)

    report = load_plugins(SRT_PROFILE, registry)

    assert report.selection == PlatformChoice(
        "alpha", "vendor-a", reason="automatic platform selection"
    )


def test_broken_plugin_of_the_automatically_selected_distribution_aborts_load_plugins(
    site: Site, registry: type[BaseHookRegistry]
) -> None:
    site.dist(
        "vendor-a",
        platforms={"alpha": OOT_PLATFORM},
        plugins={"alpha_hooks": "def register():\n    raise RuntimeError('kernel table')\n"},
    )
    site.install()

    with pytest.raises(PluginLoadError) as info:
        load_plugins(SRT_PROFILE, registry)

    assert (info.value.plugin, info.value.distribution) == ("alpha_hooks", "vendor-a")


def test_load_plugins_with_a_builtin_platform_skips_every_platform_distributions_plugins(
    site: Site, registry: type[BaseHookRegistry], monkeypatch: pytest.MonkeyPatch
) -> None:
    selected, other, tools = _platform_world(site)
    monkeypatch.setenv("SGLANG_PLATFORM", "cpu")

    report = load_plugins(SRT_PROFILE, registry)

    assert report.names("executed") == ["tool_hooks"]
    assert selected["alpha_hooks"] not in sys.modules
    assert other["beta_hooks"] not in sys.modules
    assert tools["tool_hooks"] in sys.modules
