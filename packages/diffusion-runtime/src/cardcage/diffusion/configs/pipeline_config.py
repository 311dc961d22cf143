"""``PipelineConfig``: how the pipeline is built (precision, compilation, scheduler shift).

Per server, not per request: it travels inside ``ServerArgs`` to every worker. Validated on
construction with ``InvalidPipelineConfigError`` (a ``ValueError``) naming the field.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from cardcage.diffusion.errors import InvalidPipelineConfigError

from ._validate import check_choice, check_float

__all__ = ["DTYPES", "PipelineConfig"]

DTYPES = ("float32", "bfloat16", "float16")


@dataclass(frozen=True, slots=True)
class PipelineConfig:
    """Model-independent pipeline settings; ``flow_shift=None`` keeps the model's own value."""

    dtype: str = "float32"
    enable_torch_compile: bool = False
    flow_shift: float | None = None

    def __post_init__(self) -> None:
        err = InvalidPipelineConfigError
        check_choice(err, "dtype", self.dtype, DTYPES)
        if not isinstance(self.enable_torch_compile, bool):
            raise err("enable_torch_compile", self.enable_torch_compile, "True or False")
        if self.flow_shift is not None:
            value = check_float(err, "flow_shift", self.flow_shift, low=0.0, low_inclusive=False)
            object.__setattr__(self, "flow_shift", value)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PipelineConfig:
        known = {f.name for f in dataclasses.fields(cls)}
        for key, value in data.items():
            if key not in known:
                raise InvalidPipelineConfigError.unknown_field(str(key), value, known)
        return cls(**data)
