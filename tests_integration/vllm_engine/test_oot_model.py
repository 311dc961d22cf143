"""An out-of-tree model architecture, registered by a cardcage general plugin, in vLLM's engine.

vLLM's own offline OOT-registration test, on vLLM's engine: a distribution of its own,
``cc-oot-model`` (written here into a ``--target``-style site), has a ``vllm.general_plugins``
entry point whose ``register()`` (decorated with ``cardcage.hooks.general_plugin``, so vLLM's
loader gets cardcage's failure policy) registers ``CcTinyForCausalLM`` with vLLM's
``ModelRegistry``. The architecture is a class of the plugin's own, a subclass of vLLM's Llama
as vLLM's own test subclasses OPT, that records which process built it. The tiny model's
``config.json`` names that architecture and nothing else.

* With the plugin loaded, vLLM's ``LLM(...).generate()`` (single process, demo-cpu selected as a
  user selects it) builds the plugin's class in its worker and generates the same greedy tokens
  as Hugging Face's Llama on the same weights.
* With ``VLLM_PLUGINS=demo_cpu`` (demo-cpu's platform and general plugins only: the allowlist
  filters platform plugins too, so an empty one would drop demo-cpu as well), vLLM never runs
  the plugin's ``register()`` and refuses the architecture with its own error.
"""

from __future__ import annotations

import json
import shutil
import textwrap
from pathlib import Path
from typing import Any

import pytest
from vllm_engine_scenario import hf_greedy, make_tiny_llama, run_llm
from vllm_launcher import MAX_TOKENS

ARCHITECTURE = "CcTinyForCausalLM"

PLUGIN = '''
"""cc-oot-model's general plugin: its own architecture, into vLLM's ModelRegistry."""

from cardcage.hooks.host import general_plugin


@general_plugin
def register() -> None:
    from vllm import ModelRegistry

    if "{arch}" not in ModelRegistry.get_supported_archs():
        ModelRegistry.register_model("{arch}", "cc_oot_model.model:{arch}")
'''

MODEL = '''
"""The architecture: vLLM's Llama under a name of its own, which says where it was built."""

import os
from pathlib import Path

from vllm.model_executor.models.llama import LlamaForCausalLM


class {arch}(LlamaForCausalLM):
    def __init__(self, *, vllm_config, prefix=""):
        super().__init__(vllm_config=vllm_config, prefix=prefix)
        evidence = os.environ.get("CC_OOT_MODEL_EVIDENCE")
        if evidence:
            with Path(evidence).open("a", encoding="utf-8") as out:
                out.write(f"{{os.getpid()}}\\n")
'''


def _site(root: Path) -> Path:
    """``cc-oot-model`` 1.0 as ``pip install --target`` leaves it."""
    package = root / "cc_oot_model"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(
        textwrap.dedent(PLUGIN.format(arch=ARCHITECTURE)), encoding="utf-8"
    )
    (package / "model.py").write_text(
        textwrap.dedent(MODEL.format(arch=ARCHITECTURE)), encoding="utf-8"
    )
    info = root / "cc_oot_model-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: cc-oot-model\nVersion: 1.0\n", encoding="utf-8"
    )
    (info / "entry_points.txt").write_text(
        "[vllm.general_plugins]\ncc_oot_model = cc_oot_model:register\n", encoding="utf-8"
    )
    return root


@pytest.fixture(scope="module")
def oot(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The plugin's site and a tiny Llama whose config names only the plugin's architecture."""
    root = tmp_path_factory.mktemp("oot")
    model = make_tiny_llama(root / "llama")
    renamed = root / "cc-tiny"
    shutil.copytree(model, renamed)
    config = json.loads((renamed / "config.json").read_text(encoding="utf-8"))
    config["architectures"] = [ARCHITECTURE]
    (renamed / "config.json").write_text(json.dumps(config), encoding="utf-8")
    return {"site": _site(root / "site"), "model": renamed, "llama": model, "root": root}


def test_vllm_generates_with_the_architecture_the_plugin_registered(
    oot: dict[str, Path],
) -> None:
    evidence = oot["root"] / "built.txt"
    report: dict[str, Any] = run_llm(
        oot["model"],
        oot["root"] / "run",
        layout="single",
        sites=[oot["site"]],
        CARDCAGE_DEMO_CPU="1",
        CC_OOT_MODEL_EVIDENCE=str(evidence),
    )
    # vLLM built the plugin's class, in its worker (this layout: the launcher's own process).
    assert evidence.read_text(encoding="utf-8").split() == [str(report["pid"])]
    assert report["platform"].startswith("cardcage.platforms.hosts.vllm.adapter.")
    want = hf_greedy(oot["llama"], report["prompt_token_ids"], MAX_TOKENS)
    assert report["token_ids"] == want


def test_without_the_plugin_in_vllm_plugins_vllm_refuses_the_architecture(
    oot: dict[str, Path],
) -> None:
    evidence = oot["root"] / "built-refused.txt"
    failed = run_llm(
        oot["model"],
        oot["root"] / "refused",
        layout="single",
        sites=[oot["site"]],
        check=False,
        CARDCAGE_DEMO_CPU="1",
        VLLM_PLUGINS="demo_cpu",
        CC_OOT_MODEL_EVIDENCE=str(evidence),
    )
    assert failed.get("returncode", 0) != 0, "vLLM ran an architecture nobody registered"
    assert ARCHITECTURE in failed["stderr"]
    assert "not supported" in failed["stderr"]
    assert not evidence.exists()
