"""Benchmarks for ``cardcage.platforms`` against SGLang 0.5.23's resolver and loader (DESIGN.md §7).

Every number is a ratio measured in one run, on one machine, so machine speed cancels out:

1. first ``current_platform`` + SRT ``load_plugins()`` with ~100 distributions installed, each
   side in a fresh process / the same work done by SGLang's ``_resolve_platform()`` and
   ``load_plugins()``; and the number of metadata scans each side makes (cardcage: must be 1);
2. ``python -c "import cardcage.platforms"`` / ``python -c pass``.

The environment of (1) is generated: dummy ``<name>-<version>.dist-info`` folders (METADATA and
entry_points.txt) in a temporary site directory put first on the children's ``PYTHONPATH``, on top
of whatever the interpreter has installed. Most dummies declare console scripts or unrelated
groups; a few declare an ``sglang.srt.platforms`` entry point whose ``activate()`` returns None, a
few others an ``sglang.srt.plugins`` entry point with a trivial ``register()``. No platform
activates, so both sides fall back: cardcage to its base ``SRTPlatform`` through its default
(kernel-file) probes, SGLang to its base ``SRTPlatform`` through its torch probes; both import
every platform plugin and call its ``activate()``, and import every general plugin and call its
``register()``. Each child checks that it did exactly that, and prints its own timings.

The anchor is three files read out of the sglang wheel that ``nox -s bench`` downloads
(``--anchor-dir``): ``sglang/srt/platforms/__init__.py``, ``sglang/srt/plugins/__init__.py`` and
``sglang/srt/plugins/hook_registry.py``. They are extracted into a temporary directory and
imported by path, in the child only, through stub parent packages whose ``__path__`` points
there. Everything else they import is a minimal stub installed before the clock starts, derived
from their import statements: ``torch`` (no CUDA, no HIP, no XPU), ``sglang.srt.environ.envs``
(``os.getenv`` readers for the variables they use) and the in-tree platform classes. Nothing of
SGLang is copied into this repository.

Timing, in the child with ``time.perf_counter()``: from just before ``from cardcage.platforms
import current_platform`` / ``from sglang.srt.platforms import current_platform`` (the extracted
file) until ``load_plugins()`` returns. cardcage imports its modules on first access, SGLang at
module scope, so the window holds both sides' module imports. Three variants differ only in what
both children have imported before the clock starts:

- stdlib (the budgeted row): the standard-library modules that either side imports inside the
  window, the union, on both sides. A runtime process has them long before its platform is
  resolved (torch's own ``__init__`` imports inspect, platform, glob and typing), so each side
  pays for its own modules and its work, and neither for the other's choice of stdlib modules;
- cold (context): nothing; what a bare interpreter pays, stdlib imports included;
- warm (context): every module of the window but the plugin modules: scanning, selecting and
  loading only.

The stdlib and warm variants are also reported in CPU time (``time.thread_time()`` around the
same window, context rows): wall time on a loaded machine includes the time the child waited for
a CPU, CPU time does not, so those two rows keep the split between imports and work readable when
another build runs beside the benchmark. The budget stays on wall time.

``importlib.metadata`` is imported before the clock in every variant (its functions are wrapped to
count scans). The stubs cost nothing, so SGLang's reference leaves out its real environ module,
its nine in-tree platform modules and torch: it is a lower bound of what SGLang pays. By how much,
measured for issue 22: importing the real ``sglang.srt.environ``, ``platforms.device_mixin``,
``platforms.interface`` and the eight in-tree platform modules from the 0.5.23 wheel in the bench
venv (their parent packages stubbed, torch, numpy, msgspec and psutil imported first) took a
median 5.2 ms and 6.8 ms of CPU time in two batches of nine fresh processes (environ alone
2.4 ms), on a shared 2-core machine whose stdlib row measured SGLang's whole window at 17.8 ms of
CPU time in the same hour. cardcage's side of the window holds its counterparts (its interface,
device mixin, probes and environment modules), so against a faithful reference the ratio would
be 0.72-0.77 times the printed one. They stay stubbed because the in-tree modules import torch
at module scope: the real torch in each of the ~180 children would add minutes to the run, and
its probes would make the fallback depend on the machine.

What cardcage's records are made of shows in this row (issue 34). The four named tuples defined
in the window (``HookSource``, ``HookRecord``, ``LoadedPlugin``, ``DeviceCapability``) are
``typing.NamedTuple``s: on 2026-12-07, six alternating runs in venvs built like the ``bench``
session's measured the stdlib row at 0.72 (0.70-0.81 between runs) of SGLang's loader in wall
time and 0.71 in CPU time with the 0.1 ``TupleRecord`` stand-ins, 0.76 (0.72-0.91) and 0.76 with
``typing.NamedTuple`` (the first one defined in a process costs about 1 ms, mostly once). The
thirteen other records defined in the window are plain classes with ``__slots__``: twelve of them
as dataclasses measured 1.21 (1.15-1.24) in CPU time where the plain classes measured 0.70, about
0.45 ms a class. docs/reference/records.md lists what each record is.

Benchmarks report, they do not gate: the exit code is 0 even when a budget is missed or a
measurement fails.

    python benchmarks/bench_platforms.py --anchor-dir DIR [--json PATH] [--quick]
"""

from __future__ import annotations

import ast
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import asdict, dataclass, field
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

from _common import (
    ANCHOR_VERSION,
    BenchError,
    Result,
    find_anchor_wheel,
    parse_args,
    progress,
    quartiles,
    table,
)
from _common import (
    measure_startup as measure_startup_commands,
)

if TYPE_CHECKING:
    from collections.abc import Sequence

ANCHOR_PLATFORMS = "sglang/srt/platforms/__init__.py"
ANCHOR_PLUGINS = "sglang/srt/plugins/__init__.py"
ANCHOR_HOOKS = "sglang/srt/plugins/hook_registry.py"
ANCHOR_MEMBERS = (ANCHOR_PLATFORMS, ANCHOR_PLUGINS, ANCHOR_HOOKS)

PLATFORM_GROUP = "sglang.srt.platforms"
PLUGIN_GROUP = "sglang.srt.plugins"

LOAD_BUDGET = 0.8  # DESIGN §7, revised by issue 34
SCAN_LIMIT = 1
IMPORT_BUDGET = 1.3

TARGET_DISTS = 100  # installed distributions the children see, the interpreter's own included
MIN_DUMMIES = 60  # generated even when the interpreter already has ~100 installed
PLATFORM_DISTS = 3  # dummies with an sglang.srt.platforms entry point (activate() -> None)
PLUGIN_DISTS = 6  # dummies with an sglang.srt.plugins entry point (trivial register())
DUMMY_PREFIX = "ccbench"  # every generated distribution and module name starts with this

# Variables that would change what either side does; removed from every child's environment.
STEERING_PREFIXES = ("SGLANG_", "CARDCAGE_")


@dataclass(frozen=True)
class Settings:
    """How hard to measure; ``--quick`` trades precision for a run of a few seconds."""

    load_rounds: int  # one fresh process per side per round
    startup_rounds: int


FULL = Settings(load_rounds=30, startup_rounds=60)
QUICK = Settings(load_rounds=6, startup_rounds=8)


@dataclass
class Failure:
    """A measurement that could not be made; reported, never raised out of ``main``."""

    section: str
    message: str


# -- the anchor ----------------------------------------------------------------------------------


def extract_anchor(wheel: Path, dest: Path) -> Path:
    """Extract the three anchor files, and nothing else of SGLang; returns the tree's root."""
    with zipfile.ZipFile(wheel) as archive:
        for member in ANCHOR_MEMBERS:
            archive.extract(member, dest)
    return dest


def optional_imports(tree: ast.AST) -> set[ast.stmt]:
    """Imports inside ``try: ... except ImportError``: the file copes when they are missing.

    (0.5.23 probes MUSA with ``import torchada`` that way, behind ``torch.version.musa``, which
    the torch stub does not have.)
    """
    found: set[ast.stmt] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Try):
            continue
        caught = set()
        for handler in node.handlers:
            types_ = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
            caught |= {t.id for t in types_ if isinstance(t, ast.Name)}
        if caught & {"ImportError", "ModuleNotFoundError"}:
            for statement in node.body:
                found |= {
                    n for n in ast.walk(statement) if isinstance(n, ast.Import | ast.ImportFrom)
                }
    return found


def _imports(path: Path) -> tuple[list[str], list[tuple[str, list[str]]], set[str]]:
    """``import x`` names, ``from x import a, b`` pairs, and ``envs.NAME`` attributes used."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    optional = optional_imports(tree)
    plain: list[str] = []
    froms: list[tuple[str, list[str]]] = []
    env_names: set[str] = set()
    for node in ast.walk(tree):
        if node in optional:
            continue
        if isinstance(node, ast.Import):
            plain.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                raise BenchError(f"{path.name}: relative import of {node.module!r}; extend stubs")
            froms.append((node.module or "", [alias.name for alias in node.names]))
        elif (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "envs"
        ):
            env_names.add(node.attr)
    return plain, froms, env_names


def plan_stubs(root: Path) -> dict[str, Any]:
    """The stubs the anchor files need, read from their import statements.

    Fails loudly when a release imports something this plan does not know how to stub, instead
    of failing somewhere inside a child. ``torch`` is the only third-party module allowed.
    """
    real = {
        m.removesuffix("/__init__.py").removesuffix(".py").replace("/", ".") for m in ANCHOR_MEMBERS
    }
    platform_classes: dict[str, list[str]] = {}
    env_names: set[str] = set()
    for member in ANCHOR_MEMBERS:
        plain, froms, used_envs = _imports(root / member)
        env_names |= used_envs
        pairs: list[tuple[str, list[str]]] = [(name, []) for name in plain] + froms
        for module, names in pairs:
            top = module.split(".")[0]
            if module in real or top in sys.stdlib_module_names or module == "torch":
                continue
            if module == "sglang.srt.environ" and names == ["envs"]:
                continue
            if module.startswith("sglang.srt.platforms.") and module.count(".") == 3:
                platform_classes.setdefault(module, []).extend(names)
                continue
            raise BenchError(f"{member} imports {module} ({', '.join(names)}): add a stub for it")
    if not env_names:
        raise BenchError("the anchor reads no envs.* variable; the stub plan is out of date")
    return {
        "root": str(root),
        "env_names": sorted(env_names),
        "platform_classes": platform_classes,
    }


# -- the generated environment -------------------------------------------------------------------


@dataclass
class DummyEnvironment:
    """The temporary site directory and what the children must find done in it."""

    site: Path
    dummies: int
    platform_modules: list[str] = field(default_factory=list)
    plugin_modules: list[str] = field(default_factory=list)


UNRELATED_GROUPS = (
    "pytest11",
    "flake8.extension",
    "mkdocs.plugins",
    "sphinx.html_themes",
    "jupyter_client.kernel_provisioners",
    "opentelemetry_instrumentor",
)

PLATFORM_SOURCE = '''\
"""A platform plugin whose hardware is absent: activate() declines."""

ACTIVATIONS = []


def activate():
    ACTIVATIONS.append(1)
    return None
'''

PLUGIN_SOURCE = '''\
"""A general plugin whose register() does nothing but count itself."""

REGISTERED = []


def register():
    REGISTERED.append(1)
'''


def installed_distributions() -> dict[str, str]:
    """Normalised name -> entry_points.txt text of what this interpreter has installed."""
    found: dict[str, str] = {}
    for dist in metadata.distributions():
        key = getattr(dist, "_normalized_name", None) or str(dist.metadata["Name"])
        found.setdefault(key, dist.read_text("entry_points.txt") or "")
    return found


def foreign_plugins(installed: dict[str, str]) -> list[str]:
    """Installed distributions that already declare SRT platform or general plugins."""
    return sorted(
        name
        for name, text in installed.items()
        if f"[{PLATFORM_GROUP}]" in text or f"[{PLUGIN_GROUP}]" in text
    )


def write_dist(site: Path, index: int, entry_points: str) -> None:
    """One ``<name>-<version>.dist-info`` with METADATA (README-sized) and entry_points.txt."""
    name = f"{DUMMY_PREFIX}-dist-{index:03d}"
    version = f"1.{index}.{index % 7}"
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    description = "\n".join(
        f"Paragraph {p} of the {name} README: installation, usage, configuration and a long "
        "changelog, as real distributions carry in their METADATA." * 3
        for p in range(6)
    )
    info.joinpath("METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
        f"Summary: Generated distribution {index} for bench_platforms.py\n"
        "License: MIT\nRequires-Python: >=3.9\nClassifier: Programming Language :: Python :: 3\n"
        "Requires-Dist: packaging>=20\nDescription-Content-Type: text/markdown\n\n"
        f"{description}\n",
        encoding="utf-8",
    )
    if entry_points:
        info.joinpath("entry_points.txt").write_text(entry_points, encoding="utf-8")


def build_environment(site: Path, existing: int) -> DummyEnvironment:
    """Write the dummies (and their plugin modules) so the children see ~TARGET_DISTS in all."""
    count = max(MIN_DUMMIES, TARGET_DISTS - existing)
    env = DummyEnvironment(site, count)
    site.mkdir(parents=True)
    # Spread the plugin distributions over the alphabet instead of bunching them at the start.
    platform_at = {count * (2 * k + 1) // (2 * PLATFORM_DISTS) for k in range(PLATFORM_DISTS)}
    plugin_at = {count * (2 * k + 1) // (2 * PLUGIN_DISTS) + 1 for k in range(PLUGIN_DISTS)}
    for index in range(count):
        if index in platform_at:
            module = f"{DUMMY_PREFIX}_platform_{index:03d}"
            site.joinpath(f"{module}.py").write_text(PLATFORM_SOURCE, encoding="utf-8")
            env.platform_modules.append(module)
            text = f"[{PLATFORM_GROUP}]\n{DUMMY_PREFIX}_plat_{index:03d} = {module}:activate\n"
        elif index in plugin_at:
            module = f"{DUMMY_PREFIX}_plugin_{index:03d}"
            site.joinpath(f"{module}.py").write_text(PLUGIN_SOURCE, encoding="utf-8")
            env.plugin_modules.append(module)
            text = f"[{PLUGIN_GROUP}]\n{DUMMY_PREFIX}_plug_{index:03d} = {module}:register\n"
        elif index % 5 == 4:
            group = UNRELATED_GROUPS[index % len(UNRELATED_GROUPS)]
            text = f"[{group}]\nccb{index} = {DUMMY_PREFIX}_dist_{index:03d}.ext:hook\n"
        elif index % 11 == 10:
            text = ""  # a library without entry points
        else:
            scripts = "".join(
                f"ccb{index}-{s} = {DUMMY_PREFIX}_dist_{index:03d}.cli:main_{s}\n"
                for s in range(1 + index % 4)
            )
            text = f"[console_scripts]\n{scripts}"
            if index % 3 == 0:
                text += f"\n[gui_scripts]\nccb{index}-gui = {DUMMY_PREFIX}_dist_{index:03d}:gui\n"
        write_dist(site, index, text)
    return env


# -- the children --------------------------------------------------------------------------------

# Both children, before the clock: counters around importlib.metadata's scans.
CHILD_PRELUDE = """\
import importlib
import json
import sys
import time
import importlib.metadata as _md

_config = json.loads(sys.argv[1])
_counts = {"distributions": 0, "entry_points": 0, "scan": 0, "METADATA": 0, "entry_points.txt": 0}
_distributions = _md.distributions
_entry_points = _md.entry_points


def _counted_distributions(**kwargs):
    _counts["distributions"] += 1
    return _distributions(**kwargs)


def _counted_entry_points(**params):
    _counts["entry_points"] += 1
    return _entry_points(**params)


_md.distributions = _counted_distributions
_md.entry_points = _counted_entry_points
if _config["audit"]:
    _read_text = _md.PathDistribution.read_text

    def _counted_read_text(self, filename):
        if filename in _counts:
            _counts[filename] += 1
        return _read_text(self, filename)

    _md.PathDistribution.read_text = _counted_read_text
"""

# Both children, last thing before the clock: what the variant has imported already.
CHILD_PREIMPORT = """
for _name in _config["preimport"]:
    importlib.import_module(_name)
_before = set(sys.modules)
"""

# Both children, after the clock: what was done, as one JSON line.
CHILD_EPILOGUE = """
def _calls(modules, attr):
    return sum(len(getattr(sys.modules[m], attr)) for m in modules if m in sys.modules)


_out = {
    "seconds": _t1 - _t0,
    "cpu_seconds": _c1 - _c0,
    "platform": type(_platform).__module__ + "." + type(_platform).__qualname__,
    "activations": _calls(_config["platform_modules"], "ACTIVATIONS"),
    "registrations": _calls(_config["plugin_modules"], "REGISTERED"),
    "counts": _counts,
    "torch": getattr(sys.modules.get("torch"), "__file__", None),
}
if _config["audit"]:
    _out["imported"] = sorted(_after - _before)
    _out["dists"] = len({getattr(d, "_normalized_name", d) for d in _distributions()})
print(json.dumps(_out))
"""

CARDCAGE_SETUP = """

class _CountScans:
    # Wraps cardcage.hooks.snapshot.scan when that module is first imported, so that nothing of
    # cardcage need be imported before the clock starts.
    name = "cardcage.hooks.snapshot"

    def find_spec(self, name, path=None, target=None):
        if name != self.name:
            return None
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            spec = None if finder is self or find is None else find(name, path, target)
            if spec is not None:
                break
        else:
            return None
        exec_module = spec.loader.exec_module

        def counted_exec_module(module):
            exec_module(module)
            scan = module.scan

            def counted_scan():
                _counts["scan"] += 1
                return scan()

            module.scan = counted_scan

        spec.loader.exec_module = counted_exec_module
        return spec


sys.meta_path.insert(0, _CountScans())
"""

CARDCAGE_WINDOW = """
_t0 = time.perf_counter()
_c0 = time.thread_time()
from cardcage.platforms import current_platform as _platform
from cardcage.hooks import load_plugins

_report = load_plugins()
_c1 = time.thread_time()
_t1 = time.perf_counter()
_after = set(sys.modules)

from cardcage.platforms import get_selection_record

_record = get_selection_record()
assert _record is not None and _record.builtin is None, _record
assert len(_report.names("executed")) == len(_config["plugin_modules"]), _report
"""

SGLANG_SETUP = """
import os
import types


def _stub(name, **attrs):
    module = types.ModuleType(name)
    module.__dict__.update(attrs)
    sys.modules[name] = module
    return module


def _no():
    return False


class _EnvStr:
    # sglang.srt.environ.EnvStr("") as far as get() goes: os.getenv, "" when unset.
    def __init__(self, name):
        self.name = name

    def get(self):
        value = os.getenv(self.name)
        return "" if value is None else value


_ns = types.SimpleNamespace
_stub(
    "torch",
    cuda=_ns(is_available=_no, get_device_name=lambda *a: ""),
    version=_ns(hip=None, cuda=None),
    xpu=_ns(is_available=_no),
)
_root = _config["stubs"]["root"]
_stub("sglang", __path__=[os.path.join(_root, "sglang")])
_stub("sglang.srt", __path__=[os.path.join(_root, "sglang", "srt")])
_stub("sglang.srt.environ", envs=_ns(**{n: _EnvStr(n) for n in _config["stubs"]["env_names"]}))


class SRTPlatform:
    pass


for _module, _names in _config["stubs"]["platform_classes"].items():
    _classes = {n: type(n, (SRTPlatform,), {}) for n in _names if n != "SRTPlatform"}
    _stub(_module, **_classes, **({"SRTPlatform": SRTPlatform} if "SRTPlatform" in _names else {}))
"""

SGLANG_WINDOW = """
_t0 = time.perf_counter()
_c0 = time.thread_time()
from sglang.srt.platforms import current_platform as _platform
from sglang.srt.plugins import load_plugins

load_plugins()
_c1 = time.thread_time()
_t1 = time.perf_counter()
_after = set(sys.modules)

assert type(_platform) is SRTPlatform, _platform
"""

CARDCAGE_CHILD = CHILD_PRELUDE + CARDCAGE_SETUP + CHILD_PREIMPORT + CARDCAGE_WINDOW + CHILD_EPILOGUE
SGLANG_CHILD = CHILD_PRELUDE + SGLANG_SETUP + CHILD_PREIMPORT + SGLANG_WINDOW + CHILD_EPILOGUE


def child_env(pycache: Path, site: Path | None) -> dict[str, str]:
    """The environment of every child: private bytecode cache, no steering variables.

    Bytecode is cached under a private prefix (and PYTHONDONTWRITEBYTECODE dropped) so that an
    editable install, the extracted anchor and the plugin modules are compiled once, in the
    warm-up, not in every measured process: a deployed wheel ships its .pyc files.
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith(STEERING_PREFIXES)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(pycache)
    if site is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(site), env.get("PYTHONPATH")]))
    return env


@dataclass(frozen=True)
class Side:
    label: str
    code: str


def run_child(side: Side, config: dict[str, Any], env: dict[str, str], cwd: Path) -> dict[str, Any]:
    """One fresh process doing the work once; returns what it printed, checked."""
    proc = subprocess.run(
        [sys.executable, "-c", side.code, json.dumps(config)],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
    )
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        raise BenchError(f"the {side.label} child failed (exit {proc.returncode}):\n{proc.stderr}")
    out: dict[str, Any] = json.loads(lines[-1])
    expected = (len(config["platform_modules"]), len(config["plugin_modules"]))
    if (out["activations"], out["registrations"]) != expected:
        raise BenchError(
            f"the {side.label} child activated {out['activations']} platform plugins and "
            f"registered {out['registrations']} general plugins; expected {expected}"
        )
    if out["torch"]:
        raise BenchError(f"the {side.label} child imported the real torch: {out['torch']}")
    return out


def is_stdlib(module: str) -> bool:
    return module.partition(".")[0] in sys.stdlib_module_names


@dataclass(frozen=True)
class Variant:
    """What both children import before the clock starts."""

    key: str
    label: str
    budget: float | None


VARIANTS = (
    Variant("stdlib", "stdlib modules pre-imported", LOAD_BUDGET),
    Variant("cold", "cold process, stdlib imports timed too", None),
    Variant("warm", "all modules pre-imported: scan + select + load only", None),
)


@dataclass
class LoadSamples:
    """Per-variant, per-round child outputs of both sides, and one audited run of each."""

    ours: dict[str, list[dict[str, Any]]]
    theirs: dict[str, list[dict[str, Any]]]
    audit_ours: dict[str, Any]
    audit_theirs: dict[str, Any]
    stdlib: list[str]  # what the "stdlib" variant pre-imports on both sides


def preimports(variant: str, stdlib: list[str], own: list[str]) -> list[str]:
    return {"cold": [], "stdlib": stdlib, "warm": stdlib + own}[variant]


def measure_load(
    anchor_root: Path, dummies: DummyEnvironment, scratch: Path, settings: Settings
) -> LoadSamples:
    """Alternating fresh processes of both sides and every variant, after warm-up runs.

    An audited cold run of each side first lists the modules each imports inside the window:
    the "stdlib" variant pre-imports the standard-library ones of both sides (the union, on both
    sides, so neither is charged for a module the other side got for free), the "warm" variant
    also each side's own modules (everything but the plugin modules, whose import is the work).
    """
    config: dict[str, Any] = {
        "audit": False,
        "preimport": [],
        "platform_modules": dummies.platform_modules,
        "plugin_modules": dummies.plugin_modules,
        "stubs": plan_stubs(anchor_root),
    }
    env = child_env(scratch / "pycache", dummies.site)
    cwd = scratch / "cwd"
    cwd.mkdir(exist_ok=True)
    ours = Side("cardcage", CARDCAGE_CHILD)
    theirs = Side(f"SGLang {ANCHOR_VERSION}", SGLANG_CHILD)
    for _ in range(2):
        run_child(ours, config, env, cwd)
        run_child(theirs, config, env, cwd)
    audited = {**config, "audit": True}
    audit_ours = run_child(ours, audited, env, cwd)
    audit_theirs = run_child(theirs, audited, env, cwd)
    plugin_modules = set(dummies.platform_modules + dummies.plugin_modules)
    stdlib = sorted({m for m in audit_ours["imported"] + audit_theirs["imported"] if is_stdlib(m)})
    own = {
        side: [m for m in audit["imported"] if not is_stdlib(m) and m not in plugin_modules]
        for side, audit in ((ours, audit_ours), (theirs, audit_theirs))
    }
    configs = {
        (side, v.key): {**config, "preimport": preimports(v.key, stdlib, own[side])}
        for side in (ours, theirs)
        for v in VARIANTS
    }
    for (side, _), variant_config in configs.items():  # one warm-up each; checks the lists
        run_child(side, variant_config, env, cwd)
    samples = LoadSamples(
        {v.key: [] for v in VARIANTS},
        {v.key: [] for v in VARIANTS},
        audit_ours,
        audit_theirs,
        stdlib,
    )
    for round_index in range(settings.load_rounds):
        order = (ours, theirs) if round_index % 2 == 0 else (theirs, ours)
        for variant in VARIANTS:
            for side in order:
                out = run_child(side, configs[side, variant.key], env, cwd)
                (samples.ours if side is ours else samples.theirs)[variant.key].append(out)
    return samples


def load_results(samples: LoadSamples, dists: int) -> list[Result]:
    """One row per variant (the budget is on "stdlib imported"), and the scan count."""
    results = []
    for variant in VARIANTS:
        ours = [o["seconds"] for o in samples.ours[variant.key]]
        theirs = [t["seconds"] for t in samples.theirs[variant.key]]
        value = statistics.median(ours) * 1e3
        reference = statistics.median(theirs) * 1e3
        if variant.budget is not None:
            name = f"first current_platform + load_plugins(), {dists} dists, {variant.label}"
        else:
            name = f"the same, {variant.label} (context)"
        results.append(
            Result(
                group="platform + plugins",
                name=name,
                unit="ms",
                value=value,
                reference=reference,
                reference_label=f"SGLang {ANCHOR_VERSION}",
                ratio=value / reference,
                budget=variant.budget,
                spread=quartiles([o / t for o, t in zip(ours, theirs, strict=True)]),
            )
        )
    # The same windows in CPU time (the child's thread_time): what a busy machine adds by
    # descheduling the child drops out, so the split between imports (stdlib row) and work
    # (warm row) still reads right when another build runs beside the benchmark.
    for variant in VARIANTS:
        if variant.key == "cold":
            continue
        ours = [o["cpu_seconds"] for o in samples.ours[variant.key]]
        theirs = [t["cpu_seconds"] for t in samples.theirs[variant.key]]
        results.append(
            Result(
                group="platform + plugins",
                name=f"the same in CPU time, {variant.label} (context)",
                unit="ms",
                value=statistics.median(ours) * 1e3,
                reference=statistics.median(theirs) * 1e3,
                reference_label=f"SGLang {ANCHOR_VERSION}",
                ratio=statistics.median(ours) / statistics.median(theirs),
                budget=None,
                spread=quartiles([o / t for o, t in zip(ours, theirs, strict=True)]),
            )
        )
    every_ours = [o for runs in samples.ours.values() for o in runs]
    every_theirs = [t for runs in samples.theirs.values() for t in runs]
    # One scan means one scan() call and one pass over distributions(), in every process.
    scans = max(max(o["counts"]["scan"], o["counts"]["distributions"]) for o in every_ours)
    reference_scans = max(t["counts"]["distributions"] for t in every_theirs)
    results.append(
        Result(
            group="platform + plugins",
            name="metadata scans per process (scan() calls; distributions() passes)",
            unit="scans",
            value=scans,
            reference=reference_scans,
            reference_label=f"SGLang {ANCHOR_VERSION}",
            ratio=scans / reference_scans,
            budget=None,
            limit=SCAN_LIMIT,
        )
    )
    return results


def scan_report(samples: LoadSamples) -> str:
    """The counters of both sides, and what each imported inside the window, spelled out."""
    ours = samples.audit_ours["counts"]
    theirs = samples.audit_theirs["counts"]
    every = [o for runs in samples.ours.values() for o in runs] + [samples.audit_ours]
    scan_calls = sorted({o["counts"]["scan"] for o in every})

    def imported(audit: dict[str, Any]) -> str:
        names = audit["imported"]
        std = [m for m in names if is_stdlib(m)]
        return f"{len(names)} modules ({len(std)} stdlib)"

    return (
        f"metadata scans, cardcage: cardcage.hooks.snapshot.scan() called "
        f"{'/'.join(map(str, scan_calls))} time(s) per process, importlib.metadata."
        f"distributions() passes {ours['distributions']}, entry_points() calls "
        f"{ours['entry_points']}; METADATA reads {ours['METADATA']}, entry_points.txt reads "
        f"{ours['entry_points.txt']}.\n"
        f"metadata scans, SGLang {ANCHOR_VERSION}: importlib.metadata.entry_points() called "
        f"{theirs['entry_points']} time(s), distributions() passes {theirs['distributions']}; "
        f"METADATA reads {theirs['METADATA']}, entry_points.txt reads "
        f"{theirs['entry_points.txt']}.\n"
        f"imported inside the window of a cold process: cardcage {imported(samples.audit_ours)}, "
        f"SGLang {imported(samples.audit_theirs)}; the stdlib row pre-imports these "
        f"{len(samples.stdlib)} stdlib modules on both sides.\n"
        f"selected: cardcage {samples.audit_ours['platform']}; SGLang "
        f"{samples.audit_theirs['platform']} (stub of the in-tree base class)."
    )


def load_details(samples: LoadSamples) -> dict[str, Any]:
    """For the JSON file: what each side counted and imported in its audited cold run."""
    return {
        side: {
            "counts": audit["counts"],
            "platform": audit["platform"],
            "imported_in_window": audit["imported"],
        }
        for side, audit in (("cardcage", samples.audit_ours), ("sglang", samples.audit_theirs))
    } | {"stdlib_preimported": samples.stdlib}


# -- 2. start-up cost ----------------------------------------------------------------------------

STARTUP_COMMANDS = {
    "pass": "pass",
    "import cardcage.platforms": "import cardcage.platforms",
    "from cardcage.platforms.interface import SRTPlatform": (
        "from cardcage.platforms.interface import SRTPlatform"
    ),
}


def measure_startup(scratch: Path, settings: Settings) -> list[Result]:
    """Import cost of cardcage.platforms (budgeted) and of its interface module (context)."""
    rows = (
        ("import cardcage.platforms", IMPORT_BUDGET),
        ("from cardcage.platforms.interface import SRTPlatform", None),
    )
    cwd = scratch / "cwd"
    cwd.mkdir(exist_ok=True)
    env = child_env(scratch / "pycache", None)
    return measure_startup_commands(STARTUP_COMMANDS, rows, env, cwd, settings.startup_rounds)


# -- report --------------------------------------------------------------------------------------


def summary(results: Sequence[Result], failures: Sequence[Failure] = ()) -> str:
    """One line a reader (or a CI log grep) can take in at a glance."""
    budgeted = [r for r in results if r.budget is not None or r.limit is not None]
    met = sum(r.verdict == "PASS" for r in budgeted)
    line = f"bench_platforms: {met}/{len(budgeted)} budgets met"
    for verdict, label in (("MISS~", "over by less than the noise"), ("MISS", "missed")):
        missed = [r for r in budgeted if r.verdict == verdict]
        if missed:
            names = ", ".join(
                f"{r.name} {r.value:g} > {r.limit:g}"
                if r.limit is not None
                else f"{r.name} {r.ratio:.3f} > {r.budget:.2f}"
                for r in missed
            )
            line += f"; {len(missed)} {label} ({names})"
    if failures:
        line += f"; {len(failures)} not measured ({', '.join(f.section for f in failures)})"
    return line


def environment(wheel: Path | None, dists: int | None, dummies: int | None) -> dict[str, Any]:
    """Where the numbers come from, for the JSON file and the table's header."""
    return {
        "python": sys.version.split()[0],
        "executable": sys.executable,
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "anchor_wheel": wheel.name if wheel else None,
        "anchor_members": list(ANCHOR_MEMBERS),
        "distributions": dists,
        "generated_distributions": dummies,
    }


def write_json(
    path: Path,
    env: dict[str, Any],
    results: Sequence[Result],
    failures: Sequence[Failure],
    notes: Sequence[str],
    details: dict[str, Any],
    elapsed: float,
) -> None:
    """The table's data, machine-readable, with the verdicts and the summary line."""
    rows = [{**asdict(r), "verdict": r.verdict} for r in results]
    data = {
        "environment": env,
        "elapsed_s": elapsed,
        "results": rows,
        "failures": [asdict(f) for f in failures],
        "notes": list(notes),
        "details": details,
        "summary": summary(results, failures),
    }
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")


def accelerator_notes() -> list[str]:
    """Say so when cardcage's default probes would import a real torch (not comparable then)."""
    drivers = [
        p
        for p in ("/proc/driver/nvidia/version", "/dev/nvidiactl", "/dev/kfd")
        if os.path.exists(p)
    ]
    if not drivers:
        return []
    return [
        f"accelerator driver files present ({', '.join(drivers)}): cardcage's default probes "
        "import torch when it is installed, SGLang's side uses a torch stub, so the first row "
        "would not compare like with like (the child fails if a real torch is imported)."
    ]


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    settings = QUICK if args.quick else FULL
    started = time.perf_counter()
    results: list[Result] = []
    failures: list[Failure] = []
    notes = accelerator_notes()
    wheel: Path | None = None
    installed = installed_distributions()
    foreign = foreign_plugins(installed)
    if foreign:
        notes.append(
            f"installed distributions already declare SRT plugins ({', '.join(foreign)}); both "
            "sides load them too, and the children's checks may reject the run."
        )
    dists: int | None = None
    dummy_count: int | None = None
    scans = ""
    details: dict[str, Any] = {}
    env = environment(None, None, None)
    print(f"cardcage.platforms benchmarks vs sglang {ANCHOR_VERSION}")
    print(f"python {env['python']} on {env['platform']}, {env['cpus']} CPUs", flush=True)
    with tempfile.TemporaryDirectory(prefix="cardcage-bench-") as tmp:
        scratch = Path(tmp)
        try:
            wheel = find_anchor_wheel(args.anchor_dir)
            print(f"anchor: {', '.join(ANCHOR_MEMBERS)} from {wheel.name}", flush=True)
            anchor_root = extract_anchor(wheel, scratch / "anchor")
            dummies = build_environment(scratch / "site", len(installed))
            dummy_count = dummies.dummies
            progress(
                f"first current_platform + load_plugins(): {settings.load_rounds} rounds of "
                f"{2 * len(VARIANTS)} fresh processes"
            )
            samples = measure_load(anchor_root, dummies, scratch, settings)
            dists = samples.audit_ours.get("dists")
            results += load_results(samples, dists or len(installed) + dummy_count)
            scans = scan_report(samples)
            details = load_details(samples)
        except BenchError as exc:
            failures.append(Failure("first current_platform + load_plugins()", str(exc)))
        try:
            progress("start-up: python -c ... (subprocesses)")
            results += measure_startup(scratch, settings)
        except BenchError as exc:
            failures.append(Failure("start-up", str(exc)))
    env = environment(wheel, dists, dummy_count)
    if dists is not None:
        print(
            f"{dists} installed distributions ({dummy_count} generated; {PLATFORM_DISTS} with a "
            f"platform plugin that declines, {PLUGIN_DISTS} with a general plugin)"
        )
    print()
    if results:
        print(table(results))
    print(
        "\nvalue: cardcage; reference: SGLang or `python -c pass`. ratio = value / reference; "
        "(25-75 %) is the\nspread of the per-round ratio. Every measurement is a fresh process "
        "with a private bytecode cache.\nPlatform + plugins rows: timed inside the child from "
        "`from ... import current_platform` until\nload_plugins() returns, both sides' module "
        "imports included; the variants differ in what both\nchildren imported before the "
        "clock (see the module docstring). SGLang's stubs cost nothing.\n"
        "MISS~ = over budget, but a quarter or more of the rounds met it (within noise)."
    )
    if scans:
        print(f"\n{scans}")
    for note in notes:
        print(f"\nnote: {note}")
    for failure in failures:
        print(f"\nNOT MEASURED: {failure.section}: {failure.message}")
    elapsed = time.perf_counter() - started
    print(f"\n{summary(results, failures)} ({elapsed:.0f} s)")
    if args.json:
        write_json(args.json, env, results, failures, notes, details, elapsed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
