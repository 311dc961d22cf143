"""What ``cardcage deps`` reads off a vendor's platform class: kernels and platform methods.

The class is a real ``SRTPlatform`` subclass defined here; the hosts are never imported (the
rooms' tables are data). Which SGLang names each release calls is cardcage's release table,
which ``nox -s scenario-sglang-releases`` checks against every release's own classes.
"""

from __future__ import annotations

from typing import Any, ClassVar

from cardcage.platforms.deps.collect import merge, platform_dependencies
from cardcage.platforms.deps.model import Dependency, Where
from cardcage.platforms.hosts.sglang.releases import RELEASES
from cardcage.platforms.interface import SRTPlatform

PACKAGE = __name__.split(".", 1)[0]


class VendorSection:
    """A vLLM section: what only vLLM asks, and a declaration for cardcage."""

    behaves_as = "cpu"

    @classmethod
    def get_attn_backend_cls(cls, *args: Any, **kwargs: Any) -> str:
        return "vendor.attention.Backend"


class VendorPlatform(SRTPlatform):
    kernels: ClassVar[dict[str, str]] = {"rms_norm": "vendor.kernels:rms_norm"}
    vllm_section = f"{__name__}:VendorSection"

    def get_kv_pool_cls(self, kind: Any = None) -> Any:
        return None

    def init_backend(self) -> None:
        pass

    def seed_everything(self, seed: int | None = None) -> None:
        pass


def _rows() -> dict[tuple[str, str], Dependency]:
    deps = platform_dependencies(VendorPlatform, "vendor-plugin", [PACKAGE])
    return {(d.host, d.symbol): d for d in deps}


def test_a_kernels_host_op_and_each_releases_registration_mechanism_are_dependencies() -> None:
    rows = _rows()
    assert ("sglang", "sglang.srt.layers.layernorm:RMSNorm") in rows
    old = rows[
        ("sglang", "sglang.srt.layers.utils.multi_platform:MultiPlatformOp.register_oot_forward")
    ]
    new = rows[("sglang", "sglang.kernels.fused_op:BaseFusedOp.register_oot_forward")]
    assert (old.releases, new.releases) == (("0.5.12", "0.5.15"), ("0.5.18", "0.5.23"))
    assert ("vllm", "vllm.model_executor.custom_op:CustomOp.register_oot") in rows
    assert all(d.source == "kernel" for d in (old, new))


def test_a_method_the_vendor_defines_is_a_dependency_for_the_releases_that_have_it() -> None:
    init = _rows()[("sglang", "sglang.srt.platforms.interface:SRTPlatform.init_backend")]
    assert init.source == "platform-method"
    assert init.releases == (RELEASES[0].version, RELEASES[-1].version)


def test_names_the_adapter_serves_from_the_vendors_declaration_are_dependencies_per_release() -> (
    None
):
    rows = _rows()
    mha = rows[("sglang", "sglang.srt.platforms.interface:SRTPlatform.get_mha_kv_pool_cls")]
    assert mha.releases == ("0.5.12", "0.5.20")
    assert "serves as get_mha_kv_pool_cls" in mha.where[0].location
    direct = rows[("sglang", "sglang.srt.platforms.interface:SRTPlatform.get_kv_pool_cls")]
    assert direct.releases == ("0.5.22", "0.5.23")


def test_vllm_names_come_from_the_section_and_the_adapters_translations_only() -> None:
    vllm = {s for (host, s) in _rows() if host == "vllm" and ":Platform." in s}
    assert vllm == {
        "vllm.platforms.interface:Platform.get_attn_backend_cls",
        "vllm.platforms.interface:Platform.manual_seed_all",
    }


def test_merge_keeps_every_site_and_guards_only_when_every_use_is_guarded() -> None:
    base = Dependency(
        "vllm", "module", "vllm.envs", "import", "p", (Where("a.py:1"),), guarded=True
    )
    other = Dependency("vllm", "module", "vllm.envs", "import", "p", (Where("b.py:2"),))
    (merged,) = merge([base, other])
    assert [w.location for w in merged.where] == ["a.py:1", "b.py:2"]
    assert merged.guarded is False


def test_the_release_table_says_how_each_release_reaches_a_contract_name() -> None:
    first, last = RELEASES[0], RELEASES[-1]
    assert first.host_names_for("init_backend") == ("init_backend",)
    assert first.host_names_for("capabilities") == (
        "support_cuda_graph",
        "support_piecewise_cuda_graph",
    )
    assert last.host_names_for("support_cuda_graph") == ("capabilities",)
    assert last.host_names_for("no_such_name") == ()
