"""Deferred patching: run a callback right after a module is first imported.

In deferred mode, applying hooks must not import the runtime's modules (that would drag the whole
module graph in at plugin-load time, and import order matters to runtimes). Instead, a finder at
the front of ``sys.meta_path`` watches the names the registry is waiting for; when one is imported,
the module body runs as usual and the registry's callback patches it before the importer sees it.
"""

from __future__ import annotations

import os
import sys
import threading

from .log import get_logger

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from importlib.machinery import ModuleSpec
    from types import ModuleType
    from typing import Any

__all__ = ["ImportWatcher", "watcher"]

logger = get_logger(__name__)


class _NotifyingLoader:
    """Delegates to the real loader, then tells the watcher the module is ready."""

    def __init__(self, loader: Any, on_loaded: Callable[[ModuleType], None]) -> None:
        self._loader = loader
        self._on_loaded = on_loaded

    def create_module(self, spec: ModuleSpec) -> ModuleType | None:
        create = getattr(self._loader, "create_module", None)
        return create(spec) if create is not None else None

    def exec_module(self, module: ModuleType) -> None:
        self._loader.exec_module(module)
        # Leave no trace: the module keeps its real loader, as if we had never been there.
        module.__loader__ = self._loader
        if module.__spec__ is not None:
            module.__spec__.loader = self._loader
        self._on_loaded(module)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._loader, name)


class ImportWatcher:
    """A meta-path finder that only ever wraps the loaders of watched module names."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._callbacks: dict[str, list[Callable[[str], None]]] = {}
        self._resolving = threading.local()

    def watch(self, module: str, callback: Callable[[str], None]) -> None:
        """Call ``callback(module)`` once, right after ``module`` is imported."""
        with self._lock:
            self._callbacks.setdefault(module, []).append(callback)
            if self not in sys.meta_path:
                sys.meta_path.insert(0, self)

    def watched(self) -> tuple[str, ...]:
        with self._lock:
            return tuple(sorted(self._callbacks))

    def unwatch_all(self, callback: Callable[[str], None]) -> None:
        with self._lock:
            for name in list(self._callbacks):
                remaining = [cb for cb in self._callbacks[name] if cb != callback]
                if remaining:
                    self._callbacks[name] = remaining
                else:
                    del self._callbacks[name]
            # Nothing left to wait for: leave sys.meta_path as it was before the first watch.
            if not self._callbacks and self in sys.meta_path:
                sys.meta_path.remove(self)

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if fullname not in self._callbacks:
            return None
        busy: set[str] = getattr(self._resolving, "names", set())
        if fullname in busy:
            return None
        busy.add(fullname)
        self._resolving.names = busy
        try:
            spec: ModuleSpec | None = None
            for finder in list(sys.meta_path):
                if finder is self:
                    continue
                find = getattr(finder, "find_spec", None)
                if find is None:
                    continue
                spec = find(fullname, path, target)
                if spec is not None:
                    break
        finally:
            busy.discard(fullname)
        if spec is None or spec.loader is None:
            return None
        spec.loader = _NotifyingLoader(spec.loader, self._fire)  # type: ignore[assignment]
        return spec

    def _fire(self, module: ModuleType) -> None:
        name = module.__name__
        with self._lock:
            callbacks = self._callbacks.pop(name, [])
            if not self._callbacks and self in sys.meta_path:
                sys.meta_path.remove(self)
        failure: BaseException | None = None
        for callback in callbacks:
            try:
                callback(name)
            except Exception as exc:
                logger.exception("Deferred hook application failed after importing %s", name)
                failure = failure or exc
        if failure is not None:
            # A callback raises only when its policy says the process must not go on (the
            # selected platform's hook failed): the import that revealed it fails with it.
            raise failure


watcher = ImportWatcher()


def _reinit_lock_after_fork() -> None:
    watcher._lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reinit_lock_after_fork)
