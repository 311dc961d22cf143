"""``cardcage new``: the names it derives and refuses, the files it renders, what it writes.

The generated plugin's own tests, installed into a fresh virtual environment against our wheels,
run in ``nox -s scaffold`` (tests_integration/scaffold); these check the generator itself, with
the real renderer and the real ``cardcage`` command in a subprocess.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest

from cardcage.hooks.errors import PluginError
from cardcage.platforms.scaffold import (
    DestinationNotAFolderError,
    DestinationNotEmptyError,
    InvalidPluginNameError,
    PluginSpec,
    compatible_range,
    plan_plugin,
    render_plugin,
    write_plugin,
)
from cardcage.platforms.scaffold._command import TORCH_CPU_INSTALL
from cardcage.platforms.scaffold._names import RESERVED_ENTRY_POINT_NAMES
from cardcage.platforms.srt import srt_policy

ALL = ["srt,diffusion,vllm"]


def _plan(name: str = "acme-npu-plugin", **options: object) -> PluginSpec:
    return plan_plugin(Path("/nowhere") / name, **options)  # type: ignore[arg-type]


# -- names -------------------------------------------------------------------------------------


def test_every_name_is_derived_from_the_destination_folder() -> None:
    spec = _plan()
    assert (spec.distribution, spec.package, spec.entry_point, spec.device) == (
        "acme-npu-plugin",
        "acme_npu_plugin",
        "acme_npu",
        "acme_npu",
    )
    assert (spec.device_type, spec.class_prefix, spec.env_prefix) == (
        "acme_npu",
        "AcmeNpu",
        "ACME_NPU",
    )
    assert spec.targets == {"srt"}


def test_names_given_as_options_win_over_the_derived_ones() -> None:
    spec = _plan(
        distribution="sglang-acme",
        package="acme_sglang",
        entry_point="acme",
        device="acme_x1",
        device_type="privateuseone",
        class_prefix="AcmeX1",
    )
    assert (spec.package, spec.entry_point, spec.device, spec.device_type) == (
        "acme_sglang",
        "acme",
        "acme_x1",
        "privateuseone",
    )
    assert spec.class_prefix == "AcmeX1"


@pytest.mark.parametrize(
    ("options", "field", "suggestion"),
    [
        ({"distribution": "Acme NPU"}, "distribution name", "acme-npu"),
        ({"distribution": "cardcage-core-platforms"}, "distribution name", None),
        ({"package": "acme-npu"}, "import package", "acme_npu"),
        ({"package": "cardcage"}, "import package", "cardcage_plugin"),
        ({"package": "class"}, "import package", "class_plugin"),
        ({"package": "AcmeNpu"}, "import package", "acmenpu"),
        ({"entry_point": "Acme-NPU"}, "entry-point name", "acme_npu"),
        ({"entry_point": "cuda"}, "entry-point name", "acme_npu_cuda"),
        ({"entry_point": "9acme"}, "entry-point name", "acme"),
        ({"package": "9acme"}, "import package", "acme"),
        ({"device": "npu"}, "device name", "acme_npu_npu"),
        ({"class_prefix": "acme"}, "class prefix", "Acme"),
    ],
)
def test_a_bad_name_is_refused_with_a_valid_spelling_to_paste(
    options: dict[str, str], field: str, suggestion: str | None
) -> None:
    with pytest.raises(InvalidPluginNameError) as caught:
        _plan(**options)
    error = caught.value
    assert error.field == field
    if suggestion is not None:
        assert error.suggestion == suggestion
        assert f"Did you mean {suggestion!r}?" in str(error)
        assert f"{error.flag} {suggestion}" in str(error)
    assert isinstance(error, ValueError)
    assert isinstance(error, PluginError)


def test_a_distribution_name_starting_with_a_digit_is_not_renamed_into_a_package() -> None:
    """``9acme-npu`` is a valid distribution name but no import package can start with a digit.
    ``cardcage new`` once renamed it ``n9acme_npu`` silently (issue 35); it now refuses, says
    the package was derived from the distribution, and suggests a spelling for ``--package``."""
    with pytest.raises(InvalidPluginNameError) as caught:
        _plan("9acme-npu")
    error = caught.value
    assert (error.field, error.value, error.suggestion) == (
        "import package",
        "9acme_npu",
        "acme_npu",
    )
    assert "not starting with a digit" in str(error)
    assert "derived from the distribution name '9acme-npu'" in str(error)
    assert "Fix: pass --package acme_npu." in str(error)
    spec = _plan("9acme-npu", package="acme_npu")
    assert (spec.distribution, spec.package, spec.entry_point) == (
        "9acme-npu",
        "acme_npu",
        "acme_npu",
    )


def test_the_error_names_the_distribution_it_was_planning() -> None:
    with pytest.raises(InvalidPluginNameError, match="distribution acme-npu-plugin") as caught:
        _plan(entry_point="xpu")
    assert caught.value.distribution == "acme-npu-plugin"


def test_a_mistyped_target_gets_a_did_you_mean() -> None:
    with pytest.raises(InvalidPluginNameError, match="Did you mean 'diffusion'"):
        _plan(targets=["srt,difusion"])


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"authors": ["<ada@acme.example>"]}, "author"),
        ({"authors": ['Ada "the" Lovelace']}, "author"),
        ({"urls": ["https://acme.example"]}, "project URL"),
        ({"urls": ["Source=ftp://acme.example"]}, "project URL"),
        ({"license": "Apache 2.0; MIT"}, "licence"),
        ({"description": "two\nlines"}, "description"),
    ],
)
def test_bad_metadata_is_refused_naming_the_flag(options: dict[str, object], field: str) -> None:
    with pytest.raises(InvalidPluginNameError) as caught:
        _plan(**options)
    assert caught.value.field == field
    assert caught.value.flag in str(caught.value)


def test_the_reserved_names_hold_every_built_in_srt_alias() -> None:
    aliases = {builtin.alias for builtin in srt_policy().builtins}
    assert aliases <= RESERVED_ENTRY_POINT_NAMES


# -- dependency ranges -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("version", "expected"),
    [
        ("0.1.0", ">=0.1.0,<0.2"),
        ("0.3.2", ">=0.3.2,<0.4"),
        ("1.4.0", ">=1.4.0,<2"),
        ("0.2.0.dev3+g1234", ">=0.2.0,<0.3"),
        ("2", ">=2.0.0,<3"),
    ],
)
def test_the_range_admits_this_release_and_its_compatible_successors(
    version: str, expected: str
) -> None:
    assert compatible_range(version) == expected


def test_the_ranges_come_from_the_installed_cardcage() -> None:
    spec = _plan(targets=["diffusion"])
    installed = metadata.version("cardcage-core-platforms")
    requirements = dict(spec.requirements)
    assert requirements["cardcage-core-platforms"] == compatible_range(installed)
    assert requirements["cardcage-core-hooks"] == compatible_range(
        metadata.version("cardcage-core-hooks")
    )
    assert "cardcage-diffusion-runtime" in requirements
    assert "cardcage-diffusion-runtime" not in dict(_plan().requirements)


# -- rendering ---------------------------------------------------------------------------------


def test_an_srt_plugin_has_no_diffusion_half_and_no_vllm_section() -> None:
    files = render_plugin(_plan())
    assert "src/acme_npu_plugin/_probe.py" in files
    assert not any("diffusion" in path or "vllm" in path for path in files)
    project = tomllib.loads(files["pyproject.toml"])
    assert set(project["project"]["entry-points"]) == {
        "sglang.srt.platforms",
        "sglang.srt.plugins",
        "cardcage.env_registries",
    }
    assert "diffusion" not in project["project"]["optional-dependencies"]


@pytest.mark.parametrize("targets", [[], ALL])
def test_every_rendered_python_file_compiles_and_no_placeholder_is_left(
    targets: list[str],
) -> None:
    for path, text in render_plugin(_plan(targets=targets)).items():
        assert "{{" not in text, path
        assert "}}" not in text, path
        if path.endswith(".py"):
            compile(text, path, "exec")


def test_the_pyproject_carries_the_vendors_names_and_metadata() -> None:
    spec = _plan(
        targets=ALL,
        description="Acme NPU support for SGLang",
        authors=["Ada Lovelace <ada@acme.example>", "Acme NPU team"],
        urls=[
            "Source=https://git.acme.example/npu",
            "Issues=https://git.acme.example/npu/-/issues",
        ],
        license="Apache-2.0",
    )
    project = tomllib.loads(render_plugin(spec)["pyproject.toml"])["project"]
    assert project["name"] == "acme-npu-plugin"
    assert project["description"] == "Acme NPU support for SGLang"
    assert project["license"] == "Apache-2.0"
    assert project["authors"] == [
        {"name": "Ada Lovelace", "email": "ada@acme.example"},
        {"name": "Acme NPU team"},
    ]
    assert project["urls"] == {
        "Source": "https://git.acme.example/npu",
        "Issues": "https://git.acme.example/npu/-/issues",
    }
    assert project["entry-points"] == {
        "sglang.srt.platforms": {"acme_npu": "acme_npu_plugin:activate"},
        "sglang.srt.plugins": {"acme_npu": "acme_npu_plugin.hooks:register"},
        "cardcage.env_registries": {"acme_npu": "acme_npu_plugin.envs:ENV_VARS"},
        "sglang.multimodal_gen.platforms": {"acme_npu": "acme_npu_plugin.diffusion:activate"},
        "sglang.multimodal_gen.plugins": {"acme_npu": "acme_npu_plugin.diffusion.hooks:register"},
        "vllm.platform_plugins": {"acme_npu": "acme_npu_plugin:activate"},
        "vllm.general_plugins": {"acme_npu": "acme_npu_plugin.hooks:register"},
    }
    assert project["dependencies"] == [
        spec.requirement("cardcage-core-hooks"),
        spec.requirement("cardcage-core-platforms"),
    ]
    assert project["optional-dependencies"]["diffusion"] == [
        spec.requirement("cardcage-diffusion-runtime")
    ]


def test_without_a_licence_the_plugin_is_not_open_sourced_by_accident() -> None:
    project = tomllib.loads(render_plugin(_plan())["pyproject.toml"])["project"]
    assert project["license"] == "LicenseRef-Proprietary"
    assert "authors" not in project
    assert "urls" not in project


def test_nothing_of_our_checkout_or_our_demo_is_left_in_the_plugin() -> None:
    for path, text in render_plugin(_plan(targets=ALL)).items():
        for ours in ("demo_cpu", "demo-cpu", "DemoCpu", "../packages", "cardcage maintainers"):
            assert ours not in text, f"{path} mentions {ours!r}"


def test_the_readme_says_how_to_install_against_local_wheels() -> None:
    readme = render_plugin(_plan(targets=ALL))["README.md"]
    assert "pip install --find-links" in readme
    assert "not on a package index" in readme
    assert "cardcage doctor --strict --hooks" in readme
    assert "ACME_NPU_PRESENT" in readme


def test_the_hooks_module_is_declared_with_the_public_plugin_api() -> None:
    hooks = render_plugin(_plan(targets=ALL))["src/acme_npu_plugin/hooks.py"]
    assert "from cardcage.platforms.plugin import around, hooks_plugin" in hooks
    assert "vllm=[" in hooks
    assert "vllm=[" not in render_plugin(_plan())["src/acme_npu_plugin/hooks.py"]


#: The one rule, worded as the vendor tutorial and ``cardcage doctor`` word it (issue 35).
ACTIVATE_RULE = (
    "activate() returns None when its hardware is absent; it raises only for a user's "
    "misconfiguration (a bad environment value), with an error that names the variable and the "
    "fix."
)


def _one_line(text: str) -> str:
    return " ".join(text.split())


@pytest.mark.parametrize(
    "path", ["src/acme_npu_plugin/__init__.py", "src/acme_npu_plugin/diffusion/__init__.py"]
)
def test_each_generated_activate_states_the_one_rule(path: str) -> None:
    assert ACTIVATE_RULE in _one_line(render_plugin(_plan(targets=ALL))[path])


def test_no_generated_file_installs_a_logging_handler() -> None:
    """DESIGN 2.6: a NullHandler would silence Python's last-resort handler."""
    for path, text in render_plugin(_plan(targets=ALL)).items():
        assert "addHandler(" not in text, path
        assert "basicConfig(" not in text, path


def _written(tmp_path: Path, **options: object) -> Path:
    """The plugin written under ``tmp_path``; its ``src`` folder, for ``PYTHONPATH``."""
    root = tmp_path / "acme-npu-plugin"
    write_plugin(plan_plugin(root, **options), root)  # type: ignore[arg-type]
    return root / "src"


def _python(src: Path, code: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SGLANG_", "ACME_NPU_"))}
    env["PYTHONPATH"] = os.pathsep.join([str(src), env.get("PYTHONPATH", "")])
    return subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=False
    )


def test_the_generated_plugins_warnings_reach_stderr_without_logging_configured(
    tmp_path: Path,
) -> None:
    """An application that configured no logging still shows the plugin's warnings (issue 35)."""
    done = _python(
        _written(tmp_path),
        "import acme_npu_plugin; acme_npu_plugin.logger.warning('acme warns the user')",
    )
    assert done.returncode == 0, done.stderr
    assert "acme warns the user" in done.stderr


def test_every_unfinished_device_operation_raises_not_implemented_naming_itself(
    tmp_path: Path,
) -> None:
    """The tutorial's promise: until the vendor implements a device operation, calling it raises
    ``NotImplementedError`` naming the method and the file, never an error from deep inside
    torch (``Expected one of cpu, cuda, ... device type``) or a missing torch (issue 35)."""
    code = """
import inspect, json
from acme_npu_plugin.device import AcmeNpuDeviceMixin

outcomes = {}
mixin = AcmeNpuDeviceMixin()
for name, member in vars(AcmeNpuDeviceMixin).items():
    if name.startswith("_") or not inspect.isfunction(member):
        continue
    required = [
        p for p in list(inspect.signature(member).parameters.values())[1:]
        if p.default is p.empty and p.kind is p.POSITIONAL_OR_KEYWORD
    ]
    try:
        outcomes[name] = ["returned", repr(getattr(mixin, name)(*[0] * len(required)))]
    except Exception as exc:
        outcomes[name] = [type(exc).__name__, str(exc)]
print(json.dumps(outcomes))
"""
    done = _python(_written(tmp_path), code)
    assert done.returncode == 0, done.stderr
    outcomes = json.loads(done.stdout)
    assert "get_device" in outcomes
    for name, (kind, text) in outcomes.items():
        if kind == "returned":
            continue
        assert kind == "NotImplementedError", (name, kind, text)
        assert f"AcmeNpuDeviceMixin.{name}() is not implemented yet" in text
        assert "src/acme_npu_plugin/device.py" in text


def test_the_vllm_section_takes_its_vllm_bases_answers_and_asks_only_where_there_are_none(
    tmp_path: Path,
) -> None:
    """Inside cardcage's vLLM adapter ``super()`` is the adapter's vLLM base: a platform declared
    CPU-like gets vLLM's ``CpuPlatform`` answers (its attention backend, its worker) from the
    generated section unchanged, so declaring ``behaves_as`` is the whole vLLM edit for a device
    whose tensors live on the host CPU; vLLM's abstract base answers nothing, and the section
    still names what the vendor must write. Stand-in bases, since vLLM is not installed here."""
    code = """
import json
from acme_npu_plugin.vllm_section import AcmeNpuVllmSection as Section

class Parallel:
    worker_cls = "auto"

class Config:
    parallel_config = Parallel()

class CpuLike:  # answers as vLLM's CpuPlatform does
    @classmethod
    def get_attn_backend_cls(cls, selected_backend, attn_selector_config, num_heads=None):
        return "vllm.CPUAttentionBackend"

    @classmethod
    def check_and_update_config(cls, vllm_config):
        vllm_config.parallel_config.worker_cls = "vllm.CPUWorker"

class Abstract:  # answers as vLLM's Platform does
    @classmethod
    def get_attn_backend_cls(cls, selected_backend, attn_selector_config, num_heads=None):
        return ""

    @classmethod
    def check_and_update_config(cls, vllm_config):
        pass

def worker(adapter):
    config = Config()
    config.parallel_config = Parallel()
    adapter.check_and_update_config(config)
    return config.parallel_config.worker_cls

out = {}
for base in (CpuLike, Abstract):
    adapter = type("Adapter", (Section, base), {})
    for name, call in (
        ("attention", lambda: adapter.get_attn_backend_cls(None, None, num_heads=4)),
        ("worker", lambda: worker(adapter)),
    ):
        try:
            out[f"{base.__name__} {name}"] = call()
        except NotImplementedError as exc:
            out[f"{base.__name__} {name}"] = f"NotImplementedError: {exc}"
print(json.dumps(out))
"""
    done = _python(_written(tmp_path, targets=["srt,vllm"]), code)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["CpuLike attention"] == "vllm.CPUAttentionBackend"
    assert out["CpuLike worker"] == "vllm.CPUWorker"
    for name, asked in (("attention", "attention backend"), ("worker", "worker class")):
        assert out[f"Abstract {name}"].startswith("NotImplementedError: AcmeNpuVllmSection.")
        assert (
            f"name your vLLM {asked} in src/acme_npu_plugin/vllm_section.py"
            in out[f"Abstract {name}"]
        )


def test_the_diffusion_platform_names_its_unfinished_torch_device() -> None:
    """Without the diffusion runtime here, the rendered method is checked as text; the scaffold
    session runs it for real in a worker (tests_integration/scaffold)."""
    text = render_plugin(_plan(targets=ALL))["src/acme_npu_plugin/diffusion/platform.py"]
    method = text[text.index("def get_local_torch_device") :]
    assert "torch.device(" not in method.split("raise NotImplementedError", 1)[0].split('"""')[-1]
    assert "AcmeNpuPlatform.get_local_torch_device() is not implemented yet" in _one_line(method)


def test_the_generated_tests_show_a_failing_childs_own_output() -> None:
    """A generated test that runs a fresh interpreter must not hide its stderr behind
    ``CalledProcessError``: a vendor needs the child's traceback (issue 35)."""
    for path, text in render_plugin(_plan(targets=ALL)).items():
        if path.startswith("tests/") and "subprocess.run(" in text:
            assert "check=True" not in text, path
            assert "done.stderr" in text, path


# -- writing -----------------------------------------------------------------------------------


def test_a_non_empty_destination_is_refused_and_left_untouched(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("mine", encoding="utf-8")
    spec = plan_plugin(tmp_path)
    with pytest.raises(DestinationNotEmptyError, match="--force") as caught:
        write_plugin(spec, tmp_path)
    assert caught.value.entries == ("notes.txt",)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


def test_force_writes_into_a_non_empty_destination_and_keeps_other_files(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("mine", encoding="utf-8")
    written = write_plugin(plan_plugin(tmp_path, distribution="acme-npu"), tmp_path, force=True)
    assert (tmp_path / "notes.txt").read_text(encoding="utf-8") == "mine"
    assert tmp_path / "pyproject.toml" in written


@pytest.mark.parametrize("force", [False, True])
def test_a_destination_that_is_or_lies_under_a_file_is_refused(tmp_path: Path, force: bool) -> None:
    file = tmp_path / "acme-npu-plugin"
    file.write_text("mine", encoding="utf-8")
    for destination in (file, file / "inner"):
        with pytest.raises(DestinationNotAFolderError, match="choose a folder") as caught:
            write_plugin(plan_plugin(destination), destination, force=force)
        assert caught.value.blocker == str(file)
    assert file.read_text(encoding="utf-8") == "mine"


def test_an_empty_destination_is_fine(tmp_path: Path) -> None:
    target = tmp_path / "acme-npu-plugin"
    target.mkdir()
    written = write_plugin(plan_plugin(target), target)
    assert {p.relative_to(target).as_posix() for p in written} == set(
        render_plugin(plan_plugin(target))
    )


# -- the command -------------------------------------------------------------------------------


def _cardcage(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cardcage.platforms.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
        env={k: v for k, v in os.environ.items() if not k.startswith(("SGLANG_", "CARDCAGE_"))},
    )


def _next_steps(stdout: str) -> list[str]:
    """The commands ``cardcage new`` printed after its "Next" line."""
    after = stdout.split("\nNext, ", 1)[1].splitlines()[1:]
    return [line[2:] for line in after if line.startswith("  ")]


def test_cardcage_new_writes_the_plugin_and_prints_the_next_commands(tmp_path: Path) -> None:
    done = _cardcage("new", "acme-npu-plugin", "--targets", "diffusion,vllm", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "Created acme-npu-plugin in" in done.stdout
    assert "src/acme_npu_plugin/diffusion/platform.py" in done.stdout
    assert "pip install -e '.[test,diffusion]'" in _next_steps(done.stdout)
    assert "cardcage doctor --strict --hooks" in _next_steps(done.stdout)
    assert (tmp_path / "acme-npu-plugin" / "src" / "acme_npu_plugin" / "vllm_section.py").is_file()


def test_the_next_steps_cd_to_the_resolved_destination(tmp_path: Path) -> None:
    """``cardcage new ../acme-npu-plugin`` printed ``cd .../cardcage/../acme-npu-plugin``."""
    (tmp_path / "checkout").mkdir()
    done = _cardcage("new", "../acme-npu-plugin", cwd=tmp_path / "checkout")
    assert done.returncode == 0, done.stderr
    resolved = (tmp_path / "acme-npu-plugin").resolve()
    assert f"Created acme-npu-plugin in {resolved}\n" in done.stdout
    assert _next_steps(done.stdout)[0] == f"cd {resolved}"
    assert ".." not in done.stdout


def test_the_next_steps_use_this_environment_and_no_placeholder_where_it_has_cardcage(
    tmp_path: Path,
) -> None:
    """The environment that ran ``cardcage new`` has the core: the plugin installs there as the
    tutorial installs it, with no new venv and no folder of wheels to invent."""
    done = _cardcage("new", "acme-npu-plugin", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert _next_steps(done.stdout)[1:] == [
        "pip install -e '.[test]'",
        "pytest",
        "ACME_NPU_PRESENT=1 SGLANG_PLATFORM=acme_npu cardcage platform",
        "cardcage doctor --strict --hooks",
    ]
    assert "venv" not in done.stdout
    assert "/path/to" not in done.stdout
    assert "WHEELS" not in done.stdout


def _installed(distribution: str) -> bool:
    try:
        metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return False
    return True


def test_a_diffusion_plugin_gets_torch_pinned_first_and_the_runtime_named_where_missing(
    tmp_path: Path,
) -> None:
    """Without torch here, the steps install the pinned CPU torch first (before anything could
    pull PyPI's CUDA build); without the diffusion runtime here, they name it and the one folder
    the user must supply. (tests-core-platforms has neither; its torch variant has torch.)"""
    done = _cardcage("new", "acme-npu-plugin", "--targets", "diffusion", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    expected = [] if _installed("torch") else [TORCH_CPU_INSTALL]
    if not _installed("cardcage-diffusion-runtime"):
        expected.append("pip install --find-links WHEELS cardcage-diffusion-runtime")
        assert "WHEELS below: the folder of cardcage's wheels you installed cardcage from" in (
            done.stdout.replace("\n", " ")
        )
    expected.append("pip install -e '.[test,diffusion]'")
    assert _next_steps(done.stdout)[1 : len(expected) + 1] == expected


def test_the_printed_torch_line_is_the_tutorials() -> None:
    page = (Path(__file__).parents[3] / "docs" / "platforms" / "vendor-plugin.md").read_text(
        encoding="utf-8"
    )
    assert f"$ {TORCH_CPU_INSTALL}\n" in page


def test_cardcage_new_lists_every_file_it_wrote(tmp_path: Path) -> None:
    done = _cardcage("new", "acme-npu-plugin", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    listed = {line.strip() for line in done.stdout.splitlines() if line.startswith("  ")}
    written = {
        p.relative_to(tmp_path / "acme-npu-plugin").as_posix()
        for p in (tmp_path / "acme-npu-plugin").rglob("*")
        if p.is_file()
    }
    assert written <= listed


def test_a_bad_name_exits_2_with_the_fix_and_writes_nothing(tmp_path: Path) -> None:
    done = _cardcage("new", "acme-npu-plugin", "--entry-point", "cuda", cwd=tmp_path)
    assert done.returncode == 2
    assert "cardcage new: error:" in done.stderr
    assert "--entry-point acme_npu_cuda" in done.stderr
    assert not (tmp_path / "acme-npu-plugin").exists()


def test_a_leading_digit_exits_2_with_the_package_to_pass_and_writes_nothing(
    tmp_path: Path,
) -> None:
    done = _cardcage("new", "9acme-npu", cwd=tmp_path)
    assert done.returncode == 2
    assert "Fix: pass --package acme_npu." in done.stderr
    assert "n9acme" not in done.stdout + done.stderr
    assert not (tmp_path / "9acme-npu").exists()


def test_a_non_empty_destination_exits_2(tmp_path: Path) -> None:
    (tmp_path / "acme-npu-plugin").mkdir()
    (tmp_path / "acme-npu-plugin" / "README.md").write_text("mine", encoding="utf-8")
    done = _cardcage("new", "acme-npu-plugin", cwd=tmp_path)
    assert done.returncode == 2
    assert "--force" in done.stderr
    assert (tmp_path / "acme-npu-plugin" / "README.md").read_text(encoding="utf-8") == "mine"


def test_the_other_commands_never_import_the_scaffold(tmp_path: Path) -> None:
    code = (
        "import sys; from cardcage.platforms import cli; cli.build_parser(); "
        "cli.main(['plugins', 'list', '--json']); "
        "sys.stderr.write(repr(sorted(m for m in sys.modules if 'scaffold' in m)))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip().endswith("[]")
