"""``ServerArgs``: the settings of one diffusion deployment (model, workers, address, seed, logs).

Construction applies the current platform's defaults, then validates (the seed's order: the
platform's ``apply_server_args_defaults()`` runs in ``__post_init__``, before normalization and
validation). Building one therefore resolves ``current_platform`` in this process; it never
initializes the backend.

Workers receive it as a ``worker_bootstrap.ServerArgsPayload`` of plain data and rebuild it with
``from_payload`` after their lifecycle phases, so the rebuild runs ``__post_init__`` again under
the worker's own platform: defaults the launcher filled in travel as explicit values, fields
still unset get the worker platform's defaults, and every value is validated in the worker too
(SGLang unpickles the object and skips both).

A runtime module: a launching script imports it under ``if __name__ == "__main__":`` only.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from cardcage.diffusion.configs._validate import check_choice, check_float, check_int
from cardcage.diffusion.configs.pipeline_config import PipelineConfig
from cardcage.diffusion.configs.sampling_params import check_seed
from cardcage.diffusion.errors import InvalidServerArgsError

from .platforms.current import get_current_platform

__all__ = ["LOG_LEVELS", "ServerArgs"]

LOG_LEVELS = ("debug", "info", "warning", "error", "critical")


@dataclass(slots=True)
class ServerArgs:
    """Settings shared by the launcher, every worker and the HTTP server.

    ``model_path`` is a built-in model id or a local directory; ``num_gpus`` is the number of
    worker processes (one per device; CPU workers on the CPU platform); ``seed`` is the seed of
    requests that pass none, so it takes exactly the range a request's seed does (0 to
    ``MAX_SEED``); ``master_port`` is the torch.distributed rendezvous port (None: the launcher
    binds one the kernel picks and hands it to rank 0, so no other process can take it);
    ``worker_start_timeout`` bounds the wait for every worker to report ready (None: no bound);
    ``dit_layerwise_offload=None`` takes the platform's default.
    """

    model_path: str
    num_gpus: int = 1
    host: str = "127.0.0.1"
    port: int = 30000
    seed: int = 42
    log_level: str = "info"
    master_port: int | None = None
    worker_start_timeout: float | None = 600.0
    dit_layerwise_offload: bool | None = None
    pipeline_config: PipelineConfig = field(default_factory=PipelineConfig)

    def __post_init__(self) -> None:
        platform = get_current_platform()
        platform.apply_server_args_defaults(self)
        if self.dit_layerwise_offload is None:
            self.dit_layerwise_offload = platform.enable_dit_layerwise_offload_by_default()
        self._normalize_and_validate()

    def _normalize_and_validate(self) -> None:
        err = InvalidServerArgsError
        if not isinstance(self.model_path, str) or not self.model_path.strip():
            raise err("model_path", self.model_path, "a built-in model id or a local directory")
        check_int(err, "num_gpus", self.num_gpus, low=1, high=1024)
        if not isinstance(self.host, str) or not self.host.strip():
            raise err("host", self.host, "a host name or IP address to bind, e.g. '127.0.0.1'")
        check_int(err, "port", self.port, low=0, high=65535)  # 0: the HTTP server picks one
        check_seed(err, "seed", self.seed)  # the range every request accepts
        if isinstance(self.log_level, str):
            self.log_level = self.log_level.lower()
        check_choice(err, "log_level", self.log_level, LOG_LEVELS)
        if self.master_port is not None:
            check_int(err, "master_port", self.master_port, low=1, high=65535)
        if self.worker_start_timeout is not None:
            self.worker_start_timeout = check_float(
                err, "worker_start_timeout", self.worker_start_timeout, low=0.0,
                low_inclusive=False,
            )  # fmt: skip
        if not isinstance(self.dit_layerwise_offload, bool):
            raise err("dit_layerwise_offload", self.dit_layerwise_offload, "True, False or None")
        config: object = self.pipeline_config
        if isinstance(config, dict):
            config = PipelineConfig.from_dict(config)
        if not isinstance(config, PipelineConfig):
            raise err("pipeline_config", config, "a PipelineConfig or a dict")
        self.pipeline_config = config

    def to_payload(self) -> dict[str, Any]:
        """Every field as plain data (``pipeline_config`` as a dict), for the bootstrap payload."""
        data = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        data["pipeline_config"] = self.pipeline_config.to_dict()
        return data

    @classmethod
    def from_payload(cls, fields: dict[str, Any]) -> ServerArgs:
        """Rebuild from ``to_payload()`` output (defaults and validation run again)."""
        known = {f.name for f in dataclasses.fields(cls)}
        for key, value in fields.items():
            if key not in known:
                raise InvalidServerArgsError.unknown_field(str(key), value, known)
        return cls(**fields)
