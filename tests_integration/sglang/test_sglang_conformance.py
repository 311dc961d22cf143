"""Conformance: cardcage's SRT contract against SGLang 0.5.23's own classes.

demo-cpu's adapters answer every name they do not override as SGLang's base does.

For the SRT and the diffusion adapter SGLang 0.5.23 selects, the probe walks SGLang's base class
(its MRO up to ``object``) and, for every public name the vendor's classes do not define, compares
the raw class-dict entry the adapter resolves with the one SGLang's base resolves: they must be
the same object, so a method the vendor did not override runs SGLang's code, not cardcage's. The
vendor's classes are the vendor class's MRO outside cardcage's abstract base: demo-cpu's own, and
``cardcage.platforms.cpu.CpuDeviceMixin``, the built-in it chose as a base (its answers are the
vendor's choice). The identity methods (``is_cuda()``, ``is_cpu()``, ``is_out_of_tree()``, ...) are
called on the adapter and on an SGLang-native platform built on the same base whose ``_enum`` is
the identity the vendor declares (``behaves_as``: none for demo-cpu's SRT half, so SGLang's OOT;
CPU for its diffusion half), and must agree, except that the adapter stays out of tree.

demo-cpu declares ``capabilities`` (SGLang 0.5.23's name), so the adapter maps no name of
SGLang's base any more: its own declaration reaches SGLang as SGLang's struct.

The table of docs/platforms/contract.md that lists every SGLang 0.5.23 name is asked of SGLang's
own classes here (the unit tests of core-platforms ask cardcage's): every row marked same or
mapped must answer as the page says and as cardcage does, and every public name of SGLang's SRT
contract must have a row. A vendor still written with the seed's names (``support_cuda_graph()``,
``get_mha_kv_pool_cls()``) is selected by SGLang and must see its answers in SGLang's
``capabilities`` and ``get_kv_pool_cls()``.

Run by the nox session ``scenario-sglang``; see ``sglang_scenario.py``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from sglang_scenario import ALL_VENDORS, env, needs_sites, start_diffusion, start_srt, step

from cardcage.hooks.testing import write_distribution

pytestmark = needs_sites

# Names SGLang's base defines that the adapter maps on purpose. SRT: none; demo-cpu declares its
# capabilities, a name of its own, converted to SGLang's struct (checked on its own below).
# Diffusion: demo-cpu's diffusion platform declares behaves_as = CPU, so every identity predicate
# of SGLang's diffusion base answers as SGLang's CPU platform does (checked below).
DIFFUSION_IDENTITY = {
    "is_cuda", "is_rocm", "is_hip", "is_cpu", "is_xpu", "is_musa", "is_npu", "is_tpu", "is_mps",
    "is_cuda_alike", "is_cuda_static", "is_rocm_static",
}  # fmt: skip
MAPPED: dict[str, set[str]] = {"srt": set(), "diffusion": DIFFUSION_IDENTITY}
# The identity each half of demo-cpu declares: the SRT half none, the diffusion half CPU.
BEHAVES_AS: dict[str, str | None] = {"srt": None, "diffusion": "CPU"}

# The helper that reads docs/platforms/contract.md's tables (shared with core-platforms' tests).
CONTRACT_TABLE = Path(__file__).resolve().parents[2] / "packages/core-platforms/tests"


def _conformance(runtime: str) -> dict[str, Any]:
    """The conformance walk of SGLang's start-up that selects demo-cpu by name."""
    if runtime == "srt":
        report = start_srt(ALL_VENDORS, SGLANG_PLATFORM="demo_cpu")
    else:
        report = start_diffusion(ALL_VENDORS, SGLANG_DIFFUSION_PLATFORM_OVERRIDE="demo_cpu")
    return step(report, f"{runtime}-conformance")


@pytest.mark.parametrize("runtime", ["srt", "diffusion"])
def test_every_name_demo_cpu_does_not_define_is_sglangs_own(runtime: str) -> None:
    result = _conformance(runtime)
    assert result["vendor_classes"][-1] == "cardcage.platforms.cpu.CpuDeviceMixin"
    assert all(
        c.startswith(("cardcage_demo_cpu.", "cardcage.platforms.cpu."))
        for c in result["vendor_classes"]
    )
    assert set(result["differs"]) == MAPPED[runtime], result["differs"]
    # Not a vacuous pass: SGLang's base has dozens of names demo-cpu leaves to it (the
    # diffusion half fewer, since its identity predicates are mapped).
    assert len(result["same"]) >= (20 if runtime == "srt" else 15)
    assert "is_out_of_tree" in result["same"]
    if runtime == "srt":
        assert {"is_cuda", "is_cpu"} <= set(result["same"])


@pytest.mark.parametrize("runtime", ["srt", "diffusion"])
def test_identity_methods_answer_as_the_sglang_platform_demo_cpu_declares(runtime: str) -> None:
    result = _conformance(runtime)
    assert result["behaves_as"] == BEHAVES_AS[runtime]
    assert result["enum_is_sglang_oot"] is True  # out of tree, whatever it behaves as
    assert result["identity"]["is_out_of_tree"] == "True"
    reference = result["reference_identity"]
    if runtime == "srt":
        assert result["identity"] == reference  # an SGLang-native OOT platform's answers
        assert result["identity"]["is_cpu"] == "False"  # OOT, though its tensors live on the CPU
    else:
        # SGLang's own class with _enum = CPU, except that it is not out of tree.
        assert reference.pop("is_out_of_tree") == "False"
        assert {k: v for k, v in result["identity"].items() if k != "is_out_of_tree"} == reference
        assert result["identity"]["is_cpu"] == "True"
    assert len(result["identity"]) >= 10


def test_srt_capabilities_are_demo_cpus_declaration_as_sglangs_struct() -> None:
    result = _conformance("srt")
    capabilities = result["capabilities"]
    # demo-cpu declares capabilities = PlatformCapabilities(...) (cardcage's class, all False);
    # SGLang reads its own Struct type, with the same fields.
    assert "capabilities" in result["vendor_names"]
    assert capabilities["type"] == capabilities["sglang_type"]
    assert capabilities["type"] == "sglang.srt.platforms.interface.PlatformCapabilities"
    assert capabilities["fields"] == dict.fromkeys(capabilities["sglang_fields"], False)


def _run(
    script: str, *args: str, pythonpath: str = "", **extra: str
) -> subprocess.CompletedProcess[str]:
    environment = env([], extra)
    environment["PYTHONPATH"] = pythonpath
    return subprocess.run(
        [sys.executable, "-c", script, *args],
        env=environment,
        capture_output=True,
        text=True,
        check=False,
    )


# -- docs/platforms/contract.md's table of names, asked of SGLang 0.5.23 -----------------------

TABLE_SCRIPT = """
import json, sys
sys.path.insert(0, sys.argv[1])
import contract_table as t
from cardcage.platforms import device_mixin as cd, interface as ci
from sglang.srt.platforms import device_mixin as sd, interface as si

ours, theirs = t.namespace(ci, cd), t.namespace(si, sd)
rows = []
for row in t.conformance_rows():
    cardcage, sglang = t.ask(row, ours), t.ask(row, theirs)
    rows.append({
        "name": row.name, "asked_as": row.asked_as, "status": row.status,
        "cardcage": t.normalise(cardcage), "sglang": t.normalise(sglang),
        "sglang_vs_page": t.mismatch(row, sglang, theirs),
    })
public = set()
for cls in (si.SRTPlatform, sd.DeviceMixin):
    public |= {f"{cls.__name__}.{n}" for n in vars(cls) if not n.startswith("_")}
public |= {f"interface.{n}" for n in si.__all__ if n != "SRTPlatform"}
public |= {
    f"device_mixin.{n}" for n, v in vars(sd).items()
    if isinstance(v, type) and v.__module__ == sd.__name__ and n != "DeviceMixin"
}
print(json.dumps({"rows": rows, "public": sorted(public)}))
"""


@pytest.fixture(scope="module")
def table() -> dict[str, Any]:
    done = _run(TABLE_SCRIPT, str(CONTRACT_TABLE))
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def test_every_public_name_of_sglangs_srt_contract_has_a_row(table: dict[str, Any]) -> None:
    listed = {row["name"] for row in table["rows"]}
    assert len(table["public"]) >= 60
    assert set(table["public"]) - listed == set()
    assert listed - set(table["public"]) == set()


def test_sglang_answers_every_same_and_mapped_row_as_the_page_and_cardcage_do(
    table: dict[str, Any],
) -> None:
    checked = [row for row in table["rows"] if row["status"] in ("same", "mapped")]
    wrong = [
        row
        for row in checked
        if row["sglang_vs_page"] is not None or row["sglang"] != row["cardcage"]
    ]
    assert wrong == []
    assert len(checked) >= 55  # not vacuous


def test_the_rows_marked_different_do_differ(table: dict[str, Any]) -> None:
    different = [row for row in table["rows"] if row["status"] == "different"]
    # get_torch_distributed_backend_str() differs only for an npu device when SGLang's
    # SGLANG_ZBAL_LOCAL_MEM_SIZE is set, not for the base's question; the others differ here.
    differ_here = {r["asked_as"] for r in different if r["sglang"] != r["cardcage"]}
    assert differ_here == {
        "platform.supported_quantization",
        "platform.is_sail()",
        "platform.get_device(device_id=0)",
        "[member.name for member in PlatformEnum]",
        "DeviceCapability(9, 10).to_int()",
    }


# -- a vendor written with the seed's names, selected by SGLang 0.5.23 ---------------------------

LEGACY_VENDOR = """
from cardcage.platforms.device_mixin import PlatformEnum
from cardcage.platforms.host import host_qualname
from cardcage.platforms.interface import SRTPlatform


class LegacyMhaPool:
    pass


class LegacySRTPlatform(SRTPlatform):
    _enum = PlatformEnum.OOT
    device_name = "legacy"
    device_type = "cpu"

    def support_cuda_graph(self):
        return True

    def support_piecewise_cuda_graph(self):
        return False

    def get_mha_kv_pool_cls(self):
        return LegacyMhaPool


def activate():
    return host_qualname("cclegacy_vendor:LegacySRTPlatform")
"""

LEGACY_PROBE = """
import json, logging, warnings
logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
warnings.simplefilter("always")
import sglang  # SGLang's selection resolves the platform (SGLANG_PLATFORM=legacy)
from sglang.srt import platforms
from sglang.srt.platforms.interface import PlatformCapabilities, SRTPlatform
from sglang.srt.utils.common import support_triton

platform = platforms.current_platform
capabilities = platform.capabilities
print(json.dumps({
    "adapter": type(platform).__module__,
    "sglang_struct": type(capabilities) is PlatformCapabilities,
    "fields": {f: getattr(capabilities, f) for f in capabilities.__struct_fields__},
    "support_triton": support_triton("triton"),
    "sglangs_get_kv_pool_cls": type(platform).get_kv_pool_cls is SRTPlatform.get_kv_pool_cls,
    "pools": {
        kind: getattr(platform.get_kv_pool_cls(kind=kind), "__name__", None)
        for kind in ("mha", "mla", "dsa")
    },
    "mla_alias_visible": hasattr(platform, "get_mla_kv_pool_cls"),
}))
"""


@pytest.fixture(scope="module")
def legacy(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], str]:
    site = tmp_path_factory.mktemp("legacy-site")
    write_distribution(
        site,
        "cc-legacy-vendor",
        entry_points={"sglang.srt.platforms": {"legacy": "cclegacy_vendor:activate"}},
        modules={"cclegacy_vendor": LEGACY_VENDOR},
    )
    done = _run(LEGACY_PROBE, pythonpath=str(site), SGLANG_PLATFORM="legacy")
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.strip().splitlines()[-1]), done.stderr


def test_old_capability_methods_reach_sglangs_capabilities(
    legacy: tuple[dict[str, Any], str],
) -> None:
    report, _ = legacy
    assert report["adapter"] == "cardcage.platforms.hosts.sglang.adapter"
    assert report["sglang_struct"] is True
    assert report["fields"] == {
        "supports_triton": False,
        "graph_capture": True,  # support_cuda_graph() -> True
        "piecewise_graph": False,  # support_piecewise_cuda_graph() -> False
        "hicache_device_kernels": False,
        "supports_pynccl": False,
    }
    assert report["support_triton"] is False  # SGLang's own reader of the struct


def test_an_old_kv_pool_factory_is_served_by_sglangs_get_kv_pool_cls(
    legacy: tuple[dict[str, Any], str],
) -> None:
    report, stderr = legacy
    assert report["sglangs_get_kv_pool_cls"] is True
    assert report["pools"] == {"mha": "LegacyMhaPool", "mla": None, "dsa": None}
    # cardcage's base keeps the other old factories as aliases; SGLang must not see them.
    assert report["mla_alias_visible"] is False
    # Both warnings: cardcage's when the class is defined, SGLang's when it serves the kind.
    assert "PlatformDeprecationWarning: LegacySRTPlatform.get_mha_kv_pool_cls() is the seed's" in (
        stderr
    )
    assert "PlatformDeprecationWarning: LegacySRTPlatform.support_cuda_graph()" in stderr
    assert "LegacySRTPlatform.get_mha_kv_pool_cls() is deprecated and will be removed" in stderr
