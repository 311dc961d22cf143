"""What the scenario-sglang-engine tests share: a tiny local model, the environment, one run.

The nox session ``scenario-sglang-engine`` installs torch 2.14.1 with the real torchvision
0.29.1 (the CUDA build of the pair, which runs on the CPU), SGLang 0.5.23's wheel with
``--no-deps``, the packages SGLang's SRT engine path imports on the CPU (``SGLANG_ENGINE_PINS``
in noxfile.py, each with the import that needs it), core-hooks, core-platforms and demo-cpu, all
into one venv: no SGLang module and no torchvision module is stubbed. An older release
(``SGLANG_ENGINE_OLD_RELEASES``) is unpacked from its wheel, with the transformers and tokenizers
it pins, into a site of its own under ``$CC_SGLANG_ENGINE_RELEASES``; a run of that release puts
the site first on PYTHONPATH, so the same venv runs it with nothing reinstalled.

The model is made here, at test time: a seeded random Llama (``LlamaConfig`` +
``save_pretrained``, safetensors) and a word-level tokenizer over the same vocabulary, saved to
one folder. Nothing is downloaded (``HF_HUB_OFFLINE=1``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

LAUNCHER = Path(__file__).with_name("engine_launcher.py")
#: The probe plugin (a test-only SGLang general plugin), copied into a site of its own.
PROBE = Path(__file__).with_name("engine_probe.py")
PROBE_DIST = "cc_engine_probe-0.dist-info"
#: The release the venv holds (the session installs it); others come from their own sites.
VENV_RELEASE = "0.5.23"
RELEASE_SITES_ENV = "CC_SGLANG_ENGINE_RELEASES"
#: Words ``w0`` .. ``w508`` after three special tokens: a vocabulary of 512.
VOCAB_SIZE = 512
SPECIALS = ["<unk>", "<s>", "</s>"]
#: One SGLang start-up is tens of seconds of imports; a hung one must not hang CI.
ENGINE_TIMEOUT_S = 600


def make_tiny_llama(folder: Path, *, seed: int = 0) -> Path:
    """A random two-layer Llama and its tokenizer in ``folder``; the same bytes for one seed."""
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    words = [f"w{i}" for i in range(VOCAB_SIZE - len(SPECIALS))]
    vocab = {token: index for index, token in enumerate([*SPECIALS, *words])}
    tokenizer = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, unk_token="<unk>", bos_token="<s>", eos_token="</s>"
    ).save_pretrained(folder)
    config = LlamaConfig(
        vocab_size=VOCAB_SIZE,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
        bos_token_id=1,
        eos_token_id=2,
    )
    torch.manual_seed(seed)
    LlamaForCausalLM(config).save_pretrained(folder, safe_serialization=True)
    return folder


def release_site(version: str) -> Path | None:
    """The site to put first on PYTHONPATH for SGLang ``version``; None for the venv's own."""
    if version == VENV_RELEASE:
        return None
    sites = os.environ.get(RELEASE_SITES_ENV)
    site = (Path(sites or ".") / version).resolve()  # the Engine runs in another folder
    if not sites or not (site / "sglang").is_dir():
        raise FileNotFoundError(
            f"SGLang {version} is not unpacked at ${RELEASE_SITES_ENV}/{version} ({site}): "
            "run `nox -s scenario-sglang-engine`, which unpacks it and sets the variable"
        )
    return site


def probe_site(folder: Path) -> Path:
    """A site in ``folder`` that makes ``engine_probe`` an installed SGLang general plugin.

    The site holds the module and its distribution's metadata, whose entry point SGLang's
    ``load_plugins()`` finds through PYTHONPATH like any installed plugin's.
    """
    dist = folder / PROBE_DIST
    dist.mkdir(parents=True, exist_ok=True)
    (dist / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: cc-engine-probe\nVersion: 0\n", encoding="utf-8"
    )
    (dist / "entry_points.txt").write_text(
        f"[sglang.srt.plugins]\ncc_engine_probe = {PROBE.stem}:register\n", encoding="utf-8"
    )
    shutil.copyfile(PROBE, folder / PROBE.name)
    return folder


def env(extra: dict[str, str]) -> dict[str, str]:
    """This process's environment, offline, with ``extra`` set and no other selector.

    Every SGLang and cardcage selector, allowlist and opt-in is dropped first, so the run sees
    exactly the variables the case names.
    """
    clean = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("SGLANG_", "CARDCAGE_", "CC_SGLANG_")) and k != "PYTHONPATH"
    }
    clean.update({"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"})
    clean.update(extra)
    return clean


def run_engine(
    model: Path,
    report: Path,
    *,
    release: str = VENV_RELEASE,
    sites: Sequence[Path] = (),
    **extra: str,
) -> dict[str, Any]:
    """Start SGLang ``release``'s ``Engine`` on ``model`` in a fresh interpreter.

    Returns the launcher's report: its JSON (texts, its pid, its children's pids and titles, the
    hook registry), ``stderr`` (SGLang's log) and ``probe`` (the probe plugin's lines, one per
    scheduler). Every SGLang process gets the release's site (if any), then ``sites`` (plugins
    installed with ``pip install --target``), then the probe's, on PYTHONPATH.
    """
    probe = report.with_name("probe.jsonl")
    sites = [release_site(release), *sites, probe_site(report.parent / "probe-site")]
    path = os.pathsep.join(str(site) for site in sites if site is not None)
    done = subprocess.run(
        [sys.executable, str(LAUNCHER), str(model), str(report)],
        env=env({**extra, "PYTHONPATH": path, "CC_ENGINE_PROBE": str(probe)}),
        cwd=report.parent,
        capture_output=True,
        text=True,
        timeout=ENGINE_TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 0, (
        f"SGLang's Engine failed ({done.returncode}):\n{done.stderr[-6000:]}"
    )
    result: dict[str, Any] = json.loads(report.read_text(encoding="utf-8"))
    result["stderr"] = done.stderr
    lines = probe.read_text(encoding="utf-8").splitlines() if probe.exists() else []
    result["probe"] = [json.loads(line) for line in lines]
    result["platform_reads"] = {
        int(path.name.rsplit(".", 2)[-2]): json.loads(path.read_text(encoding="utf-8"))
        for path in probe.parent.glob(f"{probe.name}.platform.*.json")
    }
    result["kernel_phases"] = {
        int(path.name.rsplit(".", 2)[-2]): json.loads(path.read_text(encoding="utf-8"))
        for path in probe.parent.glob(f"{probe.name}.kernels.*.json")
    }
    return result
