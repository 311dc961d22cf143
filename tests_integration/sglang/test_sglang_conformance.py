"""Conformance: demo-cpu's adapters answer every name they do not override as SGLang's base does.

For the SRT and the diffusion adapter SGLang 0.5.23 selects, the probe walks SGLang's base class
(its MRO up to ``object``) and, for every public name the vendor's classes do not define, compares
the raw class-dict entry the adapter resolves with the one SGLang's base resolves: they must be
the same object, so a method the vendor did not override runs SGLang's code, not cardcage's. The
vendor's classes are the vendor class's MRO outside cardcage's abstract base: demo-cpu's own, and
``cardcage.platforms.cpu.CpuDeviceMixin``, the built-in it chose as a base (its answers are the
vendor's choice). The identity methods (``is_cuda()``, ``is_cpu()``, ``is_out_of_tree()``, ...) are
called on the adapter and on an SGLang-native OOT platform built on the same base, and must agree.

Run by the nox session ``scenario-sglang``; see ``sglang_scenario.py``.
"""

from __future__ import annotations

from typing import Any

import pytest
from sglang_scenario import ALL_VENDORS, needs_sites, start_diffusion, start_srt, step

pytestmark = needs_sites

# Names SGLang's base defines that the adapter maps on purpose, each checked on its own below.
MAPPED = {
    # demo-cpu declares support_cuda_graph()/support_piecewise_cuda_graph() (the seed's names);
    # SGLang 0.5.23 reads capabilities.graph_capture/piecewise_graph instead.
    "srt": {"capabilities"},
    "diffusion": set(),
}


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
    # Not a vacuous pass: SGLang's base has dozens of names demo-cpu leaves to it.
    assert len(result["same"]) >= 20
    assert {"is_out_of_tree", "is_cuda", "is_cpu"} <= set(result["same"])


@pytest.mark.parametrize("runtime", ["srt", "diffusion"])
def test_identity_methods_answer_as_an_sglang_out_of_tree_platform(runtime: str) -> None:
    result = _conformance(runtime)
    assert result["enum_is_sglang_oot"] is True
    assert result["identity"] == result["reference_identity"]
    assert result["identity"]["is_out_of_tree"] == "True"
    assert result["identity"]["is_cpu"] == "False"  # OOT, though its tensors live on the CPU
    assert len(result["identity"]) >= 10


def test_srt_capabilities_come_from_demo_cpus_capability_methods() -> None:
    capabilities = _conformance("srt")["capabilities"]
    # SGLang's own Struct type, its fields from support_cuda_graph() and
    # support_piecewise_cuda_graph() (both False on demo-cpu), every other field SGLang's default.
    assert capabilities["type"] == capabilities["sglang_type"]
    assert capabilities["type"] == "sglang.srt.platforms.interface.PlatformCapabilities"
    assert capabilities["fields"] == capabilities["sglang_fields"]
    assert capabilities["fields"]["graph_capture"] is False
    assert capabilities["fields"]["piecewise_graph"] is False
