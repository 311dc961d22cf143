"""Spawned workers' lifecycle, the payload boundary, the HTTP child, the early-import warning.

Every process test starts real children from the launcher's spawn context, with a real vendor
distribution (``bootstrap_support.write_vendor``) found through entry points, and asserts on what
the children observed from inside.
"""

from __future__ import annotations

import logging
import multiprocessing
import pickle
import subprocess
import sys
import textwrap
import types
from collections import OrderedDict
from collections.abc import Iterator
from pathlib import Path

import pytest
from bootstrap_support import SERVER_ARGS_MODULE, WORKER_MODULE, read_json, run_script, write_vendor

from cardcage.diffusion.errors import BootstrapPayloadError
from cardcage.diffusion.runtime.managers.launcher import launch_workers, start_http_server
from cardcage.diffusion.runtime.managers.worker_bootstrap import (
    ServerArgsPayload,
    runtime_modules_imported_early,
    warn_if_runtime_imported_early,
)
from cardcage.diffusion.runtime.server_args import ServerArgs
from cardcage.hooks.testing import on_sys_path

OVERRIDE = "SGLANG_DIFFUSION_PLATFORM_OVERRIDE"


@pytest.fixture
def vendor_site(site: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The vendor distribution on this process's path and on every child's PYTHONPATH."""
    write_vendor(site)
    monkeypatch.setenv("PYTHONPATH", str(site))
    with on_sys_path(site):
        yield site


@pytest.fixture
def fork_by_default() -> Iterator[None]:
    """Make ``fork`` the global start method: the launcher must spawn anyway."""
    previous = multiprocessing.get_start_method(allow_none=True)
    multiprocessing.set_start_method("fork", force=True)
    yield
    multiprocessing.set_start_method(previous, force=True)


# -- the payload ----------------------------------------------------------------------------------


def test_payload_round_trips_server_args(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(OVERRIDE, "cpu")
    args = ServerArgs(model_path="tiny", num_gpus=2, seed=7, pipeline_config={"dtype": "bfloat16"})
    payload = pickle.loads(pickle.dumps(ServerArgsPayload.capture(args)))
    assert payload.materialize() == args
    assert "tiny" not in repr(payload)  # opaque: the bytes are not shown


def test_unpickling_a_spec_payload_imports_no_runtime_module(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(OVERRIDE, "cpu")
    blob = tmp_path / "payload.pickle"
    blob.write_bytes(pickle.dumps(ServerArgsPayload.capture(ServerArgs(model_path="tiny"))))
    code = textwrap.dedent(
        f"""
        import pickle, sys
        payload = pickle.loads(open({str(blob)!r}, "rb").read())
        fields = payload.read()
        loaded = sorted(m for m in sys.modules if m.startswith("cardcage.diffusion."))
        print(fields["model_path"], loaded)
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert result.stdout.split(" ", 1) == [
        "tiny",
        "['cardcage.diffusion.runtime', 'cardcage.diffusion.runtime.managers', "
        "'cardcage.diffusion.runtime.managers.worker_bootstrap']\n",
    ]


def test_capture_rejects_anything_but_server_args() -> None:
    with pytest.raises(BootstrapPayloadError, match="did not contain diffusion ServerArgs") as info:
        ServerArgsPayload.capture({"model_path": "tiny"})  # type: ignore[arg-type]
    assert isinstance(info.value, TypeError)


@pytest.mark.parametrize(
    "content",
    [
        ["not", "a", "mapping"],
        {"kind": "something.Else", "version": 1, "fields": {}},
        OrderedDict(model_path="tiny"),  # a class reference: refused without importing it
    ],
)
def test_materialize_rejects_a_payload_holding_anything_else(content: object) -> None:
    payload = ServerArgsPayload(pickle.dumps(content))
    with pytest.raises(BootstrapPayloadError, match="did not contain diffusion ServerArgs"):
        payload.materialize()


# -- the early-import warning (unit) ---------------------------------------------------------------


def _fake_modules(*names: str) -> dict[str, object]:
    return {name: types.ModuleType(name) for name in names}


def test_allowed_modules_are_not_reported() -> None:
    namespace = types.ModuleType("cardcage.diffusion.tools")
    namespace.__spec__ = types.SimpleNamespace(origin=None, submodule_search_locations=["x"])  # type: ignore[assignment]
    modules = _fake_modules(
        "cardcage.diffusion",
        "cardcage.diffusion.errors",
        "cardcage.diffusion.configs",
        "cardcage.diffusion.runtime",
        "cardcage.diffusion.runtime.managers",
        "cardcage.diffusion.runtime.managers.worker_bootstrap",
        "cardcage.diffusion.runtime.managers.protocol",
        "cardcage.diffusion.runtime.platforms",
        "cardcage.diffusion.runtime.platforms.plugins",
        "cardcage.diffusionx.other",
    )
    modules["cardcage.diffusion.tools"] = namespace
    assert runtime_modules_imported_early(modules) == []


def test_worker_modules_are_reported_with_a_dot_boundary() -> None:
    modules = _fake_modules(
        WORKER_MODULE,
        SERVER_ARGS_MODULE,
        "cardcage.diffusion.runtime.platforms_extra",  # not a submodule of platforms
        "cardcage.diffusion.runtime.managers.worker_bootstrap_v2",
    )
    assert runtime_modules_imported_early(modules) == sorted(modules)


def test_warning_names_at_most_five_modules_and_the_script(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    names = [f"cardcage.diffusion.runtime.early_{i}" for i in range(7)]
    for name in names:
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    main = types.ModuleType("__main__")
    main.__file__ = "/srv/jobs/offline.py"
    monkeypatch.setitem(sys.modules, "__main__", main)
    with caplog.at_level(logging.WARNING):
        reported = warn_if_runtime_imported_early()
    assert set(names) <= set(reported)
    (record,) = caplog.records
    message = record.getMessage()
    assert ", ".join(sorted(reported)[:5]) + f" (+{len(reported) - 5} more)" in message
    assert "/srv/jobs/offline.py" in message
    assert sorted(reported)[5] not in message


# -- the lifecycle, observed from inside spawned workers ------------------------------------------


@pytest.mark.usefixtures("fork_by_default")
def test_worker_lifecycle_precedes_worker_import_and_server_args(
    vendor_site: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("H5_REPLACE", "ready")
    # The parent imported both modules already: a forked child would inherit them.
    import cardcage.diffusion.runtime.managers.gpu_worker  # noqa: F401

    with launch_workers(ServerArgs(model_path="tiny", num_gpus=2)) as group:
        infos = [handle.info for handle in group.workers]
    for rank, info in enumerate(infos):
        assert info["replaced"] is True  # the plugin's REPLACE is what ran
        assert info["env_rank"] == str(rank)
        assert info["model_path"] == "tiny"
        assert info["master_port"] == 29917  # the platform's defaults, applied in the launcher
        events = info["events"]
        assert [e["tag"] for e in events] == ["init_backend", "register", "run"]
        init_backend, register, run = events
        for early in (init_backend, register):
            assert not early["worker_imported"]
            assert not early["server_args_imported"]
        assert run["worker_imported"]
        assert run["server_args_imported"]


def test_http_child_applies_hooks_before_importing_the_server(
    vendor_site: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    events_file = tmp_path / "http.json"
    monkeypatch.setenv("H5_EVENTS_FILE", str(events_file))
    process = start_http_server(ServerArgs(model_path="tiny"), "h5_vendor_server:serve")
    process.join(60)
    assert process.exitcode == 0
    seen = read_json(events_file)
    assert seen["banner"] == "HELLO FROM THE SERVER"  # hooked before the module was imported
    assert seen["at_import"] == {"server_args_imported": False}
    assert seen["model_path"] == "tiny"
    tags = [e["tag"] for e in seen["events"]]  # type: ignore[union-attr]
    assert tags == ["register", "server_import", "serve"]  # and no init_backend


# -- the early-import warning, from real offline scripts -------------------------------------------

GUARDED_SCRIPT = """
from cardcage.diffusion import DiffGenerator  # a proxy: imports nothing yet

if __name__ == "__main__":
    from cardcage.diffusion import SamplingParams

    params = SamplingParams(num_inference_steps=2, seed=3)
    with DiffGenerator.from_pretrained(
        model_path="cardcage/tiny-dit", num_gpus=2, log_level="debug"  # per-step lines: DEBUG
    ) as generator:
        print("pings", len(generator.workers.ping()))
        image = generator.generate(prompt="a red triangle", sampling_params=params)
        print("saved", image.save("kite.png"))
"""

OFFENDING_SCRIPT = """
from cardcage.diffusion import DiffGenerator, SamplingParams  # SamplingParams: too early

if __name__ == "__main__":
    with DiffGenerator.from_pretrained(model_path="cardcage/tiny-dit", num_gpus=2) as generator:
        print("pings", len(generator.workers.ping()))
"""


def test_a_script_written_as_prescribed_triggers_no_warning(tmp_path: Path) -> None:
    result = run_script(GUARDED_SCRIPT, tmp_path, {OVERRIDE: "cpu"})
    assert result.returncode == 0, result.stderr
    assert "pings 2" in result.stdout
    assert "saved kite.png" in result.stdout
    assert (tmp_path / "kite.png").read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    assert "ready" in result.stderr  # the workers' logs do reach stderr
    progress = [line for line in result.stderr.splitlines() if "denoising step 2/2" in line]
    assert len(progress) == 1, result.stderr  # rank 0 reports progress, rank 1 stays quiet
    assert "rank 0]" in progress[0]
    assert "imported before this worker initialized its platform" not in result.stderr


def test_a_script_importing_the_runtime_early_is_warned_about(tmp_path: Path) -> None:
    result = run_script(OFFENDING_SCRIPT, tmp_path, {OVERRIDE: "cpu"})
    assert result.returncode == 0, result.stderr
    assert "pings 2" in result.stdout
    warnings = [
        line
        for line in result.stderr.splitlines()
        if "imported before this worker initialized its platform" in line
    ]
    assert len(warnings) == 1, result.stderr  # rank 0 reports, rank 1 does not repeat it
    assert "cardcage.diffusion.configs.sampling_params" in warnings[0]
    assert str(tmp_path / "offline_script.py") in warnings[0]
