"""``cardcage deps``: a plugin's host dependencies, checked against host releases it never imports.

Every run is a real ``cardcage`` subprocess over a folder of fixture distributions
(``cli_support.Site``); the host releases are real wheel archives written here, with the
layout and metadata of SGLang's and vLLM's wheels, small enough to say exactly what each release
has. The check against the real SGLang and vLLM wheels of cardcage's release tables runs in the
release scenarios, where those wheels are installed.
"""

from __future__ import annotations

import base64
import hashlib
import textwrap
import zipfile
from pathlib import Path
from typing import Any

import pytest
from cli_support import Site, validate

PLUGIN = "acme-plugin"

PLUGIN_CODE = """
import os

from sglang.srt.layers.activation import SiluAndMul
from sglang.srt.utils import common

try:
    from sglang.srt.fancy import Turbo
except ImportError:
    Turbo = None


def setup():
    common.get_device_memory_capacity("cpu")
    return SiluAndMul(), os.environ.get("SGLANG_ACME_THREADS")
"""

#: SGLang "0.5.20": everything the plugin uses, as it was tested.
OLD = {
    "sglang/__init__.py": "__version__ = '0.5.20'\n",
    "sglang/srt/__init__.py": "",
    "sglang/srt/utils/__init__.py": "",
    "sglang/srt/utils/common.py": "def get_device_memory_capacity(device):\n    return 1\n",
    "sglang/srt/layers/__init__.py": "",
    "sglang/srt/layers/activation.py": "class SiluAndMul:\n    def __init__(self):\n        pass\n",
    "sglang/srt/environ.py": "class Envs:\n    SGLANG_ACME_THREADS = 1\n",
    "sglang/srt/plugins/__init__.py": "GROUP = 'sglang.srt.plugins'\n",
}

#: SGLang "0.5.23": SiluAndMul moved to another module, get_device_memory_capacity takes a
#: required ``index`` too, and the variable is gone.
NEW = {
    **OLD,
    "sglang/__init__.py": "__version__ = '0.5.23'\n",
    "sglang/srt/utils/common.py": (
        "def get_device_memory_capacity(device, index):\n    return 1\n"
    ),
    "sglang/srt/layers/activation.py": "",
    "sglang/kernels/__init__.py": "",
    "sglang/kernels/activation.py": "class SiluAndMul:\n    def __init__(self):\n        pass\n",
    "sglang/srt/environ.py": "class Envs:\n    pass\n",
}


def _wheel(folder: Path, name: str, version: str, files: dict[str, str]) -> Path:
    """A wheel archive of ``files``, with the metadata pip and cardcage read."""
    stem = f"{name.replace('-', '_')}-{version}"
    path = folder / f"{stem}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as archive:
        for member, text in files.items():
            archive.writestr(member, textwrap.dedent(text))
        info = f"{stem}.dist-info"
        archive.writestr(
            f"{info}/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
        )
        archive.writestr(
            f"{info}/WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        )
        archive.writestr(f"{info}/RECORD", "")
    return path


def _record_line(root: Path, relative: str) -> str:
    data = (root / relative).read_bytes()
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{relative},sha256={digest},{len(data)}"


def _plugin(site: Site, code: str = PLUGIN_CODE) -> None:
    """``acme-plugin``: one module, a general plugin entry point, and a RECORD like a wheel's."""
    site.add(
        PLUGIN,
        "1.0",
        entry_points={"sglang.srt.plugins": {"acme": "acme_plugin:setup"}},
        modules={"acme_plugin": code},
    )
    info = site.root / "acme_plugin-1.0.dist-info"
    lines = [_record_line(site.root, "acme_plugin.py")]
    lines += [f"acme_plugin-1.0.dist-info/{n},," for n in ("METADATA", "entry_points.txt")]
    (info / "RECORD").write_text("\n".join(lines) + "\n", encoding="utf-8")


@pytest.fixture
def site(tmp_path: Path) -> Site:
    made = Site(tmp_path / "site")
    made.env["CARDCAGE_CACHE_DIR"] = str(tmp_path / "cache")
    _plugin(made)
    return made


@pytest.fixture
def wheels(tmp_path: Path) -> dict[str, Path]:
    folder = tmp_path / "wheels"
    folder.mkdir()
    return {
        "old": _wheel(folder, "sglang", "0.5.20", OLD),
        "new": _wheel(folder, "sglang", "0.5.23", NEW),
    }


def _deps(site: Site, *args: str) -> dict[str, Any]:
    result = site.run("deps", PLUGIN, "--no-rehearse", *args, "--json")
    assert result.returncode in (0, 1), result
    document: dict[str, Any] = result.json()
    validate("deps", document)
    return document


def _verdicts(document: dict[str, Any], version: str) -> dict[str, dict[str, Any]]:
    (release,) = [r for r in document["releases"] if r["version"] == version]
    return {v["symbol"]: v for v in release["verdicts"]}


def test_the_dependency_list_names_each_host_symbol_and_where_the_plugin_uses_it(
    site: Site,
) -> None:
    document = _deps(site)
    (plugin,) = document["plugins"]
    rows = {(d["symbol"], d["source"]): d for d in plugin["dependencies"]}
    silu = rows[("sglang.srt.layers.activation:SiluAndMul", "import")]
    assert silu["host"] == "sglang"
    assert silu["where"] == ["acme_plugin.py:4"]
    assert rows[("SGLANG_ACME_THREADS", "env-var")]["kind"] == "env-var"
    assert rows[("sglang.srt.plugins", "entry-point-group")]["kind"] == "entry-point-group"
    assert rows[("sglang.srt.fancy:Turbo", "import")]["guarded"] is True
    assert document["releases"] == []  # no host installed, no --against: listed, not checked


def test_every_dependency_is_present_in_the_release_the_plugin_was_tested_on(
    site: Site, wheels: dict[str, Path]
) -> None:
    document = _deps(site, "--against", str(wheels["old"]))
    (release,) = document["releases"]
    assert (release["host"], release["version"], release["table_release"]) == (
        "sglang",
        "0.5.20",
        "0.5.20",
    )
    assert release["summary"]["breaks"] == 0
    verdicts = _verdicts(document, "0.5.20")
    assert verdicts["sglang.srt.layers.activation:SiluAndMul"]["status"] == "present"
    # The plugin guards this import itself: missing, and not a break.
    assert verdicts["sglang.srt.fancy:Turbo"]["status"] == "missing"
    assert verdicts["sglang.srt.fancy:Turbo"]["breaks"] is False
    assert document["ok"] is True


def test_a_moved_class_is_reported_moved_with_where_it_went_and_when(
    site: Site, wheels: dict[str, Path]
) -> None:
    document = _deps(site, "--against", str(wheels["old"]), "--against", str(wheels["new"]))
    moved = _verdicts(document, "0.5.23")["sglang.srt.layers.activation:SiluAndMul"]
    assert moved["status"] == "moved"
    assert moved["breaks"] is True
    assert moved["moved_to"][0] == "sglang.kernels.activation:SiluAndMul"
    assert (moved["last_present"], moved["removed_in"]) == ("0.5.20", "0.5.23")
    assert "sglang.kernels.activation" in moved["fix"]


def test_a_variable_the_release_no_longer_reads_is_a_break(
    site: Site, wheels: dict[str, Path]
) -> None:
    verdict = _verdicts(_deps(site, "--against", str(wheels["new"])), "0.5.23")[
        "SGLANG_ACME_THREADS"
    ]
    assert (verdict["status"], verdict["breaks"]) == ("missing", True)


def test_a_signature_the_plugins_own_call_no_longer_fits_is_changed_and_breaks(
    site: Site, wheels: dict[str, Path], tmp_path: Path
) -> None:
    lock = tmp_path / "acme.lock.json"
    written = _deps(site, "--against", str(wheels["old"]), "--write-lock", str(lock))
    assert any("wrote" in note for note in written["notes"])
    document = _deps(site, "--against", str(wheels["new"]), "--baseline", str(lock))
    verdict = _verdicts(document, "0.5.23")["sglang.srt.utils:common.get_device_memory_capacity"]
    assert verdict["status"] == "changed"
    assert verdict["breaks"] is True
    assert verdict["baseline_signature"] == "(device)"
    assert verdict["signature"] == "(device, index)"
    assert verdict["misfits"] == ["acme_plugin.py:14: does not pass the required 'index'"]


def test_a_folder_a_release_is_installed_in_is_read_like_its_wheel(
    site: Site, wheels: dict[str, Path], tmp_path: Path
) -> None:
    installed = tmp_path / "target"
    with zipfile.ZipFile(wheels["new"]) as archive:
        archive.extractall(installed)  # what pip install --target leaves, RECORD included
    document = _deps(site, "--against", str(wheels["old"]), "--against", str(installed))
    (release,) = [r for r in document["releases"] if r["version"] == "0.5.23"]
    assert release["origin"] == f"installed at {installed}"
    moved = _verdicts(document, "0.5.23")["sglang.srt.layers.activation:SiluAndMul"]
    assert (moved["status"], moved["removed_in"]) == ("moved", "0.5.23")


def test_strict_exits_1_on_a_break_and_0_without(site: Site, wheels: dict[str, Path]) -> None:
    assert (
        site.run("deps", "--no-rehearse", "--against", str(wheels["old"]), "--strict").returncode
        == 0
    )
    broken = site.run("deps", "--no-rehearse", "--against", str(wheels["new"]), "--strict")
    assert broken.returncode == 1, broken
    assert "BREAK" in broken.stdout
    assert "sglang.srt.layers.activation:SiluAndMul" in broken.stdout


def test_name_and_version_comes_from_the_cache_and_needs_download_to_fetch(
    site: Site, wheels: dict[str, Path], tmp_path: Path
) -> None:
    refused = site.run("deps", "--no-rehearse", "--against", "sglang==0.5.23")
    assert refused.returncode == 2, refused
    assert "--download" in refused.stderr
    # pip download from a local folder of wheels (no index, no network): the cache fills.
    env = {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(wheels["new"].parent)}
    fetched = site.run(
        "deps", "--no-rehearse", "--against", "sglang==0.5.23", "--download", "--json", env=env
    )
    assert fetched.returncode == 0, fetched
    assert [r["version"] for r in fetched.json()["releases"]] == ["0.5.23"]
    assert list((tmp_path / "cache" / "wheels").glob("sglang-0.5.23-*.whl"))
    # Cached now: no --download, no index needed.
    again = site.run("deps", "--no-rehearse", "--against", "sglang==0.5.23", "--json")
    assert again.returncode == 0, again


def test_a_version_pip_cannot_find_is_a_usage_error_naming_it(site: Site, tmp_path: Path) -> None:
    empty = tmp_path / "no-wheels"
    empty.mkdir()
    env = {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(empty)}
    result = site.run("deps", "--no-rehearse", "--against", "sglang==9.9.9", "--download", env=env)
    assert result.returncode == 2, result
    assert "pip could not download sglang==9.9.9" in result.stderr
    assert "pass a wheel file" in result.stderr


@pytest.mark.parametrize(
    ("against", "expected"),
    [
        ("torch==2.13.0", "not a host cardcage serves"),
        ("nonsense", "accepted:"),
        ("missing.whl", "no such file"),
    ],
)
def test_bad_against_is_a_usage_error_naming_what_is_accepted(
    site: Site, against: str, expected: str
) -> None:
    result = site.run("deps", "--no-rehearse", "--against", against)
    assert result.returncode == 2, result
    assert expected in result.stderr


def test_a_corrupt_wheel_is_a_usage_error(site: Site, tmp_path: Path) -> None:
    broken = tmp_path / "sglang-0.5.23-py3-none-any.whl"
    broken.write_bytes(b"PK\x03\x04 not really a zip")
    result = site.run("deps", "--no-rehearse", "--against", str(broken))
    assert result.returncode == 2, result
    assert str(broken) in result.stderr


def test_a_wheel_of_another_project_is_a_usage_error(site: Site, tmp_path: Path) -> None:
    other = _wheel(tmp_path, "requests", "2.0.0", {"requests/__init__.py": ""})
    result = site.run("deps", "--no-rehearse", "--against", str(other))
    assert result.returncode == 2, result
    assert "requests" in result.stderr


def test_an_unknown_plugin_distribution_is_a_usage_error(site: Site) -> None:
    result = site.run("deps", "no-such-plugin", "--no-rehearse")
    assert result.returncode == 2, result
    assert "no-such-plugin" in result.stderr
    assert PLUGIN in result.stderr  # what is installed instead


def test_a_baseline_that_is_not_a_lock_is_a_usage_error(site: Site, tmp_path: Path) -> None:
    bogus = tmp_path / "bogus.json"
    bogus.write_text('{"schema": "something-else"}', encoding="utf-8")
    result = site.run("deps", "--no-rehearse", "--baseline", str(bogus))
    assert result.returncode == 2, result
    assert "--write-lock" in result.stderr
