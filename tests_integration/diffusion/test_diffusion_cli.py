"""The launching process applies plugin hooks before it builds its argument objects.

Run by the nox session ``scenario-diffusion``, with the fixture ``cc-diff-args`` installed from
its wheel into its own site: its AFTER hooks on ``ServerArgs.__post_init__`` and
``SamplingParams.__post_init__`` refuse more than two workers and more than 50 steps. The
``cardcage-diffusion`` console script of the session's venv and an offline script run in fresh
interpreters with that site on PYTHONPATH; a refusal that comes back as an argument error, with
no worker started, shows the hook ran in the launching process before the object was built
(applied only later, by the launcher, it would have reached the workers' copies alone).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

SITES = Path(os.environ.get("CC_SCENARIO_SITES", "/nonexistent")).resolve()
CLI = Path(sys.executable).with_name("cardcage-diffusion")
MODEL = "cardcage/tiny-dit"

pytestmark = pytest.mark.skipif(
    not SITES.is_dir(), reason="run through `nox -s scenario-diffusion` (needs the fixture sites)"
)


def _env() -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("SGLANG_", "CARDCAGE_", "CC_DIFF_")) and k != "PYTHONPATH"
    }
    env.update(PYTHONPATH=str(SITES / "cc-diff-args"), SGLANG_DIFFUSION_PLATFORM_OVERRIDE="cpu")
    return env


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        args, env=_env(), cwd=cwd, capture_output=True, text=True, check=False, timeout=120
    )


@pytest.mark.parametrize(
    ("command", "option", "value", "limit"),
    [
        ("generate", "--num-gpus", "3", "at most 2"),
        ("serve", "--num-gpus", "3", "at most 2"),
        ("generate", "--steps", "60", "at most 50"),
    ],
)
def test_a_plugin_hook_on_the_argument_objects_refuses_a_cli_option_before_any_worker(
    tmp_path: Path, command: str, option: str, value: str, limit: str
) -> None:
    extra = ["--prompt", "a blue square"] if command == "generate" else []
    done = _run([str(CLI), command, "--model-path", MODEL, option, value, *extra], tmp_path)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines()[-1] == (
        f"cardcage-diffusion {command}: error: argument {option}: {value} is not valid: "
        f"expected {limit} on cc-diff-args hardware"
    )
    assert "DIFFUSION plugins: 1 loaded (args_limits" in done.stderr
    assert "rank 0]" not in done.stderr  # no worker process ever logged anything
    assert "worker(s) ready" not in done.stderr


OFFLINE_SCRIPT = """
import json
import multiprocessing

from cardcage.diffusion import DiffGenerator

if __name__ == "__main__":
    from cardcage.diffusion.errors import InvalidServerArgsError

    try:
        DiffGenerator.from_pretrained(model_path="cardcage/tiny-dit", num_gpus=3)
        outcome = {"launched": True}
    except InvalidServerArgsError as exc:
        outcome = {"field": exc.field, "message": str(exc)}
    outcome["children"] = len(multiprocessing.active_children())
    print(json.dumps(outcome))
"""


def test_diff_generator_applies_the_hooks_before_it_builds_server_args(tmp_path: Path) -> None:
    script = tmp_path / "offline.py"
    script.write_text(textwrap.dedent(OFFLINE_SCRIPT))
    done = _run([sys.executable, str(script)], tmp_path)
    assert done.returncode == 0, done.stderr
    outcome = json.loads(done.stdout.strip().splitlines()[-1])
    assert outcome == {
        "field": "num_gpus",
        "message": "ServerArgs.num_gpus=3 is not valid: expected at most 2 on cc-diff-args "
        "hardware. Pass a valid num_gpus= or leave it at its default.",
        "children": 0,
    }
