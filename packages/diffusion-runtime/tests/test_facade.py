"""The ``cardcage.diffusion`` facade and the argument objects it serves.

Import-cost claims are checked in fresh interpreters (``sys.modules`` of this test process is
full of runtime modules already).
"""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
import textwrap
from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

import cardcage.diffusion as facade
from cardcage.diffusion import DiffGenerator, PipelineConfig, SamplingParams, ServerArgs
from cardcage.diffusion.configs.sampling_params import MAX_SEED
from cardcage.diffusion.errors import (
    InvalidArgumentError,
    InvalidPipelineConfigError,
    InvalidSamplingParamsError,
    InvalidServerArgsError,
)
from cardcage.diffusion.runtime.managers import diffusion_generator
from cardcage.diffusion.runtime.platforms.cpu import CpuPlatform
from cardcage.diffusion.runtime.platforms.testing import set_current_platform


def _fresh(code: str) -> dict[str, object]:
    """Run ``code`` in a new interpreter; it prints one JSON object."""
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    data: dict[str, object] = json.loads(result.stdout)
    return data


def test_binding_diffgenerator_at_module_scope_imports_no_runtime_module() -> None:
    seen = _fresh(
        """
        import json, sys
        from cardcage.diffusion import DiffGenerator
        print(json.dumps({
            "diffusion": sorted(m for m in sys.modules if m.startswith("cardcage.diffusion")),
            "heavy": sorted(m for m in ("torch", "numpy", "zmq") if m in sys.modules),
            "repr": repr(DiffGenerator),
        }))
        """
    )
    assert seen["diffusion"] == ["cardcage.diffusion"]
    assert seen["heavy"] == []
    assert "not imported yet" in str(seen["repr"])


def test_other_names_load_only_what_they_need_on_first_access() -> None:
    seen = _fresh(
        """
        import json, sys
        import cardcage.diffusion as facade
        before = "cardcage.diffusion.configs.sampling_params" in sys.modules
        facade.SamplingParams
        print(json.dumps({
            "before": before,
            "after": sorted(m for m in sys.modules if m.startswith("cardcage.diffusion.")),
        }))
        """
    )
    assert seen["before"] is False
    assert seen["after"] == [
        "cardcage.diffusion.configs",
        "cardcage.diffusion.configs._validate",
        "cardcage.diffusion.configs.sampling_params",
        "cardcage.diffusion.errors",
    ]


def test_the_proxy_stands_for_the_class() -> None:
    real = diffusion_generator.DiffGenerator
    assert DiffGenerator.from_pretrained == real.from_pretrained
    instance = real.__new__(real)
    assert isinstance(instance, DiffGenerator)
    assert issubclass(real, DiffGenerator)

    class Custom(DiffGenerator):  # type: ignore[misc,valid-type]
        pass

    assert Custom.__mro__[1] is real
    assert pickle.loads(pickle.dumps(DiffGenerator)) is DiffGenerator


def test_unknown_names_raise_attribute_error() -> None:
    with pytest.raises(AttributeError, match="has no attribute 'Pipeline'"):
        facade.Pipeline
    assert {"DiffGenerator", "PipelineConfig", "SamplingParams", "ServerArgs"} <= set(dir(facade))


# -- ServerArgs -----------------------------------------------------------------------------------


class _VendorDefaults(CpuPlatform):
    def apply_server_args_defaults(self, server_args: object) -> None:
        assert isinstance(server_args, ServerArgs)
        if server_args.master_port is None:
            server_args.master_port = 24242
        server_args.log_level = server_args.log_level.upper()  # normalized afterwards


def test_server_args_apply_the_platform_defaults_before_validation() -> None:
    set_current_platform(_VendorDefaults())
    args = ServerArgs(model_path="tiny")
    assert args.master_port == 24242
    assert args.log_level == "info"
    assert args.dit_layerwise_offload is False  # the CPU platform's default
    assert ServerArgs(model_path="tiny", master_port=1234).master_port == 1234


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("model_path", " "),
        ("num_gpus", 0),
        ("num_gpus", True),
        ("port", 70000),
        ("seed", -1),
        ("log_level", "loud"),
        ("worker_start_timeout", 0),
        ("pipeline_config", {"dtype": "float8"}),
    ],
)
def test_server_args_reject_bad_values_naming_the_field(field: str, value: object) -> None:
    set_current_platform(CpuPlatform())
    kwargs: dict[str, object] = {"model_path": "tiny", field: value}
    with pytest.raises((InvalidServerArgsError, InvalidPipelineConfigError)) as info:
        ServerArgs(**kwargs)  # type: ignore[arg-type]
    assert isinstance(info.value, ValueError)
    assert info.value.field in (field, "dtype")


def test_server_args_payload_names_an_unknown_field() -> None:
    set_current_platform(CpuPlatform())
    fields = ServerArgs(model_path="tiny").to_payload()
    assert ServerArgs.from_payload(fields) == ServerArgs(model_path="tiny")
    with pytest.raises(InvalidServerArgsError, match="has no field 'gpus'"):
        ServerArgs.from_payload({**fields, "gpus": 2})


# -- SamplingParams and PipelineConfig ----------------------------------------------------------


@given(
    steps=st.none() | st.integers(1, 1000),
    guidance=st.none() | st.floats(1, 50),
    height=st.integers(1, 512).map(lambda n: n * 8),
    seed=st.none() | st.integers(0, 2**62 - 1),
    images=st.integers(1, 16),
)
def test_sampling_params_accept_every_valid_combination(
    steps: int | None, guidance: float | None, height: int, seed: int | None, images: int
) -> None:
    params = SamplingParams(
        num_inference_steps=steps,
        guidance_scale=guidance,
        height=height,
        width=64,
        seed=seed,
        num_images=images,
    )
    assert SamplingParams.from_dict(params.to_dict()) == params


@given(
    seed=st.integers(-3, 3)
    | st.integers(MAX_SEED - 3, MAX_SEED + 3)
    | st.integers(2**63 - 3, 2**63 + 3)
    | st.integers(-(2**70), 2**70)
)
def test_the_server_default_seed_accepts_exactly_the_seeds_requests_accept(seed: int) -> None:
    # ServerArgs.seed is the default of every request that passes none: a value it accepts
    # that SamplingParams rejects would make each such request fail.
    set_current_platform(CpuPlatform())

    def accepted(build: Callable[[], object]) -> bool:
        try:
            build()
        except InvalidArgumentError:
            return False
        return True

    as_default = accepted(lambda: ServerArgs(model_path="tiny", seed=seed))
    assert as_default == accepted(lambda: SamplingParams(seed=seed))
    assert as_default == (0 <= seed <= MAX_SEED)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("num_inference_steps", 0),
        ("num_inference_steps", 2.5),
        ("guidance_scale", float("nan")),
        ("guidance_scale", 0.5),
        ("height", 60),
        ("width", 8192),
        ("seed", -3),
        ("seed", 2**62),
        ("num_images", 17),
        ("negative_prompt", 3),
    ],
)
def test_sampling_params_reject_bad_values_naming_the_field(field: str, value: object) -> None:
    with pytest.raises(InvalidSamplingParamsError) as info:
        SamplingParams(**{field: value})  # type: ignore[arg-type]
    assert info.value.field == field
    assert f"SamplingParams.{field}=" in str(info.value)


def test_sampling_params_from_dict_refuses_unknown_keys() -> None:
    with pytest.raises(InvalidSamplingParamsError, match="num_steps"):
        SamplingParams.from_dict({"num_steps": 4})


def test_pipeline_config_validates_its_fields() -> None:
    assert PipelineConfig(dtype="bfloat16", flow_shift=3).flow_shift == 3.0
    with pytest.raises(InvalidPipelineConfigError, match="flow_shift"):
        PipelineConfig(flow_shift=0)
    with pytest.raises(InvalidPipelineConfigError, match="enable_torch_compile"):
        PipelineConfig(enable_torch_compile="yes")  # type: ignore[arg-type]
