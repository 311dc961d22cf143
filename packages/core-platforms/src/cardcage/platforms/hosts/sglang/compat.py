"""The names an older SGLang release calls on a platform, answered from what the vendor declared.

cardcage's contract is SGLang 0.5.23's (``capabilities``, ``get_kv_pool_cls(kind=...)``, None
from a factory meaning "the runtime's own"). Releases before 0.5.22 call other names on an
out-of-tree platform, and build whatever their factories return. ``release_names`` gives the
adapter (``adapter.build_adapter``) the entries that answer those names, driven by the release's
row in ``releases.RELEASES``, never by a version check here:

* each per-kind KV-pool factory the release calls (``get_mha_kv_pool_cls()``, ...,
  ``get_nsa_kv_pool_cls()`` in 0.5.12) asks the vendor's ``get_kv_pool_cls(kind=...)``; a vendor
  that still overrides the per-kind name itself keeps its method. A None answer becomes the
  release's in-tree pool class, since that release would construct None;
* ``get_paged_allocator_cls()``: the vendor's answer, or the release's in-tree allocator for None;
* each capability method the release calls (``support_cuda_graph()``, ...) reads the field of the
  vendor's ``capabilities`` that replaced it, unless the vendor overrides the method itself.

The entries are descriptors that are not callable themselves (``_ReleaseMethod``), so cardcage's
``get_kv_pool_cls`` does not mistake them for a vendor's legacy override and call back into them.
Imported by the adapter only, so only in a process SGLang hosts; nothing is imported from SGLang
until SGLang calls one of these names.
"""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any

from .releases import Release

__all__ = ["release_names"]


class _ReleaseMethod:
    """A method of the adapter that answers a name only some SGLang releases call.

    Binds like a function on an instance (``platform.get_mha_kv_pool_cls()``), but the object in
    the class dict is not callable, which is how ``_contract.legacy_override`` tells it from a
    vendor's override of a deprecated name.
    """

    def __init__(self, function: Callable[..., Any], doc: str) -> None:
        self._function = function
        self.__doc__ = doc

    def __set_name__(self, owner: type, name: str) -> None:
        self._function.__name__ = name
        self._function.__qualname__ = f"{owner.__qualname__}.{name}"

    def __get__(self, instance: object, owner: type | None = None) -> Any:
        if instance is None:
            return self._function
        return types.MethodType(self._function, instance)

    def __repr__(self) -> str:
        return f"<release method {self._function.__name__}: {self.__doc__}>"


def _resolve(qualname: str) -> Any:
    import pkgutil

    return pkgutil.resolve_name(qualname)


def _in_tree(answer: Any, fallback: str) -> Any:
    """The vendor's class, or the release's own ``fallback`` where the vendor answered None."""
    return _resolve(fallback) if answer is None else answer


def _kv_pool(kind: str, fallback: str, vendor: Callable[..., Any] | None) -> _ReleaseMethod:
    if vendor is None:

        def factory(self: Any) -> Any:
            return _in_tree(self.get_kv_pool_cls(kind=kind), fallback)

        where = f"get_kv_pool_cls(kind={kind!r})"
    else:

        def factory(self: Any) -> Any:
            return _in_tree(vendor(self), fallback)

        where = "the vendor's own method"
    return _ReleaseMethod(factory, f"{where}, or {fallback} for None")


def _allocator(fallback: str, vendor: Callable[..., Any]) -> _ReleaseMethod:
    def get_paged_allocator_cls(self: Any) -> Any:
        return _in_tree(vendor(self), fallback)

    return _ReleaseMethod(get_paged_allocator_cls, f"the platform's answer, or {fallback} for None")


def _capability(field: str) -> _ReleaseMethod:
    def method(self: Any) -> bool:
        return bool(getattr(self.capabilities, field))

    return _ReleaseMethod(method, f"capabilities.{field}")


def _function(cls: type, name: str) -> Callable[..., Any]:
    """The plain function behind ``cls``'s method ``name`` (vendor's or cardcage's)."""
    found = getattr(cls, name)
    return getattr(found, "__func__", found)  # type: ignore[no-any-return]


def release_names(release: Release, cls: type, vendor_names: set[str]) -> dict[str, Any]:
    """The adapter entries that answer what ``release`` calls on an out-of-tree SRT platform.

    ``cls`` is the vendor's cardcage class; ``vendor_names`` are the names its own classes define
    (which the vendor answers, as on every release). Empty for a release that asks cardcage's
    contract's own names (0.5.22 on).
    """
    entries: dict[str, Any] = {}
    for name, (kind, fallback) in release.kv_pool_factories.items():
        vendor = _function(cls, name) if name in vendor_names else None
        entries[name] = _kv_pool(kind, fallback, vendor)
    if release.allocator_fallback is not None:
        vendor_allocator = _function(cls, "get_paged_allocator_cls")
        entries["get_paged_allocator_cls"] = _allocator(
            release.allocator_fallback, vendor_allocator
        )
    for name, field in release.capability_methods.items():
        if name not in vendor_names:
            entries[name] = _capability(field)
    return entries
