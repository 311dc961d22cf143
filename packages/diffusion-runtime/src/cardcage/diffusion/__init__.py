"""cardcage.diffusion: the diffusion runtime of the SGLang plugin contract.

The facade of the seed's ``sglang.multimodal_gen``. Importing it, or binding
``from cardcage.diffusion import DiffGenerator`` at a script's module scope, imports no runtime
module: ``DiffGenerator`` is a lazy proxy that imports the real class on first use (a call, an
attribute, ``isinstance``/``issubclass``, subclassing). That matters because spawn re-executes
the launching script's module scope in every worker before the worker initializes its platform;
anything built there is out of reach of ``init_backend()`` and of plugin hooks. The other names
(``SamplingParams``, ``PipelineConfig``, ``ServerArgs``) load on first access; use them under
``if __name__ == "__main__":`` or inside a function.
"""

from __future__ import annotations

import importlib
import threading

__version__ = "0.1.0"

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from .configs.pipeline_config import PipelineConfig
    from .configs.sampling_params import SamplingParams
    from .runtime.managers.diffusion_generator import DiffGenerator
    from .runtime.server_args import ServerArgs

__all__ = ["DiffGenerator", "PipelineConfig", "SamplingParams", "ServerArgs"]

_LAZY_NAMES = {
    "PipelineConfig": "cardcage.diffusion.configs.pipeline_config",
    "SamplingParams": "cardcage.diffusion.configs.sampling_params",
    "ServerArgs": "cardcage.diffusion.runtime.server_args",
}


class _LazyClass:
    """Stands for a class until first use, then delegates to it (thread-safe, loads once).

    Unlike a plain lazy-import object it keeps ``isinstance``/``issubclass`` and subclassing
    working, pickles by reference, and introspection of dunder names never triggers the import.
    """

    __module__ = __name__

    def __init__(self, module: str, name: str) -> None:
        self._module = module
        self._name = name
        self._lock = threading.Lock()
        self._target: type | None = None

    def _load(self) -> type:
        target = self._target
        if target is None:
            with self._lock:
                if self._target is None:
                    self._target = getattr(importlib.import_module(self._module), self._name)
                target = self._target
        assert target is not None
        return target

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__") and attr.endswith("__"):
            raise AttributeError(attr)
        return getattr(self._load(), attr)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._load()(*args, **kwargs)

    def __instancecheck__(self, obj: object) -> bool:
        return isinstance(obj, self._load())

    def __subclasscheck__(self, cls: type) -> bool:
        return issubclass(cls, self._load())

    def __mro_entries__(self, bases: tuple[object, ...]) -> tuple[type]:
        return (self._load(),)

    def __reduce__(self) -> str:
        return self._name  # pickled as a reference to cardcage.diffusion.<name>

    def __repr__(self) -> str:
        state = "loaded" if self._target is not None else "not imported yet"
        return f"<lazy class {self._module}.{self._name} ({state})>"


if not TYPE_CHECKING:
    DiffGenerator = _LazyClass(
        "cardcage.diffusion.runtime.managers.diffusion_generator", "DiffGenerator"
    )


def __getattr__(name: str) -> object:
    module = _LAZY_NAMES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
