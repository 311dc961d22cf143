"""What ``cardcage new`` generates does real work in SGLang 0.5.23's own SRT ``Engine``.

A vendor starts from ``cardcage new DEST --device-type cpu --targets srt,vllm``. This module runs
that command (the venv's ``cardcage`` script) into a fresh folder, makes the vendor's first edit
(``FIRST_EDIT``: the device methods SGLang calls, answered for a device whose memory is the
host's, since this machine has no other; the kernels stay as generated), installs the result
with ``pip install --no-deps --target`` into a site of its own and puts that site on the Engine's
PYTHONPATH. The user's side is the generated README's: ``ACME_CPU_PRESENT=1`` fakes the device,
``SGLANG_PLATFORM=acme_cpu`` selects it, and nothing else names a device.

One Engine run then shows, from SGLang's own processes, that SGLang selected the generated
platform, called its ``init_backend()`` in the scheduler (where SGLang builds its ops) and
nowhere else, that the generated kernels are in effect in SGLang's ops there, and that greedy
decoding gives the text demo-cpu's run gives on the same seeded model. Nothing of SGLang is
stubbed; the generated plugin is edited only where a vendor would edit it.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from engine_scenario import make_tiny_llama, run_engine

#: The vendor's names: ``cardcage new`` derives the package and entry point from the folder.
DISTRIBUTION = "acme-cpu"
PACKAGE = "acme_cpu"
ENTRY_POINT = "acme_cpu"
VENDOR_CLASS = "acme_cpu.platform.AcmeCpuSRTPlatform"
DEVICE_MEMORY = "sglang.srt.utils.common.get_device_memory_capacity"
KERNEL_OPS = ("rms_norm", "fused_add_rms_norm", "silu_and_mul")

#: The vendor's first edit, as (file under src/acme_cpu, the generated text, what replaces it).
#: Each generated text must be there exactly once: a template that moves breaks this test, not
#: the edit. The comment over each replacement says why, as a vendor tutorial would.
FIRST_EDIT: tuple[tuple[str, str, str], ...] = (
    (
        "device.py",
        "from typing import Any\n",
        "import os\nfrom typing import Any\n",
    ),
    (
        "device.py",
        '        raise _to_implement("get_device_total_memory")\n',
        # The launcher sizes the KV cache from this, before any worker exists: read it from
        # the kernel (no device context). This device's memory is the host's RAM.
        '        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")\n',
    ),
    (
        "device.py",
        '        raise _to_implement("get_current_memory_usage")\n',
        "        # What this process holds on the device: its resident pages, from /proc.\n"
        '        with open("/proc/self/statm", encoding="ascii") as statm:\n'
        '            return float(int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE"))\n',
    ),
    (
        "device.py",
        '        """[Active] Whether pinned host memory speeds up copies to the device."""\n'
        "        return True\n",
        '        """[Active] Whether pinned host memory speeds up copies to the device."""\n'
        # No: the device is the host, there are no copies to speed up, and torch pins memory
        # only through an accelerator's driver (SGLang's scheduler pins each batch's input ids).
        "        return False\n",
    ),
    (
        "device.py",
        '        raise _to_implement("get_device")\n',
        "        # torch knows this device type (the host CPU's): one device, every rank.\n"
        "        import torch\n\n"
        "        return torch.device(self.device_type)\n",
    ),
    (
        "device.py",
        '        raise _to_implement("get_torch_distributed_backend_str")\n',
        # The scheduler sets up torch.distributed even for one rank: gloo is torch's CPU backend.
        '        return "gloo"\n',
    ),
)


def _cardcage_new(destination: Path) -> None:
    """``cardcage new`` as a vendor types it, from the venv that has cardcage."""
    cardcage = Path(sys.executable).with_name("cardcage")
    done = subprocess.run(
        [str(cardcage), "new", str(destination), "--device-type", "cpu", "--targets", "srt,vllm"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert f"entry point {ENTRY_POINT!r}" in done.stdout, done.stdout


def _edit(package: Path, edits: tuple[tuple[str, str, str], ...]) -> None:
    """Apply ``edits`` to the generated package, each generated text found exactly once."""
    for name, generated, edited in edits:
        path = package / name
        text = path.read_text(encoding="utf-8")
        assert text.count(generated) == 1, f"{path} no longer has {generated!r} once"
        path.write_text(text.replace(generated, edited), encoding="utf-8")


def _install(project: Path, site: Path) -> Path:
    """``pip install --no-deps --target site project``: the plugin and its entry points."""
    done = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-compile",
         "--target", str(site), str(project)],
        capture_output=True,
        text=True,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:]
    return site


@pytest.fixture(scope="module")
def seconds() -> Iterator[dict[str, float]]:
    """Where this module's time goes, by step: printed at the end (``-s`` shows it)."""
    spent: dict[str, float] = {}
    yield spent
    print(f"\ngenerated plugin under SGLang, seconds: {spent}")


@pytest.fixture(scope="module")
def plugin_site(tmp_path_factory: pytest.TempPathFactory, seconds: dict[str, float]) -> Path:
    """The generated plugin after the vendor's first edit, installed into a site of its own."""
    started = time.perf_counter()
    folder = tmp_path_factory.mktemp("generated-plugin")
    project = folder / DISTRIBUTION
    _cardcage_new(project)
    _edit(project / "src" / PACKAGE, FIRST_EDIT)
    site = _install(project, folder / "site")
    seconds["new, edit, install"] = round(time.perf_counter() - started, 1)
    return site


@pytest.fixture(scope="module")
def run(
    plugin_site: Path, tmp_path_factory: pytest.TempPathFactory, seconds: dict[str, float]
) -> dict[str, Any]:
    """SGLang 0.5.23's Engine with the generated platform selected as a user selects it."""
    started = time.perf_counter()
    folder = tmp_path_factory.mktemp("sglang-generated")
    report = run_engine(
        make_tiny_llama(folder / "tiny-llama"),
        folder / "report.json",
        sites=[plugin_site],
        SGLANG_PLATFORM=ENTRY_POINT,
        ACME_CPU_PRESENT="1",
        CC_ENGINE_PROBE_DIST=DISTRIBUTION,
    )
    report["children"] = {int(pid): title for pid, title in report["children"].items()}
    seconds["engine, generated plugin"] = round(time.perf_counter() - started, 1)
    return report


@pytest.fixture(scope="module")
def demo_cpu_run(
    tmp_path_factory: pytest.TempPathFactory, seconds: dict[str, float]
) -> dict[str, Any]:
    """The same Engine on demo-cpu, the hand-written reference, on the same seeded model."""
    started = time.perf_counter()
    folder = tmp_path_factory.mktemp("sglang-demo-cpu")
    report = run_engine(
        make_tiny_llama(folder / "tiny-llama"), folder / "report.json", SGLANG_PLATFORM="demo_cpu"
    )
    seconds["engine, demo-cpu"] = round(time.perf_counter() - started, 1)
    return report


def _child(report: dict[str, Any], title: str) -> int:
    """The pid of the launcher's one child whose title SGLang set to ``title``."""
    (pid,) = [pid for pid, name in report["children"].items() if name.startswith(title)]
    return pid


def _scheduler_probe(run: dict[str, Any]) -> dict[str, Any]:
    """The probe plugin's one line, written inside SGLang's one scheduler."""
    (line,) = run["probe"]
    assert line["pid"] == _child(run, "sglang::scheduler")
    return line


def test_sglang_selected_the_generated_platform_and_took_its_defaults(
    run: dict[str, Any],
) -> None:
    platform = run["platform"]
    assert platform["is_sglang_platform"] is True  # SGLang's own base class, through the adapter
    assert VENDOR_CLASS in platform["mro"]
    assert platform["is_demo_cpu"] is False  # demo-cpu is installed too, and stayed out
    # In the scheduler as well: the same adapter class is SGLang's current_platform there.
    assert _scheduler_probe(run)["platform"] == platform["class"]
    # No device= and no attention backend were passed: the generated
    # apply_server_args_defaults() answered them from the device type.
    assert run["server_args"] == {
        "device": "cpu",
        "disable_cuda_graph": True,
        "attention_backend": "torch_native",
    }


def test_only_the_generated_plugins_hook_is_registered_with_sglang(run: dict[str, Any]) -> None:
    # The generated general plugin's SGLang hook, attributed to the generated distribution:
    # demo-cpu's general plugin loaded too, and registered nothing for a platform not its own.
    assert run["hooks"] == [
        {
            "hook": f"{PACKAGE}.hooks.log_device_memory",
            "type": "AROUND",
            "source": [ENTRY_POINT, DISTRIBUTION],
            "applied": True,
        }
    ]


def test_sglang_called_the_generated_init_backend_in_its_scheduler_only(
    run: dict[str, Any],
) -> None:
    # Names SGLang's own code read off the platform object, per process: init_backend() is
    # read (and called) where the model runner builds the model and its ops, the scheduler.
    scheduler = _child(run, "sglang::scheduler")
    reads = {pid: set(names) for pid, names in run["platform_reads"].items()}
    assert "init_backend" in reads.get(scheduler, set()), reads
    for pid in (run["launcher"], _child(run, "sglang::detokenizer")):
        assert "init_backend" not in reads.get(pid, set())
    # cardcage installs the platform's kernels only once its init_backend() has returned: the
    # scheduler's installed kernels are the generated platform's.
    kernels = _scheduler_probe(run)["in_effect"]["kernels"]
    assert {k["platform"] for k in kernels} == {VENDOR_CLASS}, kernels


def test_the_generated_kernels_are_in_effect_in_sglangs_ops_in_the_scheduler(
    run: dict[str, Any],
) -> None:
    # Asked inside the scheduler, after it built the model: SGLang's RMSNorm and SiluAndMul
    # dispatch to the generated kernels, and the generated hook is SGLang's, applied.
    report = _scheduler_probe(run)["in_effect"]
    kernels = {k["op"]: (k["kernel"], k["host"], k["in_effect"]) for k in report["kernels"]}
    assert kernels == {op: (f"{PACKAGE}.kernels:{op}", "sglang", True) for op in KERNEL_OPS}
    hooks = [(h["target"], h["applied_by"], h["state"]) for h in report["hooks"]]
    assert hooks == [(DEVICE_MEMORY, "sglang", "in-effect")], report["hooks"]


def test_greedy_text_equals_demo_cpus_on_the_same_model(
    run: dict[str, Any], demo_cpu_run: dict[str, Any]
) -> None:
    assert run["completion_tokens"] == [4, 4]
    assert run["texts_again"] == run["texts"]  # greedy: the same prompts, the same text
    assert run["texts"] == demo_cpu_run["texts"]
