"""A plugin from ``cardcage new`` installs, passes its own tests and the CI gate, outside our
checkout, against our wheels only; and keeps passing once its probe is real.

For each configuration the test runs ``cardcage new`` (from this session's venv) into a folder
outside the repository, makes a fresh virtual environment with ``python -m venv``, installs the
plugin with its ``test`` extra as its README says (``pip install --find-links <our wheels> -e
'.[test]'``; every other package from the machine's registries), and runs in that venv what a
vendor's CI runs: the plugin's tests and ``cardcage doctor --strict --hooks``. The last test
replaces the generated probe with a real one that finds no device and runs the tests again.
Run by ``nox -s scaffold``, which sets ``$CC_SCAFFOLD_WHEELS``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
WHEELS = (
    str(Path(os.environ["CC_SCAFFOLD_WHEELS"]).resolve())
    if os.environ.get("CC_SCAFFOLD_WHEELS")
    else ""
)
DIFFUSION_PINS = os.environ.get("CC_SCAFFOLD_DIFFUSION_PINS", "").split()
TEST_PINS = os.environ.get("CC_SCAFFOLD_TEST_PINS", "").split()
#: Where the plugins go: outside the checkout (nox points TMPDIR inside it, at .nox/).
OUTSIDE = os.environ.get("CC_SCAFFOLD_OUTSIDE") or None

pytestmark = pytest.mark.skipif(not WHEELS, reason="run by `nox -s scaffold` (needs our wheels)")

#: A real probe, as a vendor writes one: ask the driver's management library through ctypes.
#: No machine here has an ``acme_npu_driver`` library, so it answers False, as a real probe does
#: on a machine without the device.
REAL_PROBE = '''"""Is an Acme NPU here? Asks the driver's management library."""

from __future__ import annotations

import ctypes
import ctypes.util


def device_present() -> bool:
    name = ctypes.util.find_library("acme_npu_driver")
    if name is None:
        return False
    try:
        library = ctypes.CDLL(name)
    except OSError:
        return False
    count = ctypes.c_int(0)
    return library.acmeGetDeviceCount(ctypes.byref(count)) == 0 and count.value > 0
'''


@dataclass
class Plugin:
    """A generated plugin, installed in its own venv."""

    root: Path
    venv: Path

    def run(self, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
        """Run ``args`` with the plugin's venv first on PATH, in the plugin's folder."""
        environ = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("SGLANG_", "CARDCAGE_", "VLLM_", "ACME_NPU_"))
            and k not in {"VIRTUAL_ENV", "PYTHONPATH"}
        }
        environ["PATH"] = f"{self.venv / 'bin'}{os.pathsep}{environ.get('PATH', '')}"
        environ.update(env)
        return subprocess.run(
            list(args), cwd=self.root, env=environ, capture_output=True, text=True, check=False
        )

    def pytest(self) -> dict[str, int]:
        done = self.run("python", "-m", "pytest", "-q", "-p", "no:cacheprovider")
        assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
        return _counts(done.stdout)


def _counts(output: str) -> dict[str, int]:
    """``{"passed": 20, "skipped": 1}`` from pytest's closing line."""
    last = output.strip().splitlines()[-1]
    return {word: int(n) for n, word in re.findall(r"(\d+) (passed|failed|skipped|error)", last)}


def _generate(base: Path, *flags: str, install_extra: str, pins: list[str]) -> Plugin:
    root = base / "acme-npu-plugin"
    done = subprocess.run(
        [sys.executable, "-m", "cardcage.platforms.cli", "new", str(root), *flags],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert REPO not in root.resolve().parents, "the plugin must live outside the checkout"
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    plugin = Plugin(root, venv)
    if pins:  # first on their own, where the machine's pip configuration finds the CPU torch
        first = plugin.run("python", "-m", "pip", "install", "--quiet", *pins)
        assert first.returncode == 0, first.stderr[-4000:]
    install = plugin.run(
        "python", "-m", "pip", "install", "--quiet", "--find-links", WHEELS,
        "-e", f".[{install_extra}]", *pins, *TEST_PINS,
    )  # fmt: skip
    assert install.returncode == 0, install.stderr[-4000:]
    return plugin


@pytest.fixture(scope="module")
def outside() -> Iterator[Path]:
    """A fresh folder outside the repository, removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="cardcage-scaffold-", dir=OUTSIDE) as folder:
        yield Path(folder)


@pytest.fixture(scope="module")
def srt_plugin(outside: Path) -> Plugin:
    return _generate(
        outside / "srt",
        "--description", "Acme NPU support for SGLang and cardcage",
        "--author", "Acme NPU team <npu@acme.example>",
        "--url", "Source=https://git.acme.example/npu",
        "--license", "Apache-2.0",
        install_extra="test",
        pins=[],
    )  # fmt: skip


@pytest.fixture(scope="module")
def full_plugin(outside: Path) -> Plugin:
    return _generate(
        outside / "full",
        "--targets", "srt,diffusion,vllm",
        install_extra="test,diffusion",
        pins=DIFFUSION_PINS,
    )  # fmt: skip


# -- an SRT-only plugin, without torch ---------------------------------------------------------


def test_the_srt_plugin_passes_its_own_tests_without_torch(srt_plugin: Plugin) -> None:
    counts = srt_plugin.pytest()
    assert counts.get("failed", 0) == 0
    assert counts["passed"] >= 15
    assert counts.get("skipped", 0) == 2  # the real-device test, and the kernels (need torch)
    no_torch = srt_plugin.run("python", "-c", "import torch")
    assert no_torch.returncode != 0


def test_the_srt_plugin_passes_the_ci_gate(srt_plugin: Plugin) -> None:
    done = srt_plugin.run("cardcage", "doctor", "--strict", "--hooks")
    assert done.returncode == 0, done.stdout + done.stderr
    # Without the device, doctor says what it could not check rather than a bare "no problems".
    assert "No problems found in what could be checked here" in done.stdout
    assert "INFO: platform-not-checked [sglang.srt.platforms]" in done.stdout


def test_the_ci_gate_with_the_device_declared_present_checks_its_own_hooks(
    srt_plugin: Plugin,
) -> None:
    done = srt_plugin.run(
        "cardcage", "doctor", "--strict", "--hooks", SGLANG_PLATFORM="acme_npu",
        ACME_NPU_PRESENT="1",
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "selects platform plugin 'acme_npu' (acme-npu-plugin 0.1.0)" in done.stdout
    hooks = srt_plugin.run("cardcage", "hooks", SGLANG_PLATFORM="acme_npu", ACME_NPU_PRESENT="1")
    assert hooks.returncode == 0, hooks.stdout + hooks.stderr
    assert "log_platform_access" in hooks.stdout


def test_the_srt_plugin_builds_a_wheel_with_the_vendors_metadata(
    srt_plugin: Plugin, tmp_path: Path
) -> None:
    done = srt_plugin.run(
        "python", "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", str(tmp_path), "."
    )
    assert done.returncode == 0, done.stderr
    (wheel,) = tmp_path.glob("acme_npu_plugin-0.1.0-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        meta = archive.read("acme_npu_plugin-0.1.0.dist-info/METADATA").decode()
        names = archive.namelist()
    assert "Summary: Acme NPU support for SGLang and cardcage" in meta
    assert "Author-email: Acme NPU team <npu@acme.example>" in meta
    assert "Project-URL: Source, https://git.acme.example/npu" in meta
    assert "License-Expression: Apache-2.0" in meta
    assert "acme_npu_plugin/py.typed" in names


def test_a_failing_loader_test_shows_the_childs_own_error(srt_plugin: Plugin) -> None:
    """Issue 35: the generated loader test ran its child with ``check=True``, so a failure
    showed only ``CalledProcessError ... exit status 1``. With a register() that raises, the
    test's output now holds the child's error, which names the cause."""
    hooks = srt_plugin.root / "src" / "acme_npu_plugin" / "hooks.py"
    original = hooks.read_text(encoding="utf-8")
    hooks.write_text(
        original + "\n\ndef register() -> None:  # noqa: F811\n"
        "    raise RuntimeError('acme hooks broken on purpose')\n",
        encoding="utf-8",
    )
    try:
        done = srt_plugin.run(
            "python", "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_hooks.py",
            "-k", "test_the_loader_runs_the_plugin_when_the_platform_is_selected",
        )  # fmt: skip
    finally:
        hooks.write_text(original, encoding="utf-8")
        shutil.rmtree(hooks.parent / "__pycache__", ignore_errors=True)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "acme hooks broken on purpose" in done.stdout
    assert "PluginLoadError" in done.stdout


# -- SRT, diffusion and vLLM -------------------------------------------------------------------


def test_the_full_plugin_passes_its_own_tests_diffusion_included(full_plugin: Plugin) -> None:
    counts = full_plugin.pytest()
    assert counts.get("failed", 0) == 0
    assert counts.get("skipped", 0) == 1  # the diffusion tests ran: only the device test skips
    assert counts["passed"] >= 20


def test_the_full_plugin_passes_the_ci_gate(full_plugin: Plugin) -> None:
    for env in ({}, {"SGLANG_PLATFORM": "acme_npu", "ACME_NPU_PRESENT": "1"}):
        done = full_plugin.run("cardcage", "doctor", "--strict", "--hooks", **env)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "No problems found" in done.stdout
        assert ("platform-not-checked" in done.stdout) == (not env)  # selected: all was checked


def test_replacing_the_probe_with_a_real_one_keeps_every_test_passing(full_plugin: Plugin) -> None:
    probe = full_plugin.root / "src" / "acme_npu_plugin" / "_probe.py"
    original = probe.read_text(encoding="utf-8")
    probe.write_text(REAL_PROBE, encoding="utf-8")
    try:
        absent = full_plugin.run("python", "-c", "import acme_npu_plugin as p; print(p.activate())")
        assert absent.stdout.strip() == "None", absent.stderr  # the real probe finds no device
        counts = full_plugin.pytest()
        assert counts.get("failed", 0) == 0
        assert counts["passed"] >= 20
    finally:
        probe.write_text(original, encoding="utf-8")
        shutil.rmtree(probe.parent / "__pycache__", ignore_errors=True)


def test_a_first_generate_stops_on_the_unfinished_method_not_on_torch(
    full_plugin: Plugin, tmp_path: Path
) -> None:
    """Issue 35: a vendor's first ``generate`` with the generated platform selected stopped on
    torch's "Expected one of cpu, cuda, ... device type at start of device string: acme_npu".
    The tutorial promises that an unfinished part raises NotImplementedError naming itself."""
    done = full_plugin.run(
        "cardcage-diffusion", "generate", "--model-path", "cardcage/tiny-dit",
        "--prompt", "a yellow circle", "--output", str(tmp_path / "out.png"),
        ACME_NPU_PRESENT="1", SGLANG_DIFFUSION_PLATFORM_OVERRIDE="acme_npu",
    )  # fmt: skip
    output = done.stdout + done.stderr
    assert done.returncode != 0, output
    assert "AcmeNpuPlatform.get_local_torch_device() is not implemented yet" in output, output
    assert "src/acme_npu_plugin/diffusion/platform.py" in output
    assert "Expected one of" not in output
    assert not (tmp_path / "out.png").exists()
