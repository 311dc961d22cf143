"""The static reader behind ``plugin_scan``: one plugin source file in, its host dependencies out.

Everything here works on ``ast`` trees of text it is handed. It must never import the plugin,
a host, or anything the plugin names: a vendor runs ``cardcage deps`` *before* installing the
host release in question, and the plugin's own imports may not even resolve here.

The rules are heuristics, written down next to the code that applies them, so that a vendor who
reads a surprising row can find why it is there (and a reviewer can find what is missed).
Names are resolved flow-insensitively per file: every import statement of a file binds its names
for the whole file, whatever the scope, and a later local assignment does not unbind them.

Known blind spots, by design of a static reader: names reached through instances
(``self.layer.forward``), through other modules' re-exports of a host name (the plugin's
``from .compat import Foo``), or built at run time (``import_module(f"vllm.{x}")``,
``getattr(m, name)``) are not seen; a parameter that shadows a host alias is taken for the alias;
dotted strings are split into module and name by capitalisation, which a lower-case class or a
capitalised module defeats; a version test on any library (``torch.__version__``) counts as a
host version guard.

Import-safe: stdlib only.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from .model import CallShape, Dependency, Source, SymbolKind, Where, colon_target

__all__ = ["Accumulator", "Key", "env_prefixes", "scan_tree"]

#: A dependency's identity: rows with the same key are one :class:`Dependency`.
Key = tuple[str, SymbolKind, str, Source]

#: Caught by an ``except`` that guards an import: a missing module or name raises one of these.
_IMPORT_GUARDS = frozenset(
    {"ImportError", "ModuleNotFoundError", "AttributeError", "Exception", "BaseException"}
)
#: Caught by an ``except`` that guards an attribute use (``mod.Name``, ``getattr(mod, "Name")``).
_ATTRIBUTE_GUARDS = frozenset({"AttributeError", "Exception", "BaseException"})

#: Where a host keeps its environment variables as attributes (``vllm.envs.VLLM_X``, SGLang's
#: ``sglang.srt.environ.envs.SGLANG_X``): an attribute past one of these is an env var, not a name.
_ENV_HOLDERS = ("vllm.envs", "sglang.srt.environ.envs")

#: Cardcage's hook declarations (``cardcage.platforms.plugin``) and early value patches
#: (``cardcage.hooks.early.set_value``) take their target first, without "hook" in their name.
_HOOK_FUNCTIONS = frozenset({"around", "before", "after", "replace", "HookSpec", "set_value"})

#: Version identifiers of Python itself, not of a host: ``sys.version_info``,
#: ``platform.python_version()``. A test on them does not pick host releases.
_PYTHON_VERSION = frozenset({"version_info", "python_version", "python_version_tuple"})

#: ``get_bool_env_var("SGLANG_X")`` and its siblings in ``sglang.srt.utils``.
_ENV_HELPER = re.compile(r"^get_\w+_env_var$")
_ENV_NAME = re.compile(r"^[A-Z][A-Z0-9_]*$")
_IDENTIFIER = r"[A-Za-z_]\w*"


def env_prefixes(host: str) -> tuple[str, ...]:
    """The prefixes of a host's own environment variables (``SGL_`` is SGLang's older spelling)."""
    if host == "sglang":
        return ("SGLANG_", "SGL_")
    return (host.upper() + "_",)


@dataclass(frozen=True)
class _Bound:
    """What a local name of a plugin file stands for in a host.

    ``import vllm.a.b`` binds ``vllm`` with ``modules`` holding every module the statements made
    reachable through it (``vllm``, ``vllm.a``, ``vllm.a.b``); ``import vllm.a.b as x`` binds
    ``x`` to ``vllm.a.b``; ``from vllm.a import Foo`` binds ``Foo`` to ``vllm.a`` and ``("Foo",)``.
    """

    host: str
    module: str
    qual: tuple[str, ...] = ()
    modules: frozenset[str] = frozenset()


@dataclass(frozen=True)
class _Ref:
    """A use resolved to a host symbol: a dependency key, and whether calls on it are on it."""

    key: Key
    #: False when the attribute chain was cut (``x.Foo.bar.baz`` records ``Foo.bar``): a call at
    #: the end of the chain calls something the dependency does not name.
    exact: bool


@dataclass
class Accumulator:
    """Collects sites and call shapes per dependency key across every file of a distribution."""

    distribution: str
    _sites: dict[Key, dict[Where, bool]] = field(default_factory=dict)
    _calls: dict[Key, set[CallShape]] = field(default_factory=dict)

    def add(self, key: Key, where: Where, *, guarded: bool) -> None:
        """One site; a site seen twice (same location) is guarded only if both uses are."""
        sites = self._sites.setdefault(key, {})
        sites[where] = sites.get(where, True) and guarded

    def add_call(self, key: Key, shape: CallShape) -> None:
        self._calls.setdefault(key, set()).add(shape)

    def merge(self, other: Accumulator) -> None:
        """Take in another's sites and calls (one file's, once the whole file was read)."""
        for key, sites in other._sites.items():
            for where, guarded in sites.items():
                self.add(key, where, guarded=guarded)
        for key, shapes in other._calls.items():
            self._calls.setdefault(key, set()).update(shapes)

    def dependencies(self) -> list[Dependency]:
        """One row per key, sites and calls sorted; guarded only if every site is."""
        rows = [
            Dependency(
                host=key[0],
                kind=key[1],
                symbol=key[2],
                source=key[3],
                distribution=self.distribution,
                where=tuple(sorted(sites, key=_where_order)),
                calls=tuple(
                    sorted(
                        self._calls.get(key, ()),
                        key=lambda c: (_where_order(c.where), c.positional, c.keywords),
                    )
                ),
                guarded=all(sites.values()),
            )
            for key, sites in self._sites.items()
            if sites
        ]
        rows.sort(key=lambda d: (d.host, d.symbol, d.source, d.kind))
        return rows


def _where_order(where: Where) -> tuple[str, int, str]:
    """``a.py:9`` before ``a.py:10``: file, then line as a number."""
    path, _, line = where.location.rpartition(":")
    if path and line.isdigit():
        return (path, int(line), "")
    return (where.location, 0, where.location)


def _dotted(node: ast.expr) -> str | None:
    """``a.b.c`` for a Name/Attribute chain, else None."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def _last_name(node: ast.expr) -> str | None:
    """The name a call's function is spelled with, last component only (``a.b.hook`` -> hook)."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _is_version_test(test: ast.expr) -> bool:
    """An ``if`` test that decides by host version.

    Heuristic: any identifier in the test (a name, an attribute, a called function) whose
    lower-case spelling contains ``version``: ``__version__``, ``version("vllm")``,
    ``vllm_version_is(...)``, ``is_version(...)``, ``Version(...)``, ``VLLM_VERSION >= ...``;
    Python's own version (``sys.version_info``) does not count. Code under such a test was
    written for some releases only, so what it needs is guarded. Any library's version counts
    (``torch.__version__``), as the test cannot tell which library a version belongs to.
    """
    for node in ast.walk(test):
        spelled = _last_name(node) if isinstance(node, (ast.Name, ast.Attribute)) else None
        if (
            spelled is not None
            and "version" in spelled.lower()
            and spelled.lower() not in _PYTHON_VERSION
        ):
            return True
    return False


def _caught(handlers: Iterable[ast.ExceptHandler]) -> set[str]:
    """The exception names an ``except`` list catches (a bare ``except:``: BaseException)."""
    names: set[str] = set()
    for handler in handlers:
        if handler.type is None:
            names.add("BaseException")
            continue
        types = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
        for node in types:
            spelled = _last_name(node)
            if spelled is not None:
                names.add(spelled)
    return names


def _walk_runtime(tree: ast.AST) -> Iterator[ast.AST]:
    """Every node of ``tree`` except those under ``if TYPE_CHECKING:`` bodies."""
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            stack.extend(node.orelse)
            continue
        stack.extend(ast.iter_child_nodes(node))


class _Scanner(ast.NodeVisitor):
    """One file's pass: records sites into the accumulator as it meets them."""

    def __init__(
        self, path: str, tree: ast.Module, hosts: Mapping[str, tuple[str, ...]], acc: Accumulator
    ) -> None:
        self.path = path
        self.acc = acc
        self.host_of_package = {pkg: host for host, pkgs in hosts.items() for pkg in pkgs}
        # With no host package at all, (?!) matches nothing: no string is a host target.
        packages = "|".join(re.escape(pkg) for pkg in sorted(self.host_of_package, key=len)[::-1])
        packages = packages or "(?!)"
        self.colon_target = re.compile(
            rf"^(?:{packages})(?:\.\w+)*:{_IDENTIFIER}(?:\.{_IDENTIFIER})*$"
        )
        self.dotted_path = re.compile(rf"^(?:{packages})(?:\.{_IDENTIFIER})+$")
        # Guard state: exception names caught around the current node, and whether a version
        # test encloses it.
        self.caught: set[str] = set()
        self.version_guarded = False
        self.bindings: dict[str, list[_Bound]] = {}
        self.os_names: set[str] = set()
        self.environ_names: set[str] = set()
        self.getenv_names: set[str] = set()
        #: Module-level ``NAME = "text"``: hooks and env reads often name their target so.
        self.constants: dict[str, ast.Constant] = {}
        #: Dotted host paths with a capitalised part, recorded at the end unless a hook used them.
        self.qualname_literals: list[tuple[ast.Constant, str, bool]] = []
        self.hook_consumed: set[int] = set()
        self._prepass(tree)

    # -- the pre-pass: what every name of the file is bound to ------------------------------

    def _prepass(self, tree: ast.Module) -> None:
        for stmt in tree.body:
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
                target, value = stmt.targets[0], stmt.value
            elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
                target, value = stmt.target, stmt.value
            else:
                continue
            if (
                isinstance(target, ast.Name)
                and isinstance(value, ast.Constant)
                and isinstance(value.value, str)
            ):
                self.constants[target.id] = value
        modules_via: dict[str, set[str]] = {}
        for node in _walk_runtime(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    self._bind_import(alias, modules_via)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                for alias in node.names:
                    self._bind_from(node.module, alias)
        for top, modules in modules_via.items():
            host = self.host_of_package[top]
            self.bindings.setdefault(top, []).append(_Bound(host, top, modules=frozenset(modules)))

    def _bind_import(self, alias: ast.alias, modules_via: dict[str, set[str]]) -> None:
        top = alias.name.split(".")[0]
        if alias.name == "os" or (top == "os" and not alias.asname):  # import os.path binds os
            self.os_names.add(alias.asname or "os")
        host = self.host_of_package.get(top)
        if host is None:
            return
        if alias.asname:
            self.bindings.setdefault(alias.asname, []).append(
                _Bound(host, alias.name, modules=frozenset({alias.name}))
            )
            return
        parts = alias.name.split(".")
        reachable = modules_via.setdefault(top, set())
        reachable.update(".".join(parts[: i + 1]) for i in range(len(parts)))

    def _bind_from(self, module: str, alias: ast.alias) -> None:
        local = alias.asname or alias.name
        if module == "os":
            if alias.name == "environ":
                self.environ_names.add(local)
            elif alias.name == "getenv":
                self.getenv_names.add(local)
            return
        host = self.host_of_package.get(module.split(".", maxsplit=1)[0])
        if host is None or alias.name == "*":
            return
        self.bindings.setdefault(local, []).append(_Bound(host, module, (alias.name,)))

    # -- recording ---------------------------------------------------------------------------

    def _where(self, node: ast.AST) -> Where:
        return Where(f"{self.path}:{getattr(node, 'lineno', 0)}")

    def _guarded(self, guards: frozenset[str]) -> bool:
        return self.version_guarded or bool(self.caught & guards)

    def _record(
        self, key: Key, node: ast.AST, guards: frozenset[str], *, guarded: bool = False
    ) -> None:
        self.acc.add(key, self._where(node), guarded=guarded or self._guarded(guards))

    def _host(self, dotted: str) -> str | None:
        return self.host_of_package.get(dotted.split(".", maxsplit=1)[0])

    def _env_key(self, name: str) -> Key | None:
        """An env var dependency for a host's own variable; None for anyone else's."""
        if not _ENV_NAME.match(name):
            return None
        for host in dict.fromkeys(self.host_of_package.values()):
            if name.startswith(env_prefixes(host)):
                return (host, "env-var", name, "env-var")
        return None

    def _classify(self, host: str, module: str, qual: tuple[str, ...]) -> _Ref:
        """The key for ``module`` + attribute chain ``qual`` (an env var, a module or a name).

        A name keeps at most two parts past its module (``Foo.bar``): deeper attributes are
        usually on instances or nested classes, which a static reader of the release cannot
        follow anyway.
        """
        full = ".".join((module, *qual))
        for holder in _ENV_HOLDERS:
            if full.startswith(holder + "."):
                var = full[len(holder) + 1 :].split(".")[0]
                env = self._env_key(var)
                if env is not None:
                    return _Ref(env, exact=False)
        if not qual:
            return _Ref((host, "module", module, "import"), exact=False)
        return _Ref(
            (host, "name", f"{module}:{'.'.join(qual[:2])}", "import"), exact=len(qual) <= 2
        )

    def _resolve(self, dotted: str) -> list[_Ref]:
        """Every host symbol a ``name.attr...`` chain of this file may stand for."""
        base, *attrs = dotted.split(".")
        refs: list[_Ref] = []
        for bound in self.bindings.get(base, ()):
            if bound.qual:
                refs.append(self._classify(bound.host, bound.module, (*bound.qual, *attrs)))
                continue
            # A module binding: the chain's module part is the longest module it reaches.
            full = ".".join((bound.module, *attrs))
            module = max(
                (
                    m
                    for m in bound.modules | {bound.module}
                    if full == m or full.startswith(m + ".")
                ),
                key=len,
            )
            rest = tuple(full[len(module) + 1 :].split(".")) if full != module else ()
            refs.append(self._classify(bound.host, module, rest))
        return refs

    # -- scopes and guards -------------------------------------------------------------------

    def visit_If(self, node: ast.If) -> None:
        if _is_type_checking(node.test):
            # Typing-only imports are no runtime dependency; the else branch is.
            for stmt in node.orelse:
                self.visit(stmt)
            return
        self.visit(node.test)
        outer = self.version_guarded
        self.version_guarded = outer or _is_version_test(node.test)
        for stmt in (*node.body, *node.orelse):
            self.visit(stmt)
        self.version_guarded = outer

    def visit_IfExp(self, node: ast.IfExp) -> None:
        self.visit(node.test)
        outer = self.version_guarded
        self.version_guarded = outer or _is_version_test(node.test)
        self.visit(node.body)
        self.visit(node.orelse)
        self.version_guarded = outer

    def _visit_try(self, node: ast.Try | ast.TryStar) -> None:
        outer = self.caught
        self.caught = outer | _caught(node.handlers)
        for stmt in node.body:
            self.visit(stmt)
        self.caught = outer
        for part in (*node.handlers, *node.orelse, *node.finalbody):
            self.visit(part)

    def visit_Try(self, node: ast.Try) -> None:
        self._visit_try(node)

    def visit_TryStar(self, node: ast.TryStar) -> None:
        self._visit_try(node)

    def _visit_function(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> None:
        """A body runs later, outside any ``try`` around the ``def``; annotations never count."""
        if not isinstance(node, ast.Lambda):
            for decorator in node.decorator_list:
                self.visit(decorator)
        for default in (*node.args.defaults, *node.args.kw_defaults):
            if default is not None:
                self.visit(default)
        outer = self.caught
        self.caught = set()
        body = [node.body] if isinstance(node, ast.Lambda) else node.body
        for part in body:
            self.visit(part)
        self.caught = outer

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self._visit_function(node)

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> None:
        self._visit_function(node)

    def visit_Lambda(self, node: ast.Lambda) -> None:
        self._visit_function(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self.visit(node.target)
        if node.value is not None:
            self.visit(node.value)

    def visit_Expr(self, node: ast.Expr) -> None:
        # A bare string statement is a docstring or a comment: it names nothing the code uses.
        if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            return
        self.visit(node.value)

    def visit_JoinedStr(self, node: ast.JoinedStr) -> None:
        # The literal pieces of an f-string are message text, never a whole target.
        for value in node.values:
            if isinstance(value, ast.FormattedValue):
                self.visit(value)

    # -- imports -----------------------------------------------------------------------------

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            host = self._host(alias.name)
            if host is not None:
                self._record((host, "module", alias.name, "import"), node, _IMPORT_GUARDS)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level or not node.module:
            return  # the plugin's own modules
        host = self._host(node.module)
        if host is None:
            return
        for alias in node.names:
            if alias.name == "*":
                key: Key = (host, "module", node.module, "import")
            else:
                key = self._classify(host, node.module, (alias.name,)).key
            self._record(key, node, _IMPORT_GUARDS)

    # -- uses --------------------------------------------------------------------------------

    def visit_Attribute(self, node: ast.Attribute) -> None:
        dotted = _dotted(node)
        if dotted is None:
            self.generic_visit(node)
            return
        for ref in self._resolve(dotted):
            if ref.key[1] != "module":
                self._record(ref.key, node, _ATTRIBUTE_GUARDS)

    def visit_Subscript(self, node: ast.Subscript) -> None:
        if self._is_environ(node.value):
            self._record_env(node.slice, node)
        self.generic_visit(node)

    def visit_Compare(self, node: ast.Compare) -> None:
        # "VLLM_X" in os.environ
        if (
            len(node.ops) == 1
            and isinstance(node.ops[0], (ast.In, ast.NotIn))
            and self._is_environ(node.comparators[0])
        ):
            self._record_env(node.left, node)
        self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> None:
        if not isinstance(node.value, str):
            return
        text = node.value
        if self.colon_target.match(text):
            host = self._host(text)
            assert host is not None
            self._record((host, "name", text, "hook"), node, _IMPORT_GUARDS)
        elif self.dotted_path.match(text) and any(p[:1].isupper() for p in text.split(".")):
            self.qualname_literals.append((node, text, self._guarded(_IMPORT_GUARDS)))

    def visit_Call(self, node: ast.Call) -> None:
        name = _last_name(node.func)
        if name in {"getattr", "hasattr"} and isinstance(node.func, ast.Name):
            self._getattr(node, guarded=name == "hasattr" or len(node.args) >= 3)
        elif name in {"import_module", "__import__"}:
            self._dynamic_import(node)
        elif name is not None and self._env_read(node, name):
            pass
        elif name is not None and _is_hook_call(node.func, name):
            self._hook_call(node)
        self._call_shape(node)
        self.generic_visit(node)

    def _call_shape(self, node: ast.Call) -> None:
        dotted = _dotted(node.func)
        if dotted is None:
            return
        shape = CallShape(
            positional=sum(not isinstance(arg, ast.Starred) for arg in node.args),
            keywords=tuple(sorted(kw.arg for kw in node.keywords if kw.arg is not None)),
            star_args=any(isinstance(arg, ast.Starred) for arg in node.args),
            star_kwargs=any(kw.arg is None for kw in node.keywords),
            where=self._where(node),
        )
        for ref in self._resolve(dotted):
            if ref.exact and ref.key[1] == "name":
                self.acc.add_call(ref.key, shape)

    def _string(self, node: ast.expr | None) -> tuple[str, ast.Constant] | None:
        """A literal string, or a module-level constant's: ``around(TARGET, ...)``."""
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value, node
        if isinstance(node, ast.Name) and node.id in self.constants:
            constant = self.constants[node.id]
            assert isinstance(constant.value, str)
            return constant.value, constant
        return None

    def _getattr(self, node: ast.Call, *, guarded: bool) -> None:
        if len(node.args) < 2:
            return
        subject = _dotted(node.args[0])
        found = self._string(node.args[1])
        if subject is None or found is None:
            return
        for ref in self._resolve(f"{subject}.{found[0]}"):
            if ref.key[1] != "module":
                self._record(ref.key, node, _ATTRIBUTE_GUARDS, guarded=guarded)

    def _dynamic_import(self, node: ast.Call) -> None:
        found = self._string(node.args[0]) if node.args else None
        if found is None:
            return
        if not (self.dotted_path.match(found[0]) or found[0] in self.host_of_package):
            return
        host = self._host(found[0])
        if host is not None:
            self._record((host, "module", found[0], "import"), node, _IMPORT_GUARDS)

    # -- environment variables ---------------------------------------------------------------

    def _is_environ(self, node: ast.expr) -> bool:
        if isinstance(node, ast.Name):
            return node.id in self.environ_names
        return (
            isinstance(node, ast.Attribute)
            and node.attr == "environ"
            and isinstance(node.value, ast.Name)
            and node.value.id in self.os_names
        )

    def _record_env(self, arg: ast.expr | None, node: ast.AST) -> None:
        found = self._string(arg)
        if found is None:
            return
        key = self._env_key(found[0])
        if key is not None:
            self._record(key, node, _ATTRIBUTE_GUARDS)

    def _env_read(self, node: ast.Call, name: str) -> bool:
        """``os.environ.get/setdefault/pop``, ``os.getenv``, ``get_bool_env_var`` & co."""
        func = node.func
        environ_method = (
            isinstance(func, ast.Attribute)
            and func.attr in {"get", "setdefault", "pop"}
            and self._is_environ(func.value)
        )
        getenv = (isinstance(func, ast.Name) and func.id in self.getenv_names) or (
            isinstance(func, ast.Attribute)
            and func.attr == "getenv"
            and isinstance(func.value, ast.Name)
            and func.value.id in self.os_names
        )
        if not (environ_method or getenv or _ENV_HELPER.match(name)):
            return False
        self._record_env(node.args[0] if node.args else None, node)
        return True

    # -- hook targets ------------------------------------------------------------------------

    def _hook_call(self, node: ast.Call) -> None:
        """A dotted host path handed first (or as ``target=``) to a hook or patch call.

        The dotted form does not say where the module ends. Heuristic: the module is every part
        before the first capitalised one (``sglang.srt.x.Foo.bar`` -> ``sglang.srt.x:Foo.bar``);
        with none capitalised, every part but the last (``pkg.mod.func`` -> ``pkg.mod:func``).
        """
        arg = node.args[0] if node.args else None
        if arg is None:
            arg = next((kw.value for kw in node.keywords if kw.arg == "target"), None)
        found = self._string(arg)
        if found is None or not self.dotted_path.match(found[0]):
            return
        self.hook_consumed.add(id(found[1]))
        self._record(_split_dotted(self, found[0], "hook"), node, _IMPORT_GUARDS)

    def finish(self) -> None:
        """Dotted qualnames no hook call took: the plugin names a host class by its path.

        ``"vllm.v1.worker.cpu_worker.CPUWorker"`` returned to the host as a worker class is as
        much a dependency as an import of it (the host imports it by that name). Only strings
        with a capitalised part count: an all-lower-case dotted string may be a module, a logger
        or an entry point group name, and is left alone.
        """
        for node, text, guarded in self.qualname_literals:
            if id(node) not in self.hook_consumed:
                key = _split_dotted(self, text, "import")
                self._record(key, node, _IMPORT_GUARDS, guarded=guarded)


def _is_hook_call(func: ast.expr, name: str) -> bool:
    """A call that takes a hook or patch target first.

    Heuristic: cardcage's declarations (:data:`_HOOK_FUNCTIONS`), or a function whose dotted
    spelling mentions ``hook`` or ``patch``: ``register_hook(...)``, ``mock.patch(...)``,
    ``HookRegistry.register(...)``, ``early.hook(...)``.
    """
    spelled = (_dotted(func) or name).lower()
    return name in _HOOK_FUNCTIONS or "hook" in spelled or "patch" in spelled


def _split_dotted(scanner: _Scanner, text: str, source: Source) -> Key:
    host = scanner.host_of_package[text.split(".", 1)[0]]
    return (host, "name", colon_target(text), source)


def scan_tree(
    path: str, tree: ast.Module, hosts: Mapping[str, tuple[str, ...]], acc: Accumulator
) -> None:
    """Record into ``acc`` every host dependency of one parsed file shown as ``path``."""
    scanner = _Scanner(path, tree, hosts, acc)
    scanner.visit(tree)
    scanner.finish()
