"""The SGLang release table and the names older releases call, without SGLang installed.

What each release really ships is checked against its wheel by ``nox -s
scenario-sglang-releases``; here: how a version finds its row, what the rows say a vendor's
override reaches, and how the adapter's per-release entries answer from a vendor's declaration.
"""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from cardcage.platforms.cpu import CpuDeviceMixin
from cardcage.platforms.errors import PlatformDeprecationWarning
from cardcage.platforms.hosts.sglang import compat, releases
from cardcage.platforms.interface import KVPoolKind, PlatformCapabilities, PlatformEnum, SRTPlatform

ROWS = {r.version: r for r in releases.RELEASES}


@pytest.mark.parametrize(
    ("version", "row", "supported"),
    [
        ("0.5.23", "0.5.23", True),
        ("0.5.23.post1", "0.5.23", True),
        ("0.5.21", "0.5.20", True),  # between two measured releases: the one below
        ("0.5.12", "0.5.12", True),
        ("0.5.11", "0.5.12", False),
        ("0.5.24", "0.5.23", False),
        ("0.6.0", "0.5.23", False),
        ("not-a-version", "0.5.23", False),
    ],
)
def test_a_version_is_read_as_the_measured_release_at_or_below_it(
    version: str, row: str, supported: bool
) -> None:
    found, ok = releases.release_for(version)
    assert (found.version, ok) == (row, supported)


def test_the_table_spans_the_supported_range_oldest_first() -> None:
    versions = [r.version for r in releases.RELEASES]
    assert (versions[0], versions[-1]) == releases.SUPPORTED
    assert versions == sorted(versions, key=releases.parse_version)  # type: ignore[arg-type]


def test_older_releases_call_per_kind_factories_and_capability_methods() -> None:
    old, new = ROWS["0.5.20"], ROWS["0.5.22"]
    assert set(old.kv_pool_factories) == {
        "get_mha_kv_pool_cls",
        "get_mla_kv_pool_cls",
        "get_dsa_kv_pool_cls",
    }
    assert "get_nsa_kv_pool_cls" in ROWS["0.5.12"].kv_pool_factories
    assert old.capability_fields_read() == ("graph_capture", "piecewise_graph")
    assert old.allocator_fallback is not None
    assert not new.kv_pool_factories
    assert new.allocator_fallback is None
    assert "supports_pynccl" not in new.capability_fields
    assert "supports_pynccl" in ROWS["0.5.23"].capability_fields


def test_never_called_names_what_a_release_does_not_reach() -> None:
    overridden = {
        "get_kv_pool_cls",
        "post_load_model",
        "get_speculative_worker_cls",
        "init_backend",
    }
    assert ROWS["0.5.20"].never_called(overridden) == [
        "get_speculative_worker_cls",
        "post_load_model",
    ]
    assert ROWS["0.5.22"].never_called(overridden) == ["get_speculative_worker_cls"]
    assert ROWS["0.5.23"].never_called(overridden) == []
    # The seed's names reach 0.5.23 through its successors (the adapter maps them).
    assert ROWS["0.5.23"].never_called({"support_cuda_graph", "get_mha_kv_pool_cls"}) == []
    assert ROWS["0.5.12"].never_called({"get_quantization_config"}) == ["get_quantization_config"]


class _Pool:
    pass


class _Allocator:
    pass


class _Vendor(CpuDeviceMixin, SRTPlatform):
    _enum = PlatformEnum.OOT
    device_name = "vendor"
    device_type = "cpu"
    capabilities = PlatformCapabilities(graph_capture=True)

    def get_kv_pool_cls(self, *, kind: KVPoolKind) -> type | None:
        return _Pool

    def get_paged_allocator_cls(self) -> type | None:
        return _Allocator


def _adapted(vendor: type, release: str) -> Any:
    names = {n for k in vendor.__mro__ if k.__module__ == __name__ for n in vars(k)}
    entries = compat.release_names(ROWS[release], vendor, names)
    # Built where the adapters live, as build_adapter does (its classes skip the class check).
    entries["__module__"] = "cardcage.platforms.hosts.sglang.adapter"
    return type(f"{vendor.__name__}Adapted", (vendor,), entries)()


def test_an_older_release_reads_the_vendors_declaration_through_its_own_names() -> None:
    platform = _adapted(_Vendor, "0.5.20")
    assert platform.support_cuda_graph() is True
    assert platform.support_piecewise_cuda_graph() is False
    assert platform.get_mha_kv_pool_cls() is _Pool
    assert platform.get_dsa_kv_pool_cls() is _Pool
    assert platform.get_paged_allocator_cls() is _Allocator
    assert _adapted(_Vendor, "0.5.12").get_nsa_kv_pool_cls() is _Pool


def test_a_release_with_cardcages_names_gets_no_entries() -> None:
    for version in ("0.5.22", "0.5.23"):
        assert compat.release_names(ROWS[version], _Vendor, set()) == {}


with pytest.warns(PlatformDeprecationWarning, match="get_mha_kv_pool_cls"):  # the seed's name

    class _LegacyVendor(CpuDeviceMixin, SRTPlatform):
        _enum = PlatformEnum.OOT
        device_name = "legacy"
        device_type = "cpu"

        def get_mha_kv_pool_cls(self) -> type | None:
            return _Pool


def test_a_vendors_own_per_kind_factory_is_what_the_release_calls() -> None:
    platform = _adapted(_LegacyVendor, "0.5.20")
    assert platform.get_mha_kv_pool_cls() is _Pool
    # The entries are not callable in the class dict, so cardcage's get_kv_pool_cls does not
    # take them for the vendor's override and loop back into them.
    assert platform.get_kv_pool_cls(kind="mla") is None


def test_the_first_current_platform_never_imports_the_release_table() -> None:
    code = (
        "import sys, cardcage.platforms as p; p.current_platform.device_name; "
        "print([m for m in sys.modules if m.startswith('cardcage.platforms.hosts.sglang')])"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_a_half_imported_sglang_is_read_from_its_version_module(tmp_path: Any) -> None:
    # SGLang selects its platform from inside sglang/__init__.py, before __version__ is set;
    # the release must come from sglang.version there, not from the newest row (this package
    # has no metadata, so a metadata lookup would find nothing).
    package = tmp_path / "sglang"
    package.mkdir()
    (package / "version.py").write_text('__version__ = "0.5.20"\n')
    (package / "__init__.py").write_text(
        "from cardcage.platforms.hosts.sglang import releases\n"
        "SEEN = releases.running_release().version\n"
        "__version__ = 'set afterwards'\n"
    )
    code = "import sglang; print(sglang.SEEN)"
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,
    )
    assert done.stdout.strip() == "0.5.20"
