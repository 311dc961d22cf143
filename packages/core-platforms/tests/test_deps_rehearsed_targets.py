"""A hook target the rehearsal finds is the same dependency the static scan would name.

``cardcage.hooks`` accepts a target dotted (``vllm.utils.torch_utils.make_tensor_with_pad``) or
with a colon; a host release is looked up by ``module:Qual.name``. A dotted target the plugin
builds at run time is seen only by the hooks' rehearsal, and must be split as the static scan
splits a dotted string, never read as one long module name (which no release has: a false
break on every release). A real ``cardcage deps`` subprocess over a fixture SGLang plugin (its
rehearsal runs cardcage's own SRT loader, no SGLang installed), checked against a small SGLang
wheel written here.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest
from cli_support import Site, validate

from cardcage.platforms.deps.model import colon_target

PLUGIN = "acme-hooks"

#: The targets are joined at run time: only the rehearsal of register() sees them.
PLUGIN_CODE = """
from cardcage.hooks import HookRegistry, HookType

UTILS = ("sglang", "srt", "utils", "common")
LAYERS = ("sglang", "srt", "layers", "activation")


def _around(original, *args, **kwargs):
    return original(*args, **kwargs)


def register():
    memory = ".".join((*UTILS, "get_device_memory_capacity"))
    HookRegistry.register(memory, _around, HookType.AROUND)
    HookRegistry.register(".".join((*LAYERS, "SiluAndMul", "forward")), _around, HookType.AROUND)
"""

RELEASE = {
    "sglang/__init__.py": "",
    "sglang/srt/__init__.py": "",
    "sglang/srt/utils/__init__.py": "",
    "sglang/srt/utils/common.py": "def get_device_memory_capacity(device):\n    return 1\n",
    "sglang/srt/layers/__init__.py": "",
    "sglang/srt/plugins/__init__.py": "GROUP = 'sglang.srt.plugins'\n",
    "sglang/srt/layers/activation.py": (
        "class SiluAndMul:\n    def forward(self, x):\n        return x\n"
    ),
}
HOOKS = {
    "sglang.srt.utils.common:get_device_memory_capacity",
    "sglang.srt.layers.activation:SiluAndMul.forward",
}


@pytest.mark.parametrize(
    ("target", "spelled"),
    [
        ("vllm.utils.torch_utils.make_tensor_with_pad",
         "vllm.utils.torch_utils:make_tensor_with_pad"),
        ("vllm.v1.spec_decode.metadata.SpecDecodeMetadata.make_dummy",
         "vllm.v1.spec_decode.metadata:SpecDecodeMetadata.make_dummy"),
        ("vllm.platforms:Platform.is_cpu", "vllm.platforms:Platform.is_cpu"),
    ],
)  # fmt: skip
def test_a_dotted_target_splits_before_its_first_capitalised_part_or_its_last(
    target: str, spelled: str
) -> None:
    assert colon_target(target) == spelled


def test_a_rehearsed_dotted_target_is_a_name_each_release_is_asked_for(tmp_path: Path) -> None:
    site = Site(tmp_path / "site")
    site.add(
        PLUGIN,
        entry_points={"sglang.srt.plugins": {"acme": "acme_hooks:register"}},
        modules={"acme_hooks": PLUGIN_CODE},
    )
    wheel = tmp_path / "sglang-0.5.23-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for member, text in RELEASE.items():
            archive.writestr(member, text)
        archive.writestr(
            "sglang-0.5.23.dist-info/METADATA",
            "Metadata-Version: 2.1\nName: sglang\nVersion: 0.5.23\n",
        )
    result = site.run("deps", PLUGIN, "--against", str(wheel), "--json")
    assert result.returncode == 0, result
    document = result.json()
    validate("deps", document)
    (plugin,) = document["plugins"]
    hooks = {(d["kind"], d["symbol"]) for d in plugin["dependencies"] if d["source"] == "hook"}
    assert hooks == {("name", symbol) for symbol in HOOKS}
    (release,) = document["releases"]
    verdicts = {v["symbol"]: v["status"] for v in release["verdicts"] if v["source"] == "hook"}
    assert verdicts == dict.fromkeys(HOOKS, "present")
    assert release["summary"]["breaks"] == 0
