"""A real vendor distribution for the process tests: a platform plus a general plugin.

``write_vendor(site)`` writes distribution ``h5-vendor`` (entry points in both diffusion groups)
into ``site``. Spawned workers import it from ``sys.path`` / ``PYTHONPATH`` and behave according
to environment variables the test sets (children inherit the environment):

* ``H5_FAIL_RANK=<n>``: ``init_backend()`` raises ``RuntimeError("device on fire")`` on rank n;
* ``H5_REPLACE=ready``: the plugin REPLACEs ``run_scheduler_process`` with one that reports the
  lifecycle observations in ``Ready.info`` and then waits for ``Shutdown``;
  ``H5_REPLACE=exit``: the replacement returns at once, without ever reporting ready;
* ``H5_BLOCK_PORT=<port>``: an AROUND hook on ``GPUWorker.handle_request`` makes a ``ping`` with
  payload ``"block"`` connect to that local port, send its pid, and wait until the test closes
  the connection (so a test knows, without sleeping, that the request is in flight);
* ``H5_EVENTS_FILE=<path>``: the HTTP test server writes its observations there as JSON;
* ``H5_A2A_DIR=<dir>``: the platform's all-to-all communicator (``h5_vendor_comm.H5Communicator``)
  writes ``a2a-rank<N>.json`` there after each exchange: pid, rank, world size, calls so far;
  ``H5_A2A=bad`` makes the platform name ``h5_vendor_comm.NotACommunicator`` instead.

Each observation records which of the worker module and the ServerArgs module were imported at
that moment, which is what the lifecycle-order tests assert on.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

from cardcage.hooks.testing import write_distribution

PLATFORMS = "sglang.multimodal_gen.platforms"
PLUGINS = "sglang.multimodal_gen.plugins"

WORKER_MODULE = "cardcage.diffusion.runtime.managers.gpu_worker"
SERVER_ARGS_MODULE = "cardcage.diffusion.runtime.server_args"

PLATFORM_SOURCE = f"""
import os
import sys

from cardcage.diffusion.runtime.platforms.interface import Platform, PlatformEnum

EVENTS = []


def record(tag):
    EVENTS.append({{
        "tag": tag,
        "pid": os.getpid(),
        "worker_imported": {WORKER_MODULE!r} in sys.modules,
        "server_args_imported": {SERVER_ARGS_MODULE!r} in sys.modules,
    }})


class H5Platform(Platform):
    _enum = PlatformEnum.OOT
    device_name = "h5"
    device_type = "cpu"
    dispatch_key = "PrivateUse1"

    def init_backend(self):
        record("init_backend")
        if os.environ.get("H5_FAIL_RANK") == os.environ.get("LOCAL_RANK"):
            raise RuntimeError("device on fire")

    def apply_server_args_defaults(self, server_args):
        if server_args.master_port is None:
            server_args.master_port = 29917

    # A CPU in disguise, so the real worker can build its pipeline and process group.
    def get_local_torch_device(self):
        import torch

        return torch.device("cpu")

    def get_torch_distributed_backend_str(self):
        return "gloo"

    @classmethod
    def get_all_to_all_communicator_cls(cls):
        if os.environ.get("H5_A2A") == "bad":
            return "h5_vendor_comm.NotACommunicator"
        return "h5_vendor_comm.H5Communicator"


def activate():
    return "h5_vendor_platform.H5Platform"
"""

PLUGIN_SOURCE = f"""
import os

import h5_vendor_platform as vendor

from cardcage.diffusion.runtime.platforms.plugins import HookType, plugin_hook


def register():
    vendor.record("register")
    mode = os.environ.get("H5_REPLACE")
    if mode:
        @plugin_hook({WORKER_MODULE + ".run_scheduler_process"!r}, HookType.REPLACE)
        def run_scheduler_process(local_rank, rank, server_args, pipe_writer):
            from cardcage.diffusion.runtime.managers.protocol import Ready, Shutdown

            vendor.record("run")
            if mode == "exit":
                return
            info = {{
                "events": vendor.EVENTS,
                "replaced": True,
                "model_path": server_args.model_path,
                "master_port": server_args.master_port,
                "env_rank": os.environ.get("RANK"),
            }}
            pipe_writer.send(Ready(rank, info))
            while not isinstance(pipe_writer.recv(), Shutdown):
                pass

    port = os.environ.get("H5_BLOCK_PORT")
    if port:
        @plugin_hook({WORKER_MODULE + ".GPUWorker.handle_request"!r}, HookType.AROUND)
        def blocking(original, self, method, payload):
            if method == "ping" and payload == "block":
                import socket

                with socket.create_connection(("127.0.0.1", int(port))) as conn:
                    conn.sendall(str(os.getpid()).encode() + b"\\n")
                    conn.recv(1)
            return original(self, method, payload)

    @plugin_hook("h5_vendor_lib.banner")
    def shouted(result):
        return result.upper()
"""

COMM_SOURCE = """
import json
import os

from cardcage.diffusion.runtime.distributed.device_communicators.cpu_communicator import (
    CpuCommunicator,
)


class H5Communicator(CpuCommunicator):
    calls = 0

    def all_to_all_4D(self, x, scatter_dim, gather_dim):
        out = super().all_to_all_4D(x, scatter_dim, gather_dim)
        type(self).calls += 1
        directory = os.environ.get("H5_A2A_DIR")
        if directory:
            record = {"pid": os.getpid(), "rank": self.rank, "world_size": self.world_size,
                      "calls": type(self).calls, "name": self.unique_name}
            with open(os.path.join(directory, f"a2a-rank{self.rank}.json"), "w") as handle:
                json.dump(record, handle)
        return out


class NotACommunicator:
    pass
"""

LIB_SOURCE = """
def banner():
    return "hello from the server"
"""

SERVER_SOURCE = f"""
import json
import os
import sys

import h5_vendor_platform as vendor
from h5_vendor_lib import banner

vendor.record("server_import")
BANNER = banner()  # built at import time: only a hook applied before the import changes it
AT_IMPORT = {{"server_args_imported": {SERVER_ARGS_MODULE!r} in sys.modules}}


def serve(server_args):
    vendor.record("serve")
    with open(os.environ["H5_EVENTS_FILE"], "w") as handle:
        json.dump({{
            "events": vendor.EVENTS,
            "banner": BANNER,
            "at_import": AT_IMPORT,
            "model_path": server_args.model_path,
        }}, handle)
"""


def write_vendor(site: Path) -> Path:
    """Write the ``h5-vendor`` distribution (platform, plugin, a library, a server module)."""
    return write_distribution(
        site,
        "h5-vendor",
        entry_points={
            PLATFORMS: {"h5": "h5_vendor_platform:activate"},
            PLUGINS: {"h5": "h5_vendor_plugin:register"},
        },
        modules={
            "h5_vendor_platform": PLATFORM_SOURCE,
            "h5_vendor_plugin": PLUGIN_SOURCE,
            "h5_vendor_comm": COMM_SOURCE,
            "h5_vendor_lib": LIB_SOURCE,
            "h5_vendor_server": SERVER_SOURCE,
        },
    )


def pid_alive(pid: int) -> bool:
    """True if ``pid`` exists (a zombie counts as gone: it has exited and holds no resources)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as handle:
            state = handle.read().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


class BlockingListener:
    """A local socket the blocking hook connects to: ``accept()`` returns the worker's pid."""

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.server.settimeout(60)
        self.port = self.server.getsockname()[1]
        self.conn: socket.socket | None = None

    def accept(self) -> int:
        self.conn, _ = self.server.accept()
        self.conn.settimeout(60)
        data = b""
        while not data.endswith(b"\n"):
            chunk = self.conn.recv(64)
            if not chunk:
                break
            data += chunk
        return int(data)

    def release(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    def close(self) -> None:
        self.release()
        self.server.close()


def run_script(
    source: str, directory: Path, env: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    """Run ``source`` as a real script file (spawn re-executes it in every worker)."""
    script = directory / "offline_script.py"
    script.write_text(source, encoding="utf-8")
    return subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **env},
        cwd=directory,
        check=False,
    )


def read_json(path: Path) -> dict[str, object]:
    data: dict[str, object] = json.loads(path.read_text(encoding="utf-8"))
    return data
