"""``/openapi.json`` says what ``cardcage-diffusion serve`` accepts, and schemathesis agrees.

A client generator or a property-based tester trusts the document: a request it declares valid
must be served, one it declares invalid must be refused, every answer must be one it declares,
and its links must lead to ids that exist. The first tests check the pieces in process (the
declared sizes and prompts against the parser's own verdicts, the links' targets); the last runs
schemathesis's CLI, every check, against a real server with a real spawned worker over loopback,
with the limits set low so that each generated generation is cheap.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_http_server import Server, error_of, run_server

from cardcage.diffusion.configs.sampling_params import SamplingParams
from cardcage.diffusion.errors import InvalidArgumentError
from cardcage.diffusion.runtime.entrypoints.limits import ServeLimits
from cardcage.diffusion.runtime.entrypoints.openai_api import ApiError, parse_size
from cardcage.diffusion.runtime.entrypoints.openapi import (
    NOT_ONLY_WHITESPACE,
    request_schema,
    size_schema,
)

MODEL = "cardcage/tiny-dit"
# The schemathesis server: sizes up to 32x32 (so `size` is required: "auto" is 64x64), the
# model's 8 default steps at most, and a pixel-steps bound no request within those reaches
# (1024 pixels x 8 steps x 16 images), so every request the document calls valid is served.
LIMITS = ("--max-pixels", "1024", "--max-steps", "8", "--max-pixel-steps", "131072")
SCHEMATHESIS_TIMEOUT = 600.0
"""A bound on the whole run, so a hang fails the test instead of stalling CI."""


def _accepted_size(size: str, limits: ServeLimits) -> bool:
    """The server's own verdict on ``size`` (the parser, ``SamplingParams``, the limits)."""
    try:
        width, height = parse_size(size)
        limits.check(SamplingParams(width=width, height=height), default_steps=None)
    except (ApiError, InvalidArgumentError):
        return False
    return True


@given(
    st.integers(1, 8192),
    st.integers(1, 1100).map(str) | st.sampled_from(["0", "08", " 8", "8 "]),
    st.integers(1, 1100).map(str),
)
def test_the_declared_sizes_are_exactly_the_ones_the_server_accepts(
    max_pixels: int, width: str, height: str
) -> None:
    limits = ServeLimits(max_pixels=max_pixels)
    size = f"{width}x{height}"
    declared = jsonschema.Draft202012Validator(size_schema(max_pixels)).is_valid(size)
    assert declared == _accepted_size(size, limits), size
    assert jsonschema.Draft202012Validator(size_schema(max_pixels)).is_valid("auto") == (
        _accepted_size("auto", limits)
    )


def test_a_large_pixel_limit_is_declared_as_a_pattern_bounding_each_side() -> None:
    schema = size_schema(ServeLimits().max_pixels)  # the default, 1024 x 1024: ~70,000 sizes
    valid = jsonschema.Draft202012Validator(schema).is_valid
    assert "enum" not in schema
    assert "--max-pixels" in schema["description"]
    assert all(valid(f"{side}x8") and valid(f"8x{side}") for side in range(8, 4097, 8))
    assert not any(valid(text) for text in ("4104x8", "12x8", "064x64", " 64x64", "64x64 "))
    assert valid("auto")


def test_the_prompt_pattern_refuses_exactly_what_strip_empties() -> None:
    holds_text = re.compile(NOT_ONLY_WHITESPACE)
    disagree = [
        hex(code)
        for code in range(sys.maxunicode + 1)
        if (holds_text.search(chr(code)) is None) != (chr(code).strip() == "")
    ]
    assert disagree == []


def test_the_body_schema_declares_the_configured_limits() -> None:
    small = request_schema(MODEL, ServeLimits(max_pixels=1024, max_steps=8))
    properties = small["properties"]
    assert "size" in small["required"]  # "auto" (64x64) and an omitted size do not fit
    assert properties["num_inference_steps"]["anyOf"][0]["maximum"] == 8
    assert properties["model"]["anyOf"][0]["enum"] == [MODEL]
    assert "--max-pixel-steps" in small["description"]
    default = request_schema(MODEL, ServeLimits())
    assert default["required"] == ["prompt"]
    assert default["properties"]["num_inference_steps"]["anyOf"][0]["maximum"] == 100
    validator = jsonschema.Draft202012Validator(default)
    assert not validator.is_valid({"prompt": ""})
    assert not validator.is_valid({"prompt": " \t"})
    assert not validator.is_valid({"prompt": "a", "seed": 2**62})
    assert validator.is_valid({"prompt": "a", "seed": 2**62 - 1, "size": "auto"})
    assert not validator.is_valid({"prompt": "a", "output_compression": -1})
    assert not validator.is_valid({"prompt": "a", "output_compression": 101})


def _keys(value: Any) -> Iterator[str]:
    if isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from _keys(item)
    elif isinstance(value, list):
        for item in value:
            yield from _keys(item)


def test_the_document_uses_json_schema_keywords_not_pydantic_names() -> None:
    """pydantic writes a bound it cannot place as ``ge``/``le``, which JSON Schema ignores (a
    stateful schemathesis run sent ``output_compression: -351`` as valid data)."""
    assert {"ge", "le", "gt", "lt"}.isdisjoint(_keys(_document()["paths"]))


def _document() -> dict[str, Any]:
    from cardcage.diffusion.runtime.entrypoints.http_server import create_app
    from cardcage.diffusion.runtime.server_args import ServerArgs

    app = create_app(ServerArgs(model_path=MODEL), bridge=None)  # type: ignore[arg-type]
    try:
        return app.openapi()
    finally:
        app.state.bridge_pool.shutdown()


def test_every_link_names_an_operation_and_its_parameter() -> None:
    document = _document()
    operations = {
        op["operationId"]: op for item in document["paths"].values() for op in item.values()
    }
    assert len(operations) == sum(len(item) for item in document["paths"].values())
    followed = set()
    for operation in operations.values():
        for response in operation["responses"].values():
            for link in response.get("links", {}).values():
                target = operations[link["operationId"]]
                names = {parameter["name"] for parameter in target.get("parameters", ())}
                assert set(link["parameters"]) <= names
                followed.add(link["operationId"])
    assert followed == {"get_image", "get_model"}


# -- against a running server ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def small_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One worker with one torch thread: on a loaded CI machine, torch's default of a thread
    per core made each 8x8 image take seconds (threads waiting on each other) instead of a
    fraction of one."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("OMP_NUM_THREADS", "1")
        with run_server(tmp_path_factory.mktemp("openapi"), *LIMITS) as running:
            yield running


def test_options_on_the_generation_path_is_405_allowing_post(small_server: Server) -> None:
    reply = small_server.request("OPTIONS", "/v1/images/generations")
    assert reply.status == 405
    assert reply.headers["allow"] == "POST"
    assert "use POST" in error_of(reply)["message"]


def test_a_request_the_document_calls_invalid_is_refused_and_a_valid_one_served(
    small_server: Server,
) -> None:
    document = small_server.request("GET", "/openapi.json").json()
    post = document["paths"]["/v1/images/generations"]["post"]
    validator = jsonschema.Draft202012Validator(
        post["requestBody"]["content"]["application/json"]["schema"]
    )
    for body in ({"prompt": ""}, {"prompt": "a", "size": "64x64"}, {"prompt": "a"}):
        assert not validator.is_valid(body)
        assert small_server.generate(body).status == 400, body
    body = {"prompt": "a", "size": "32x32", "n": 16, "response_format": "url"}
    assert validator.is_valid(body)  # the largest request within the limits
    reply = small_server.generate(body)
    assert reply.status == 200, reply.body
    first = reply.json()["data"][0]
    assert first["url"].endswith(f"/v1/images/{first['image_id']}")
    assert small_server.request("GET", f"/v1/images/{first['image_id']}").status == 200


def _schemathesis(
    small_server: Server, workdir: Path
) -> tuple[subprocess.CompletedProcess[str], float]:
    har = workdir / "requests.har"
    command = [
        sys.executable, "-m", "schemathesis.cli", "run", f"{small_server.url}/openapi.json",
        "--checks", "all", "--max-examples", "10", "--generation-deterministic",
        "--workers", "1", "--request-timeout", "120", "--no-color",
        "--report", "har", "--report-har-path", str(har),
    ]  # fmt: skip
    started = time.monotonic()
    # In its own directory: schemathesis reads a schemathesis.toml from where it runs.
    finished = subprocess.run(
        command, cwd=workdir, capture_output=True, text=True, timeout=SCHEMATHESIS_TIMEOUT,
        check=False,
    )  # fmt: skip
    return finished, time.monotonic() - started


def test_schemathesis_finds_no_failure_with_every_check(
    small_server: Server, tmp_path: Path
) -> None:
    finished, elapsed = _schemathesis(small_server, tmp_path)
    output = finished.stdout + finished.stderr
    print(f"schemathesis ran for {elapsed:.1f} s", output[-3000:], sep="\n")
    assert finished.returncode == 0, output[-8000:]
    cases = re.search(r"(\d+) generated, \1 passed", output)
    assert cases is not None, output[-3000:]
    assert int(cases.group(1)) > 100
    links = re.search(r"API Links: +(\d+) covered / (\d+) selected", output)
    assert links is not None, output[-3000:]
    assert links.group(1) == links.group(2)  # the stateful phase followed every link
    entries = json.loads((tmp_path / "requests.har").read_text())["log"]["entries"]
    reached = {
        (entry["request"]["method"], re.sub(r"/img_[\w-]+$", "/{image_id}", path), status)
        for entry in entries
        if (status := entry["response"]["status"]) == 200
        and (path := entry["request"]["url"].split(small_server.url, 1)[-1])
    }
    # The links led to ids that exist: an image answered by URL, and the served model.
    assert ("GET", "/v1/images/{image_id}", 200) in reached
    assert {
        ("GET", f"/v1/models/{MODEL}", 200),
        ("GET", "/v1/models/cardcage%2Ftiny-dit", 200),
    } & reached
