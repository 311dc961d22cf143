"""SGLang 0.5.23's SRT contract in cardcage: capabilities, ``get_kv_pool_cls``, the seed's old
names as deprecated aliases, and the check that runs when a platform class is defined.

Each old name warns once per class (``PlatformDeprecationWarning``), so every test defines its
own classes. The base's answers to every 0.5.23 name are checked against the docs page by
``test_conformance_table.py``; SGLang's side of the mapping by the scenario-sglang session.
"""

from __future__ import annotations

import copy
import importlib.util
import logging
import os
import pickle
import subprocess
import sys
import warnings
from typing import TYPE_CHECKING, Any

import pytest

from cardcage.hooks.errors import CardcageError
from cardcage.platforms.cpu import CpuSRTPlatform
from cardcage.platforms.cuda import CudaDeviceMixin, CudaSRTPlatform
from cardcage.platforms.device_mixin import CpuArchEnum, DeviceMixin, PlatformEnum
from cardcage.platforms.errors import (
    OutOfTreeImplementationError,
    PlatformContractError,
    PlatformDeprecationWarning,
    TorchNotInstalledError,
    UnknownKVPoolKindError,
)
from cardcage.platforms.interface import (
    PlatformCapabilities,
    SRTPlatform,
    reject_out_of_tree_path,
    require_out_of_tree_impl,
)
from cardcage.platforms.rocm import RocmSRTPlatform
from cardcage.platforms.xpu import XpuSRTPlatform

if TYPE_CHECKING:
    from collections.abc import Callable

TORCH_INSTALLED = importlib.util.find_spec("torch") is not None
needs_torch = pytest.mark.skipif(not TORCH_INSTALLED, reason="needs PyTorch (torch extra)")
without_torch = pytest.mark.skipif(TORCH_INSTALLED, reason="checks the error without torch")


class MhaPool:
    pass


class MlaPool:
    pass


def _messages(record: list[warnings.WarningMessage]) -> list[str]:
    return [str(w.message) for w in record if issubclass(w.category, PlatformDeprecationWarning)]


# -- PlatformCapabilities ------------------------------------------------------------------------


def test_capabilities_default_to_the_conservative_answer() -> None:
    capabilities = PlatformCapabilities()

    assert capabilities.as_dict() == {
        "supports_triton": False,
        "graph_capture": False,
        "piecewise_graph": False,
        "hicache_device_kernels": False,
        "supports_pynccl": False,
    }
    assert tuple(capabilities.as_dict()) == PlatformCapabilities.FIELDS


def test_capabilities_are_keyword_only() -> None:
    with pytest.raises(TypeError):
        PlatformCapabilities(True)  # type: ignore[misc]


def test_capabilities_are_frozen() -> None:
    capabilities = PlatformCapabilities(graph_capture=True)

    with pytest.raises(AttributeError, match=r"frozen.*replace\(graph_capture=\.\.\.\)"):
        capabilities.graph_capture = False  # type: ignore[misc]
    with pytest.raises(AttributeError):
        del capabilities.graph_capture
    with pytest.raises(AttributeError):
        capabilities.extra = True  # type: ignore[attr-defined]


def test_capabilities_refuse_a_value_that_is_not_a_bool() -> None:
    with pytest.raises(PlatformContractError, match=r"graph_capture: must be True or False"):
        PlatformCapabilities(graph_capture=1)  # type: ignore[arg-type]


def test_capabilities_compare_hash_copy_and_pickle_by_value() -> None:
    capabilities = PlatformCapabilities(supports_triton=True, supports_pynccl=True)

    assert capabilities == PlatformCapabilities(supports_pynccl=True, supports_triton=True)
    assert capabilities != PlatformCapabilities()
    assert hash(capabilities) == hash(
        PlatformCapabilities(supports_triton=True, supports_pynccl=True)
    )
    assert pickle.loads(pickle.dumps(capabilities)) == capabilities
    assert copy.copy(capabilities) is capabilities
    assert copy.deepcopy(capabilities) is capabilities
    assert capabilities != capabilities.as_dict()


def test_capabilities_replace_gives_a_modified_copy() -> None:
    capabilities = PlatformCapabilities(graph_capture=True)

    changed = capabilities.replace(piecewise_graph=True)

    assert (changed.graph_capture, changed.piecewise_graph) == (True, True)
    assert capabilities.piecewise_graph is False
    with pytest.raises(TypeError, match="no field bogus"):
        capabilities.replace(bogus=True)


def test_capabilities_repr_names_every_field() -> None:
    assert repr(PlatformCapabilities(graph_capture=True)) == (
        "PlatformCapabilities(supports_triton=False, graph_capture=True, piecewise_graph=False, "
        "hicache_device_kernels=False, supports_pynccl=False)"
    )


def test_a_declared_capabilities_is_what_instances_and_the_class_answer() -> None:
    class Vendor(SRTPlatform):
        capabilities = PlatformCapabilities(supports_triton=True)

    assert (
        Vendor.capabilities == Vendor().capabilities == PlatformCapabilities(supports_triton=True)
    )


def test_capabilities_may_be_a_property() -> None:
    class Vendor(SRTPlatform):
        @property
        def capabilities(self) -> PlatformCapabilities:  # type: ignore[override]
            return PlatformCapabilities(graph_capture=self.device_name == "big")

    assert Vendor().capabilities == PlatformCapabilities()


# -- the built-in platforms' capabilities -------------------------------------------------------


def test_builtin_classes_declare_capabilities_and_no_old_capability_method() -> None:
    for cls in (CudaSRTPlatform, RocmSRTPlatform, XpuSRTPlatform, CpuSRTPlatform):
        assert "capabilities" in vars(cls)
        assert not {"support_cuda_graph", "support_piecewise_cuda_graph"} & set(vars(cls))


# -- get_kv_pool_cls ---------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["mha", "mla", "dsa"])
def test_base_kv_pool_is_none_for_every_kind(kind: str) -> None:
    assert SRTPlatform().get_kv_pool_cls(kind=kind) is None  # type: ignore[arg-type]


def test_kind_is_keyword_only() -> None:
    with pytest.raises(TypeError):
        SRTPlatform().get_kv_pool_cls("mha")  # type: ignore[misc]


def test_an_unknown_kind_is_a_key_error_that_lists_the_kinds() -> None:
    with pytest.raises(UnknownKVPoolKindError) as caught:
        SRTPlatform().get_kv_pool_cls(kind="paged")  # type: ignore[arg-type]

    assert isinstance(caught.value, KeyError)
    assert isinstance(caught.value, CardcageError)
    assert str(caught.value) == (
        "get_kv_pool_cls(kind='paged'): unknown KV pool kind; the kinds are 'mha', 'mla', 'dsa'."
    )


def test_a_get_kv_pool_cls_override_answers() -> None:
    class Vendor(SRTPlatform):
        def get_kv_pool_cls(self, *, kind: Any) -> type | None:
            return MhaPool if kind == "mha" else None

    assert Vendor().get_kv_pool_cls(kind="mha") is MhaPool
    assert Vendor().get_kv_pool_cls(kind="mla") is None


def test_legacy_per_kind_overrides_serve_their_kind_and_warn_once_per_class() -> None:
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")

        class Legacy(SRTPlatform):
            def get_mha_kv_pool_cls(self) -> type:
                return MhaPool

            def get_mla_kv_pool_cls(self) -> type:
                return MlaPool

        defined = _messages(record)
        platform = Legacy()
        answers = [platform.get_kv_pool_cls(kind=k) for k in ("mha", "mla", "dsa", "mha")]  # type: ignore[arg-type]
        Legacy().get_kv_pool_cls(kind="mla")

    assert answers == [MhaPool, MlaPool, None, MhaPool]
    # One warning per (class, hook), at definition; serving the kind adds none.
    assert len(defined) == 2
    assert _messages(record) == defined
    assert "its successor is get_kv_pool_cls(kind='mha')" in defined[0]
    assert "Override get_kv_pool_cls(self, *, kind) instead" in defined[0]


def test_a_subclass_of_a_legacy_class_is_served_without_a_new_warning() -> None:
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")

        class Legacy(SRTPlatform):
            def get_dsa_kv_pool_cls(self) -> type:
                return MhaPool

        class Child(Legacy):
            pass

        answer = Child().get_kv_pool_cls(kind="dsa")

    assert answer is MhaPool
    assert len(_messages(record)) == 1


def test_a_legacy_override_calling_super_gets_the_runtimes_own_pool() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PlatformDeprecationWarning)

        class Legacy(SRTPlatform):
            def get_mha_kv_pool_cls(self) -> type | None:
                return super().get_mha_kv_pool_cls()

        assert Legacy().get_kv_pool_cls(kind="mha") is None


def test_get_nsa_kv_pool_cls_is_ignored_with_a_warning_that_says_so() -> None:
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")

        class Legacy(SRTPlatform):
            def get_nsa_kv_pool_cls(self) -> type:
                return MhaPool

        answer = Legacy().get_kv_pool_cls(kind="dsa")

    assert answer is None  # SGLang 0.5.23 never reads it either
    (message,) = _messages(record)
    assert message == (
        "Legacy.get_nsa_kv_pool_cls() is an older name of the DSA KV-pool factory that neither "
        "SGLang 0.5.23 nor cardcage reads: this override is ignored. Override "
        "get_kv_pool_cls(self, *, kind) and answer kind 'dsa'."
    )


@pytest.mark.parametrize(
    ("alias", "kind"),
    [
        ("get_mha_kv_pool_cls", "mha"),
        ("get_mla_kv_pool_cls", "mla"),
        ("get_dsa_kv_pool_cls", "dsa"),
        ("get_nsa_kv_pool_cls", "dsa"),
    ],
)
def test_calling_an_old_factory_asks_get_kv_pool_cls_and_warns_once(alias: str, kind: str) -> None:
    class Vendor(SRTPlatform):
        def get_kv_pool_cls(self, *, kind: Any) -> type | None:
            return {"mha": MhaPool, "mla": MlaPool}.get(kind, str)

    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        first = getattr(Vendor(), alias)()
        second = getattr(Vendor(), alias)()

    assert first is second is Vendor().get_kv_pool_cls(kind=kind)
    (message,) = _messages(record)
    assert message == (
        f"Vendor.{alias}() is deprecated (the seed's name): call get_kv_pool_cls(kind={kind!r}), "
        "its SGLang 0.5.23 successor."
    )


# -- the seed's capability methods ---------------------------------------------------------------


def test_an_old_capability_override_is_read_into_capabilities_on_each_instance() -> None:
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")

        class Legacy(SRTPlatform):
            def __init__(self, graphs: bool = True) -> None:
                self.graphs = graphs

            def support_cuda_graph(self) -> bool:
                return self.graphs

    assert Legacy().capabilities == PlatformCapabilities(graph_capture=True)
    assert Legacy(graphs=False).capabilities == PlatformCapabilities()
    assert Legacy.capabilities == PlatformCapabilities()  # the class: what it declares
    (message,) = _messages(record)
    assert message == (
        "Legacy.support_cuda_graph() is the seed's name, which SGLang 0.5.23 no longer reads; "
        "its successor is capabilities.graph_capture. Declare capabilities = "
        "PlatformCapabilities(graph_capture=...) on Legacy and delete support_cuda_graph(). "
        "Until then both hosts read its answer into capabilities.graph_capture."
    )


def test_old_overrides_replace_only_their_fields_of_an_inherited_declaration() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PlatformDeprecationWarning)

        class NoPiecewiseCuda(CudaSRTPlatform):
            def support_piecewise_cuda_graph(self) -> bool:
                return False

        class NoGraphs(NoPiecewiseCuda):
            def support_cuda_graph(self) -> bool:
                return False

    assert NoPiecewiseCuda().capabilities == CudaSRTPlatform.capabilities.replace(
        piecewise_graph=False
    )
    assert NoGraphs().capabilities == CudaSRTPlatform.capabilities.replace(
        piecewise_graph=False, graph_capture=False
    )


def test_a_declared_capabilities_wins_over_an_old_method_in_the_same_class() -> None:
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")

        class Both(SRTPlatform):
            capabilities = PlatformCapabilities(graph_capture=False)

            def support_cuda_graph(self) -> bool:
                return True

    assert Both().capabilities.graph_capture is False
    (message,) = _messages(record)
    assert (
        "Both also declares capabilities, which wins: both hosts ignore support_cuda_graph()"
        in (message)
    )


def test_an_old_method_on_a_vendor_mixin_is_read_too() -> None:
    class Mixin(DeviceMixin):
        def support_piecewise_cuda_graph(self) -> bool:
            return True

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PlatformDeprecationWarning)

        class Vendor(Mixin, SRTPlatform):
            pass

    assert Vendor().capabilities == PlatformCapabilities(piecewise_graph=True)


def test_an_old_override_that_calls_super_does_not_loop() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PlatformDeprecationWarning)

        class Legacy(CudaSRTPlatform):
            def support_cuda_graph(self) -> bool:
                return not super().support_cuda_graph()

        assert Legacy().capabilities.graph_capture is False
        assert Legacy().support_cuda_graph() is False


@pytest.mark.parametrize(
    ("method", "field"),
    [("support_cuda_graph", "graph_capture"), ("support_piecewise_cuda_graph", "piecewise_graph")],
)
def test_calling_an_old_capability_method_reads_capabilities_and_warns_once(
    method: str, field: str
) -> None:
    class Vendor(SRTPlatform):
        capabilities = PlatformCapabilities(**{field: True})

    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        answers = [getattr(Vendor(), method)() for _ in range(3)]

    assert answers == [True, True, True]
    (message,) = _messages(record)
    assert message == (
        f"Vendor.{method}() is deprecated (the seed's name): read capabilities.{field}, "
        "its SGLang 0.5.23 successor."
    )


def test_supports_fp8_has_no_successor_and_says_so() -> None:
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")

        class Fp8(SRTPlatform):
            def supports_fp8(self) -> bool:
                return True

        answer = Fp8().supports_fp8()
        base = SRTPlatform().supports_fp8()

    assert (answer, base) == (True, False)
    defined, called = _messages(record)
    assert "SGLang 0.5.23 has no successor: no host asks a platform about fp8" in defined
    assert "supported_quantization" in defined
    assert "verify_quantization()" in defined
    assert called.startswith("SRTPlatform.supports_fp8() is deprecated and SGLang 0.5.23 has no")


def test_cuda_keeps_the_seeds_fp8_answer() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PlatformDeprecationWarning)
        assert CudaSRTPlatform().supports_fp8() is True
        assert RocmSRTPlatform().supports_fp8() is False


def test_deprecation_warnings_are_future_warnings_pointing_at_the_vendors_code() -> None:
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")

        class Legacy(SRTPlatform):
            def support_cuda_graph(self) -> bool:
                return True

        Legacy().support_piecewise_cuda_graph()

    assert issubclass(PlatformDeprecationWarning, FutureWarning)
    assert [w.filename for w in record] == [__file__, __file__]


def test_cardcage_builtin_classes_define_without_warnings() -> None:
    script = (
        "import warnings; warnings.simplefilter('error')\n"
        "import cardcage.platforms.cpu, cardcage.platforms.cuda\n"
        "import cardcage.platforms.rocm, cardcage.platforms.xpu\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=False
    )

    assert done.returncode == 0, done.stderr


# -- the class-definition check ------------------------------------------------------------------


def _define(name: str, body: dict[str, Any], bases: tuple[type, ...] = (SRTPlatform,)) -> type:
    return type(name, bases, {"__module__": "acme_npu_plugin.platform", **body})


def _method(source: str) -> Callable[..., Any]:
    scope: dict[str, Any] = {}
    exec(source, scope)  # the signatures under test, written as a vendor would
    (func,) = (v for k, v in scope.items() if k != "__builtins__")
    return func  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    ("name", "source", "problem"),
    [
        (
            "get_kv_pool_cls",
            "def get_kv_pool_cls(self): return None",
            "cannot take the call get_kv_pool_cls(kind=...) that the runtime makes: it has no "
            "parameter named 'kind'.",
        ),
        (
            "get_kv_pool_cls",
            "def get_kv_pool_cls(self, *, pool_kind): return None",
            "it has no parameter named 'kind'",
        ),
        (
            "get_compile_backend",
            "def get_compile_backend(self): return 'inductor'",
            "cannot take the call get_compile_backend(mode) that the runtime makes: it takes 0 "
            "positional argument(s) besides self, and the runtime passes 1.",
        ),
        (
            "get_speculative_worker_cls",
            "def get_speculative_worker_cls(self, algo): return None",
            "cannot take the call get_speculative_worker_cls(algorithm=...) that the runtime "
            "makes: it has no parameter named 'algorithm'.",
        ),
        (
            "get_speculative_graph_runner_cls",
            "def get_speculative_graph_runner_cls(self, algorithm, stage): return None",
            "it has no parameter named 'phase'",
        ),
        (
            "get_default_attention_backend",
            "def get_default_attention_backend(self, model): return 'x'",
            "it requires 'model', which the runtime does not pass",
        ),
        (
            "post_load_model",
            "def post_load_model(self): pass",
            "it takes 0 positional argument(s) besides self, and the runtime passes 1",
        ),
    ],
)
def test_a_signature_the_runtime_cannot_call_is_a_contract_error(
    name: str, source: str, problem: str
) -> None:
    with pytest.raises(PlatformContractError) as caught:
        _define("AcmeSRTPlatform", {name: _method(source)})

    error = caught.value
    assert isinstance(error, TypeError)
    assert isinstance(error, CardcageError)
    assert problem in str(error)
    assert str(error).startswith(f"acme_npu_plugin.platform.AcmeSRTPlatform.{name}: ")
    assert error.platform_class == error.owner == "acme_npu_plugin.platform.AcmeSRTPlatform"
    assert error.member == name
    assert error.fix.startswith("Define it as a method with the contract's signature, def ")


def test_the_fix_spells_the_contracts_signature() -> None:
    with pytest.raises(PlatformContractError) as caught:
        _define("Acme", {"get_kv_pool_cls": _method("def get_kv_pool_cls(self): pass")})

    assert caught.value.fix == (
        "Define it as a method with the contract's signature, def get_kv_pool_cls(self, *, kind)."
    )


@pytest.mark.parametrize(
    ("name", "source"),
    [
        ("get_kv_pool_cls", "def get_kv_pool_cls(self, *, kind): return None"),
        ("get_kv_pool_cls", "def get_kv_pool_cls(self, kind): return None"),
        ("get_kv_pool_cls", "def get_kv_pool_cls(self, **kwargs): return None"),
        ("get_kv_pool_cls", "def get_kv_pool_cls(self, *, kind, extra=1): return None"),
        ("get_compile_backend", "def get_compile_backend(self, mode=None): return 'x'"),
        ("get_compile_backend", "def get_compile_backend(self, *args, **kwargs): return 'x'"),
        (
            "get_speculative_graph_runner_cls",
            "def get_speculative_graph_runner_cls(self, algorithm, phase): return None",
        ),
        ("supports_speculative_algorithm", "def supports_speculative_algorithm(self, a): return 1"),
        ("get_group_coordinator_device", "def get_group_coordinator_device(self, rank): pass"),
    ],
)
def test_a_signature_that_takes_every_call_is_accepted(name: str, source: str) -> None:
    cls = _define("Acme", {name: _method(source)})

    assert name in vars(cls)


def test_static_and_class_methods_are_checked_as_bound() -> None:
    ok = _define(
        "Acme",
        {
            "get_dispatch_key_name": staticmethod(lambda: "acme"),
            "supports_speculative_algorithm": classmethod(lambda cls, algorithm: True),
        },
    )
    assert ok().get_dispatch_key_name() == "acme"

    with pytest.raises(PlatformContractError, match="get_dispatch_key_name"):
        _define("Bad", {"get_dispatch_key_name": staticmethod(lambda self: "acme")})


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        (property(lambda self: None), "is a property, but the runtime calls it as a method."),
        (None, "is NoneType None, not a method."),
        ("torch_native", "is str 'torch_native', not a method."),
    ],
)
def test_a_member_that_is_not_a_method_is_a_contract_error(value: object, problem: str) -> None:
    with pytest.raises(PlatformContractError) as caught:
        _define("Acme", {"get_default_attention_backend": value})

    assert caught.value.problem == problem


def test_a_bad_method_on_a_vendor_mixin_names_the_mixin_and_the_class() -> None:
    mixin = type(
        "AcmeMixin",
        (DeviceMixin,),
        {"__module__": "acme_npu_plugin.device", "get_kv_pool_cls": _method("def f(self): pass")},
    )

    with pytest.raises(PlatformContractError) as caught:
        _define("AcmeSRTPlatform", {}, bases=(mixin, SRTPlatform))

    assert str(caught.value).startswith(
        "acme_npu_plugin.device.AcmeMixin.get_kv_pool_cls (inherited by "
        "acme_npu_plugin.platform.AcmeSRTPlatform): "
    )
    assert caught.value.owner == "acme_npu_plugin.device.AcmeMixin"


def test_a_callable_object_is_not_second_guessed() -> None:
    class Factory:
        def __call__(self, *args: object, **kwargs: object) -> None:
            return None

    assert _define("Acme", {"get_kv_pool_cls": Factory()})


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ({"graph_capture": True}, "is dict {'graph_capture': True}, not a PlatformCapabilities."),
        (True, "is bool True, not a PlatformCapabilities."),
    ],
)
def test_capabilities_of_the_wrong_type_is_a_contract_error(value: object, problem: str) -> None:
    with pytest.raises(PlatformContractError) as caught:
        _define("Acme", {"capabilities": value})

    assert caught.value.member == "capabilities"
    assert caught.value.problem == problem
    assert caught.value.fix == (
        "Declare capabilities = PlatformCapabilities(...) from cardcage.platforms.interface."
    )


def test_sglangs_own_capabilities_struct_is_refused_with_the_reason() -> None:
    class SGLangLike:  # what msgspec's Struct looks like to the check
        __struct_fields__ = ("graph_capture",)

    with pytest.raises(PlatformContractError, match="is SGLang's PlatformCapabilities"):
        _define("Acme", {"capabilities": SGLangLike()})


def test_selection_reports_a_contract_error_as_an_invalid_platform_class(tmp_path: Any) -> None:
    from cardcage.platforms.errors import InvalidPlatformClassError
    from cardcage.platforms.selection import load_platform_class
    from cardcage.platforms.srt import srt_policy

    (tmp_path / "ccbad_contract.py").write_text(
        "from cardcage.platforms.interface import SRTPlatform\n"
        "class Bad(SRTPlatform):\n"
        "    def get_kv_pool_cls(self):\n"
        "        return None\n",
        encoding="utf-8",
    )
    sys.path.insert(0, str(tmp_path))
    try:
        with pytest.raises(InvalidPlatformClassError) as caught:
            load_platform_class(srt_policy(), "ccbad_contract:Bad", None)
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("ccbad_contract", None)

    assert isinstance(caught.value.__cause__, PlatformContractError)


# -- the out-of-tree guards ----------------------------------------------------------------------


class _Oot(SRTPlatform):
    _enum = PlatformEnum.OOT
    device_name = "acme_npu"
    device_type = "npu"


def test_the_guards_do_nothing_for_an_in_tree_platform() -> None:
    platform = CudaSRTPlatform()

    assert require_out_of_tree_impl(platform, hook="get_graph_runner_cls()", subsystem="x") is None
    assert reject_out_of_tree_path(platform, subsystem="x") is None


def test_require_out_of_tree_impl_names_the_factory_to_override() -> None:
    with pytest.raises(OutOfTreeImplementationError) as caught:
        require_out_of_tree_impl(
            _Oot(), hook="get_graph_runner_cls()", subsystem="CUDA graph runner"
        )

    error = caught.value
    assert isinstance(error, NotImplementedError)
    assert (error.platform_class, error.device_name, error.subsystem, error.hook) == (
        "_Oot",
        "acme_npu",
        "CUDA graph runner",
        "get_graph_runner_cls()",
    )
    assert str(error).startswith(
        "Out-of-tree platform _Oot (device 'acme_npu') provides no CUDA graph runner: "
        "get_graph_runner_cls() answered None"
    )
    assert "Override get_graph_runner_cls() on _Oot" in str(error)


def test_reject_out_of_tree_path_names_the_subsystem() -> None:
    with pytest.raises(OutOfTreeImplementationError, match="reached the hybrid pool") as caught:
        reject_out_of_tree_path(_Oot(), subsystem="the hybrid pool")

    assert caught.value.hook is None


# -- the other new names -----------------------------------------------------------------------


def test_speculative_and_feature_answers_are_conservative() -> None:
    base = SRTPlatform()

    assert base.supports_speculative_algorithm("EAGLE") is False
    assert base.supports_speculative_draft_attention_backend("EAGLE", "triton") is False
    assert base.support_mamba_cache_extra_buffer() is False
    assert base.get_speculative_worker_cls(algorithm="EAGLE") is None
    assert base.get_speculative_graph_runner_cls(algorithm="EAGLE", phase="draft_extend") is None
    assert base.post_load_model(object()) is None
    with pytest.raises(NotImplementedError):
        base.get_default_speculative_draft_attention_backend("EAGLE")


@without_torch
def test_group_coordinator_device_without_torch_names_the_extra() -> None:
    with pytest.raises(TorchNotInstalledError, match=r"get_group_coordinator_device\(\)"):
        SRTPlatform().get_group_coordinator_device(0)


@pytest.mark.torch
@needs_torch
def test_group_coordinator_device_is_the_cpu() -> None:
    import torch

    assert SRTPlatform().get_group_coordinator_device(3) == torch.device("cpu")


@pytest.mark.parametrize(
    ("device_type", "backend"),
    [
        ("cuda", "nccl"),
        ("xpu", "xccl"),
        ("hpu", "hccl"),
        ("npu", "hccl"),
        ("cpu", "gloo"),
        ("musa", "mccl"),
        ("acme", "gloo"),
    ],
)
def test_distributed_backend_follows_the_device_type(device_type: str, backend: str) -> None:
    mixin = type("Mixin", (DeviceMixin,), {"device_type": device_type})()

    assert mixin.get_torch_distributed_backend_str() == backend


def test_cpu_arch_is_get_cpu_architecture_asked_once(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []

    class Mixin(DeviceMixin):
        @classmethod
        def get_cpu_architecture(cls) -> CpuArchEnum:
            calls.append(1)
            return CpuArchEnum.ARM

    mixin = Mixin()

    assert (mixin.cpu_arch, mixin.cpu_arch, len(calls)) == (CpuArchEnum.ARM, CpuArchEnum.ARM, 1)


def test_reindex_device_id_yields_the_id_by_default() -> None:
    with DeviceMixin().reindex_device_id(5) as local:
        assert local == 5


def test_profiler_activities_are_not_implemented_by_default() -> None:
    with pytest.raises(NotImplementedError):
        DeviceMixin().get_torch_profiler_activity_str()
    with pytest.raises(NotImplementedError):
        DeviceMixin().get_torch_profiler_activity()


# -- CUDA reindex_device_id --------------------------------------------------------------------


@pytest.fixture
def cuda_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    monkeypatch.setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    return monkeypatch


def test_cuda_reindex_shows_only_the_device_and_restores_the_variable(
    cuda_env: pytest.MonkeyPatch,
) -> None:
    cuda_env.setenv("CUDA_VISIBLE_DEVICES", "4,6,7")

    with CudaDeviceMixin().reindex_device_id(1) as local:
        inside = os.environ["CUDA_VISIBLE_DEVICES"]

    assert (local, inside, os.environ["CUDA_VISIBLE_DEVICES"]) == (0, "6", "4,6,7")


def test_cuda_reindex_without_the_variable_sets_then_unsets_it(
    cuda_env: pytest.MonkeyPatch,
) -> None:
    with CudaDeviceMixin().reindex_device_id(3) as local:
        inside = os.environ["CUDA_VISIBLE_DEVICES"]

    assert (local, inside, "CUDA_VISIBLE_DEVICES" in os.environ) == (0, "3", False)


def test_cuda_reindex_restores_the_variable_when_the_block_raises(
    cuda_env: pytest.MonkeyPatch,
) -> None:
    cuda_env.setenv("CUDA_VISIBLE_DEVICES", "2,3")

    with pytest.raises(RuntimeError), RocmSRTPlatform().reindex_device_id(0):
        raise RuntimeError("worker failed")

    assert os.environ["CUDA_VISIBLE_DEVICES"] == "2,3"


def test_cuda_reindex_beyond_the_visible_devices_is_an_index_error(
    cuda_env: pytest.MonkeyPatch,
) -> None:
    cuda_env.setenv("CUDA_VISIBLE_DEVICES", "0,1")

    with (
        pytest.raises(IndexError, match=r"lists 2 device\(s\); ask for one of 0\.\.1"),
        CudaDeviceMixin().reindex_device_id(2),
    ):
        pass

    assert os.environ["CUDA_VISIBLE_DEVICES"] == "0,1"


def test_cuda_reindex_warns_when_the_device_order_is_not_pci_bus_id(
    cuda_env: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    cuda_env.delenv("CUDA_DEVICE_ORDER")

    with (
        caplog.at_level(logging.WARNING, "cardcage.platforms.cuda"),
        CudaDeviceMixin().reindex_device_id(0),
    ):
        pass

    assert "set CUDA_DEVICE_ORDER=PCI_BUS_ID" in caplog.text


# -- CPU synchronize, XPU uuid and seeding -----------------------------------------------------


def test_cpu_synchronize_imports_nothing() -> None:
    script = (
        "import sys\n"
        "from cardcage.platforms.cpu import CpuSRTPlatform\n"
        "CpuSRTPlatform().synchronize()\n"
        "assert 'torch' not in sys.modules\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=False
    )

    assert done.returncode == 0, done.stderr


@without_torch
def test_xpu_uuid_without_torch_names_the_extra() -> None:
    with pytest.raises(TorchNotInstalledError, match=r"get_device_uuid\(\)"):
        XpuSRTPlatform().get_device_uuid()


@pytest.mark.torch
@needs_torch
def test_cpu_synchronize_with_torch_imported_runs_torch_cpu_synchronize(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import torch

    calls: list[int] = []
    monkeypatch.setattr(torch.cpu, "synchronize", lambda: calls.append(1))

    CpuSRTPlatform().synchronize()

    assert calls == [1]


@pytest.mark.torch
@needs_torch
@pytest.mark.parametrize(("cls", "module"), [(CudaSRTPlatform, "cuda"), (XpuSRTPlatform, "xpu")])
def test_accelerator_seed_everything_seeds_every_device(
    cls: type[SRTPlatform], module: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import torch

    seeded: list[int] = []
    monkeypatch.setattr(getattr(torch, module), "manual_seed_all", seeded.append)
    saved = torch.random.get_rng_state()
    try:
        DeviceMixin.seed_everything(11)  # torch.manual_seed may seed the devices itself
        by_torch = len(seeded)
        cls.seed_everything(11)
        first = torch.rand(2)
        cls.seed_everything(11)
        second = torch.rand(2)
    finally:
        torch.random.set_rng_state(saved)

    assert seeded == [11] * (3 * by_torch + 2)  # plus one explicit call per seed_everything
    assert torch.equal(first, second)


@pytest.mark.torch
@needs_torch
def test_xpu_uuid_reads_the_device_properties(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    class Props:
        uuid = "xpu-uuid-0"

    monkeypatch.setattr(torch.xpu, "get_device_properties", lambda device_id: Props())

    assert XpuSRTPlatform().get_device_uuid(0) == "xpu-uuid-0"


# -- import budget -----------------------------------------------------------------------------


def test_the_interface_imports_no_torch_nor_dataclasses_nor_inspect() -> None:
    script = (
        "import sys\n"
        "import cardcage.platforms.interface, cardcage.platforms.cpu, cardcage.platforms.cuda\n"
        "heavy = {'torch', 'numpy', 'dataclasses', 'inspect', 'msgspec'} & set(sys.modules)\n"
        "assert not heavy, heavy\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=False
    )

    assert done.returncode == 0, done.stderr


def test_what_a_host_imports_of_a_valid_plugin_loads_no_error_classes() -> None:
    # What SGLang imports when it selects a cardcage plugin and runs its general plugin: a
    # vendor class on CpuSRTPlatform, its env vars, a hooks_plugin() declaration, the hook
    # registered. The error classes are for when something is wrong, and nothing is here.
    script = (
        "import os, sys\n"
        "os.environ['CC_TEST_FLAG'] = '1'\n"
        "from cardcage.hooks.envs import EnvVar, parse_bool\n"
        "from cardcage.hooks.registry import HookRegistry, HookType\n"
        "import cardcage.platforms.cpu, cardcage.platforms.cuda, cardcage.platforms.host\n"
        "from cardcage.platforms.plugin import around, hooks_plugin\n"
        "class Vendor(cardcage.platforms.cpu.CpuSRTPlatform):\n"
        "    device_name = 'vendor'\n"
        "assert EnvVar('CC_TEST_FLAG', False, parse_bool, 'boolean', 'test').get() is True\n"
        "hook = around('json.dumps', lambda original, *a, **k: original(*a, **k))\n"
        "register = hooks_plugin('vendor.platform:Vendor', cardcage=[hook])\n"
        "HookRegistry.register('json.loads', lambda *a, **k: None, HookType.BEFORE)\n"
        "loaded = sorted(m for m in sys.modules if m.endswith('.errors'))\n"
        "assert not loaded, loaded\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=False
    )

    assert done.returncode == 0, done.stderr
