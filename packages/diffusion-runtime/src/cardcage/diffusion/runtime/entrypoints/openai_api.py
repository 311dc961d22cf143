"""OpenAI's images API as pydantic models: the request, the answers and the error shape.

``ImageGenerationRequest`` accepts every field of OpenAI's ``POST /v1/images/generations``
body (``prompt``, ``model``, ``n``, ``size`` including ``"auto"``, ``quality``, ``style``,
``background``, ``moderation``, ``output_format``, ``output_compression``, ``response_format``,
``stream``, ``partial_images``, ``user``) plus this server's sampling fields (``seed``,
``num_inference_steps``, ``guidance_scale``, ``negative_prompt``). Types are strict (``"2"`` is
not an ``n``); a value this server cannot honour (``background: "transparent"``, ``stream:
true``) is refused with a 400 naming the field, never silently ignored. Ranges are checked by
``SamplingParams`` itself (``to_sampling_params``), so the HTTP API and ``DiffGenerator`` accept
exactly the same values.

Every refusal is an ``ApiError`` carrying the HTTP status and OpenAI's error body
``{"error": {"message", "type", "param", "code"}}``; ``validation_error`` turns pydantic's
errors into one (the first error, by field).

``model_card`` is bound by ``http_server`` at import time on purpose: the HTTP child applies
plugin hooks before importing the server, so a hook on ``model_card`` reaches that binding
(the HTTP tests prove the order with one).

Import-safe for the HTTP child: pydantic and ``cardcage.diffusion.configs`` (no torch).
"""

from __future__ import annotations

import json
import re
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, ValidationError
from pydantic_core import PydanticCustomError

from cardcage.diffusion.configs.sampling_params import (
    MAX_IMAGES_PER_REQUEST,
    MAX_SEED,
    SamplingParams,
)
from cardcage.diffusion.errors import InvalidArgumentError

__all__ = [
    "DEFAULT_SIZE",
    "MAX_BODY_BYTES",
    "MAX_PROMPT_CHARS",
    "ApiError",
    "ErrorResponse",
    "ImageData",
    "ImageGenerationRequest",
    "ImagesResponse",
    "ModelCard",
    "ModelList",
    "error_body",
    "model_card",
    "parse_image_request",
    "parse_size",
    "sampling_error",
    "to_sampling_params",
    "validation_error",
]

MAX_BODY_BYTES = 1 << 20
"""Largest request body accepted (413 above it): a prompt is text, 1 MiB is plenty."""

MAX_PROMPT_CHARS = 4000
"""Longest prompt accepted (OpenAI's DALL-E 3 limit)."""

DEFAULT_SIZE = "64x64"
"""What ``size`` omitted or ``"auto"`` means: the built-in model's native size."""

# Exactly the sizes /openapi.json declares: no surrounding spaces, no leading zeros.
_SIZE = re.compile(r"([1-9][0-9]{0,4})x([1-9][0-9]{0,4})")
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
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = error_type
        self.param = param
        self.code = code
        self.headers = headers or {}

    def body(self) -> dict[str, Any]:
        return error_body(self.message, error_type=self.type, param=self.param, code=self.code)


def error_body(
    message: str, *, error_type: str, param: str | None = None, code: str | None = None
) -> dict[str, Any]:
    """OpenAI's error shape."""
    return {"error": {"message": message, "type": error_type, "param": param, "code": code}}


def _unicode_text(value: str) -> str:
    """Refuse lone surrogates: JSON can carry them (``"\\ud800"``), UTF-8 cannot."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        bad = value[exc.start : exc.end]
        raise ValueError(
            f"must be valid Unicode text; it holds a lone surrogate {bad!r} at index {exc.start}"
        ) from None
    return value


Text = Annotated[str, AfterValidator(_unicode_text)]


def _integral(value: object) -> object:
    """``2.0`` as ``2``: JSON has one number type, and JSON Schema (so ``/openapi.json``) calls
    ``2.0`` an integer; ``2.5`` stays a float, which a strict int refuses."""
    if type(value) is float and value.is_integer():
        return int(value)
    return value


def _exactly_bool(value: object) -> object:
    """``false`` only as a boolean: ``0 == False`` in Python, so a Literal would take ``0``."""
    if value is not None and type(value) is not bool:
        raise PydanticCustomError("bool_type", "Input should be a valid boolean")
    return value


def _exactly_int(value: object) -> object:
    """``0`` only as a number: ``False == 0`` in Python, so a Literal would take ``false``."""
    value = _integral(value)
    if value is not None and type(value) is not int:
        raise PydanticCustomError("int_type", "Input should be a valid integer")
    return value


Integer = Annotated[int, BeforeValidator(_integral)]


class ImageGenerationRequest(BaseModel):
    """The body of ``POST /v1/images/generations`` (OpenAI's fields, then this server's)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    prompt: Text = Field(description="The text to draw (required, non-empty).")
    model: Text | None = Field(None, description="Optional; must be the served model id.")
    n: Integer | None = Field(
        None, description=f"Images to generate, 1 to {MAX_IMAGES_PER_REQUEST} (default 1)."
    )
    size: Text | None = Field(
        None,
        description="'WIDTHxHEIGHT', each side a multiple of 8, or 'auto' "
        f"(default and 'auto': {DEFAULT_SIZE!r}).",
    )
    quality: Literal["standard", "hd", "low", "medium", "high", "auto"] | None = Field(
        None, description="Accepted for compatibility; the built-in model has one quality."
    )
    style: Literal["vivid", "natural"] | None = Field(
        None, description="Accepted for compatibility; it does not change the image."
    )
    background: Literal["opaque", "auto"] | None = Field(
        None, description="'opaque' or 'auto' (images are opaque RGB; 'transparent' is refused)."
    )
    moderation: Literal["low", "auto"] | None = Field(
        None, description="Accepted for compatibility; this server does no moderation."
    )
    output_format: Literal["png", "jpeg", "webp"] | None = Field(
        None, description="Image file format (default 'png')."
    )
    output_compression: Integer | None = Field(
        None, ge=0, le=100, description="0-100 quality for 'jpeg' and 'webp' (default 100)."
    )
    response_format: Literal["b64_json", "url"] | None = Field(
        None,
        description="'b64_json' (default): the image inline; 'url': a link to GET "
        "/v1/images/{id} on this server, valid for a limited time.",
    )
    stream: Annotated[Literal[False] | None, BeforeValidator(_exactly_bool)] = Field(
        None, description="Streaming is not supported."
    )
    partial_images: Annotated[Literal[0] | None, BeforeValidator(_exactly_int)] = Field(
        None, description="Only 0: partial images need streaming, which is not supported."
    )
    user: Text | None = Field(None, description="End-user id; accepted and logged nowhere.")
    seed: Integer | None = Field(
        None,
        description=(
            f"Integer from 0 to {MAX_SEED}; image i uses seed + i (default: the server's --seed)."
        ),
    )
    num_inference_steps: Integer | None = Field(
        None, description="Denoising steps (default: the model's)."
    )
    guidance_scale: float | None = Field(
        None, description="Classifier-free guidance scale >= 1 (default: the model's)."
    )
    negative_prompt: Text | None = Field(None, description="Text to steer away from.")


class ImageData(BaseModel):
    """One generated image: inline (``b64_json``) or a link (``url``)."""

    b64_json: str | None = None
    url: str | None = None
    image_id: str | None = Field(
        default=None,
        description="With response_format 'url': the id of GET /v1/images/{image_id}, the last "
        "segment of 'url' (a cardcage extension; OpenAI's client keeps extra fields).",
    )
    revised_prompt: str | None = None
    seed: int | None = Field(None, description="The seed of this image (a cardcage extension).")


class ImagesResponse(BaseModel):
    """The answer to a generation request."""

    created: int
    data: list[ImageData]
    background: Literal["opaque"] = "opaque"
    output_format: Literal["png", "jpeg", "webp"] = "png"
    size: str
    warning: str | None = Field(
        default=None,
        description="Present when the images are valid but not what the model does well: a "
        "size other than the one it was trained at (a cardcage extension; OpenAI's client "
        "keeps extra fields).",
    )


class ModelCard(BaseModel):
    """One entry of ``GET /v1/models`` (OpenAI's model object; a plugin hook on ``model_card``
    may add fields, which are served as they are)."""

    model_config = ConfigDict(extra="allow")

    id: str
    object: Literal["model"] = "model"
    created: int
    owned_by: str


class ModelList(BaseModel):
    object: Literal["list"] = "list"
    data: list[ModelCard]


class ErrorDetail(BaseModel):
    message: str
    type: str
    param: str | None
    code: str | None


class ErrorResponse(BaseModel):
    """OpenAI's error shape, as every error of this server is answered."""

    error: ErrorDetail


# -- parsing --------------------------------------------------------------------------------------


def _invalid(param: str | None, message: str, code: str = "invalid_value") -> ApiError:
    return ApiError(400, message, param=param, code=code)


def parse_size(value: str | None) -> tuple[int, int]:
    """``"WIDTHxHEIGHT"`` (or ``None`` / ``"auto"``) -> ``(width, height)``; ranges are
    ``SamplingParams``'s."""
    if value is None or value == "auto":
        value = DEFAULT_SIZE
    match = _SIZE.fullmatch(value)
    if match is None:
        raise _invalid(
            "size",
            f"'size' must look like {DEFAULT_SIZE!r} (WIDTHxHEIGHT) or be 'auto', got {value!r}.",
        )
    return int(match.group(1)), int(match.group(2))


def decode_json_object(body: bytes) -> dict[str, Any]:
    """The body as a JSON object; any failure (bad UTF-8, syntax, nesting too deep for the
    parser, an integer too long to convert) is a 400, never a dropped connection."""
    try:
        data = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ApiError(
            400, f"The request body is not valid JSON: {exc}.", code="invalid_json"
        ) from None
    except RecursionError:
        raise ApiError(
            400, "The request body is not valid JSON: it nests too deeply.", code="invalid_json"
        ) from None
    except ValueError as exc:  # e.g. an integer longer than sys.get_int_max_str_digits()
        raise ApiError(
            400, f"The request body could not be read as JSON: {exc}.", code="invalid_json"
        ) from None
    if not isinstance(data, dict):
        raise ApiError(
            400,
            f"The request body must be a JSON object, got a JSON {type(data).__name__}.",
            code="invalid_json",
        )
    return data


_TYPE_ERRORS = ("_type", "_parsing", "is_instance_of")


def validation_error(exc: ValidationError) -> ApiError:
    """Pydantic's first error as OpenAI's 400 naming the field."""
    error = exc.errors(include_url=False)[0]
    location = error.get("loc") or ()
    param = str(location[0]) if location else None
    kind = str(error.get("type", ""))
    given = error.get("input")
    if kind == "missing":
        return _invalid(param, f"'{param}' is required.", "missing_parameter")
    if kind == "extra_forbidden":
        known = ", ".join(ImageGenerationRequest.model_fields)
        return _invalid(
            param,
            f"Unknown parameter {param!r}. Supported parameters: {known}.",
            "unknown_parameter",
        )
    unsupported: dict[str, object] = {"background": "transparent", "stream": True}
    refused = unsupported.get(param or "", _MISSING)
    if param is not None and type(given) is type(refused) and given == refused:
        return _invalid(
            param,
            f"{param}={given!r} is not supported by this server: {_UNSUPPORTED_REASON[param]}",
            "unsupported_value",
        )
    if param == "partial_images" and type(given) is int:
        return _invalid(
            param, f"partial_images={given!r} is not supported: {_UNSUPPORTED_REASON['stream']}",
            "unsupported_value",
        )  # fmt: skip
    if kind.endswith(_TYPE_ERRORS) or (kind == "literal_error" and not isinstance(given, str)):
        return _invalid(
            param,
            f"'{param}' must be {_expected(param, error)}, got {type(given).__name__} {given!r}.",
            "invalid_type",
        )
    return _invalid(param, f"'{param}' {error.get('msg', 'is invalid')}; got {given!r}.")


_MISSING = object()
_UNSUPPORTED_REASON = {
    "background": "images are opaque RGB. Use 'opaque' or 'auto'.",
    "stream": "images come back whole in one answer. Omit it or pass false.",
}


def _expected(param: str | None, error: Any) -> str:
    kind = str(error.get("type", ""))
    if kind.startswith("int"):
        return "an integer"
    if kind.startswith("float"):
        return "a number"
    if kind.startswith("string"):
        return "a string"
    if kind.startswith("bool") or param == "stream":
        return "a boolean"
    return str(error.get("msg", "of another type")).lower()


def parse_image_request(body: bytes, *, model_id: str) -> ImageGenerationRequest:
    """Validate a generation body; ``ApiError`` (400, or 404 for another model) names the
    first bad field."""
    data = decode_json_object(body)
    try:
        request = ImageGenerationRequest.model_validate(data)
    except ValidationError as exc:
        raise validation_error(exc) from None
    if not request.prompt.strip():
        raise _invalid("prompt", "'prompt' must not be empty.")
    if len(request.prompt) > MAX_PROMPT_CHARS:
        raise _invalid(
            "prompt",
            f"'prompt' is {len(request.prompt)} characters long; the limit is {MAX_PROMPT_CHARS}.",
        )
    if request.model is not None and request.model != model_id:
        raise ApiError(
            404,
            f"The model {request.model!r} is not served here; this server serves {model_id!r} "
            "(omit 'model' or pass that id).",
            param="model",
            code="model_not_found",
        )
    return request


def to_sampling_params(request: ImageGenerationRequest) -> SamplingParams:
    """The request's ``SamplingParams``; a value out of range is a 400 naming the field."""
    width, height = parse_size(request.size)
    fields: dict[str, Any] = {"num_images": 1 if request.n is None else request.n}
    fields.update(width=width, height=height)
    for name in ("seed", "num_inference_steps", "guidance_scale", "negative_prompt"):
        value = getattr(request, name)
        if value is not None:
            fields[name] = value
    try:
        return SamplingParams(**fields)
    except InvalidArgumentError as exc:
        raise sampling_error(exc, width=width, height=height) from None


def sampling_error(exc: InvalidArgumentError, *, width: int, height: int) -> ApiError:
    """A ``SamplingParams`` (or pipeline) rejection in the request's words (400)."""
    param = _PARAM_OF_FIELD.get(exc.field, exc.field)
    if param == "size":
        return _invalid(
            "size",
            f"size {width}x{height} is not valid: {exc.field} must be {exc.expected}.",
        )
    return _invalid(param, f"'{param}' must be {exc.expected}, got {exc.value!r}.")


def model_card(model_id: str, *, created: int) -> dict[str, Any]:
    """One entry of ``GET /v1/models`` (OpenAI's model object)."""
    return {"id": model_id, "object": "model", "created": created, "owned_by": "cardcage"}
