"""``cardcage-diffusion generate`` and the command line's argument handling, run for real.

Tests that start workers run the installed console script in a fresh interpreter (the command
spawns its workers from there, so a subprocess is where the behaviour is): ``generate`` writes PNG
files that decode to the requested size, and a model path that resolves to nothing exits 1
naming it, without a traceback. Argument errors are refused before anything is spawned, so
those cases call ``main()`` in this process (one also runs the console script, for its status).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from model_support import parse_png

from cardcage.diffusion.runtime.entrypoints.cli import build_parser, main

MODEL = "cardcage/tiny-dit"


def command() -> list[str]:
    script = Path(sys.executable).with_name("cardcage-diffusion")
    if script.exists():
        return [str(script)]
    return [sys.executable, "-m", "cardcage.diffusion.runtime.entrypoints.cli"]


@dataclass
class Run:
    returncode: int
    stdout: str
    stderr: str


def run_cli(*args: str, cwd: Path, timeout: float = 120.0) -> Run:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SGLANG_")}
    done = subprocess.run(
        [*command(), *args],
        capture_output=True, text=True, timeout=timeout, env=env, cwd=cwd, check=False,
    )  # fmt: skip
    return Run(done.returncode, done.stdout, done.stderr)


def test_generate_writes_a_png_of_the_requested_size_with_two_workers(tmp_path: Path) -> None:
    output = tmp_path / "out" / "lighthouse.png"
    run = run_cli(
        "generate", "--model-path", MODEL, "--num-gpus", "2", "--prompt", "a lighthouse",
        "--output", str(output), "--height", "48", "--width", "64", "--steps", "2",
        "--seed", "3", "--log-level", "warning",
        cwd=tmp_path,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    image = parse_png(output.read_bytes())
    assert (image.width, image.height, image.bit_depth, image.color_type) == (64, 48, 8, 2)
    assert f"Wrote {output} (64x48" in run.stdout


def test_generate_with_several_images_numbers_the_files(tmp_path: Path) -> None:
    run = run_cli(
        "generate", "--model-path", MODEL, "--prompt", "a cat", "--output", "cat.png",
        "--num-images", "2", "--height", "32", "--width", "32", "--steps", "1",
        "--log-level", "warning",
        cwd=tmp_path,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    first, second = (parse_png((tmp_path / f"cat-{i}.png").read_bytes()) for i in (0, 1))
    assert (first.width, first.height) == (32, 32)
    assert first.pixels != second.pixels  # image i uses seed + i
    assert not (tmp_path / "cat.png").exists()


BAD_ARGUMENTS: list[tuple[str, list[str], str]] = [
    ("no command", [], "COMMAND"),
    ("unknown command", ["train"], "invalid choice"),
    ("missing prompt", ["generate", "--model-path", MODEL], "--prompt"),
    ("missing model", ["generate", "--prompt", "a"], "--model-path"),
    ("steps not an int", ["generate", "--model-path", MODEL, "--prompt", "a", "--steps", "x"],
     "--steps"),
    ("height not a multiple of 8",
     ["generate", "--model-path", MODEL, "--prompt", "a", "--height", "65"], "--height"),
    ("guidance below 1",
     ["generate", "--model-path", MODEL, "--prompt", "a", "--guidance-scale", "0.5"],
     "--guidance-scale"),
    ("zero workers", ["generate", "--model-path", MODEL, "--prompt", "a", "--num-gpus", "0"],
     "--num-gpus"),
    ("too many images",
     ["generate", "--model-path", MODEL, "--prompt", "a", "--num-images", "99"], "--num-images"),
    ("empty prompt", ["generate", "--model-path", MODEL, "--prompt", " "], "--prompt"),
    ("port out of range", ["serve", "--model-path", MODEL, "--port", "70000"], "--port"),
    ("negative queue", ["serve", "--model-path", MODEL, "--max-queue", "-1"], "--max-queue"),
    ("bad log level", ["serve", "--model-path", MODEL, "--log-level", "loud"], "--log-level"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("args", "named"), [c[1:] for c in BAD_ARGUMENTS], ids=[c[0] for c in BAD_ARGUMENTS]
)
def test_bad_arguments_exit_2_naming_the_option_before_any_worker_starts(
    capsys: pytest.CaptureFixture[str], args: list[str], named: str
) -> None:
    assert main(args) == 2
    stderr = capsys.readouterr().err
    assert named in stderr
    assert "error:" in stderr
    assert "usage:" in stderr
    assert "Traceback" not in stderr
    assert "worker(s) ready" not in stderr


def test_the_console_script_exits_2_on_a_bad_argument(tmp_path: Path) -> None:
    run = run_cli("generate", "--model-path", MODEL, "--prompt", "a", "--width", "7", cwd=tmp_path)
    assert run.returncode == 2
    assert run.stderr.strip().splitlines()[-1] == (
        "cardcage-diffusion generate: error: argument --width: 7 is not valid: expected an int "
        ">= 8 and <= 4096, a multiple of 8"
    )


def test_an_output_that_cannot_be_created_exits_2_before_any_worker_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    output = blocker / "sub" / "x.png"
    args = ["generate", "--model-path", MODEL, "--prompt", "a", "--output", str(output)]
    assert main(args) == 2
    stderr = capsys.readouterr().err
    assert f"{output} cannot be created: {blocker} is not a directory" in stderr
    assert "worker(s) ready" not in stderr


def test_a_model_path_that_names_nothing_exits_1_naming_the_path(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-model"
    run = run_cli(
        "generate", "--model-path", str(missing), "--prompt", "a", "--output", "x.png",
        cwd=tmp_path,
    )  # fmt: skip
    assert run.returncode == 1, run.stderr
    last = run.stderr.strip().splitlines()[-1]
    assert last.startswith("cardcage-diffusion generate: error:")
    assert str(missing) in last
    assert "Traceback" not in run.stderr
    assert not (tmp_path / "x.png").exists()


def test_debug_log_level_adds_the_traceback_to_a_runtime_error(tmp_path: Path) -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = str(taken.getsockname()[1])
        quiet = run_cli("serve", "--model-path", MODEL, "--port", port, cwd=tmp_path)
        debug = run_cli(
            "serve", "--model-path", MODEL, "--port", port, "--log-level", "debug", cwd=tmp_path
        )
    for run in (quiet, debug):
        assert run.returncode == 1
        assert f"Cannot listen on 127.0.0.1:{port}" in run.stderr.strip().splitlines()[-1]
    assert "Traceback" not in quiet.stderr
    assert "Traceback" in debug.stderr


def test_help_lists_both_commands() -> None:
    text = build_parser().format_help()
    assert "generate" in text
    assert "serve" in text


def test_the_cli_module_scope_imports_no_runtime_module() -> None:
    # spawn re-imports the console script's module in every worker and in the HTTP child
    # before they initialize their platform: it must build nothing there.
    probe = (
        "import sys\n"
        "import cardcage.diffusion.runtime.entrypoints.cli\n"
        "print(sorted(m for m in sys.modules if m.startswith(('cardcage.', 'torch'))))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.strip() == repr(
        [
            "cardcage.diffusion",
            "cardcage.diffusion.runtime",
            "cardcage.diffusion.runtime.entrypoints",
            "cardcage.diffusion.runtime.entrypoints.cli",
        ]
    )
