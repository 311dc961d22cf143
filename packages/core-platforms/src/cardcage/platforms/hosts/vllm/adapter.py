"""vLLM-native adapters: a cardcage platform class, as vLLM's selection and callers want it.

vLLM resolves the name ``activate()`` returned by splitting it on its *last dot* and reading the
attribute (no ``module:Class`` form), instantiates the class with no arguments, and then treats it
as a ``vllm.platforms.interface.Platform``: it compares ``_enum`` with its own ``PlatformEnum``,
and calls most methods on the class (``cls.get_device_capability()`` inside
``has_device_capability``). Under vLLM, ``host_qualname()`` therefore returns a dotted name in
this module; resolving it builds (once per vendor class, then cached) the adapter::

    class <Vendor>(<vLLM section>, VendorClass, <vLLM base>)

where the vLLM base is ``vllm.platforms.interface.Platform``, or the built-in class the vendor's
declared identity names (``identity``: ``vllm.platforms.cpu.CpuPlatform`` for CPU-like), with
this namespace, in order of precedence:

0. the adapter's own: vLLM's identity predicates answered as the declared built-in's
   (``identity``); ``device_name`` answered with the vendor's ``device_type`` (vLLM builds
   ``torch.device(f"{device_name}:{index}")`` for an out-of-tree platform), unless the section
   sets it; and, when the vendor defines ``init_backend()``, a ``check_and_update_config`` that
   runs the section's and the base's, then hands vLLM the worker subclass that calls
   ``init_backend()`` in the worker (``worker``);

1. every name of the vendor's vLLM section (``SRTPlatform.vllm_section``, a class imported only
   here) answers as the section defines it: this is the marked place for what only vLLM asks
   (``get_attn_backend_cls``, ``check_and_update_config`` and its ``worker_cls``,
   ``dispatch_key``, ``get_punica_wrapper``, ...);
2. every name the vendor's classes define stays the vendor's, mapped onto vLLM's shapes:

   * an instance method whose vLLM counterpart is a classmethod becomes a *shared-instance*
     method: called on an instance it binds to that instance, called on the class (as vLLM's own
     classmethods do) it binds to one shared instance of the adapter, the first one created
     (vLLM's ``current_platform``). ``has_device_capability()`` reaches the vendor's
     ``get_device_capability``;
   * ``get_device_capability`` answers vLLM's ``DeviceCapability``; ``get_cpu_architecture``
     vLLM's ``CpuArchEnum`` (``UNSPECIFIED`` becomes ``UNKNOWN``); enum members (``_enum``)
     vLLM's members of the same name; ``supported_quantization`` a list;
   * translated names, where the section does not give vLLM's own:
     ``get_torch_distributed_backend_str()`` -> ``dist_backend``, ``get_communicator_class()``
     -> ``get_device_communicator_cls()`` (a dotted qualname), ``seed_everything(seed)`` ->
     ``manual_seed_all(seed)``;
3. every name that only cardcage's abstract bases define (``SRTPlatform``, ``DeviceMixin``) and
   vLLM's base also has answers as vLLM's base does; every name only vLLM has is inherited from
   it. A method the vendor did not write behaves exactly as on any vLLM platform.

The attribute name encodes the vendor's qualname with no dot in it, so vLLM's ``rsplit(".", 1)``
finds this module and any process (vLLM's workers re-run selection) rebuilds the same adapter.
Importing this module imports neither vLLM nor the vendor's class; resolving an adapter imports
both (and the section).
"""

from __future__ import annotations

import enum
import importlib
import inspect
import threading
import types
from typing import Any

from cardcage.hooks.log import get_logger
from cardcage.platforms.hosts._naming import SEPARATOR, attribute_name, vendor_qualname

from . import identity as _identity

__all__ = ["adapted_class", "adapter_qualname", "build_adapter", "vendor_qualname"]

logger = get_logger(__name__)

# Class attributes of cardcage's bases that describe hosts, not the platform.
_HOST_NAMES = frozenset({"sglang_base_class", "vllm_base_class", "vllm_section"})
# cardcage's CpuArchEnum member -> vLLM's member, where the names differ.
_ARCH_NAMES = {"UNSPECIFIED": "UNKNOWN"}

_lock = threading.RLock()
_adapters: dict[type, type] = {}  # vendor class -> its adapter
_shared: dict[type, object] = {}  # adapter class -> the instance class-level calls bind to


def adapter_qualname(qualname: str) -> str:
    """The dotted name under which vLLM resolves the adapter of the class ``qualname`` names."""
    return f"{__name__}.{attribute_name(qualname)}"


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
    for klass in cls.__mro__:
        if "vllm_base_class" in vars(klass):
            return klass
    from cardcage.platforms.errors import InvalidPlatformClassError

    raise InvalidPlatformClassError(
        f"{cls.__module__}.{cls.__qualname__} is not a cardcage SRT platform class (it does not "
        "subclass cardcage.platforms.interface.SRTPlatform), so there is no vLLM base to adapt "
        "it to. Return an SRTPlatform subclass from the vllm.platform_plugins entry point."
    )


def _raw_attribute(cls: type, name: str) -> Any:
    for klass in cls.__mro__:
        if name in vars(klass):
            return vars(klass)[name]
    raise AttributeError(name)


def _own_names(cls: type, stop: set[type]) -> set[str]:
    names: set[str] = set()
    for klass in cls.__mro__:
        if klass not in stop and klass is not object:
            names.update(n for n in vars(klass) if not n.startswith("__"))
    return names


def _shared_instance(owner: type) -> object:
    with _lock:
        found = _shared.get(owner)
        if found is None:
            found = owner()  # the adapter's __init__ records it
        return _shared.get(owner, found)


class _SharedInstanceMethod:
    """A vendor instance method that vLLM may call on the class, as vLLM's classmethods are."""

    def __init__(self, function: Any) -> None:
        self.__func__ = function
        self.__doc__ = getattr(function, "__doc__", None)
        self.__wrapped__ = function

    def __get__(self, instance: object, owner: type | None = None) -> Any:
        if instance is None:
            assert owner is not None
            instance = _shared_instance(owner)
        return types.MethodType(self.__func__, instance)


def _host_member(value: enum.Enum, host_enum: Any, what: str, cls: type) -> Any:
    name = _ARCH_NAMES.get(value.name, value.name) if what == "CpuArchEnum" else value.name
    if name in host_enum.__members__:
        return host_enum[name]
    from cardcage.platforms.errors import InvalidPlatformClassError

    raise InvalidPlatformClassError(
        f"{cls.__module__}.{cls.__qualname__} answers {type(value).__name__}.{value.name}, which "
        f"vLLM's {what} has no member for ({', '.join(host_enum.__members__)}). An out-of-tree "
        "platform declares _enum = PlatformEnum.OOT; set that."
    )


def _capability_method(vendor: Any, host_type: type) -> Any:
    def get_device_capability(self: Any, device_id: int = 0) -> Any:
        value = vendor(self, device_id)
        if value is None or isinstance(value, host_type):
            return value
        return host_type(int(value[0]), int(value[1]))

    return get_device_capability


def _arch_classmethod(cls: type, host_enum: Any) -> classmethod[Any, Any, Any]:
    vendor = cls.get_cpu_architecture  # type: ignore[attr-defined]

    def get_cpu_architecture(_owner: type) -> Any:
        value = vendor()
        if isinstance(value, enum.Enum):
            return _host_member(value, host_enum, "CpuArchEnum", cls)
        return value

    return classmethod(get_cpu_architecture)


class _ClassValue:
    """A class attribute computed by a vendor instance method on the shared instance, once."""

    def __init__(self, name: str, compute: Any) -> None:
        self._name = name
        self._compute = compute
        self._values: dict[type, Any] = {}

    def __get__(self, instance: object, owner: type | None = None) -> Any:
        owner = type(instance) if owner is None else owner
        if owner not in self._values:
            self._values[owner] = self._compute(
                instance if instance is not None else _shared_instance(owner)
            )
        return self._values[owner]


def _qualname_of(value: Any) -> Any:
    if isinstance(value, type):
        return f"{value.__module__}.{value.__qualname__}"
    return value


def _translations(
    cls: type, vendor_names: set[str], taken: set[str], host_base: type
) -> dict[str, Any]:
    """vLLM's names computed from the vendor's cardcage names (see the module docstring)."""
    out: dict[str, Any] = {}
    if "get_torch_distributed_backend_str" in vendor_names and "dist_backend" not in taken:
        out["dist_backend"] = _ClassValue(
            "dist_backend", lambda self: self.get_torch_distributed_backend_str()
        )
    if "get_communicator_class" in vendor_names and "get_device_communicator_cls" not in taken:
        base_answer = host_base.get_device_communicator_cls  # type: ignore[attr-defined]

        def get_device_communicator_cls(owner: type) -> str:
            found = _shared_instance(owner).get_communicator_class()  # type: ignore[attr-defined]
            return str(_qualname_of(found)) if found is not None else str(base_answer())

        out["get_device_communicator_cls"] = classmethod(get_device_communicator_cls)
    if "seed_everything" in vendor_names and "manual_seed_all" not in taken:
        vendor_seed = cls.seed_everything  # type: ignore[attr-defined]

        def manual_seed_all(_owner: type, seed: int) -> None:
            vendor_seed(seed)

        out["manual_seed_all"] = classmethod(manual_seed_all)
    return out


def _worker_wrapping(adapter: list[type]) -> classmethod[Any, Any, None]:
    """``check_and_update_config`` that chains to the section and base, then hands vLLM the
    worker subclass that runs the vendor's ``init_backend()`` (``worker``)."""
    from .worker import is_wrapped, worker_qualname

    def check_and_update_config(owner: type, vllm_config: Any) -> None:
        super(adapter[0], owner).check_and_update_config(vllm_config)  # type: ignore[arg-type]
        parallel_config = getattr(vllm_config, "parallel_config", None)
        if parallel_config is None:
            return
        chosen = getattr(parallel_config, "worker_cls", None)
        if isinstance(chosen, type):
            chosen = f"{chosen.__module__}.{chosen.__qualname__}"
        if isinstance(chosen, str) and chosen != "auto" and not is_wrapped(chosen):
            parallel_config.worker_cls = worker_qualname(chosen)

    check_and_update_config.__doc__ = (
        "vLLM's config step as the vendor's section and vLLM's base answer it; then the worker "
        "class they chose runs the vendor's init_backend() first (hosts.vllm.worker)."
    )
    return classmethod(check_and_update_config)


def build_adapter(cls: type) -> type:
    """Build the vLLM-native subclass of the cardcage platform class ``cls`` (uncached)."""
    runtime_base = _runtime_base(cls)
    section_path = getattr(cls, "vllm_section", None)
    section: Any = _resolve(section_path) if section_path else None
    if section is not None and not isinstance(section, type):
        from cardcage.platforms.errors import InvalidPlatformClassError

        raise InvalidPlatformClassError(
            f"{cls.__module__}.{cls.__qualname__}.vllm_section = {section_path!r} names "
            f"{type(section).__name__} {section!r:.60}, not a class. Point it at the class that "
            "holds the platform's vLLM answers."
        )
    # A declared identity picks the built-in class vLLM's answers come from (hosts.vllm.identity).
    declared = _identity.declared_identity(cls, section)
    base_path = _identity.IDENTITY_BASES.get(declared) if declared is not None else None
    host_base: type = _resolve(base_path or runtime_base.vllm_base_class)  # type: ignore[attr-defined]
    host_module = importlib.import_module(
        _resolve(runtime_base.vllm_base_class).__module__  # type: ignore[attr-defined]
    )
    cardcage_bases = set(runtime_base.__mro__)
    host_classes = set(host_base.__mro__)
    vendor_names = _own_names(cls, cardcage_bases) - _HOST_NAMES
    section_names = _own_names(section, host_classes) if section is not None else set()

    namespace: dict[str, Any] = {"__module__": __name__, "__doc__": cls.__doc__}
    # 3. names only cardcage's abstract bases define: vLLM's base answers where it has them.
    for klass in runtime_base.__mro__:
        if klass is object:
            continue
        for name in vars(klass):
            if (
                name.startswith("__")
                or name in vendor_names
                or name in section_names
                or name in namespace
                or name in _HOST_NAMES
            ):
                continue
            if hasattr(host_base, name):
                namespace[name] = _raw_attribute(host_base, name)
    # 2. the vendor's names, in vLLM's shapes.
    for name in sorted(vendor_names - section_names):
        raw = _raw_attribute(cls, name)
        host_raw = inspect.getattr_static(host_base, name, None)
        if isinstance(raw, enum.Enum) and type(raw).__module__.startswith("cardcage."):
            host_enum = getattr(host_module, type(raw).__name__, None)
            if isinstance(host_enum, enum.EnumMeta):
                namespace[name] = _host_member(raw, host_enum, type(raw).__name__, cls)
        elif name == "get_device_capability" and isinstance(raw, types.FunctionType):
            namespace[name] = _SharedInstanceMethod(
                _capability_method(raw, host_module.DeviceCapability)
            )
        elif name == "get_cpu_architecture":
            namespace[name] = _arch_classmethod(cls, host_module.CpuArchEnum)
        elif isinstance(raw, types.FunctionType) and isinstance(host_raw, classmethod):
            namespace[name] = _SharedInstanceMethod(raw)
        elif name == "supported_quantization" and isinstance(raw, tuple):
            namespace[name] = list(raw)
    namespace.update(_translations(cls, vendor_names, section_names | vendor_names, host_base))
    device_type = getattr(cls, "device_type", None)
    if "device_name" not in section_names and isinstance(device_type, str) and device_type:
        # vLLM builds torch devices from an out-of-tree platform's device_name
        # (torch.device(f"{device_name}:{index}") for its process groups): vLLM's device_name is
        # the torch device type, which cardcage calls device_type.
        namespace["device_name"] = device_type
    # A declared identity: vLLM's predicates answer as that built-in's; _enum stays OOT.
    namespace.update(
        _identity.identity_namespace(
            declared, host_base, host_module.PlatformEnum, vendor_names | section_names
        )
    )
    built: list[type] = []
    if "init_backend" in vendor_names or getattr(cls, "kernels", None):  # both run in the worker
        namespace["check_and_update_config"] = _worker_wrapping(built)
    vendor_init = vars(cls).get("__init__") or _raw_attribute(cls, "__init__")

    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        vendor_init(self, *args, **kwargs)
        with _lock:
            _shared.setdefault(type(self), self)

    init.__name__ = init.__qualname__ = "__init__"
    namespace["__init__"] = init
    bases = (section, cls, host_base) if section is not None else (cls, host_base)
    adapter = type(cls.__name__, bases, namespace)
    adapter.__qualname__ = attribute_name(f"{cls.__module__}:{cls.__qualname__}")
    built.append(adapter)
    logger.debug(
        "Built the vLLM adapter of %s.%s on %s.%s%s%s",
        cls.__module__,
        cls.__name__,
        host_base.__module__,
        host_base.__qualname__,
        f" with its vLLM section {section_path}" if section is not None else "",
        f", behaving as {declared.name}" if declared is not None else "",
    )
    return adapter


def _adapter_for(attribute: str) -> type:
    qualname = vendor_qualname(attribute)
    vendor = _resolve(qualname)
    if not isinstance(vendor, type):
        from cardcage.platforms.errors import InvalidPlatformClassError

        raise InvalidPlatformClassError(
            f"{qualname} names {type(vendor).__name__} {vendor!r:.60}, not a platform class."
        )
    with _lock:
        adapter = _adapters.get(vendor)
        if adapter is None:
            adapter = _adapters[vendor] = build_adapter(vendor)
        return adapter


def __getattr__(name: str) -> type:
    if SEPARATOR not in name or name.startswith("__"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return _adapter_for(name)
