"""SGLang-native adapters: a cardcage platform class, as SGLang's selection wants it.

SGLang resolves the name ``activate()`` returned with ``pkgutil.resolve_name`` and requires a
subclass of its own base (``sglang.srt.platforms.interface.SRTPlatform``, or the diffusion
``Platform``), with its own ``PlatformEnum.OOT``. Under SGLang, ``host_qualname()`` therefore
returns a name in this module; resolving it builds (once, then cached) the adapter::

    class <Vendor>(VendorClass, <SGLang base>)

with this namespace:

* every name the vendor's classes define stays the vendor's (including names inherited from
  cardcage's built-in platforms, such as ``CpuDeviceMixin``, that the vendor chose as bases);
* every name that only cardcage's abstract base defines (``SRTPlatform``/``Platform`` and
  ``DeviceMixin``) answers as SGLang's base does, so a method the vendor did not override
  behaves exactly as on any SGLang platform. ``super()`` inside a vendor method still reaches
  cardcage's base, which is where the vendor wrote it to go;
* cardcage enum members (``_enum = PlatformEnum.OOT``) become SGLang's members of the same name,
  and ``get_cpu_architecture()`` answers in SGLang's enum, so SGLang's ``is`` checks hold;
* the vendor's ``capabilities`` (cardcage's ``PlatformCapabilities``) becomes SGLang's struct of
  the same name and fields. It is converted once when it is a plain value, and on every read when
  it is computed per instance: a property of the vendor's, or what cardcage's class check
  installs for a class that still overrides the seed's ``support_cuda_graph()`` /
  ``support_piecewise_cuda_graph()``, so SGLang sees those answers too;
* the seed's per-kind KV-pool factories, which cardcage's base keeps as deprecated aliases, are
  hidden unless the vendor overrides them, since SGLang's ``get_kv_pool_cls`` treats their
  presence as an override;
* on an SRT release older than cardcage's contract (0.5.12 - 0.5.20), the names that release
  calls instead (per-kind KV-pool factories, ``support_cuda_graph()``, the allocator whose None
  it cannot take) answer from the vendor's declaration: ``compat``, driven by the release's row
  in ``releases``;
* vendor methods whose answer SGLang's callers need in SGLang's own type (``get_device`` as a
  device string, SGLang's ``DeviceCapability``) are wrapped with the converters of ``types``;
* a vendor class that declares ``behaves_as`` gets SGLang's identity predicates answered as
  SGLang's built-in of that name answers them (``identity``); ``_enum`` stays SGLang's ``OOT``.

The attribute name encodes the vendor's qualname, so any process resolves it (SGLang's workers
re-run selection; pickle finds an adapter instance's class the same way). Importing this module
imports neither SGLang nor the vendor's class; resolving an adapter imports both.
"""

from __future__ import annotations

import enum
import importlib
import threading
from collections.abc import Callable
from typing import Any

from cardcage.hooks.log import get_logger
from cardcage.platforms.hosts._naming import SEPARATOR, attribute_name, vendor_qualname

from . import identity as _identity
from . import types as _types

__all__ = ["adapted_class", "adapter_qualname", "build_adapter", "vendor_qualname"]

logger = get_logger(__name__)

# Names SGLang probes with getattr(..., None) and treats as "the platform overrides this".
_PRESENCE_PROBED = frozenset({"get_mha_kv_pool_cls", "get_mla_kv_pool_cls", "get_dsa_kv_pool_cls"})

_lock = threading.Lock()
_adapters: dict[type, type] = {}  # vendor class -> its adapter: one per class, however spelled


def adapter_qualname(qualname: str) -> str:
    """The name under which SGLang resolves the adapter of the class ``qualname`` names."""
    return f"{__name__}:{attribute_name(qualname)}"


def adapted_class(adapter: type) -> type | None:
    """The vendor class ``adapter`` was built from, or None when it is not one of ours."""
    with _lock:
        for vendor, built in _adapters.items():
            if built is adapter:
                return vendor
    return None


def _resolve(qualname: str) -> Any:
    import pkgutil

    return pkgutil.resolve_name(qualname)


def _runtime_base(cls: type) -> type:
    """The cardcage runtime base in ``cls``'s MRO: the class that names SGLang's counterpart."""
    for klass in cls.__mro__:
        if "sglang_base_class" in vars(klass):
            return klass
    from cardcage.platforms.errors import InvalidPlatformClassError

    raise InvalidPlatformClassError(
        f"{cls.__module__}.{cls.__qualname__} is not a cardcage platform class (it subclasses "
        "neither cardcage.platforms.interface.SRTPlatform nor the diffusion Platform), so there "
        "is no SGLang base to adapt it to."
    )


def _host_value(value: Any, host_modules: tuple[Any, ...]) -> Any:
    """A cardcage enum member as the host's member of the same name; anything else unchanged.

    The host's enum is looked up by class name in the modules that define its base classes.
    """
    if isinstance(value, enum.Enum) and type(value).__module__.startswith("cardcage."):
        for module in host_modules:
            host_enum = getattr(module, type(value).__name__, None)
            if isinstance(host_enum, enum.EnumMeta) and value.name in host_enum.__members__:
                return host_enum[value.name]
    return value


class _Hidden:
    """Makes an inherited cardcage default invisible: attribute access raises AttributeError."""

    def __set_name__(self, owner: type, name: str) -> None:
        self._name = name

    def __get__(self, instance: object, owner: type | None = None) -> Any:
        raise AttributeError(self._name)


def _host_capabilities(value: Any, struct: type) -> Any:
    """cardcage's ``PlatformCapabilities`` as SGLang's ``struct``; anything else unchanged."""
    as_dict = getattr(value, "as_dict", None)
    if isinstance(value, struct) or not callable(as_dict):
        return value
    fields = getattr(struct, "__struct_fields__", None)
    converted = {k: v for k, v in as_dict().items() if fields is None or k in fields}
    return struct(**converted)


class _HostCapabilities:
    """The vendor's per-instance ``capabilities`` (a descriptor), read as SGLang's struct."""

    def __init__(self, source: Any, struct: type) -> None:
        self._source = source
        self._struct = struct

    def unmapped(self, instance: object, owner: type | None) -> Any:
        """What the vendor's classes declare, without the seed's methods (see ``_contract``)."""
        unmapped = getattr(self._source, "unmapped", None)
        value = unmapped(instance, owner) if callable(unmapped) else self._read(instance, owner)
        return _host_capabilities(value, self._struct)

    def _read(self, instance: object, owner: type | None) -> Any:
        return type(self._source).__get__(self._source, instance, owner)

    def __get__(self, instance: object, owner: type | None = None) -> Any:
        return _host_capabilities(self._read(instance, owner), self._struct)


def build_adapter(cls: type) -> type:
    """Build the SGLang-native subclass of the cardcage platform class ``cls`` (uncached)."""
    runtime_base = _runtime_base(cls)
    host_qualname = runtime_base.sglang_base_class  # type: ignore[attr-defined]
    host_base = _resolve(host_qualname)
    host_modules = tuple(
        importlib.import_module(klass.__module__)
        for klass in host_base.__mro__
        if klass is not object
    )
    base_names = set(runtime_base.__mro__)
    vendor_names: set[str] = set()
    for klass in cls.__mro__:
        if klass not in base_names:
            vendor_names.update(vars(klass))

    namespace: dict[str, Any] = {"__module__": __name__, "__doc__": cls.__doc__}
    for klass in runtime_base.__mro__:
        if klass is object:
            continue
        for name in vars(klass):
            if name.startswith("__") or name in vendor_names or name in namespace:
                continue
            if name == "sglang_base_class":
                continue
            if name in _PRESENCE_PROBED:
                namespace[name] = _Hidden()
            elif hasattr(host_base, name):
                namespace[name] = _raw_attribute(host_base, name)
    for name in vendor_names:
        if name.startswith("__"):
            continue
        raw = _raw_attribute(cls, name)
        mapped = _host_value(raw, host_modules)
        if mapped is not raw:
            namespace[name] = mapped
    host_mro = tuple(klass for klass in host_base.__mro__ if klass is not object)
    for name in _types.CONVERSIONS:
        if name in vendor_names and callable(vendor_function := getattr(cls, name, None)):
            function = getattr(vendor_function, "__func__", vendor_function)
            namespace[name] = _types.wrap(name, function, host_mro)
    if "get_cpu_architecture" in vendor_names:
        namespace["get_cpu_architecture"] = _host_enum_classmethod(cls, host_modules)
    if "capabilities" in vendor_names and hasattr(host_base, "capabilities"):
        struct = type(host_base.capabilities)
        raw = _raw_attribute(cls, "capabilities")
        if hasattr(type(raw), "__get__"):
            namespace["capabilities"] = _HostCapabilities(raw, struct)
        else:
            namespace["capabilities"] = _host_capabilities(raw, struct)
    if host_qualname.startswith("sglang.srt."):  # what an older release calls instead
        from . import compat, releases

        namespace.update(compat.release_names(releases.running_release(), cls, vendor_names))
        if getattr(cls, "kernels", None):  # the vendor's kernels, into SGLang's SRT ops
            namespace["init_backend"] = _then(_init_backend(namespace, cls), _srt_kernels(cls))
    elif getattr(cls, "kernels", None) and callable(getattr(cls, "install_kernels", None)):
        # A diffusion platform's kernels: its runtime installs them into its ops after
        # init_backend(), and cardcage's register_oot_forward hands them to SGLang's.
        namespace["init_backend"] = _then(_init_backend(namespace, cls), _diffusion_kernels)

    # A declared identity (behaves_as): SGLang's predicates answer as that built-in's.
    namespace.update(_identity.identity_namespace(cls, host_base, vendor_names))
    adapter = type(cls.__name__, (cls, host_base), namespace)
    # What pickle looks up in this module: it decodes to the vendor class, in any process.
    adapter.__qualname__ = attribute_name(f"{cls.__module__}:{cls.__qualname__}")
    logger.debug(
        "Built the SGLang adapter of %s.%s on %s", cls.__module__, cls.__name__, host_qualname
    )
    return adapter


def _init_backend(namespace: dict[str, Any], cls: type) -> Any:
    """The ``init_backend`` the adapter has so far: SGLang's (already in ``namespace``), or the
    vendor's."""
    vendor: Any = cls
    return namespace.get("init_backend", vendor.init_backend)


def _then(inner: Any, after: Callable[[Any], None]) -> Any:
    """``init_backend`` that runs ``inner`` (the vendor's, else SGLang's), then ``after``: SGLang
    calls it in each worker before it builds the model, so every op built afterwards dispatches
    to the kernels ``after`` installs."""

    def init_backend(self: Any) -> None:
        inner(self)
        after(self)

    init_backend.__doc__ = getattr(inner, "__doc__", None)
    return init_backend


def _srt_kernels(vendor: type) -> Callable[[Any], None]:
    """Install the kernels ``vendor`` declares into SGLang's SRT ops."""

    def install(platform: Any) -> None:
        from .srt_kernels import install_for

        install_for(platform, vendor)

    return install


def _diffusion_kernels(platform: Any) -> None:
    """A cardcage diffusion platform's own ``install_kernels()``: into its runtime's ops, which
    hand them to SGLang's."""
    platform.install_kernels()


def _raw_attribute(cls: type, name: str) -> Any:
    """``name`` as stored in the class dict that defines it (descriptors not yet bound)."""
    for klass in cls.__mro__:
        if name in vars(klass):
            return vars(klass)[name]
    raise AttributeError(name)


def _host_enum_classmethod(cls: type, host_modules: tuple[Any, ...]) -> classmethod[Any, Any, Any]:
    vendor = cls.get_cpu_architecture  # type: ignore[attr-defined]

    def get_cpu_architecture(_owner: type) -> Any:
        return _host_value(vendor(), host_modules)

    return classmethod(get_cpu_architecture)


def _adapter_for(attribute: str) -> type:
    qualname = vendor_qualname(attribute)
    vendor = _resolve(qualname)
    if not isinstance(vendor, type):
        from cardcage.platforms.errors import InvalidPlatformClassError

        raise InvalidPlatformClassError(
            f"{qualname} names {type(vendor).__name__} {vendor!r:.60}, not a platform class."
        )
    from .early_patches import check_selected_class  # SGLang selected it: early patches' policy

    check_selected_class(vendor)
    with _lock:
        adapter = _adapters.get(vendor)
        if adapter is None:
            adapter = _adapters[vendor] = build_adapter(vendor)
        return adapter


def __getattr__(name: str) -> type:
    if SEPARATOR not in name or name.startswith("__"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return _adapter_for(name)
