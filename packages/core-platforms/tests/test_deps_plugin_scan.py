"""``cardcage deps``' plugin scan: which host symbols a plugin's own sources depend on.

Each rule is shown on a few lines of inline source through ``scan_sources`` (the pure core);
the installed layouts (wheel, editable) are shown on fixture distributions written to tmp_path,
and the reference plugin's real sources show what a vendor would see.
"""

from __future__ import annotations

import logging
import textwrap
import tomllib
from importlib.metadata import Distribution, distributions
from pathlib import Path

import pytest

from cardcage.platforms.deps.model import CallShape, Dependency, Where
from cardcage.platforms.deps.plugin_scan import (
    plugin_sources,
    scan_distribution,
    scan_sources,
)

REPO = Path(__file__).resolve().parents[3]
DEMO_CPU = REPO / "packages" / "demo-cpu"


def scan(source: str, path: str = "plug/mod.py", **kwargs: object) -> list[Dependency]:
    return scan_sources("vendor-plugin", [(path, textwrap.dedent(source))], **kwargs)  # type: ignore[arg-type]


def rows(source: str, **kwargs: object) -> set[tuple[str, str, str]]:
    """(kind, symbol, source) of every dependency: what most rules are about."""
    return {(d.kind, d.symbol, d.source) for d in scan(source, **kwargs)}


def one(source: str, symbol: str) -> Dependency:
    found = [d for d in scan(source) if d.symbol == symbol]
    assert len(found) == 1, [d.symbol for d in scan(source)]
    return found[0]


# -- imports ----------------------------------------------------------------------------------


def test_a_plain_import_is_a_module_dependency_of_its_host() -> None:
    (dep,) = scan("import vllm.model_executor.custom_op\n")
    assert dep == Dependency(
        host="vllm",
        kind="module",
        symbol="vllm.model_executor.custom_op",
        source="import",
        distribution="vendor-plugin",
        where=(Where("plug/mod.py:1"),),
    )


def test_a_non_host_import_is_no_dependency() -> None:
    assert scan("import torch\nimport cardcage.hooks\nfrom os import path\n") == []


def test_attributes_of_an_aliased_module_are_names_up_to_two_levels_deep() -> None:
    found = rows("import vllm.a.b as x\nx.Foo\nx.Foo.bar.baz\n")
    assert found == {
        ("module", "vllm.a.b", "import"),
        ("name", "vllm.a.b:Foo", "import"),
        ("name", "vllm.a.b:Foo.bar", "import"),
    }


def test_an_unaliased_import_chain_resolves_against_the_imported_module() -> None:
    found = rows("import vllm.a.b\nvllm.a.b.Foo.bar\n")
    assert found == {("module", "vllm.a.b", "import"), ("name", "vllm.a.b:Foo.bar", "import")}


def test_a_from_import_is_a_name_and_its_attribute_one_level_deeper() -> None:
    found = rows("from vllm.a import Foo as F\nF.bar\nF.bar.baz\n")
    assert found == {("name", "vllm.a:Foo", "import"), ("name", "vllm.a:Foo.bar", "import")}


def test_a_star_import_is_a_module_dependency_only() -> None:
    assert rows("from sglang.srt.layers import *\n") == {("module", "sglang.srt.layers", "import")}


def test_relative_imports_are_the_plugins_own() -> None:
    assert scan("from . import vllm\nfrom .vllm import Foo\nFoo.bar\n") == []


def test_import_module_and_dunder_import_with_a_literal_are_module_dependencies() -> None:
    found = rows(
        """
        import importlib
        importlib.import_module("vllm.platforms.cpu")
        __import__("sglang.srt.utils")
        importlib.import_module(name)
        """
    )
    assert found == {
        ("module", "vllm.platforms.cpu", "import"),
        ("module", "sglang.srt.utils", "import"),
    }


def test_getattr_with_a_literal_on_a_host_module_is_a_name_dependency() -> None:
    dep = one("import vllm.a as m\ngetattr(m, 'Foo')\n", "vllm.a:Foo")
    assert not dep.guarded


def test_getattr_with_a_default_is_guarded() -> None:
    assert one("import vllm.a as m\ngetattr(m, 'Foo', None)\n", "vllm.a:Foo").guarded


def test_hasattr_on_a_host_module_is_a_guarded_name_dependency() -> None:
    assert one("import vllm.a as m\nif hasattr(m, 'Foo'):\n    pass\n", "vllm.a:Foo").guarded


# -- calls ------------------------------------------------------------------------------------


def test_a_call_records_its_shape_on_the_called_name() -> None:
    dep = one("from vllm.a import Foo\nFoo(1, 2, *xs, b=1, a=2, **kw)\n", "vllm.a:Foo")
    assert dep.calls == (
        CallShape(
            positional=2,
            keywords=("a", "b"),
            star_args=True,
            star_kwargs=True,
            where=Where("plug/mod.py:2"),
        ),
    )


def test_calls_through_a_module_alias_and_a_from_import_attribute_are_recorded() -> None:
    source = "import vllm.a as x\nfrom vllm.b import C\nx.Foo(1)\nC.make(k=1)\n"
    assert one(source, "vllm.a:Foo").calls[0].positional == 1
    assert one(source, "vllm.b:C.make").calls[0].keywords == ("k",)


def test_a_call_deeper_than_the_recorded_chain_has_no_shape() -> None:
    assert one("import vllm.a as x\nx.Foo.bar.baz()\n", "vllm.a:Foo.bar").calls == ()


# -- guarded ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "handler", ["ImportError", "ModuleNotFoundError", "(ValueError, ImportError)", "Exception", ""]
)
def test_an_import_guarded_by_try_except_importerror_is_guarded(handler: str) -> None:
    source = f"try:\n    from vllm.a import Foo\nexcept {handler}:\n    Foo = None\n"
    assert one(source, "vllm.a:Foo").guarded


def test_an_import_in_a_try_that_catches_something_else_is_not_guarded() -> None:
    source = "try:\n    from vllm.a import Foo\nexcept ValueError:\n    pass\n"
    assert not one(source, "vllm.a:Foo").guarded


def test_an_import_in_the_handler_of_a_try_is_not_guarded() -> None:
    source = "try:\n    import x\nexcept ImportError:\n    from vllm.a import Foo\n"
    assert not one(source, "vllm.a:Foo").guarded


def test_an_attribute_use_is_not_guarded_by_an_except_importerror() -> None:
    source = "import vllm.a as m\ntry:\n    m.Foo\nexcept ImportError:\n    pass\n"
    assert not one(source, "vllm.a:Foo").guarded


def test_an_attribute_use_in_try_except_attributeerror_is_guarded() -> None:
    source = "import vllm.a as m\ntry:\n    m.Foo\nexcept AttributeError:\n    pass\n"
    assert one(source, "vllm.a:Foo").guarded


def test_a_function_body_inside_a_try_is_not_guarded_by_it() -> None:
    source = """
    try:
        def load():
            from vllm.a import Foo
    except ImportError:
        pass
    """
    assert not one(source, "vllm.a:Foo").guarded


@pytest.mark.parametrize(
    "test",
    [
        "vllm.__version__ >= '0.9'",
        "version('vllm') >= Version('0.9')",
        "vllm_version_is('0.9.0')",
        "is_version_at_least('0.9')",
        "VLLM_VERSION > (0, 9)",
    ],
)
def test_an_import_under_a_version_check_is_guarded(test: str) -> None:
    source = f"if {test}:\n    from vllm.a import Foo\nelse:\n    from vllm.b import Foo\n"
    assert one(source, "vllm.a:Foo").guarded
    assert one(source, "vllm.b:Foo").guarded


def test_an_import_under_another_if_is_not_guarded() -> None:
    assert not one("if DEBUG:\n    from vllm.a import Foo\n", "vllm.a:Foo").guarded


def test_a_dependency_is_guarded_only_if_every_site_is() -> None:
    source = "try:\n    import vllm.a\nexcept ImportError:\n    pass\nimport vllm.a\n"
    dep = one(source, "vllm.a")
    assert len(dep.where) == 2
    assert not dep.guarded


# -- not runtime dependencies -----------------------------------------------------------------


@pytest.mark.parametrize("test", ["TYPE_CHECKING", "typing.TYPE_CHECKING"])
def test_imports_under_type_checking_are_no_dependencies(test: str) -> None:
    source = f"import typing\nif {test}:\n    from vllm.config import VllmConfig\n"
    assert scan(source) == []


def test_the_else_branch_of_type_checking_is_scanned() -> None:
    source = "if TYPE_CHECKING:\n    pass\nelse:\n    import vllm.a\n"
    assert rows(source) == {("module", "vllm.a", "import")}


def test_attribute_uses_in_annotations_are_no_dependencies() -> None:
    source = """
    import vllm.config as c
    def f(x: c.VllmConfig) -> c.ModelConfig:
        y: c.CacheConfig = x
    """
    assert rows(source) == {("module", "vllm.config", "import")}


# -- hook targets -----------------------------------------------------------------------------


def test_a_colon_hook_target_string_is_a_hook_dependency() -> None:
    dep = one(
        'TARGET = "sglang.srt.layers.layernorm:RMSNorm.forward_native"\n',
        "sglang.srt.layers.layernorm:RMSNorm.forward_native",
    )
    assert (dep.host, dep.kind, dep.source) == ("sglang", "name", "hook")


def test_a_dotted_target_passed_to_a_hook_call_is_split_at_its_first_capitalised_part() -> None:
    found = rows('register_hook("sglang.srt.x.Foo.bar", fn)\n')
    assert found == {("name", "sglang.srt.x:Foo.bar", "hook")}


def test_a_dotted_function_target_is_split_before_its_last_part() -> None:
    found = rows('around("vllm.utils.import_utils.resolve_obj_by_qualname", fn)\n')
    assert found == {("name", "vllm.utils.import_utils:resolve_obj_by_qualname", "hook")}


def test_a_hook_target_named_by_a_module_constant_is_followed_to_the_call() -> None:
    source = """
    T = "sglang.srt.utils.common.get_device_memory_capacity"
    hooks = [patch(target=T)]
    """
    dep = one(source, "sglang.srt.utils.common:get_device_memory_capacity")
    assert (dep.source, dep.where) == ("hook", (Where("plug/mod.py:3"),))


def test_a_dotted_target_passed_to_another_call_is_not_a_hook() -> None:
    assert scan('log("sglang.srt.utils.common.get_device_memory_capacity")\n') == []


def test_a_dotted_host_qualname_literal_is_an_import_dependency() -> None:
    found = rows('WORKER = "vllm.v1.worker.cpu_worker.CPUWorker"\n')
    assert found == {("name", "vllm.v1.worker.cpu_worker:CPUWorker", "import")}


def test_docstrings_and_fstring_text_name_nothing() -> None:
    source = '''
    """Hooks sglang.srt.x.Foo.bar and vllm.a:B."""
    def f():
        "vllm.a.Foo"
        return f"vllm.a:Foo{1}"
    '''
    assert scan(source) == []


# -- environment variables --------------------------------------------------------------------


@pytest.mark.parametrize(
    "read",
    [
        'os.environ.get("VLLM_X")',
        'os.environ["VLLM_X"]',
        'os.getenv("VLLM_X", "1")',
        'os.environ.setdefault("VLLM_X", "1")',
        'os.environ.pop("VLLM_X", None)',
        '"VLLM_X" in os.environ',
        'environ.get("VLLM_X")',
        "getenv(NAME)",
    ],
)
def test_an_os_environ_read_of_a_host_variable_is_an_env_var_dependency(read: str) -> None:
    source = f"import os\nfrom os import environ, getenv\nNAME = 'VLLM_X'\n{read}\n"
    assert rows(source) == {("env-var", "VLLM_X", "env-var")}


@pytest.mark.parametrize(
    "source",
    [
        "import vllm.envs as envs\nenvs.VLLM_X\n",
        "from vllm import envs\nenvs.VLLM_X\n",
        "import vllm.envs\nvllm.envs.VLLM_X\n",
        "import vllm\nvllm.envs.VLLM_X\n",
        "from vllm.envs import VLLM_X\n",
        "import vllm.envs as envs\ngetattr(envs, 'VLLM_X', False)\n",
    ],
)
def test_vllm_envs_attributes_are_env_var_dependencies(source: str) -> None:
    env = {(d.symbol, d.host) for d in scan(source) if d.kind == "env-var"}
    assert env == {("VLLM_X", "vllm")}
    assert not any(d.symbol.endswith(":VLLM_X") for d in scan(source))


def test_sglang_environ_envs_attributes_are_env_var_dependencies() -> None:
    source = "from sglang.srt.environ import envs\nif envs.SGLANG_USE_X.get():\n    pass\n"
    assert rows(source) == {
        ("name", "sglang.srt.environ:envs", "import"),
        ("env-var", "SGLANG_USE_X", "env-var"),
    }


def test_sglang_env_helpers_are_env_var_dependencies() -> None:
    source = """
    from sglang.srt.utils import get_bool_env_var, get_int_env_var
    get_bool_env_var("SGLANG_A")
    get_int_env_var("SGL_B", 1)
    """
    env = {(d.host, d.symbol) for d in scan(source) if d.kind == "env-var"}
    assert env == {("sglang", "SGLANG_A"), ("sglang", "SGL_B")}


def test_other_environment_variables_are_ignored() -> None:
    source = 'import os\nos.environ.get("CARDCAGE_X")\nos.getenv("CUDA_VISIBLE_DEVICES")\n'
    assert scan(source) == []


# -- entry point groups -----------------------------------------------------------------------


def test_entry_point_groups_of_a_host_are_dependencies() -> None:
    deps = scan_sources(
        "vendor-plugin",
        [],
        entry_point_groups=["vllm.platform_plugins", "sglang.srt.plugins", "cardcage.x", "vllmx"],
    )
    assert [(d.host, d.kind, d.symbol, d.where) for d in deps] == [
        ("sglang", "entry-point-group", "sglang.srt.plugins", (Where("entry_points.txt"),)),
        ("vllm", "entry-point-group", "vllm.platform_plugins", (Where("entry_points.txt"),)),
    ]


# -- the whole scan ---------------------------------------------------------------------------


def test_a_file_that_does_not_parse_is_skipped_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    sources = [("plug/broken.py", "import vllm.a\ndef (:\n"), ("plug/ok.py", "import vllm.b\n")]
    with caplog.at_level(logging.WARNING):
        deps = scan_sources("vendor-plugin", sources)
    assert [d.symbol for d in deps] == ["vllm.b"]
    assert "plug/broken.py" in caplog.text


def test_sites_of_one_symbol_merge_into_one_row_with_sorted_locations() -> None:
    sources = [
        ("plug/b.py", "import vllm.a\n"),
        ("plug/a.py", "\n" * 9 + "import vllm.a\n"),
        ("plug/a.py", "\n" * 8 + "import vllm.a\n"),
    ]
    (dep,) = scan_sources("vendor-plugin", sources)
    assert [w.location for w in dep.where] == ["plug/a.py:9", "plug/a.py:10", "plug/b.py:1"]


def test_rows_are_sorted_by_host_symbol_and_source() -> None:
    source = """
    import vllm.b
    import sglang.z
    import vllm.a as m
    X = "vllm.a:F"
    m.F
    """
    assert [(d.host, d.symbol, d.source) for d in scan(source)] == [
        ("sglang", "sglang.z", "import"),
        ("vllm", "vllm.a", "import"),
        ("vllm", "vllm.a:F", "hook"),
        ("vllm", "vllm.a:F", "import"),
        ("vllm", "vllm.b", "import"),
    ]


def test_the_hosts_can_be_given() -> None:
    deps = scan("import lmdeploy.x\nimport vllm.a\n", hosts={"lmdeploy": ("lmdeploy",)})
    assert [(d.host, d.symbol) for d in deps] == [("lmdeploy", "lmdeploy.x")]


# -- installed distributions ------------------------------------------------------------------


def _write_dist(site: Path, files: dict[str, str], entry_points: str = "") -> Distribution:
    """A distribution as an installer leaves it in ``site``: its files and a dist-info."""
    info = site / "vendor_plugin-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: vendor-plugin\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(entry_points)
    record = [f"{info.name}/METADATA,,", f"{info.name}/entry_points.txt,,", f"{info.name}/RECORD,,"]
    for relative, text in files.items():
        (site / relative).parent.mkdir(parents=True, exist_ok=True)
        (site / relative).write_text(text)
        record.append(f"{relative},,")
    (info / "RECORD").write_text("\n".join(record) + "\n")
    (dist,) = distributions(path=[str(site)])
    return dist


def test_a_wheel_install_is_read_from_its_record(tmp_path: Path) -> None:
    dist = _write_dist(
        tmp_path,
        {
            "vendor_pkg/__init__.py": "",
            "vendor_pkg/ops.py": "from vllm.model_executor.custom_op import CustomOp\n",
            "vendor_pkg/__pycache__/ops.cpython-311.pyc": "",
            "vendor_pkg/data.json": "{}",
        },
        entry_points="[vllm.platform_plugins]\nvendor = vendor_pkg:activate\n",
    )
    assert [path for path, _ in plugin_sources(dist)] == [
        "vendor_pkg/__init__.py",
        "vendor_pkg/ops.py",
    ]
    assert [(d.distribution, d.symbol, d.where) for d in scan_distribution(dist)] == [
        (
            "vendor-plugin",
            "vllm.model_executor.custom_op:CustomOp",
            (Where("vendor_pkg/ops.py:1"),),
        ),
        ("vendor-plugin", "vllm.platform_plugins", (Where("entry_points.txt"),)),
    ]


def test_an_editable_install_is_read_from_the_directory_its_pth_names(tmp_path: Path) -> None:
    src = tmp_path / "project" / "src"
    (src / "vendor_pkg" / "sub").mkdir(parents=True)
    (src / "vendor_pkg" / "__init__.py").write_text("")
    (src / "vendor_pkg" / "sub" / "hooks.py").write_text("import sglang.srt.layers\n")
    (src / "vendor_pkg.egg-info").mkdir()
    (src / "vendor_pkg.egg-info" / "x.py").write_text("import vllm\n")
    site = tmp_path / "site"
    dist = _write_dist(site, {"_editable_impl_vendor_plugin.pth": f"{src}\n"})
    assert [path for path, _ in plugin_sources(dist)] == [
        "vendor_pkg/__init__.py",
        "vendor_pkg/sub/hooks.py",
    ]
    assert [d.symbol for d in scan_distribution(dist)] == ["sglang.srt.layers"]


def test_an_editable_finder_mapping_is_followed_without_importing_it(tmp_path: Path) -> None:
    pkg = tmp_path / "project" / "vendor_pkg"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("import vllm.a\n")
    (tmp_path / "project" / "solo.py").write_text("import vllm.b\n")
    finder = f"raise SystemExit('imported')\nMAPPING = {{'vendor_pkg': {str(pkg)!r}}}\n"
    editables = f"F.map_module('solo', {str(tmp_path / 'project' / 'solo.py')!r})\n"
    dist = _write_dist(
        tmp_path / "site",
        {
            "__editable__.vendor_plugin-1.0.pth": "import __editable___vendor_plugin_1_0_finder\n",
            "__editable___vendor_plugin_1_0_finder.py": finder,
            "_editable_impl_vendor_plugin.py": editables,
        },
    )
    assert [path for path, _ in plugin_sources(dist)] == ["solo.py", "vendor_pkg/__init__.py"]


def test_an_editable_project_root_leaves_out_its_tests_and_build_scripts(tmp_path: Path) -> None:
    root = tmp_path / "project"
    for relative in ("vendor_pkg/__init__.py", "tests/test_x.py", "setup.py", "noxfile.py"):
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_text("")
    dist = _write_dist(tmp_path / "site", {"_vendor_plugin.pth": f"{root}\n"})
    assert [path for path, _ in plugin_sources(dist)] == ["vendor_pkg/__init__.py"]


# -- the reference plugin ---------------------------------------------------------------------


def test_the_demo_cpu_plugin_depends_on_its_hook_targets_classes_and_entry_point_groups() -> None:
    src = DEMO_CPU / "src"
    sources = [(str(p.relative_to(src)), p.read_text()) for p in sorted(src.rglob("*.py"))]
    pyproject = tomllib.loads((DEMO_CPU / "pyproject.toml").read_text())
    groups = pyproject["project"]["entry-points"]
    deps = scan_sources("cardcage-demo-cpu", sources, entry_point_groups=groups)
    found = {(d.host, d.kind, d.symbol, d.source) for d in deps}
    assert found == {
        ("sglang", "entry-point-group", "sglang.srt.platforms", "entry-point-group"),
        ("sglang", "entry-point-group", "sglang.srt.plugins", "entry-point-group"),
        ("sglang", "entry-point-group", "sglang.multimodal_gen.platforms", "entry-point-group"),
        ("sglang", "entry-point-group", "sglang.multimodal_gen.plugins", "entry-point-group"),
        ("vllm", "entry-point-group", "vllm.platform_plugins", "entry-point-group"),
        ("vllm", "entry-point-group", "vllm.general_plugins", "entry-point-group"),
        # Its hooks, declared with cardcage's around() on module constants.
        ("sglang", "name", "sglang.srt.utils.common:get_device_memory_capacity", "hook"),
        (
            "sglang",
            "name",
            "sglang.multimodal_gen.runtime.layers.custom_op:CustomOp.dispatch_forward",
            "hook",
        ),
        ("vllm", "name", "vllm.utils.import_utils:resolve_obj_by_qualname", "hook"),
        # The vLLM classes its vLLM section hands the host by qualified name.
        ("vllm", "name", "vllm.v1.attention.backends.cpu_attn:CPUAttentionBackend", "import"),
        ("vllm", "name", "vllm.v1.worker.cpu_worker:CPUWorker", "import"),
    }
    assert not any(d.guarded for d in deps)


# -- refinements ------------------------------------------------------------------------------


def test_a_python_version_check_does_not_guard() -> None:
    source = "import sys\nif sys.version_info >= (3, 12):\n    from vllm.a import Foo\n"
    assert not one(source, "vllm.a:Foo").guarded


def test_a_registry_whose_name_mentions_hooks_takes_a_hook_target() -> None:
    source = 'HookRegistry.register("sglang.srt.models.llama.LlamaModel.forward", fn)\n'
    assert rows(source) == {("name", "sglang.srt.models.llama:LlamaModel.forward", "hook")}


def test_a_name_imported_from_either_of_two_modules_records_calls_on_both() -> None:
    source = """
    try:
        from vllm.new import Foo
    except ImportError:
        from vllm.old import Foo
    Foo(1)
    """
    assert one(source, "vllm.new:Foo").calls[0].positional == 1
    assert one(source, "vllm.old:Foo").calls[0].positional == 1


def test_import_os_path_binds_os_for_environ_reads() -> None:
    assert rows('import os.path\nos.environ.get("VLLM_X")\n') == {("env-var", "VLLM_X", "env-var")}


def test_no_hosts_means_no_dependencies() -> None:
    assert scan('import vllm.a\nX = "vllm.a:F"\nhook("vllm.a.F")\n', hosts={}) == []
