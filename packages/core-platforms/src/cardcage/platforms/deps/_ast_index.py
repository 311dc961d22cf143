"""What one host module binds at run time, read from its syntax tree: the index lookups walk.

:mod:`cardcage.platforms.deps.host_source` answers "does release R have ``module:Qual.name``?"
without importing R. This module turns one parsed source file into the facts that question
needs: the top-level names it binds (and how: a definition, an assignment, an import), the names
it binds only for type checkers, its ``from m import *`` sources, its ``__all__``, and the
module-level constructs that make any name possible (``__getattr__``, ``globals()`` writes,
``exec``). Classes are indexed the same way, on demand.

Import-safe: stdlib only; it reads syntax trees and never imports or executes what they describe.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from cardcage.platforms.deps.model import Param, Signature

__all__ = [
    "Binding",
    "ClassInfo",
    "ModuleInfo",
    "absolute_module",
    "call_text",
    "class_info",
    "index_module",
    "signature_of",
    "string_constants",
]

BindingKind = Literal["class", "function", "value", "import", "from-import"]

#: Decorators after which a method reads as an attribute, not a callable.
_PROPERTY_DECORATORS = frozenset({"property", "cached_property", "functools.cached_property"})

_FunctionNode = ast.FunctionDef | ast.AsyncFunctionDef


@dataclass(frozen=True)
class Binding:
    """One statement that binds a name: what it binds it to, as far as syntax says."""

    kind: BindingKind
    #: The ``class``/``def`` node for definitions (methods keep theirs for signatures).
    node: ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef | None = None
    #: ``import``: the module bound; ``from-import``: the module imported from (absolute; None
    #: when a relative import climbs above the top-level package).
    module: str | None = None
    #: ``from-import``: the name imported from ``module``.
    name: str | None = None
    #: An assignment from a call: ``"make_cls(...)"``, what builds the value at import time.
    call: str | None = None
    #: An assignment from a plain name or attribute (``Alias = Original``): followed by lookups.
    alias: ast.expr | None = None
    #: ``@property`` and friends: a method that reads as a value.
    is_property: bool = False
    #: ``@overload`` stubs: replaced by the real definition at run time.
    is_overload: bool = False


@dataclass
class ModuleInfo:
    """Everything a module binds at top level, and what makes its namespace open-ended."""

    #: Name -> its bindings in source order (conditional branches included).
    bindings: dict[str, list[Binding]] = field(default_factory=dict)
    #: Names bound only under ``if TYPE_CHECKING:``: absent at run time.
    type_checking_only: set[str] = field(default_factory=set)
    #: Their bindings: what a lazy ``__getattr__`` serving the same name most likely returns.
    type_checking_bindings: dict[str, list[Binding]] = field(default_factory=dict)
    #: Names a module-level ``__getattr__`` visibly serves: compared to its argument in an
    #: ``if`` that returns, or keys of a module-level literal it looks the argument up in.
    getattr_names: frozenset[str] = frozenset()
    #: Absolute names of ``from m import *`` sources (None: a relative one above the top).
    star_imports: list[str | None] = field(default_factory=list)
    #: Why any name might exist (``"module defines __getattr__"``), first one first.
    dynamic: list[str] = field(default_factory=list)
    #: ``__all__`` when every piece of it is a literal; None when absent.
    all_names: tuple[str, ...] | None = None
    #: ``__all__`` exists but is built in a way syntax cannot follow.
    all_dynamic: bool = False
    #: ``Cls.attr = ...`` at module level: attributes added to a class after its body.
    class_extras: dict[str, set[str]] = field(default_factory=dict)

    def defines(self, name: str) -> bool:
        """True when the module itself defines ``name`` (a class, function or assignment).

        Imports do not count: this answers "where is ``name`` defined now?", for names that
        moved between releases.
        """
        return any(b.kind in ("class", "function", "value") for b in self.bindings.get(name, ()))


@dataclass
class ClassInfo:
    """A class body's members, the instance attributes its methods assign, and its escapes."""

    members: dict[str, list[Binding]] = field(default_factory=dict)
    #: ``self.x = ...`` in any method (the first parameter's name, whatever it is).
    instance_attrs: set[str] = field(default_factory=set)
    has_getattr: bool = False
    #: The ``metaclass=`` keyword as written, or None.
    metaclass: str | None = None


def _is_type_checking(test: ast.expr) -> bool:
    """``if TYPE_CHECKING:`` / ``if typing.TYPE_CHECKING:``: a branch only type checkers run."""
    if isinstance(test, ast.Name):
        return test.id == "TYPE_CHECKING"
    return isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"


def call_text(call: ast.Call) -> str:
    """``make_cls(...)``: how a report names what builds a value at import time."""
    try:
        return f"{ast.unparse(call.func)}(...)"
    except (ValueError, AttributeError, RecursionError):  # pragma: no cover - defensive
        return "a call"


def _decorator_name(node: ast.expr) -> str:
    target = node.func if isinstance(node, ast.Call) else node
    try:
        return ast.unparse(target)
    except (ValueError, AttributeError, RecursionError):  # pragma: no cover - defensive
        return ""


def _function_binding(node: _FunctionNode) -> Binding:
    names = [_decorator_name(d) for d in node.decorator_list]
    is_property = any(
        n in _PROPERTY_DECORATORS or n.endswith((".setter", ".getter", ".deleter")) for n in names
    )
    is_overload = any(
        n in ("overload", "typing.overload", "typing_extensions.overload") for n in names
    )
    return Binding("function", node, is_property=is_property, is_overload=is_overload)


def _value_binding(value: ast.expr | None) -> Binding:
    if isinstance(value, ast.Call):
        return Binding("value", call=call_text(value))
    if isinstance(value, ast.Name | ast.Attribute):
        return Binding("value", alias=value)
    return Binding("value")


def _target_names(target: ast.expr) -> Iterable[str]:
    """Names a (possibly unpacking) assignment target binds; attributes and items bind none."""
    if isinstance(target, ast.Name):
        yield target.id
    elif isinstance(target, ast.Tuple | ast.List):
        for element in target.elts:
            yield from _target_names(element)
    elif isinstance(target, ast.Starred):
        yield from _target_names(target.value)


def _is_globals_call(node: ast.expr) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in ("globals", "vars", "locals")
        and not node.args
    )


def absolute_module(module: str, is_package: bool, level: int, name: str | None) -> str | None:
    """The absolute module a ``from ... import`` in ``module`` names (None: above the top)."""
    if level == 0:
        return name
    parts = module.split(".") if is_package else module.split(".")[:-1]
    if level - 1 > len(parts) - 1:
        return None
    if level > 1:
        parts = parts[: len(parts) - (level - 1)]
    if name:
        parts = [*parts, name]
    return ".".join(parts) or None


def _literal_strings(node: ast.expr | None) -> tuple[str, ...] | None:
    """The strings of a list/tuple literal of string constants, or None if it is anything else."""
    if not isinstance(node, ast.List | ast.Tuple):
        return None
    out: list[str] = []
    for element in node.elts:
        if not (isinstance(element, ast.Constant) and isinstance(element.value, str)):
            return None
        out.append(element.value)
    return tuple(out)


class _ModuleIndexer:
    def __init__(self, module: str, is_package: bool) -> None:
        self.module = module
        self.is_package = is_package
        self.info = ModuleInfo()
        self.type_checking: dict[str, list[Binding]] = {}
        self.getattr_node: ast.FunctionDef | ast.AsyncFunctionDef | None = None
        #: Top-level names bound to literal dicts/sets/lists/tuples of strings: their strings.
        self.literals: dict[str, tuple[str, ...]] = {}

    def bind(self, name: str, binding: Binding, type_checking: bool) -> None:
        if type_checking:
            self.type_checking.setdefault(name, []).append(binding)
            return
        self.info.bindings.setdefault(name, []).append(binding)

    def dynamic(self, reason: str, type_checking: bool) -> None:
        if not type_checking and reason not in self.info.dynamic:
            self.info.dynamic.append(reason)

    def set_all(self, value: ast.expr | None, extend: bool) -> None:
        names = _literal_strings(value)
        if names is None:
            self.info.all_dynamic = True
            return
        if extend and self.info.all_names is not None:
            self.info.all_names = (*self.info.all_names, *names)
        else:
            self.info.all_names = names

    def visit(self, body: Sequence[ast.stmt], type_checking: bool = False) -> None:
        for stmt in body:
            self.statement(stmt, type_checking)

    def statement(self, stmt: ast.stmt, tc: bool) -> None:
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
            self.bind(stmt.name, _function_binding(stmt), tc)
            if stmt.name == "__getattr__" and not tc:
                self.dynamic("module defines __getattr__", tc)
                self.getattr_node = stmt
        elif isinstance(stmt, ast.ClassDef):
            self.bind(stmt.name, Binding("class", stmt), tc)
        elif isinstance(stmt, ast.Assign):
            self.assign(stmt.targets, stmt.value, tc)
        elif isinstance(stmt, ast.AnnAssign):
            if stmt.value is not None:  # a bare annotation binds nothing at module level
                self.assign([stmt.target], stmt.value, tc)
            elif tc and isinstance(stmt.target, ast.Name):  # declared for type checkers only
                self.bind(stmt.target.id, Binding("value"), tc)
        elif isinstance(stmt, ast.AugAssign):
            if isinstance(stmt.target, ast.Name):
                if stmt.target.id == "__all__" and not tc:
                    self.set_all(stmt.value, extend=True)
                self.bind(stmt.target.id, Binding("value"), tc)
        elif isinstance(stmt, ast.Import):
            for alias in stmt.names:
                if alias.asname:
                    self.bind(alias.asname, Binding("import", module=alias.name), tc)
                else:
                    top = alias.name.split(".")[0]
                    self.bind(top, Binding("import", module=top), tc)
        elif isinstance(stmt, ast.ImportFrom):
            source = absolute_module(self.module, self.is_package, stmt.level, stmt.module)
            for alias in stmt.names:
                if alias.name == "*":
                    if not tc:
                        self.info.star_imports.append(source)
                    continue
                binding = Binding("from-import", module=source, name=alias.name)
                self.bind(alias.asname or alias.name, binding, tc)
        elif isinstance(stmt, ast.If):
            self.visit(stmt.body, tc or _is_type_checking(stmt.test))
            self.visit(stmt.orelse, tc)
        elif isinstance(stmt, ast.Try | ast.TryStar):
            self.visit(stmt.body, tc)
            for handler in stmt.handlers:
                self.visit(handler.body, tc)
            self.visit(stmt.orelse, tc)
            self.visit(stmt.finalbody, tc)
        elif isinstance(stmt, ast.With | ast.AsyncWith):
            for item in stmt.items:
                if item.optional_vars is not None:
                    for name in _target_names(item.optional_vars):
                        self.bind(name, Binding("value"), tc)
            self.visit(stmt.body, tc)
        elif isinstance(stmt, ast.For | ast.AsyncFor):
            for name in _target_names(stmt.target):
                self.bind(name, Binding("value"), tc)
            self.visit(stmt.body, tc)
            self.visit(stmt.orelse, tc)
        elif isinstance(stmt, ast.While):
            self.visit(stmt.body, tc)
            self.visit(stmt.orelse, tc)
        elif isinstance(stmt, ast.Match):
            for case in stmt.cases:
                self.visit(case.body, tc)
        elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
            self.expression_call(stmt.value, tc)

    def expression_call(self, call: ast.Call, tc: bool) -> None:
        func = call.func
        if isinstance(func, ast.Name) and func.id == "exec":
            self.dynamic("module calls exec()", tc)
        elif isinstance(func, ast.Attribute) and _is_globals_call(func.value):
            if func.attr in ("update", "setdefault", "__setitem__"):
                self.dynamic(f"module calls globals().{func.attr}()", tc)
        elif (
            isinstance(func, ast.Attribute)
            and isinstance(func.value, ast.Name)
            and func.value.id == "__all__"
            and func.attr in ("extend", "append")
            and not tc
        ):
            if func.attr == "extend" and call.args:
                self.set_all(call.args[0], extend=True)
            elif call.args and isinstance(call.args[0], ast.Constant):
                value = call.args[0].value
                if isinstance(value, str) and self.info.all_names is not None:
                    self.info.all_names = (*self.info.all_names, value)
            else:
                self.info.all_dynamic = True

    def assign(self, targets: Sequence[ast.expr], value: ast.expr, tc: bool) -> None:
        for target in targets:
            if isinstance(target, ast.Subscript) and _is_globals_call(target.value):
                self.dynamic("module assigns to globals()[...]", tc)
                continue
            if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name):
                if not tc:
                    self.info.class_extras.setdefault(target.value.id, set()).add(target.attr)
                continue
            if isinstance(target, ast.Name) and target.id == "__all__" and not tc:
                self.set_all(value, extend=False)
            if isinstance(target, ast.Name):
                strings = _container_strings(value)
                if strings is not None:
                    self.literals[target.id] = strings
            single = isinstance(target, ast.Name)
            for name in _target_names(target):
                binding = _value_binding(value) if single else Binding("value")
                if binding.call is not None and self._rebinds_itself(name, value):
                    continue  # ``f = decorate(f)``: the definition above still says what f is
                self.bind(name, binding, tc)

    def _rebinds_itself(self, name: str, value: ast.expr) -> bool:
        previous = self.info.bindings.get(name, [])
        if not previous or previous[-1].kind not in ("class", "function"):
            return False
        assert isinstance(value, ast.Call)
        return any(isinstance(a, ast.Name) and a.id == name for a in value.args)


def index_module(tree: ast.Module, module: str, is_package: bool) -> ModuleInfo:
    """Index one module's top level: what it binds at run time, and what it leaves open."""
    indexer = _ModuleIndexer(module, is_package)
    indexer.visit(tree.body)
    info = indexer.info
    info.type_checking_only = set(indexer.type_checking) - info.bindings.keys()
    info.type_checking_bindings = {
        name: bindings
        for name, bindings in indexer.type_checking.items()
        if name in info.type_checking_only
    }
    if indexer.getattr_node is not None:
        info.getattr_names = _getattr_names(indexer.getattr_node, indexer.literals)
    return info


def _container_strings(node: ast.expr | None) -> tuple[str, ...] | None:
    """The string keys of a dict literal, or the strings of a set/list/tuple literal."""
    elements: list[ast.expr | None]
    if isinstance(node, ast.Dict):
        elements = list(node.keys)
    elif isinstance(node, ast.Set | ast.List | ast.Tuple):
        elements = list(node.elts)
    else:
        return None
    out = [e.value for e in elements if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    return tuple(out) if len(out) == len(elements) else None


def _returns(body: Sequence[ast.stmt]) -> bool:
    """A branch that hands back a value (not one that only raises), nested defs excluded."""
    stack: list[ast.AST] = list(body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Return):
            return True
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda | ast.ClassDef):
            continue
        stack.extend(ast.iter_child_nodes(node))
    return False


def _getattr_names(
    fn: ast.FunctionDef | ast.AsyncFunctionDef, literals: dict[str, tuple[str, ...]]
) -> frozenset[str]:
    """Names a module ``__getattr__`` serves, where its code says so in literals.

    ``if name == "current_platform": ... return ...`` and ``if name in ATTRS: ... return`` (the
    branch must return: one that raises serves nothing), or ``ATTRS.get(name)`` /
    ``ATTRS[name]`` with ``ATTRS`` a module-level literal: the lazy-import idioms vLLM and
    SGLang use.
    """
    params = [*fn.args.posonlyargs, *fn.args.args]
    if not params:
        return frozenset()
    arg = params[0].arg

    def is_arg(node: ast.expr) -> bool:
        return isinstance(node, ast.Name) and node.id == arg

    def strings_of(node: ast.expr) -> tuple[str, ...]:
        if isinstance(node, ast.Name):
            return literals.get(node.id, ())
        return _container_strings(node) or ()

    names: set[str] = set()
    for node in ast.walk(fn):
        if isinstance(node, ast.If) and _returns(node.body):
            for test in ast.walk(node.test):
                if not (isinstance(test, ast.Compare) and len(test.ops) == 1):
                    continue
                left, op, right = test.left, test.ops[0], test.comparators[0]
                if isinstance(op, ast.Eq):
                    for one, other in ((left, right), (right, left)):
                        if (
                            is_arg(one)
                            and isinstance(other, ast.Constant)
                            and isinstance(other.value, str)
                        ):
                            names.add(other.value)
                elif isinstance(op, ast.In) and is_arg(left):
                    names.update(strings_of(right))
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "get"
            and node.args
            and is_arg(node.args[0])
        ):
            names.update(strings_of(node.func.value))
        elif isinstance(node, ast.Subscript) and is_arg(node.slice):
            names.update(strings_of(node.value))
    return frozenset(names)


def _self_attributes(fn: _FunctionNode) -> Iterable[str]:
    """``self.x = ...`` (any first-parameter name) anywhere in a method's body."""
    params = [*fn.args.posonlyargs, *fn.args.args]
    if not params:
        return
    receiver = params[0].arg
    for node in ast.walk(fn):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = list(node.targets)
        elif isinstance(node, ast.AnnAssign | ast.AugAssign):
            targets = [node.target]
        for target in targets:
            for element in ast.walk(target):
                if (
                    isinstance(element, ast.Attribute)
                    and isinstance(element.value, ast.Name)
                    and element.value.id == receiver
                    and isinstance(element.ctx, ast.Store)
                ):
                    yield element.attr


def class_info(node: ast.ClassDef) -> ClassInfo:
    """Index a class body: its own members, instance attributes, and lookup escapes."""
    info = ClassInfo()
    for keyword in node.keywords:
        if keyword.arg == "metaclass":
            info.metaclass = ast.unparse(keyword.value)

    def add(name: str, binding: Binding) -> None:
        info.members.setdefault(name, []).append(binding)

    def visit(body: Sequence[ast.stmt]) -> None:
        for stmt in body:
            if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
                binding = _function_binding(stmt)
                add(stmt.name, binding)
                if stmt.name in ("__getattr__", "__getattribute__"):
                    info.has_getattr = True
                if not any(_decorator_name(d) == "staticmethod" for d in stmt.decorator_list):
                    info.instance_attrs.update(_self_attributes(stmt))
            elif isinstance(stmt, ast.ClassDef):
                add(stmt.name, Binding("class", stmt))
            elif isinstance(stmt, ast.Assign):
                for target in stmt.targets:
                    single = isinstance(target, ast.Name)
                    for name in _target_names(target):
                        add(name, _value_binding(stmt.value) if single else Binding("value"))
            elif isinstance(stmt, ast.AnnAssign):
                # A bare annotation in a class body declares an instance field (dataclasses,
                # NamedTuple, pydantic, or plain documentation of what ``__init__`` sets).
                for name in _target_names(stmt.target):
                    add(name, _value_binding(stmt.value))
            elif isinstance(stmt, ast.AugAssign):
                for name in _target_names(stmt.target):
                    add(name, Binding("value"))
            elif isinstance(stmt, ast.Import | ast.ImportFrom):
                for alias in stmt.names:
                    if alias.name != "*":
                        add(alias.asname or alias.name.split(".")[0], Binding("value"))
            elif isinstance(stmt, ast.If):
                if not _is_type_checking(stmt.test):  # members for type checkers only: absent
                    visit(stmt.body)
                visit(stmt.orelse)
            elif isinstance(stmt, ast.Try | ast.TryStar):
                visit(stmt.body)
                for handler in stmt.handlers:
                    visit(handler.body)
                visit(stmt.orelse)
                visit(stmt.finalbody)
            elif isinstance(stmt, ast.With | ast.AsyncWith | ast.For | ast.AsyncFor | ast.While):
                visit(stmt.body)

    visit(node.body)
    return info


def signature_of(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> Signature:
    """A function's parameters as its source declares them (decorators are not applied)."""
    args = fn.args
    positional = [*args.posonlyargs, *args.args]
    first_default = len(positional) - len(args.defaults)
    params: list[Param] = []
    for index, arg in enumerate(positional):
        kind = "positional-only" if index < len(args.posonlyargs) else "positional-or-keyword"
        params.append(Param(arg.arg, kind, index >= first_default))
    if args.vararg is not None:
        params.append(Param(args.vararg.arg, "var-positional", False))
    for arg, default in zip(args.kwonlyargs, args.kw_defaults, strict=True):
        params.append(Param(arg.arg, "keyword-only", default is not None))
    if args.kwarg is not None:
        params.append(Param(args.kwarg.arg, "var-keyword", False))
    return Signature(tuple(params))


def string_constants(tree: ast.AST) -> Iterable[str]:
    """Every string literal in a tree (pieces of f-strings excluded: they are not the literal)."""
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.JoinedStr):
            continue
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            yield node.value
        stack.extend(ast.iter_child_nodes(node))
