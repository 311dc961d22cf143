"""The OpenAI-style images API: request parsing, validation and the JSON shapes of answers.

Pure functions over bytes and dicts (no sockets, no workers), used by the HTTP child. A bad
request raises ``ApiError`` carrying the HTTP status and an OpenAI-shaped error body
(``{"error": {"message", "type", "param", "code"}}``) whose message names the field, what it
held and what is accepted. Sampling fields are checked with ``SamplingParams`` itself, so the
HTTP API and ``DiffGenerator`` accept exactly the same values.

``model_card`` is bound by ``http_server`` at import time on purpose: the HTTP child applies
plugin hooks before importing the server, so a hook on ``model_card`` reaches that binding
(the HTTP tests prove the order with one).

Import-safe for the HTTP child: stdlib and ``cardcage.diffusion.configs`` (no torch).
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from typing import Any

from cardcage.diffusion.configs.sampling_params import MAX_IMAGES_PER_REQUEST, SamplingParams
from cardcage.diffusion.errors import InvalidArgumentError

__all__ = [
    "MAX_BODY_BYTES",
    "MAX_PROMPT_CHARS",
    "REQUEST_FIELDS",
    "ApiError",
    "ImageRequest",
    "error_body",
    "images_response",
    "model_card",
    "parse_image_request",
    "parse_size",
    "sampling_error",
]

MAX_BODY_BYTES = 1 << 20
"""Largest request body accepted (413 above it): a prompt is text, 1 MiB is plenty."""

MAX_PROMPT_CHARS = 4000
"""Longest prompt accepted (OpenAI's DALL-E 3 limit)."""

DEFAULT_SIZE = "64x64"

REQUEST_FIELDS: dict[str, str] = {
    "prompt": "the text to draw (required, non-empty)",
    "model": "optional; must be the served model id",
    "n": f"images to generate, 1 to {MAX_IMAGES_PER_REQUEST} (default 1)",
    "size": f"'WIDTHxHEIGHT', each side a multiple of 8 (default {DEFAULT_SIZE!r})",
    "response_format": "'b64_json' (the default and the only format served)",
    "user": "optional end-user id; accepted and ignored",
    "seed": "integer >= 0; image i uses seed + i (default: the server's --seed)",
    "num_inference_steps": "denoising steps (default: the model's)",
    "guidance_scale": "classifier-free guidance scale >= 1 (default: the model's)",
    "negative_prompt": "text to steer away from",
}
"""Every body field the server accepts, with what it means (also the docs' table)."""

_SIZE = re.compile(r"([0-9]{1,5})x([0-9]{1,5})")
_SAMPLING_FIELDS = ("seed", "num_inference_steps", "guidance_scale", "negative_prompt")
# SamplingParams field -> the request field a client wrote.
_PARAM_OF_FIELD = {"num_images": "n", "height": "size", "width": "size"}


class ApiError(Exception):
    """A request the server answers with an HTTP error (``status``) and an OpenAI error body."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        error_type: str = "invalid_request_error",
        param: str | None = None,
        code: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = error_type
        self.param = param
        self.code = code

    def body(self) -> dict[str, Any]:
        return error_body(self.message, error_type=self.type, param=self.param, code=self.code)


def error_body(
    message: str, *, error_type: str, param: str | None = None, code: str | None = None
) -> dict[str, Any]:
    """OpenAI's error shape."""
    return {"error": {"message": message, "type": error_type, "param": param, "code": code}}


@dataclass(frozen=True, slots=True)
class ImageRequest:
    """A validated ``POST /v1/images/generations`` body."""

    prompt: str
    params: SamplingParams
    response_format: str = "b64_json"

    @property
    def size(self) -> str:
        return f"{self.params.width}x{self.params.height}"


def _invalid(param: str, message: str, code: str = "invalid_value") -> ApiError:
    return ApiError(400, message, param=param, code=code)


def parse_size(value: object) -> tuple[int, int]:
    """``"WIDTHxHEIGHT"`` -> ``(width, height)``; range checks are ``SamplingParams``'s."""
    if not isinstance(value, str):
        raise _invalid(
            "size",
            f"'size' must be a string like {DEFAULT_SIZE!r} (WIDTHxHEIGHT), got {value!r}.",
            "invalid_type",
        )
    match = _SIZE.fullmatch(value.strip())
    if match is None:
        raise _invalid(
            "size", f"'size' must look like {DEFAULT_SIZE!r} (WIDTHxHEIGHT), got {value!r}."
        )
    return int(match.group(1)), int(match.group(2))


def _decode(body: bytes) -> dict[str, Any]:
    try:
        data = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ApiError(
            400, f"The request body is not valid JSON: {exc}.", code="invalid_json"
        ) from None
    if not isinstance(data, dict):
        raise ApiError(
            400,
            f"The request body must be a JSON object, got a JSON {type(data).__name__}.",
            code="invalid_json",
        )
    return data


def _expect_str(data: dict[str, Any], name: str) -> str | None:
    value = data.get(name)
    if value is None:
        return None
    if not isinstance(value, str):
        raise _invalid(
            name, f"'{name}' must be a string, got {type(value).__name__} {value!r}.",
            "invalid_type",
        )  # fmt: skip
    return value


def parse_image_request(body: bytes, *, model_id: str) -> ImageRequest:
    """Validate a generation body; ``ApiError`` (400) names the first bad field."""
    data = _decode(body)
    unknown = sorted(set(data) - set(REQUEST_FIELDS))
    if unknown:
        raise _invalid(
            unknown[0],
            f"Unknown parameter {unknown[0]!r}. Supported parameters: "
            + ", ".join(REQUEST_FIELDS)
            + ".",
            "unknown_parameter",
        )
    prompt = _expect_str(data, "prompt")
    if prompt is None:
        raise _invalid("prompt", "'prompt' is required.", "missing_parameter")
    if not prompt.strip():
        raise _invalid("prompt", "'prompt' must not be empty.")
    if len(prompt) > MAX_PROMPT_CHARS:
        raise _invalid(
            "prompt",
            f"'prompt' is {len(prompt)} characters long; the limit is {MAX_PROMPT_CHARS}.",
        )
    model = _expect_str(data, "model")
    if model is not None and model != model_id:
        raise ApiError(
            404,
            f"The model {model!r} is not served here; this server serves {model_id!r} "
            "(omit 'model' or pass that id).",
            param="model",
            code="model_not_found",
        )
    response_format = _expect_str(data, "response_format") or "b64_json"
    if response_format == "url":
        raise _invalid(
            "response_format",
            "response_format 'url' is not supported: this server keeps no image store to link "
            "to. Use 'b64_json' (the default); the image comes back inline as base64 PNG.",
            "unsupported_value",
        )
    if response_format != "b64_json":
        raise _invalid(
            "response_format",
            f"response_format must be 'b64_json', got {response_format!r}.",
        )
    _expect_str(data, "user")
    width, height = parse_size(data.get("size", DEFAULT_SIZE))
    n = data.get("n", 1)
    fields: dict[str, Any] = {"num_images": n, "width": width, "height": height}
    fields.update({name: data[name] for name in _SAMPLING_FIELDS if data.get(name) is not None})
    try:
        params = SamplingParams(**fields)
    except InvalidArgumentError as exc:
        raise sampling_error(exc, width=width, height=height) from None
    return ImageRequest(prompt=prompt, params=params, response_format=response_format)


def sampling_error(exc: InvalidArgumentError, *, width: int, height: int) -> ApiError:
    """A ``SamplingParams`` (or pipeline) rejection in the request's words (400)."""
    param = _PARAM_OF_FIELD.get(exc.field, exc.field)
    if param == "size":
        return _invalid(
            "size",
            f"size {width}x{height} is not valid: {exc.field} must be {exc.expected}.",
        )
    code = "invalid_type" if _wrong_type(exc.value, exc.expected) else "invalid_value"
    return _invalid(param, f"'{param}' must be {exc.expected}, got {exc.value!r}.", code)


def _wrong_type(value: object, expected: str) -> bool:
    if isinstance(value, bool) or value is None:
        return True
    if expected.startswith("an int"):
        return not isinstance(value, int)
    if expected.startswith("a finite number"):
        return not isinstance(value, int | float)
    if expected.startswith("a str"):
        return not isinstance(value, str)
    return False


def images_response(images: list[dict[str, Any]], *, size: str) -> dict[str, Any]:
    """The success body: ``created`` plus one ``{"b64_json": ...}`` item per image."""
    data = []
    for image in images:
        item: dict[str, Any] = {"b64_json": image["b64_json"]}
        if image.get("seed") is not None:
            item["seed"] = image["seed"]
        data.append(item)
    return {"created": int(time.time()), "data": data, "output_format": "png", "size": size}


def model_card(model_id: str, *, created: int) -> dict[str, Any]:
    """One entry of ``GET /v1/models`` (OpenAI's model object)."""
    return {"id": model_id, "object": "model", "created": created, "owned_by": "cardcage"}
