"""``cardcage-diffusion generate`` and the command line's argument handling, run for real.

Tests that start workers run the installed console script in a fresh interpreter (the command
spawns its workers from there, so a subprocess is where the behaviour is): ``generate`` writes PNG
files that decode to the requested size, draws a progress bar only on a terminal (a real
pseudo-terminal), and a worker that crashes exits 1 naming what failed, followed by the worker's
traceback (a user's mistake found in a worker shows it only at ``--log-level debug``). Argument
errors are refused before anything is spawned, so those cases call ``main()`` in this process
(one also runs the console script, for its status); a model path is checked in the real command
with a tripwire on process start, so "before anything is spawned" is what the test observes.
"""

from __future__ import annotations

import fcntl
import importlib.util
import os
import platform
import pty
import select
import shutil
import socket
import struct
import subprocess
import sys
import termios
import time
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import pytest
from bootstrap_support import write_vendor
from model_support import parse_png

from cardcage.diffusion.configs.sampling_params import MAX_SEED
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


def _environment(extra: dict[str, str] | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SGLANG_")}
    env.update(extra or {})
    return env


def run_cli(
    *args: str, cwd: Path, timeout: float = 120.0, env: dict[str, str] | None = None
) -> Run:
    done = subprocess.run(
        [*command(), *args],
        capture_output=True, text=True, timeout=timeout, env=_environment(env), cwd=cwd,
        check=False,
    )  # fmt: skip
    return Run(done.returncode, done.stdout, done.stderr)


def run_cli_on_a_terminal(*args: str, cwd: Path, timeout: float = 120.0) -> Run:
    """Run the command with stderr on a pseudo-terminal (an interactive user's), stdout piped.

    ``Run.stderr`` is what the terminal received, control characters included; the terminal
    turns each newline into CRLF.
    """
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 120, 0, 0))
    received = bytearray()
    with subprocess.Popen(
        [*command(), *args],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=follower, env=_environment(None),
        cwd=cwd,
    ) as process:  # fmt: skip
        os.close(follower)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:  # until every process that held it closed it
            readable, _, _ = select.select([leader], [], [], deadline - time.monotonic())
            if not readable:
                break
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # EIO: the last writer closed the terminal
                break
            if not chunk:
                break
            received += chunk
        assert process.stdout is not None
        stdout = process.stdout.read().decode()
        returncode = process.wait(timeout=max(1.0, deadline - time.monotonic()))
    os.close(leader)
    return Run(returncode, stdout, received.decode(errors="replace"))


def test_generate_writes_a_png_of_the_requested_size_with_two_workers(tmp_path: Path) -> None:
    output = tmp_path / "out" / "lighthouse.png"
    run = run_cli(
        "generate", "--model-path", MODEL, "--num-gpus", "2", "--prompt", "a white circle",
        "--output", str(output), "--height", "48", "--width", "64", "--steps", "2",
        "--seed", "3", "--log-level", "warning",
        cwd=tmp_path,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    image = parse_png(output.read_bytes())
    assert (image.width, image.height, image.bit_depth, image.color_type) == (64, 48, 8, 2)
    assert f"Wrote {output} (64x48" in run.stdout
    # torch warns at import when numpy is missing (this session installs none); the runtime
    # does not use numpy, so neither the command nor its two workers repeat that line.
    assert importlib.util.find_spec("numpy") is not None or "NumPy" not in run.stderr, run.stderr


def test_generate_with_several_images_numbers_the_files(tmp_path: Path) -> None:
    run = run_cli(
        "generate", "--model-path", MODEL, "--prompt", "a red circle", "--output", "cat.png",
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


def _failure_report(stderr: str) -> tuple[str, list[str]]:
    """The error line and the lines after it (the worker traceback the message points to)."""
    lines = stderr.strip().splitlines()
    (start,) = [i for i, line in enumerate(lines) if line.startswith(f"{PROG} generate: error:")]
    return lines[start], lines[start + 1 :]


PROG = "cardcage-diffusion"


# The real command in a fresh interpreter, with a tripwire: starting any process (a worker, the
# HTTP child) prints SPAWN_MARKER and exits 99 instead. A mistake found before the workers start
# never reaches it, and a check that ran before spawning did so if the tripwire fired.
SPAWN_MARKER = "TRIPWIRE: a process was about to be spawned"
_TRIPWIRE = f"""
import multiprocessing.process, os, sys

def _tripwire(self):
    sys.stderr.write({SPAWN_MARKER!r} + "\\n")
    sys.stderr.flush()
    os._exit(99)

multiprocessing.process.BaseProcess.start = _tripwire
from cardcage.diffusion.runtime.entrypoints.cli import main
sys.exit(main(sys.argv[1:]))
"""


def run_cli_until_it_spawns(*args: str, cwd: Path) -> Run:
    done = subprocess.run(
        [sys.executable, "-c", _TRIPWIRE, *args],
        capture_output=True, text=True, timeout=60, env=_environment(None), cwd=cwd, check=False,
    )  # fmt: skip
    return Run(done.returncode, done.stdout, done.stderr)


def _last_line(run: Run) -> str:
    return run.stderr.strip().splitlines()[-1]


@pytest.mark.parametrize("command_name", ["generate", "serve"])
def test_a_model_path_that_names_nothing_is_refused_before_any_worker_starts(
    tmp_path: Path, command_name: str
) -> None:
    missing = tmp_path / "no" / "such" / "model"
    extra = ["--prompt", "a", "--output", "x.png"] if command_name == "generate" else []
    run = run_cli_until_it_spawns(command_name, "--model-path", str(missing), *extra, cwd=tmp_path)
    assert run.returncode == 2, run.stderr
    assert SPAWN_MARKER not in run.stderr
    assert _last_line(run) == (
        f"{PROG} {command_name}: error: argument --model-path: model {str(missing)!r} not "
        "found. Pass a built-in model id ('cardcage/tiny-dit') or a directory holding "
        "config.json and model.safetensors (write one with save_pretrained(directory))."
    )
    assert "Traceback" not in run.stderr
    assert not (tmp_path / "x.png").exists()


def test_a_near_miss_of_a_builtin_model_id_gets_a_did_you_mean(tmp_path: Path) -> None:
    run = run_cli_until_it_spawns(
        "generate", "--model-path", "cardcage/tiny-ditt", "--prompt", "a", cwd=tmp_path
    )
    assert run.returncode == 2, run.stderr
    assert SPAWN_MARKER not in run.stderr
    assert "model 'cardcage/tiny-ditt' not found. Did you mean 'cardcage/tiny-dit'?" in (
        _last_line(run)
    )


def _copy_of_the_builtin_model(directory: Path) -> Path:
    from cardcage.diffusion.runtime.models.resolve import BUILTIN_MODELS, DEFAULT_MODEL_ID

    shutil.copytree(BUILTIN_MODELS[DEFAULT_MODEL_ID].directory, directory)
    return directory


def test_a_broken_config_json_is_refused_naming_the_file_before_any_worker_starts(
    tmp_path: Path,
) -> None:
    model = _copy_of_the_builtin_model(tmp_path / "model")
    (model / "config.json").write_text('{"model_type": "cardcage-tiny-dit",')
    run = run_cli_until_it_spawns("generate", "--model-path", str(model), "--prompt", "a",
                                  cwd=tmp_path)  # fmt: skip
    assert run.returncode == 2, run.stderr
    assert SPAWN_MARKER not in run.stderr
    line = _last_line(run)
    assert f"invalid model configuration in {model / 'config.json'}: not valid JSON" in line
    assert line.endswith("Fix the value, or regenerate the directory with save_pretrained().")
    assert "Traceback" not in run.stderr


def test_a_users_mistake_found_in_a_worker_shows_its_traceback_only_at_debug(
    tmp_path: Path,
) -> None:
    # Weights that do not load are found only by a worker (the launcher never reads them).
    model = _copy_of_the_builtin_model(tmp_path / "model")
    (model / "model.safetensors").write_bytes(b"not a safetensors file")
    args = ["generate", "--model-path", str(model), "--prompt", "a"]
    quiet = run_cli(*args, cwd=tmp_path)
    debug = run_cli(*args, "--log-level", "debug", cwd=tmp_path)
    for run in (quiet, debug):
        assert run.returncode == 1, run.stderr
        error, _ = _failure_report(run.stderr)
        assert "failed during worker initialization: WeightsMismatchError: weights in " in error
        assert error.endswith("Every worker was shut down; fix that and launch again.")
    assert "Traceback" not in quiet.stderr
    assert "--- worker traceback ---" not in quiet.stderr
    _, below = _failure_report(debug.stderr)
    assert below[:2] == ["--- worker traceback ---", "Traceback (most recent call last):"]
    assert below[-1].startswith("cardcage.diffusion.runtime.models.errors.WeightsMismatchError")


def test_generate_warns_before_starting_workers_at_a_size_the_model_was_not_trained_at(
    tmp_path: Path,
) -> None:
    args = ["generate", "--model-path", MODEL, "--prompt", "a"]
    off = run_cli_until_it_spawns(*args, "--width", "128", "--height", "96", cwd=tmp_path)
    assert off.returncode == 99, off.stderr  # the warning came first, then the workers
    (warning,) = [line for line in off.stderr.splitlines() if " WARNING " in line]
    assert warning.endswith(
        "WARNING cardcage.diffusion.runtime.entrypoints.cli: cardcage/tiny-dit: the model was "
        "trained at 64x64; 128x96 lies outside what it learned, so expect repeated or distorted "
        "shapes rather than the scene asked for. Ask for 64x64 for a faithful picture."
    )
    trained = run_cli_until_it_spawns(*args, "--width", "64", "--height", "64", cwd=tmp_path)
    assert trained.returncode == 99, trained.stderr
    assert " WARNING " not in trained.stderr


def test_a_failing_worker_is_reported_with_the_worker_traceback(tmp_path: Path) -> None:
    # A real vendor platform whose init_backend() raises in rank 0 (bootstrap_support).
    site = tmp_path / "site"
    site.mkdir()
    write_vendor(site)
    run = run_cli(
        "generate", "--model-path", MODEL, "--prompt", "a", cwd=tmp_path,
        env={"PYTHONPATH": str(site), "H5_FAIL_RANK": "0"},
    )  # fmt: skip
    assert run.returncode == 1, run.stderr
    error, below = _failure_report(run.stderr)
    assert "Diffusion worker rank 0 (pid " in error
    assert "failed during platform backend initialization: RuntimeError: device on fire" in error
    traceback = "\n".join(below)
    assert below[:2] == ["--- worker traceback ---", "Traceback (most recent call last):"]
    assert "h5_vendor_platform.py" in traceback
    assert "in init_backend" in traceback  # the vendor's frame, in the worker
    assert below[-1] == "RuntimeError: device on fire"
    assert "entrypoints/cli.py" not in traceback  # the worker's traceback, not the launcher's


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


@pytest.mark.parametrize("seed", [-1, MAX_SEED + 1, 2**63 - 1])
def test_serve_refuses_a_default_seed_that_every_request_would_refuse(
    capsys: pytest.CaptureFixture[str], seed: int
) -> None:
    assert main(["serve", "--model-path", MODEL, "--seed", str(seed)]) == 2
    stderr = capsys.readouterr().err
    assert stderr.strip().splitlines()[-1] == (
        f"cardcage-diffusion serve: error: argument --seed: {seed} is not valid: expected an "
        f"int >= 0 and <= {MAX_SEED}"
    )
    assert "usage:" in stderr
    assert "worker(s) ready" not in stderr


@pytest.mark.parametrize("command_name", ["generate", "serve"])
def test_seed_help_states_the_range_requests_accept(
    capsys: pytest.CaptureFixture[str], command_name: str
) -> None:
    assert main([command_name, "--help"]) == 0
    assert f"0 to {MAX_SEED}" in " ".join(capsys.readouterr().out.split())


def test_version_names_the_installed_distributions(tmp_path: Path) -> None:
    run = run_cli("--version", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    first, second = run.stdout.splitlines()
    assert first == f"cardcage-diffusion {metadata.version('cardcage-diffusion-runtime')}"
    assert second.startswith(f"Python {platform.python_version()}, ")
    for name in ("cardcage-core-hooks", "cardcage-core-platforms", "cardcage-shm-broadcast"):
        assert f"{name} {metadata.version(name)}" in second
    assert second.endswith(f"torch {metadata.version('torch')}")
    assert run.stderr == ""


def test_version_imports_neither_torch_nor_the_runtime() -> None:
    probe = (
        "import contextlib, io, sys\n"
        "from cardcage.diffusion.runtime.entrypoints.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    status = main(['--version'])\n"
        "print(status, 'torch' in sys.modules,\n"
        "      'cardcage.diffusion.runtime.platforms.plugins' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.split() == ["0", "False", "False"]


def test_generate_draws_a_progress_bar_on_a_terminal_and_logs_steps_at_debug(
    tmp_path: Path,
) -> None:
    run = run_cli_on_a_terminal(
        "generate", "--model-path", MODEL, "--prompt", "a blue square", "--steps", "3",
        "--height", "32", "--width", "32", "--log-level", "debug", cwd=tmp_path,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert "denoising: 100%" in run.stderr
    assert "3/3" in run.stderr
    for step in (1, 2, 3):
        assert f"Request #1: denoising step {step}/3" in run.stderr
    assert "Wrote output.png (32x32, seed 42)" in run.stdout


def test_generate_piped_draws_no_bar_and_logs_no_step_at_info(tmp_path: Path) -> None:
    run = run_cli(
        "generate", "--model-path", MODEL, "--prompt", "a blue square", "--steps", "3",
        "--height", "32", "--width", "32", cwd=tmp_path,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert "denoising" not in run.stderr
    assert "\r" not in run.stderr
    assert "Request #1: 1 image(s) 32x32" in run.stderr  # INFO reaches stderr: only steps moved


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
