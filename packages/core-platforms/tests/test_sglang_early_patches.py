"""Early patches' failure policy when SGLang selects a cardcage platform (SGLang's room).

SGLang is not installed here: these tests call the room's check the way the adapter lookup does
once SGLang's selection resolves a cardcage platform class. That SGLang's own selection reaches
it, and fails with the error, is proven by the ``scenario-sglang`` nox session.
"""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from typing import TYPE_CHECKING

import pytest

from cardcage.hooks import early
from cardcage.hooks.errors import EarlyPatchError
from cardcage.hooks.testing import on_sys_path, write_distribution
from cardcage.platforms.hosts.sglang.early_patches import (
    check_selected_class,
    supplying_entry_point,
)

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

SRT_PLATFORMS = "sglang.srt.platforms"
DIFFUSION_PLATFORMS = "sglang.multimodal_gen.platforms"
PLATFORM_MODULE = """
from cardcage.platforms.device_mixin import PlatformEnum
from cardcage.platforms.interface import SRTPlatform


class {name}(SRTPlatform):
    _enum = PlatformEnum.OOT
    device_name = "{name}"
    device_type = "cpu"


def activate():
    return None
"""


@pytest.fixture(autouse=True)
def clean_early(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv("CARDCAGE_EARLY_PATCHES", raising=False)
    early.reset()
    yield
    early.reset()


def vendor(site: Path, dist: str, package: str, *, group: str = SRT_PLATFORMS) -> None:
    """A distribution whose platform entry point and class live in ``package``."""
    write_distribution(
        site,
        dist,
        entry_points={
            group: {package: f"{package}.platform:activate"},
            "cardcage.early_patches": {f"{package}_early": f"{package}.early:register"},
        },
        modules={
            f"{package}.platform": PLATFORM_MODULE.format(name="VendorPlatform"),
            f"{package}.early": "def register():\n    raise RuntimeError('broken on purpose')\n",
        },
    )


def platform_class(package: str) -> type:
    cls: type = importlib.import_module(f"{package}.platform").VendorPlatform
    return cls


def test_the_supplier_is_the_platform_entry_point_in_the_class_package(tmp_path: Path) -> None:
    vendor(tmp_path, "acme-srt", "ccsge_acme")
    vendor(tmp_path, "other-vendor", "ccsge_other", group=DIFFUSION_PLATFORMS)
    with on_sys_path(tmp_path):
        assert supplying_entry_point(platform_class("ccsge_acme")) == ("ccsge_acme", "acme-srt")
        other = platform_class("ccsge_other")
        assert supplying_entry_point(other) == ("ccsge_other", "other-vendor")


def test_the_entry_point_closest_to_the_class_module_supplies_it(tmp_path: Path) -> None:
    vendor(tmp_path, "twin-one", "ccsge_twin")
    write_distribution(
        tmp_path,
        "twin-two",
        entry_points={SRT_PLATFORMS: {"twin_two": "ccsge_twin.other:activate"}},
    )
    with on_sys_path(tmp_path):
        assert supplying_entry_point(platform_class("ccsge_twin")) == ("ccsge_twin", "twin-one")


def test_two_distributions_equally_close_to_the_class_name_no_supplier(tmp_path: Path) -> None:
    vendor(tmp_path, "twin-one", "ccsge_twin")
    write_distribution(
        tmp_path,
        "twin-two",
        entry_points={SRT_PLATFORMS: {"twin_two": "ccsge_twin.platform:activate"}},
    )
    with on_sys_path(tmp_path):
        assert supplying_entry_point(platform_class("ccsge_twin")) == (None, None)


def test_a_recorded_failure_of_the_selected_class_distribution_raises(tmp_path: Path) -> None:
    vendor(tmp_path, "acme-broken", "ccsge_broken")
    with on_sys_path(tmp_path):
        early.run(["ccsge_broken_early"])
        with pytest.raises(EarlyPatchError) as caught:
            check_selected_class(platform_class("ccsge_broken"))
    error = caught.value
    assert (error.plugin, error.distribution) == ("ccsge_broken_early", "acme-broken")
    assert "platform entry point 'ccsge_broken'" in str(error)
    assert "selected by SGLang" in str(error)


def test_a_recorded_failure_of_another_distribution_is_not_raised(tmp_path: Path) -> None:
    vendor(tmp_path, "acme-broken", "ccsge_broken")
    vendor(tmp_path, "acme-fine", "ccsge_fine")
    with on_sys_path(tmp_path):
        early.run(["ccsge_broken_early"])
        check_selected_class(platform_class("ccsge_fine"))
    assert [f.dist_name for f in early.failures()] == ["acme-broken"]


def test_without_early_patches_the_check_imports_nothing_of_them() -> None:
    code = (
        "import sys\n"
        "from cardcage.platforms.hosts.sglang.early_patches import check_selected_class\n"
        "from cardcage.platforms.interface import SRTPlatform\n"
        "check_selected_class(SRTPlatform)\n"
        "print('cardcage.hooks.early' in sys.modules)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "CARDCAGE_EARLY_PATCHES"}
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "False"
