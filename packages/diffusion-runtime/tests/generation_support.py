"""A real plugin distribution for the generation tests (``h7-probe``, general plugin only).

Spawned workers start with the launcher's ``sys.path`` (put the site there with
``cardcage.hooks.testing.on_sys_path``); what it does depends on environment variables the
test sets (children inherit the environment):

* ``H7_EVIDENCE_DIR=<dir>``: an AROUND hook on ``GPUWorker.init_device_and_model`` writes
  ``rank<N>.json`` there: what the worker looked like before and after the original ran;
* ``H7_KILL_RANK=<n>`` and ``H7_KILL_AT=<k>``: a BEFORE hook on the transformer's ``forward``
  SIGKILLs rank n at its k-th call, in the middle of a request (rank 0 is computing too);
  with ``H7_KILL_MODE=raise`` it raises ``RuntimeError("rank overheated")`` instead;
* ``H7_HOLD_RENDEZVOUS=<port>``: a BEFORE hook on ``GPUWorker.init_distributed`` makes rank 0
  connect to that local port, send its ``master_port``, and wait until the test closes the
  connection: the test then acts while the launcher has chosen the rendezvous port and rank 0
  has not yet started the store on it (``bootstrap_support.BlockingListener``).
"""

from __future__ import annotations

import os
from pathlib import Path

from cardcage.hooks.testing import write_distribution

PLUGINS = "sglang.multimodal_gen.plugins"
MODEL = "cardcage/tiny-dit"

PLUGIN_SOURCE = """
import json
import os
import signal

from cardcage.diffusion.runtime.platforms.plugins import HookType, plugin_hook

CALLS = {"forward": 0}


def register():
    if os.environ.get("H7_EVIDENCE_DIR"):
        @plugin_hook(
            "cardcage.diffusion.runtime.managers.gpu_worker.GPUWorker.init_device_and_model",
            HookType.AROUND,
        )
        def observe_init(original, self):
            import torch.distributed as dist

            before = {"dist_initialized": dist.is_initialized(), "pipeline": self.pipeline}
            result = original(self)
            evidence = {
                "rank": self.rank,
                "local_rank": self.local_rank,
                "world_size": self.world_size,
                "env_rank": os.environ.get("RANK"),
                "pid": os.getpid(),
                "before": {"dist_initialized": before["dist_initialized"],
                           "pipeline": before["pipeline"] is not None},
                "after": {
                    "dist_initialized": dist.is_initialized(),
                    "dist_rank": dist.get_rank(),
                    "dist_world": dist.get_world_size(),
                    "backend": self.backend,
                    "sp_group": self.sp_group is not None,
                    "sp_communicator": type(self.sp_communicator).__name__,
                    "pipeline": type(self.pipeline).__name__,
                },
            }
            path = os.path.join(os.environ["H7_EVIDENCE_DIR"], f"rank{self.rank}.json")
            with open(path, "w") as handle:
                json.dump(evidence, handle)
            return result

    if os.environ.get("H7_HOLD_RENDEZVOUS"):
        @plugin_hook(
            "cardcage.diffusion.runtime.managers.gpu_worker.GPUWorker.init_distributed",
            HookType.BEFORE,
        )
        def hold_rendezvous(self):
            import socket

            if self.rank == 0:
                port = int(os.environ["H7_HOLD_RENDEZVOUS"])
                with socket.create_connection(("127.0.0.1", port)) as conn:
                    conn.sendall(str(self.server_args.master_port).encode() + b"\\n")
                    conn.recv(1)

    if os.environ.get("H7_KILL_RANK"):
        @plugin_hook(
            "cardcage.diffusion.runtime.models.transformer.TinyDiT.forward", HookType.BEFORE
        )
        def die_mid_request(*args, **kwargs):
            CALLS["forward"] += 1
            if (
                os.environ.get("RANK") == os.environ["H7_KILL_RANK"]
                and CALLS["forward"] == int(os.environ.get("H7_KILL_AT", "2"))
            ):
                if os.environ.get("H7_KILL_MODE") == "raise":
                    raise RuntimeError("rank overheated")
                os.kill(os.getpid(), signal.SIGKILL)
"""


def write_probe(site: Path) -> Path:
    """Write the ``h7-probe`` distribution into ``site``."""
    return write_distribution(
        site,
        "h7-probe",
        entry_points={PLUGINS: {"h7": "h7_probe_plugin:register"}},
        modules={"h7_probe_plugin": PLUGIN_SOURCE},
    )


def shm_entries_of(pids: list[int]) -> list[str]:
    """``/dev/shm`` entries created by any of ``pids`` (cardcage.shm names carry the pid)."""
    from cardcage.shm import SHM_DIR, SHM_PREFIX

    prefixes = tuple(f"{SHM_PREFIX}{pid}-" for pid in pids)
    return sorted(name for name in os.listdir(SHM_DIR) if name.startswith(prefixes))


def max_difference(a: bytes, b: bytes) -> int:
    """The largest per-byte difference of two equally long images."""
    assert len(a) == len(b)
    return max(abs(x - y) for x, y in zip(a, b, strict=True))
