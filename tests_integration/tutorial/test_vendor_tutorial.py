"""The vendor tutorial (docs/platforms/vendor-plugin.md) works as written, outside nox.

A new vendor engineer follows the page on a fresh machine: builds cardcage's wheels from the
repository (no package index has them), installs the ``cardcage`` command from them, generates
a plugin with ``cardcage new`` next to the checkout, installs it against those wheels, runs its
tests and asks ``cardcage platform``. These tests do exactly that, with the page's own text as
the script:

* every ``console`` block that follows a ``<!-- tutorial-run -->`` marker is run, in page order,
  in one bash shell (so ``cd`` and ``. .venv/bin/activate`` carry over), with ``set -e``: every
  command must succeed; the lines the page shows under a command must appear in its output;
* the file tree that follows ``<!-- tutorial-tree: <folder> -->`` must list exactly the files and
  folders that the commands left in ``<folder>`` (relative to the repository), caches aside.

The shell starts in a copy of the repository's ``packages/`` folder (``$CC_REPO_ROOT``), outside
any virtual environment, with ``python3`` from the machine's ``PATH``: the page's first command
makes the environment. Run by ``nox -s tutorial``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import pytest

REPO = Path(os.environ.get("CC_REPO_ROOT", Path(__file__).resolve().parents[2]))
PAGE = REPO / "docs" / "platforms" / "vendor-plugin.md"
RUN_MARKER = "<!-- tutorial-run -->"
TREE_MARKER = re.compile(r"<!-- tutorial-tree: (?P<folder>\S+) -->")
TREE_LINE = re.compile(r"^(?P<indent>(?:│   |    )*)(?:├── |└── )(?P<name>[^#]+?)\s*(?:#.*)?$")


@dataclass
class Command:
    text: str
    expected: list[str] = field(default_factory=list)


def _blocks_after(page: str, marker: str) -> list[str]:
    """The fenced blocks that directly follow each ``marker`` line, in page order."""
    blocks = []
    lines = page.splitlines()
    for index, line in enumerate(lines):
        if line.strip() != marker:
            continue
        fence = lines[index + 1]
        assert fence.startswith("```"), f"{marker} must be followed by a fenced block: {fence!r}"
        end = lines.index("```", index + 2)
        blocks.append("\n".join(lines[index + 2 : end]))
    return blocks


def tutorial_commands(page: str) -> list[Command]:
    """``$ `` lines (joined across trailing backslashes) with the output lines under each."""
    commands: list[Command] = []
    for block in _blocks_after(page, RUN_MARKER):
        continuing = False
        for line in block.splitlines():
            if continuing:
                commands[-1].text += "\n" + line
            elif line.startswith("$ "):
                commands.append(Command(line[2:]))
            elif line.strip():
                assert commands, f"output line before any command: {line!r}"
                commands[-1].expected.append(line.strip())
            continuing = line.endswith("\\") and (line.startswith("$ ") or continuing)
    return commands


def test_the_page_has_the_commands_a_new_vendor_runs() -> None:
    texts = [c.text for c in tutorial_commands(PAGE.read_text(encoding="utf-8"))]

    assert texts[0].startswith("python3 -m venv")
    assert any(t.startswith("cardcage new ../acme-npu-plugin ") for t in texts)
    assert any("--find-links ../cardcage-wheels" in t for t in texts)
    assert "pytest" in texts


#: The template whose ``activate()`` docstring states the rule the page states.
ACTIVATE_TEMPLATE = (
    REPO
    / "packages/core-platforms/src/cardcage/platforms/scaffold/templates/package/__init__.py.tmpl"
)
#: One rule that tells a user's mistake from a vendor's, worded alike in the tutorial, the
#: template and ``cardcage doctor`` (issue 35).
ACTIVATE_RULE = (
    "activate() returns None when its hardware is absent; it raises only for a user's "
    "misconfiguration (a bad environment value), with an error that names the variable and the "
    "fix."
)


def _plain(text: str) -> str:
    """Markdown or a docstring as one line of words: no backticks, no line breaks."""
    return " ".join(text.replace("`", "").split())


def test_the_page_and_the_template_state_the_one_activate_rule() -> None:
    assert ACTIVATE_RULE in _plain(PAGE.read_text(encoding="utf-8"))
    assert ACTIVATE_RULE in _plain(ACTIVATE_TEMPLATE.read_text(encoding="utf-8"))


def test_every_torch_install_line_on_the_page_takes_the_cpu_build() -> None:
    """Pasted on an ordinary Linux machine, a plain ``pip install torch`` pulls PyPI's CUDA
    build (several GB): where the page installs torch, the CPU index is on the line itself."""
    page = PAGE.read_text(encoding="utf-8")
    lines = [line for line in page.splitlines() if re.search(r"pip install [^`]*\btorch==", line)]
    assert lines
    for line in lines:
        assert "--index-url https://download.pytorch.org/whl/cpu" in line, line


def _tree_paths(block: str) -> set[str]:
    """Relative paths in a ``tree``-style block (comments after ``#`` ignored)."""
    paths: set[str] = set()
    stack: list[str] = []
    for line in block.splitlines()[1:]:  # the first line is the package folder itself
        match = TREE_LINE.match(line)
        assert match, f"not a tree line: {line!r}"
        depth = len(match["indent"]) // 4
        name = match["name"]
        del stack[depth:]
        if name.endswith("/"):
            stack.append(name.rstrip("/"))
            paths.add("/".join([*stack]) + "/")
        else:
            paths.add("/".join([*stack, name]))
    return paths


#: What running the tutorial leaves in a folder that is not the project's own.
_CACHES = {"__pycache__", ".pytest_cache", ".hypothesis", ".ruff_cache", ".mypy_cache"}


def _folder_paths(root: Path) -> set[str]:
    paths: set[str] = set()
    for path in root.rglob("*"):
        relative = path.relative_to(root)
        if _CACHES & set(relative.parts) or relative.parts[0].endswith(".egg-info"):
            continue
        paths.add(f"{relative.as_posix()}/" if path.is_dir() else relative.as_posix())
    return paths


@dataclass
class TutorialRun:
    done: subprocess.CompletedProcess[str]
    commands: list[Command]
    outputs: dict[int, str]
    workdir: Path


@pytest.fixture(scope="module")
def tutorial_run(tmp_path_factory: pytest.TempPathFactory) -> TutorialRun:
    if shutil.which("bash") is None:
        pytest.skip("the tutorial is written for bash")
    tmp_path = tmp_path_factory.mktemp("tutorial")
    commands = tutorial_commands(PAGE.read_text(encoding="utf-8"))
    workdir = tmp_path / "repo"
    shutil.copytree(
        REPO / "packages",
        workdir / "packages",
        ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", ".pytest_cache"),
    )
    lines = ["set -euo pipefail"]
    for number, command in enumerate(commands):
        lines += [f"printf '\\n@@tutorial-command {number}@@\\n'", command.text]
    script = tmp_path / "tutorial.sh"
    script.write_text("\n".join(lines) + "\n", encoding="utf-8")
    # A new user's shell: no virtual environment active, nothing of this test run on PATH.
    env = {k: v for k, v in os.environ.items() if k not in {"VIRTUAL_ENV", "PYTHONPATH"}}
    virtual_env = os.environ.get("VIRTUAL_ENV")
    if virtual_env:
        env["PATH"] = os.pathsep.join(
            p for p in env["PATH"].split(os.pathsep) if not p.startswith(virtual_env)
        )
    # CI reaches PyPI-like registries only, not PyTorch's index: pip warns that the index is
    # unreachable and takes the pinned CPU wheel from the machine's own wheel folder. Without
    # retries it says so at once instead of backing off five times per package.
    env["PIP_RETRIES"] = "0"

    done = subprocess.run(
        ["bash", str(script)],
        cwd=workdir,
        env=env,
        capture_output=True,
        text=True,
        timeout=1200,
        check=False,
    )
    outputs = re.split(r"\n@@tutorial-command (\d+)@@\n", "\n" + done.stdout)
    by_command = {int(outputs[i]): outputs[i + 1] for i in range(1, len(outputs) - 1, 2)}
    return TutorialRun(done, commands, by_command, workdir)


def test_the_tutorial_commands_run_as_written_on_a_fresh_copy(tutorial_run: TutorialRun) -> None:
    done, commands, by_command = tutorial_run.done, tutorial_run.commands, tutorial_run.outputs
    ran = len(by_command)
    assert done.returncode == 0, (
        f"tutorial command {ran - 1} failed ({commands[ran - 1].text!r}):\n"
        f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    )
    assert ran == len(commands)
    for number, command in enumerate(commands):
        for expected in command.expected:
            assert expected in by_command[number], (
                f"{command.text!r} did not print {expected!r}:\n{by_command[number][-2000:]}"
            )


def test_the_file_tree_on_the_page_is_what_cardcage_new_wrote(tutorial_run: TutorialRun) -> None:
    assert tutorial_run.done.returncode == 0, "the tutorial failed: see the test above"
    page = PAGE.read_text(encoding="utf-8")
    trees = [
        (match["folder"], _blocks_after(page, match.group(0))[0])
        for match in TREE_MARKER.finditer(page)
    ]
    assert trees, "the page shows no marked file tree"
    for folder, block in trees:
        root = (tutorial_run.workdir / folder).resolve()
        assert _tree_paths(block) == _folder_paths(root), f"{folder}: the page's tree differs"


def test_cardcage_new_prints_the_commands_the_page_runs_next(tutorial_run: TutorialRun) -> None:
    """Issue 35: the printed next steps once made a new venv, installed an unpinned torch and
    pointed at ``/path/to/cardcage/dist``. Now each printed step is the page's next command,
    in order; the ``cd`` names the same folder, resolved."""
    assert tutorial_run.done.returncode == 0, "the tutorial failed: see the test above"
    commands = tutorial_run.commands
    (new,) = [i for i, c in enumerate(commands) if c.text.startswith("cardcage new ")]
    printed = tutorial_run.outputs[new].split("\nNext, ", 1)[1].splitlines()[1:]
    steps = [line[2:] for line in printed if line.startswith("  ")]
    cd, *rest = steps
    page_cd, *page_rest = [c.text for c in commands[new + 1 : new + 1 + len(steps)]]
    folder = page_cd.removeprefix("cd ")
    assert cd == f"cd {(tutorial_run.workdir / folder).resolve()}"
    assert rest == page_rest
