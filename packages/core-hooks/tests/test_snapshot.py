"""The entry-point snapshot (one scan per process) and the cost of ``import cardcage.hooks``."""

from __future__ import annotations

import importlib
import os
import pickle
import shutil
import subprocess
import sys
import zipfile
from importlib import metadata
from typing import TYPE_CHECKING

import pytest

import cardcage.hooks
from cardcage.hooks import snapshot
from cardcage.hooks.errors import MalformedEntryPointError
from cardcage.hooks.loader import LoadedPlugin, load_plugins, load_plugins_by_group
from cardcage.hooks.snapshot import (
    EntryPointSnapshot,
    PluginEntryPoint,
    entry_point_snapshot,
    install_snapshot,
)

if TYPE_CHECKING:
    from pathlib import Path

    from dist_support import DistFactory

    from cardcage.hooks.profile import RuntimeProfile
    from cardcage.hooks.registry import BaseHookRegistry

pytest_plugins = ["dist_support"]


@pytest.fixture
def scans(monkeypatch: pytest.MonkeyPatch, snapshot_guard: None) -> list[int]:
    """Forget the process-wide snapshot and count the real scans made from now on."""
    del snapshot_guard
    calls: list[int] = []
    real_scan = snapshot.scan

    def counting_scan() -> EntryPointSnapshot:
        calls.append(1)
        return real_scan()

    monkeypatch.setattr(snapshot, "scan", counting_scan)
    monkeypatch.setattr(snapshot, "_snapshot", None)
    return calls


def _entries(found: tuple[PluginEntryPoint, ...]) -> list[tuple[str, str | None, str]]:
    return [(ep.name, ep.dist_name, ep.dist.version if ep.dist is not None else "") for ep in found]


# -- one scan per process -----------------------------------------------------------------------


def test_group_lookups_share_one_scan(scans: list[int]) -> None:
    entry_point_snapshot().group("console_scripts")
    entry_point_snapshot().group("no.such.group")

    assert scans == [1]


def test_a_whole_load_plugins_run_scans_once(
    dists: DistFactory,
    plugin_profile: RuntimeProfile,
    plugin_registry: type[BaseHookRegistry],
    scans: list[int],
) -> None:
    dists.add("vendor-a", platforms={"a": None}, plugins={"a_general": None}, refresh=False)
    dists.select("a")
    dists.allow("a_general")

    load_plugins(plugin_profile, plugin_registry)
    load_plugins_by_group(plugin_profile.plugin_group, profile=plugin_profile)

    assert (scans, dists.events("register")) == ([1], ["a_general"])


def test_the_snapshot_does_not_see_a_distribution_installed_after_the_scan(
    dists: DistFactory, plugin_profile: RuntimeProfile
) -> None:
    entry_point_snapshot()
    dists.add("late-dist", plugins={"late": None}, refresh=False)

    assert entry_point_snapshot().group(plugin_profile.plugin_group) == ()


def test_refresh_sees_a_newly_written_distribution(
    dists: DistFactory, plugin_profile: RuntimeProfile
) -> None:
    entry_point_snapshot()
    dists.add("late-dist", plugins={"late": None}, refresh=False)

    snapshot.refresh()

    found = entry_point_snapshot().group(plugin_profile.plugin_group)
    assert [(ep.name, ep.dist_name) for ep in found] == [("late", "late-dist")]


# -- what group() returns ---------------------------------------------------------------------


def test_group_lists_entries_in_sys_path_order_then_file_order(
    dists: DistFactory, plugin_profile: RuntimeProfile
) -> None:
    early, late = dists.site(), dists.site()  # ``late`` is prepended last: searched first
    dists.add("alpha-dist", plugins={"a1": None}, site=early, refresh=False)
    dists.add("zeta-dist", plugins={"z2": None, "z1": None}, site=late, refresh=False)

    found = dists.refresh().group(plugin_profile.plugin_group)

    assert [ep.name for ep in found] == ["z2", "z1", "a1"]


def test_group_entries_carry_distribution_name_and_version_from_metadata(
    dists: DistFactory, plugin_profile: RuntimeProfile
) -> None:
    dists.add("Zeta.Dist", version="2.5.post1", plugins={"z": None})

    [entry] = entry_point_snapshot().group(plugin_profile.plugin_group)

    assert (entry.dist_name, entry.dist and entry.dist.version) == ("Zeta.Dist", "2.5.post1")


def test_group_entries_carry_their_group_and_value(
    dists: DistFactory, plugin_profile: RuntimeProfile
) -> None:
    dist = dists.add("dist-a", plugins={"alpha": None})

    [entry] = entry_point_snapshot().group(plugin_profile.plugin_group)

    assert (entry.group, entry.value, entry.module) == (
        plugin_profile.plugin_group,
        f"{dist.module('alpha')}:register",
        dist.module("alpha"),
    )


def test_the_snapshot_lists_the_groups_it_saw(
    dists: DistFactory, plugin_profile: RuntimeProfile
) -> None:
    dists.add("vendor-a", platforms={"a": None}, plugins={"a_general": None})

    groups = entry_point_snapshot().groups()

    assert {plugin_profile.platform_group, plugin_profile.plugin_group} <= set(groups)


def test_a_distribution_on_two_path_entries_counts_once_first_wins(
    dists: DistFactory, plugin_profile: RuntimeProfile
) -> None:
    early, late = dists.site(), dists.site()
    dists.add("dup-dist", version="2.0", plugins={"shadowed": None}, site=early, refresh=False)
    dists.add("Dup_Dist", version="1.0", plugins={"winner": None}, site=late, refresh=False)

    found = dists.refresh().group(plugin_profile.plugin_group)

    assert _entries(found) == [("winner", "Dup_Dist", "1.0")]


# -- loading entry-point values -----------------------------------------------------------------

_TARGETS = """\
class Outer:
    class Inner:
        @staticmethod
        def hello():
            return "hello"


def top():
    return "top"
"""


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("{m}:top", "top"),
        ("{m}:Outer.Inner.hello", "hello"),
        ("{m}:Outer.Inner.hello [extra]", "hello"),
        ("{m}:top[x,y]", "top"),
        ("{m} : top", "top"),
    ],
    ids=["attr", "nested-attrs", "extras", "extras-no-space", "spaced-colon"],
)
def test_entry_point_values_load_the_object_they_name(
    dists: DistFactory, plugin_profile: RuntimeProfile, value: str, expected: str
) -> None:
    module = dists.module_name("targets")
    dists.add(
        "dist-a",
        entry_points={plugin_profile.plugin_group: {"ep": value.format(m=module)}},
        modules={module: _TARGETS},
    )
    [entry] = entry_point_snapshot().group(plugin_profile.plugin_group)

    loaded = entry.load()

    assert callable(loaded)
    assert loaded() == expected


def test_an_entry_point_value_without_attribute_loads_the_module(
    dists: DistFactory, plugin_profile: RuntimeProfile
) -> None:
    module = dists.module_name("targets")
    dists.add(
        "dist-a",
        entry_points={plugin_profile.plugin_group: {"ep": module}},
        modules={module: _TARGETS},
    )
    [entry] = entry_point_snapshot().group(plugin_profile.plugin_group)

    assert entry.load() is importlib.import_module(module)


@pytest.mark.parametrize(
    "value",
    ["{m}:register extra", "{m}:", "{m}:register[extra", "{m} register", "{m}:re-gister"],
    ids=["trailing-word", "empty-attr", "unclosed-extras", "space-not-colon", "hyphen"],
)
def test_a_malformed_entry_point_value_blames_the_metadata_not_the_plugin_code(
    dists: DistFactory, plugin_profile: RuntimeProfile, value: str
) -> None:
    module = dists.module_name("targets")
    dists.add(
        "dist-a",
        entry_points={plugin_profile.plugin_group: {"ep": value.format(m=module)}},
        modules={module: _TARGETS},
    )
    [entry] = entry_point_snapshot().group(plugin_profile.plugin_group)

    with pytest.raises(MalformedEntryPointError) as e:
        entry.load()

    assert (e.value.plugin, e.value.distribution) == ("ep", "dist-a")
    assert f"malformed value {entry.value!r}" in str(e.value)
    assert "[project.entry-points] table of dist-a's pyproject.toml" in str(e.value)
    assert module not in sys.modules  # nothing of the plugin was imported


def test_comment_lines_in_entry_points_txt_are_ignored(
    dists: DistFactory, plugin_profile: RuntimeProfile
) -> None:
    dist = dists.add("dist-a", plugins={"alpha": None})
    text = (dist.dist_info / "entry_points.txt").read_text(encoding="utf-8")
    group_line = f"[{plugin_profile.plugin_group}]\n"
    comments = group_line + "# hashed = x:y\n; semi = x:y\n"
    (dist.dist_info / "entry_points.txt").write_text(
        text.replace(group_line, comments), encoding="utf-8"
    )

    found = dists.refresh().group(plugin_profile.plugin_group)

    assert [ep.name for ep in found] == ["alpha"]


def test_entry_point_lines_before_any_group_header_are_ignored(
    dists: DistFactory, plugin_profile: RuntimeProfile
) -> None:
    dist = dists.add("dist-a", plugins={"alpha": None})
    text = (dist.dist_info / "entry_points.txt").read_text(encoding="utf-8")
    orphan = f"orphan = {dist.module('alpha')}:register\n"
    (dist.dist_info / "entry_points.txt").write_text(orphan + text, encoding="utf-8")

    scanned = dists.refresh()

    everywhere = [ep.name for group in scanned.groups() for ep in scanned.group(group)]
    assert "orphan" not in everywhere


def test_the_snapshot_agrees_with_importlib_metadata(
    dists: DistFactory, plugin_profile: RuntimeProfile
) -> None:
    dists.add("vendor-a", platforms={"a": None}, plugins={"a1": None, "a2": None})
    dists.add("neutral", plugins={"n1": None})

    ours = entry_point_snapshot().group(plugin_profile.plugin_group)

    theirs = metadata.entry_points(group=plugin_profile.plugin_group)
    assert sorted((ep.name, ep.value, ep.dist_name) for ep in ours) == sorted(
        (ep.name, ep.value, ep.dist.name if ep.dist else None) for ep in theirs
    )


def _importlib_view(group: str) -> list[tuple[str, str, str | None, str | None]]:
    found = metadata.entry_points(group=group)
    return [
        (ep.name, ep.value, ep.dist.name if ep.dist else None, ep.dist.version if ep.dist else None)
        for ep in found
    ]


def _our_view(group: str) -> list[tuple[str, str, str | None, str | None]]:
    found = entry_point_snapshot().group(group)
    return [(ep.name, ep.value, ep.dist_name, ep.dist.version if ep.dist else None) for ep in found]


def _write_egg_info(site: Path, name: str, version: str, entry_points: str) -> Path:
    """A setuptools-style ``<name>.egg-info`` folder: PKG-INFO, no METADATA."""
    info = site / f"{name.replace('-', '_')}.egg-info"
    info.mkdir()
    (info / "PKG-INFO").write_text(
        f"Metadata-Version: 1.2\nName: {name}\nVersion: {version}\n", encoding="utf-8"
    )
    (info / "entry_points.txt").write_text(entry_points, encoding="utf-8")
    return info


def test_an_egg_info_folder_is_scanned_with_name_and_version_from_pkg_info(
    dists: DistFactory, plugin_profile: RuntimeProfile
) -> None:
    group = plugin_profile.plugin_group
    _write_egg_info(dists.default_site, "Egg-Dist", "0.7", f"[{group}]\negg = os:getcwd\n")

    dists.refresh()

    assert _our_view(group) == [("egg", "os:getcwd", "Egg-Dist", "0.7")]
    assert _our_view(group) == _importlib_view(group)


def test_a_zip_file_on_sys_path_is_read_through_importlib_metadata(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    dists: DistFactory,
    plugin_profile: RuntimeProfile,
) -> None:
    group = plugin_profile.plugin_group
    archive = tmp_path / "zipped.zip"
    with zipfile.ZipFile(archive, "w") as bundle:
        bundle.writestr(
            "zipped_dist-2.1.dist-info/METADATA",
            "Metadata-Version: 2.1\nName: Zipped.Dist\nVersion: 2.1\n",
        )
        bundle.writestr("zipped_dist-2.1.dist-info/entry_points.txt", f"[{group}]\nz = os:sep\n")
    monkeypatch.syspath_prepend(str(archive))

    dists.refresh()

    assert _our_view(group) == [("z", "os:sep", "Zipped.Dist", "2.1")]
    assert _our_view(group) == _importlib_view(group)
    [entry] = pickle.loads(pickle.dumps(entry_point_snapshot())).group(group)
    assert (entry.dist_name, entry.dist and entry.dist.version) == ("Zipped.Dist", "2.1")


def test_a_zip_file_earlier_on_sys_path_shadows_the_same_distribution_in_a_folder(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    dists: DistFactory,
    plugin_profile: RuntimeProfile,
) -> None:
    group = plugin_profile.plugin_group
    dists.add("dup-dist", version="1.0", plugins={"in_folder": None}, refresh=False)
    archive = tmp_path / "dup.zip"
    with zipfile.ZipFile(archive, "w") as bundle:
        bundle.writestr(
            "dup_dist-2.0.dist-info/METADATA",
            "Metadata-Version: 2.1\nName: dup-dist\nVersion: 2.0\n",
        )
        bundle.writestr("dup_dist-2.0.dist-info/entry_points.txt", f"[{group}]\nin_zip = os:sep\n")
    monkeypatch.syspath_prepend(str(archive))

    dists.refresh()

    assert _our_view(group) == [("in_zip", "os:sep", "dup-dist", "2.0")]
    assert _our_view(group) == _importlib_view(group)


def test_an_earlier_copy_without_entry_points_still_shadows_a_later_one(
    dists: DistFactory, plugin_profile: RuntimeProfile
) -> None:
    group = plugin_profile.plugin_group
    early, late = dists.site(), dists.site()  # ``late`` is searched first
    dists.add("shadow-dist", version="1.0", plugins={"hidden": None}, site=early, refresh=False)
    first = dists.add(
        "shadow-dist", version="2.0", plugins={"gone": None}, site=late, refresh=False
    )
    (first.dist_info / "entry_points.txt").unlink()

    dists.refresh()

    assert _our_view(group) == []
    assert _importlib_view(group) == []


def test_the_same_distribution_in_two_path_entries_agrees_with_importlib(
    dists: DistFactory, plugin_profile: RuntimeProfile
) -> None:
    group = plugin_profile.plugin_group
    early, late = dists.site(), dists.site()
    dists.add("twice", version="1.0", plugins={"old": None, "shared": None}, site=early)
    dists.add("Twice", version="2.0", plugins={"new": None, "shared": None}, site=late)
    dists.add("other-dist", plugins={"other": None}, site=early)

    assert sorted(_our_view(group)) == sorted(_importlib_view(group))
    assert {name for name, *_ in _our_view(group)} == {"new", "shared", "other"}


def test_missing_and_non_zip_file_path_entries_are_skipped(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    dists: DistFactory,
    plugin_profile: RuntimeProfile,
) -> None:
    not_a_zip = tmp_path / "not-a-zip.txt"
    not_a_zip.write_text("hello", encoding="utf-8")
    monkeypatch.syspath_prepend(str(not_a_zip))
    monkeypatch.syspath_prepend(str(tmp_path / "does-not-exist"))
    dists.add("dist-a", plugins={"alpha": None}, refresh=False)

    dists.refresh()

    assert [name for name, *_ in _our_view(plugin_profile.plugin_group)] == ["alpha"]


def test_name_and_version_come_from_one_read_of_metadata_headers(
    monkeypatch: pytest.MonkeyPatch, dists: DistFactory, plugin_profile: RuntimeProfile
) -> None:
    dist = dists.add("dist-a", plugins={"alpha": None})
    (dist.dist_info / "METADATA").write_text(
        "Metadata-Version: 2.1\nname: Dist-A\nVERSION: 3.0\nName: not-this-one\n"
        "Summary: one\n\nName: in-the-body\nVersion: 9\n",
        encoding="utf-8",
    )
    reads: list[str] = []
    real_read = snapshot._read_text

    def counting_read(path: str) -> str | None:
        reads.append(os.path.basename(path))
        return real_read(path)

    monkeypatch.setattr(snapshot, "_read_text", counting_read)
    [entry] = dists.refresh().group(plugin_profile.plugin_group)
    reads.clear()

    assert (entry.dist_name, entry.dist and entry.dist.version) == ("Dist-A", "3.0")
    assert reads == ["METADATA"]
    assert _our_view(plugin_profile.plugin_group) == _importlib_view(plugin_profile.plugin_group)


def test_the_scan_reads_no_metadata_until_a_name_is_asked_for(
    monkeypatch: pytest.MonkeyPatch, dists: DistFactory, plugin_profile: RuntimeProfile
) -> None:
    dists.add("dist-a", plugins={"alpha": None}, refresh=False)
    reads: list[str] = []
    real_read = snapshot._read_text

    def counting_read(path: str) -> str | None:
        reads.append(os.path.basename(path))
        return real_read(path)

    monkeypatch.setattr(snapshot, "_read_text", counting_read)

    [entry] = dists.refresh().group(plugin_profile.plugin_group)

    assert "METADATA" not in reads
    assert entry.dist is not None
    assert entry.dist.normalized_name == "dist_a"


def test_groups_parsed_on_demand_match_a_full_parse(
    dists: DistFactory, plugin_profile: RuntimeProfile
) -> None:
    dists.add("vendor-a", platforms={"a": None}, plugins={"a1": None, "a2": None})
    dists.add("neutral", plugins={"n1": None})
    lazy = entry_point_snapshot()
    lazy_view = {group: lazy.group(group) for group in (plugin_profile.plugin_group, "nope")}

    full = pickle.loads(pickle.dumps(lazy))

    assert [(ep.name, ep.value) for ep in lazy_view[plugin_profile.plugin_group]] == [
        (ep.name, ep.value) for ep in full.group(plugin_profile.plugin_group)
    ]
    assert lazy_view["nope"] == full.group("nope") == ()
    assert lazy.groups() == full.groups()


# -- handing the snapshot to a spawned worker ------------------------------------------------


def test_the_snapshot_pickles_with_names_and_versions_resolved(
    dists: DistFactory, plugin_profile: RuntimeProfile
) -> None:
    dist = dists.add("Vendor.A", version="3.1", platforms={"a": None}, plugins={"p": None})
    data = pickle.dumps(entry_point_snapshot())
    shutil.rmtree(dist.dist_info)  # the worker must not need the metadata files

    restored = pickle.loads(data)

    assert _entries(restored.group(plugin_profile.platform_group)) == [("a", "Vendor.A", "3.1")]
    assert _entries(restored.group(plugin_profile.plugin_group)) == [("p", "Vendor.A", "3.1")]


def test_an_unpickled_entry_point_still_loads(
    dists: DistFactory, plugin_profile: RuntimeProfile
) -> None:
    dist = dists.add("dist-a", plugins={"alpha": None})

    [entry] = pickle.loads(pickle.dumps(entry_point_snapshot())).group(plugin_profile.plugin_group)

    assert entry.load() is dist.loaded("alpha").register


def test_install_snapshot_makes_lookups_use_the_given_snapshot(
    plugin_profile: RuntimeProfile, snapshot_guard: None, scans: list[int]
) -> None:
    given = EntryPointSnapshot([PluginEntryPoint("cwd", "os:getcwd", "worker.group", None)])

    install_snapshot(given)

    assert entry_point_snapshot() is given
    assert load_plugins_by_group("worker.group", profile=plugin_profile) == {
        "cwd": LoadedPlugin(os.getcwd, None)
    }
    assert scans == []


# -- import cost ----------------------------------------------------------------------------

_HEAVY = ("importlib.metadata", "logging", "typing", "torch", "numpy", "zmq")


def _modules_after(code: str) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-c", f"{code}; import sys; print(' '.join(sorted(sys.modules)))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return set(out.split())


def test_importing_cardcage_hooks_loads_none_of_the_heavy_modules() -> None:
    baseline = _modules_after("pass")  # what the interpreter (site, .pth files) loads anyway

    loaded = _modules_after("import cardcage.hooks")

    assert "cardcage.hooks" in loaded
    assert sorted((loaded - baseline) & set(_HEAVY)) == []


def test_importing_the_snapshot_module_defers_importlib_metadata() -> None:
    loaded = _modules_after("import cardcage.hooks.snapshot")

    assert "cardcage.hooks.snapshot" in loaded
    assert "importlib.metadata" not in loaded


_PATCHING = {
    "cardcage.hooks._patch",
    "cardcage.hooks._wrappers",
    "cardcage.hooks._fastcall",
    "cardcage.hooks._propagate",
    "cardcage.hooks._deferred",
}


def test_loading_plugins_without_hooks_never_imports_the_patching_machinery() -> None:
    # The first platform access of every process goes through load_plugins(); with no hook to
    # apply it must not pay for the modules that only patching needs (DESIGN §7).
    loaded = _modules_after("from cardcage.hooks import load_plugins; load_plugins()")

    assert "cardcage.hooks.registry" in loaded
    assert sorted(loaded & _PATCHING) == []


def test_the_first_apply_with_a_target_imports_the_patching_machinery() -> None:
    loaded = _modules_after(
        "from cardcage.hooks import HookRegistry, HookType; "
        "HookRegistry.register('json.dumps', lambda *a, **k: None, HookType.BEFORE); "
        "assert HookRegistry.apply().applied == ('json.dumps',)"
    )

    assert sorted(_PATCHING - {"cardcage.hooks._deferred"} - loaded) == []


def test_every_public_name_resolves_lazily_from_the_package() -> None:
    missing = [name for name in cardcage.hooks.__all__ if not hasattr(cardcage.hooks, name)]

    assert missing == []


def test_an_unknown_package_attribute_raises_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        cardcage.hooks.nope
