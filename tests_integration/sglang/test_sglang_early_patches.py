"""Early patches on SGLang 0.5.23's own import-time code, armed by the ``.pth`` line (DESIGN §8).

Run by the nox session ``scenario-sglang``: cardcage-core-hooks is installed in the session's
venv, whose site-packages processes ``zz_cardcage_early_patches.pth`` at every interpreter
start; the fixture ``cc-fixture-sglang-early`` lies in its own ``--target`` site on PYTHONPATH,
which is on ``sys.path`` before ``site`` runs ``.pth`` files, so the entry-point scan the ``.pth``
line makes finds it. Each case starts fresh interpreters (``early_probe.py``) that import SGLang's
real modules; nothing of SGLang is stubbed, and no plugin loader runs unless a step calls SGLang's.

What a hook registered by an ordinary plugin cannot reach, and an early patch does:
(a) the ``get_compiler_backend()`` call of a module-scope ``@torch.compile(backend=...)``
    decorator (``sglang.srt.sampling.penaltylib.repetition_penalty``; topk.py and the other
    modules with such decorators need transformers and torchvision, which this session's CPU
    pins do not install);
(b) the diffusion constant ``USE_AITER``, which ``layers.layernorm`` copies at import and
    branches on, there and in ``RMSNorm.__init__``;
(c) AMD's ``aiter``, which that branch imports: a stand-in provides it; a stand-in for the
    installed ``triton`` is never used.

And the failure policy with SGLang as the host: SGLang's loaders do not read cardcage's record of
early-patch failures, so cardcage's SGLang room applies it when SGLang's selection resolves a
cardcage platform (``cardcage.platforms.hosts.sglang.early_patches``).
"""

from __future__ import annotations

import copy
import functools
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from sglang_scenario import env, needs_sites

pytestmark = needs_sites

PROBE = Path(__file__).with_name("early_probe.py")
SITE = "cc-fixture-sglang-early"
DIST = "cc-fixture-sglang-early"
EARLY = "cc_sglang_early"
LATE = "cc_sglang_early_late"
OPT_IN = {"CARDCAGE_EARLY_PATCHES": EARLY}
BROKEN = {"CARDCAGE_EARLY_PATCHES": "cc_sglang_early_broken"}
#: What makes the fixture's platform activate; SGLang's automatic selection then picks it.
SELECT_FIXTURE_PLATFORM = {"CC_SGLANG_EARLY_PLATFORM": "1"}
REPETITION_PENALTY = "sglang.srt.sampling.penaltylib.repetition_penalty"
BACKEND = "sglang.srt.utils.common:get_compiler_backend"
USE_AITER = "sglang.multimodal_gen.runtime.platforms.aiter:USE_AITER"
STAND_IN_KERNELS = "cc_fixture_sglang_early.aiter_kernels"


def probe(*steps: str, **extra: str) -> dict[str, dict[str, Any]]:
    """Run ``early_probe.py STEPS`` with only the fixture's site installed; results by step.

    One interpreter per (steps, variables), shared by the cases that read it (each gets a copy):
    importing SGLang costs seconds.
    """
    return copy.deepcopy(_probe(steps, tuple(sorted(extra.items()))))


@functools.cache
def _probe(steps: tuple[str, ...], extra: tuple[tuple[str, str], ...]) -> dict[str, dict[str, Any]]:
    done = subprocess.run(
        [sys.executable, str(PROBE), *steps],
        env=env([SITE], dict(extra)),
        capture_output=True,
        text=True,
        check=False,
    )
    if not done.stdout.strip():
        pytest.fail(f"early probe crashed (exit status {done.returncode}):\n{done.stderr}")
    results = {r["step"]: r for r in json.loads(done.stdout)["results"]}
    failed = [r for r in results.values() if not r["ok"]]
    assert done.returncode == 0, f"{failed}\n{done.stderr[-4000:]}"
    return results


def opted_in() -> dict[str, dict[str, Any]]:
    return probe("start", "srt-import", "diffusion", "report", **OPT_IN)


def not_opted_in() -> dict[str, dict[str, Any]]:
    return probe("start", "srt-import", "srt-load", "srt-call", "diffusion", "report")


# -- (a) a function SGLang calls while importing ------------------------------------------------


def test_an_early_hook_sees_the_decorator_calls_sglang_makes_while_importing() -> None:
    results = opted_in()
    assert results["start"]["early_imported"]  # by the .pth line, at interpreter start
    assert not results["start"]["sglang_imported"]
    imported = results["srt-import"]
    assert not imported["sglang_plugins_loaded"]  # no plugin loader has run
    assert imported["calls"].count(REPETITION_PENALTY) >= 1
    hook = results["report"]["early"]["patches"][BACKEND]
    assert (hook["kind"], hook["status"], hook["source"]) == ("hook", "applied", [EARLY, DIST])


def test_the_same_hook_from_sglangs_loader_misses_what_ran_while_importing() -> None:
    results = not_opted_in()
    assert not results["start"]["early_imported"]  # unset: the .pth line imports nothing
    assert results["srt-import"]["calls"] == []
    loaded = results["srt-load"]
    assert loaded["sglang_hooks"] == [["AROUND", [LATE, DIST]]]
    assert loaded["calls"] == []  # the decorator's call happened before the hook existed
    assert results["srt-call"]["calls"] == ["__main__"]  # the hook itself works from now on
    assert results["report"]["early"] is None


# -- (b) a value SGLang computes at import, and (c) the module its branch then imports ----------


def test_sglangs_importer_sees_the_early_value_and_takes_its_branch() -> None:
    diffusion = opted_in()["diffusion"]
    assert diffusion["flag_module_use_aiter"] is True
    assert diffusion["layernorm_use_aiter"] is True  # the copy made by `from ... import`
    assert diffusion["layernorm_rms_norm"] == STAND_IN_KERNELS  # the module-scope branch ran
    assert diffusion["forward_method"] == "forward_aiter"  # RMSNorm.__init__'s branch
    assert diffusion["stand_in_kernel_calls"] == ["rmsnorm2d_fwd"]
    assert diffusion["output_is_normalized"]
    value = opted_in()["report"]["early"]["patches"][USE_AITER]
    assert (value["kind"], value["status"], value["source"]) == ("value", "applied", [EARLY, DIST])


def test_without_the_opt_in_sglang_keeps_its_own_value_and_path() -> None:
    diffusion = not_opted_in()["diffusion"]
    assert diffusion["flag_module_use_aiter"] is False
    assert diffusion["layernorm_use_aiter"] is False
    assert diffusion["layernorm_rms_norm"] is None
    assert diffusion["forward_method"] != "forward_aiter"
    assert not diffusion["aiter_is_stand_in"]


def test_a_stand_in_provides_the_missing_optional_dependency_sglang_imports() -> None:
    results = opted_in()
    assert results["diffusion"]["aiter_is_stand_in"]
    stand_in = results["report"]["early"]["patches"]["aiter"]
    assert (stand_in["status"], stand_in["source"]) == ("provided", [EARLY, DIST])


def test_a_stand_in_for_an_installed_module_is_never_used() -> None:
    triton = opted_in()["report"]["early"]["patches"]["triton"]
    assert triton["status"] == "real-module"
    assert "site-packages" in triton["detail"]  # the installed triton, which SGLang imported
    assert opted_in()["report"]["early"]["failures"] == []  # its fill never ran


# -- the failure policy, SGLang selecting ------------------------------------------------------


def test_sglang_selecting_the_platform_of_a_failed_early_patch_stops_with_its_error() -> None:
    platform = probe("srt-platform", **BROKEN, **SELECT_FIXTURE_PLATFORM)["srt-platform"]
    assert platform["raised"] == "EarlyPatchError"
    assert (platform["plugin"], platform["distribution"]) == ("cc_sglang_early_broken", DIST)
    message = platform["message"]
    assert "cc_sglang_early_broken fails on purpose" in message
    assert "platform entry point 'cc_sglang_early'" in message
    assert "selected by SGLang" in message
    assert "CARDCAGE_EARLY_PATCHES" in message  # the fix names the variable


def test_a_failed_early_patch_stays_logged_when_sglang_selects_another_platform() -> None:
    results = probe("srt-platform", "report", **BROKEN)
    assert results["srt-platform"]["raised"] is None
    assert results["srt-platform"]["class"].startswith("sglang.srt.platforms.")
    (failure,) = results["report"]["early"]["failures"]
    assert failure.startswith("in its callback (cc_fixture_sglang_early.broken:register)")
