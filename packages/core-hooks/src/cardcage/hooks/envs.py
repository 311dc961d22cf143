"""Typed environment variables: one registry per package, read live, parsed strictly.

Every variable cardcage reads is declared here (or in the sibling package's own ``envs``) with its
type, default and meaning, so ``docs/`` and ``cardcage env`` list the same table the code uses.
Values are read from ``os.environ`` on every ``get()`` because launchers set them between imports.
Booleans accept only ``0/1/true/false`` (any case): ``"yes"`` or ``"2"`` is an error that names the
variable, never a silent default.

``EnvVar`` is a plain class with ``__slots__`` that writes out its comparison, hash and ``repr``,
not a dataclass: it is defined inside the start-up window that ``benchmarks/bench_platforms.py``
budgets (docs/reference/records.md says what it keeps).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Generic, TypeVar

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from typing import Self

__all__ = [
    "CARDCAGE_DEFERRED_HOOKS",
    "CARDCAGE_EARLY_PATCHES",
    "CARDCAGE_STRICT_HOOKS",
    "ENV_VARS",
    "SGLANG_DIFFUSION_PLATFORM_OVERRIDE",
    "SGLANG_PLATFORM",
    "SGLANG_PLUGINS",
    "EnvRegistry",
    "EnvVar",
    "parse_allowlist",
    "parse_bool",
    "parse_names",
]

T = TypeVar("T")

_TRUE = frozenset({"1", "true"})
_FALSE = frozenset({"0", "false"})


def parse_bool(name: str, raw: str) -> bool:
    """Parse a strict boolean; anything but 0/1/true/false raises ``InvalidEnvVarError``."""
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    from .errors import InvalidEnvVarError  # the error classes load only for a bad value

    raise InvalidEnvVarError(name, raw, "one of 0, 1, true, false")


def parse_str(name: str, raw: str) -> str:
    """Strip surrounding whitespace; an empty string means "not set"."""
    del name
    return raw.strip()


def parse_allowlist(name: str, raw: str) -> frozenset[str] | None:
    """Parse a comma-separated allowlist of plugin names.

    ``""`` (or only spaces) means no filter and returns None; ``","`` names nothing and returns an
    empty set, which allows nothing. Items are stripped and empty items dropped.
    """
    del name
    if not raw.strip():
        return None
    return frozenset(item.strip() for item in raw.split(",") if item.strip())


_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.")


def parse_names(name: str, raw: str) -> tuple[str, ...]:
    """Parse comma-separated entry-point names, in order, without repeats.

    Items are stripped and empty items dropped, so ``""`` and ``","`` name nothing. An item that
    is not an entry-point name (letters, digits, ``_``, ``-``, ``.``) raises
    ``InvalidEnvVarError``: ``a b`` is a typo for ``a,b``, never two names.
    """
    names: list[str] = []
    for part in raw.split(","):
        item = part.strip()
        if not item:
            continue
        if not _NAME_CHARS.issuperset(item):
            from .errors import InvalidEnvVarError

            raise InvalidEnvVarError(
                name,
                raw,
                "comma-separated entry-point names (letters, digits, '_', '-' and '.'; "
                f"{item!r} is not one)",
            )
        if item not in names:
            names.append(item)
    return tuple(names)


class EnvVar(Generic[T]):
    """One environment variable: its name, type, default and what it means (immutable)."""

    __match_args__ = ("name", "default", "parser", "kind", "description")
    __slots__ = __match_args__

    name: str
    default: T
    parser: Callable[[str, str], T]
    kind: str
    description: str

    def __init__(
        self,
        name: str,
        default: T,
        parser: Callable[[str, str], T],
        kind: str,
        description: str,
    ) -> None:
        init = object.__setattr__
        init(self, "name", name)
        init(self, "default", default)
        init(self, "parser", parser)
        init(self, "kind", kind)
        init(self, "description", description)

    def _astuple(self) -> tuple[object, ...]:
        return (self.name, self.default, self.parser, self.kind, self.description)

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self._astuple() == other._astuple()

    def __hash__(self) -> int:
        return hash(self._astuple())

    def __repr__(self) -> str:
        values = zip(self.__match_args__, self._astuple(), strict=True)
        return f"{type(self).__qualname__}({', '.join(f'{n}={v!r}' for n, v in values)})"

    def __setattr__(self, name: str, value: object) -> None:
        from dataclasses import FrozenInstanceError  # the error path only

        raise FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        from dataclasses import FrozenInstanceError  # the error path only

        raise FrozenInstanceError(f"cannot delete field {name!r}")

    def __reduce__(self) -> tuple[type[Self], tuple[object, ...]]:
        return (type(self), self._astuple())

    def raw(self) -> str | None:
        """The raw string in the environment, or None when unset."""
        return os.environ.get(self.name)

    def is_set(self) -> bool:
        return self.name in os.environ

    def get(self) -> T:
        """Read and parse the live value; unset gives the default."""
        raw = os.environ.get(self.name)
        if raw is None:
            return self.default
        return self.parser(self.name, raw)


class EnvRegistry:
    """The variables one distribution reads, in declaration order."""

    def __init__(self, distribution: str) -> None:
        self.distribution = distribution
        self._vars: dict[str, EnvVar[object]] = {}

    def add(self, var: EnvVar[T]) -> EnvVar[T]:
        if var.name in self._vars:
            raise ValueError(f"environment variable {var.name} is declared twice")
        self._vars[var.name] = var  # type: ignore[assignment]
        return var

    def __iter__(self) -> Iterator[EnvVar[object]]:
        return iter(self._vars.values())

    def __getitem__(self, name: str) -> EnvVar[object]:
        return self._vars[name]

    def __contains__(self, name: object) -> bool:
        return name in self._vars


ENV_VARS = EnvRegistry("cardcage-core-hooks")

SGLANG_PLATFORM: EnvVar[str] = ENV_VARS.add(
    EnvVar(
        name="SGLANG_PLATFORM",
        default="",
        parser=parse_str,
        kind="entry-point name",
        description=(
            "Selects the SRT platform plugin by entry-point name. Only that entry point is "
            "loaded; general plugins of distributions that provide another platform are skipped."
        ),
    )
)

SGLANG_DIFFUSION_PLATFORM_OVERRIDE: EnvVar[str] = ENV_VARS.add(
    EnvVar(
        name="SGLANG_DIFFUSION_PLATFORM_OVERRIDE",
        default="",
        parser=parse_str,
        kind="entry-point name or alias",
        description=(
            "Selects the diffusion platform: an entry-point name of the "
            "sglang.multimodal_gen.platforms group, or a built-in alias (cpu, cuda, rocm, mps, "
            "npu, musa; xpu is selected only automatically), which loads no entry point. "
            "General plugins of distributions that provide another platform are skipped."
        ),
    )
)

SGLANG_PLUGINS: EnvVar[frozenset[str] | None] = ENV_VARS.add(
    EnvVar(
        name="SGLANG_PLUGINS",
        default=None,
        parser=parse_allowlist,
        kind="comma-separated names",
        description=(
            "Allowlist of general-plugin entry-point names (both runtimes); also filters automatic "
            "SRT platform discovery. Unset or empty: no filter. ',' allows nothing. A name that "
            "matches no entry point is warned about."
        ),
    )
)

CARDCAGE_STRICT_HOOKS: EnvVar[bool] = ENV_VARS.add(
    EnvVar(
        name="CARDCAGE_STRICT_HOOKS",
        default=False,
        parser=parse_bool,
        kind="boolean",
        description=(
            "When true, load_plugins() raises HookApplyError if any hook target, from any plugin, "
            "fails to apply. By default only the selected platform's hooks are fatal."
        ),
    )
)

CARDCAGE_DEFERRED_HOOKS: EnvVar[bool] = ENV_VARS.add(
    EnvVar(
        name="CARDCAGE_DEFERRED_HOOKS",
        default=False,
        parser=parse_bool,
        kind="boolean",
        description=(
            "When true, load_plugins() never imports a hook target's module: a target whose "
            "module is not imported yet is patched when that module is first imported."
        ),
    )
)

CARDCAGE_EARLY_PATCHES: EnvVar[tuple[str, ...]] = ENV_VARS.add(
    EnvVar(
        name="CARDCAGE_EARLY_PATCHES",
        default=(),
        parser=parse_names,
        kind="comma-separated names",
        description=(
            "Early patches to run at interpreter start, by entry-point name in the "
            "cardcage.early_patches group: stand-ins for missing modules and patches applied "
            "right after a module executes, before the host's importers copy what it defines. "
            "Unset or empty: nothing runs and nothing is imported (the .pth line of "
            "cardcage-core-hooks only reads this variable). Inherited by child processes."
        ),
    )
)
