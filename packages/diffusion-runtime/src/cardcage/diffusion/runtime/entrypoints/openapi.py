"""What ``/openapi.json`` declares: every constraint the images API enforces, and its links.

A client generator (or a property-based tester such as schemathesis) reads the OpenAPI document
to learn what a valid request is. So the document must declare what the server checks, no
looser and no stricter, or valid-looking requests are refused (or invalid ones accepted):

* ``request_schema(model_id, limits)``: the body of ``POST /v1/images/generations``, from
  ``ImageGenerationRequest``'s pydantic schema plus the checks the parser and ``SamplingParams``
  make (prompt length and non-blank text, ``n``, ``seed``, ``guidance_scale`` and step ranges),
  the served model id, and this server's configured limits: ``--max-steps`` as the steps'
  maximum and ``--max-pixels`` as the set of sizes (an ``enum`` of every ``WIDTHxHEIGHT`` when
  there are at most ``MAX_SIZE_ENUM``; beyond that a pattern bounding each side, with the pixel
  bound in the description). What JSON Schema cannot express, the ``--max-pixel-steps`` product
  of size, steps and ``n``, is stated in the descriptions and in the 413 response.
* ``GENERATION_LINKS`` and ``MODEL_LIST_LINKS``: OpenAPI links from a generation answered with
  ``response_format: "url"`` to ``GET /v1/images/{image_id}`` (through the answer's
  ``image_id`` field) and from ``GET /v1/models`` to ``GET /v1/models/{wanted}``, so a tool
  that follows links reaches both with ids that exist.

What the served model itself refuses (the built-in model's largest side is 2048; with N
sequence-parallel workers an image's token count must divide by N) is known only to the
workers, so it is described, not declared.

Import-safe for the HTTP child: stdlib and ``openai_api`` (pydantic; no torch).
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from cardcage.diffusion.configs.sampling_params import (
    MAX_IMAGE_SIDE,
    MAX_IMAGES_PER_REQUEST,
    MAX_SEED,
)

from .openai_api import DEFAULT_SIZE, MAX_PROMPT_CHARS, ImageGenerationRequest

if TYPE_CHECKING:
    from .limits import ServeLimits

__all__ = [
    "GENERATION_LINKS",
    "HealthReport",
    "IMAGE_ID_PATTERN",
    "MAX_SIZE_ENUM",
    "MODEL_LIST_LINKS",
    "NOT_ONLY_WHITESPACE",
    "OPERATION_IDS",
    "generation_responses",
    "request_schema",
    "size_schema",
]

SIDE_MULTIPLE = 8
"""Image sides are whole latent cells (``SamplingParams``'s rule)."""
MAX_STEPS = 1000
"""``SamplingParams``'s own bound on ``num_inference_steps``."""
MAX_SIZE_ENUM = 1024
"""Most sizes listed one by one; a larger ``--max-pixels`` is declared as a pattern instead
(the default, 1024 x 1024, allows about 70,000 sizes)."""

NOT_ONLY_WHITESPACE = r"[^\t-\r\x1c- \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]"
"""A character that ``str.strip()`` keeps: the prompt must hold one. Spelled as the exact set
Python calls whitespace rather than ``\\S``, whose meaning differs between regex dialects (the
schema's ECMA-262 one keeps U+001C..U+001F, which Python strips)."""

IMAGE_ID_PATTERN = "img_[A-Za-z0-9_-]+"
"""What ``ImageStore`` ids look like (``img_`` and URL-safe base64); the route matches only
these, so ``/v1/images/generations`` is never taken for an image id."""

OPERATION_IDS = {
    "generate": "create_image",
    "image": "get_image",
    "models": "list_models",
    "model": "get_model",
    "health": "health",
}
"""Stable operationIds: the links below name them."""

GENERATION_LINKS: dict[str, Any] = {
    "GetImage": {
        "operationId": OPERATION_IDS["image"],
        "parameters": {"image_id": "$response.body#/data/0/image_id"},
        "description": 'The first image of an answer to `response_format: "url"`; its '
        "`image_id` is the last segment of its `url`. Kept for a limited time.",
    }
}
MODEL_LIST_LINKS: dict[str, Any] = {
    "GetModel": {
        "operationId": OPERATION_IDS["model"],
        "parameters": {"wanted": "$response.body#/data/0/id"},
        "description": "The served model, by the id the list gives.",
    }
}


def _sides(largest: int) -> list[int]:
    return list(range(SIDE_MULTIPLE, largest + 1, SIDE_MULTIPLE))


def _largest_side(max_pixels: int) -> int:
    """The longest side any allowed image can have (the other side at its minimum, 8)."""
    longest = max_pixels // SIDE_MULTIPLE // SIDE_MULTIPLE * SIDE_MULTIPLE
    return min(MAX_IMAGE_SIDE, longest)


def _default_size_fits(max_pixels: int) -> bool:
    width, height = (int(side) for side in DEFAULT_SIZE.split("x"))
    return width * height <= max_pixels


def size_schema(max_pixels: int) -> dict[str, Any]:
    """The string ``size`` may be under ``--max-pixels`` (``"auto"`` only where 64x64 fits)."""
    sides = _sides(_largest_side(max_pixels))
    auto = ["auto"] if _default_size_fits(max_pixels) else []
    count = sum(min(len(sides), max_pixels // width // SIDE_MULTIPLE) for width in sides)
    if count <= MAX_SIZE_ENUM:
        sizes = [f"{w}x{h}" for w in sides for h in sides if w * h <= max_pixels]
        if not auto and not sizes:
            return {"not": {}, "description": "No size fits this server's --max-pixels."}
        return {"type": "string", "enum": auto + sizes}
    side = "(?:" + "|".join(str(value) for value in sides) + ")"
    choices = "|".join([*auto, f"{side}x{side}"])
    return {
        "type": "string",
        "pattern": f"^(?:{choices})$",
        "description": f"Each side a multiple of {SIDE_MULTIPLE} up to {sides[-1]}, and width "
        f"x height at most {max_pixels} (serve --max-pixels; 400 beyond it).",
    }


def _branch(schema: dict[str, Any], name: str) -> dict[str, Any]:
    """The non-null alternative of an optional property (pydantic writes ``anyOf [X, null]``),
    or the property itself."""
    prop: dict[str, Any] = schema["properties"][name]
    for option in prop.get("anyOf", ()):
        if option.get("type") != "null":
            found: dict[str, Any] = option
            return found
    return prop


_PYDANTIC_BOUNDS = {
    "ge": "minimum", "le": "maximum", "gt": "exclusiveMinimum", "lt": "exclusiveMaximum",
}  # fmt: skip


def _branches(schema: dict[str, Any]) -> list[dict[str, Any]]:
    return [_branch(schema, name) for name in schema["properties"]]


def _constrain(schema: dict[str, Any], name: str, **keywords: Any) -> None:
    _branch(schema, name).update(keywords)


def _describe(schema: dict[str, Any], name: str, text: str) -> None:
    prop = schema["properties"][name]
    prop["description"] = f"{prop.get('description', '').rstrip()} {text}".strip()


def request_schema(model_id: str, limits: ServeLimits) -> dict[str, Any]:
    """The JSON Schema of a generation body this server accepts (see the module docstring)."""
    schema = copy.deepcopy(ImageGenerationRequest.model_json_schema())
    _constrain(schema, "prompt", minLength=1, maxLength=MAX_PROMPT_CHARS,
               pattern=NOT_ONLY_WHITESPACE)  # fmt: skip
    _describe(schema, "prompt", f"At most {MAX_PROMPT_CHARS} characters, not only whitespace, "
              "valid Unicode (no lone surrogate).")  # fmt: skip
    _constrain(schema, "model", enum=[model_id])
    # pydantic enforces these bounds, but behind a BeforeValidator it writes them under its own
    # names ("ge", "le"), which JSON Schema ignores: a tester then calls -351 valid.
    for branch in _branches(schema):
        for pydantic_name, keyword in _PYDANTIC_BOUNDS.items():
            if pydantic_name in branch:
                branch[keyword] = branch.pop(pydantic_name)
    _constrain(schema, "n", minimum=1, maximum=MAX_IMAGES_PER_REQUEST)
    _constrain(schema, "seed", minimum=0, maximum=MAX_SEED)
    _constrain(schema, "guidance_scale", minimum=1)
    steps = min(MAX_STEPS, limits.max_steps)
    _constrain(schema, "num_inference_steps", minimum=1, maximum=steps)
    _describe(schema, "num_inference_steps", f"1 to {steps} (serve --max-steps); omitted, the "
              "model's default counts toward the limits.")  # fmt: skip
    size = size_schema(limits.max_pixels)
    sized = schema["properties"]["size"]
    if _default_size_fits(limits.max_pixels):
        sized["anyOf"] = [size, {"type": "null"}]
    else:  # omitted or null means 64x64, which this server refuses: size is required
        schema["properties"]["size"] = {**size, "description": sized.get("description", "")}
        schema["required"] = [*schema.get("required", []), "size"]
    _describe(schema, "size", f"At most {limits.max_pixels} pixels (serve --max-pixels). The "
              "model may refuse more: the built-in one's sides go up to 2048.")  # fmt: skip
    schema["description"] = (
        f"{schema.get('description', '')} One request does at most {limits.max_pixel_steps} "
        "pixel-steps, width x height x num_inference_steps x n (serve --max-pixel-steps): "
        "beyond it the answer is 413 request_too_large."
    ).strip()
    return schema


def generation_responses(limits: ServeLimits, error: dict[str, Any]) -> dict[int | str, Any]:
    """The answers of ``POST /v1/images/generations`` (``error``: the error body's model)."""

    def failed(text: str) -> dict[str, Any]:
        return {**error, "description": text}

    request_id = {
        "description": "Names the request in every log line about it (req_ and 16 hex digits).",
        "schema": {"type": "string", "pattern": "^req_[0-9a-f]{16}$"},
    }
    return {
        200: {"description": "The images, in order.", "links": GENERATION_LINKS,
              "headers": {"X-Request-Id": request_id}},
        400: failed("A field of the wrong type or out of its declared range, an unknown field, "
                    "or the body is not a JSON object."),
        404: failed("`model` names another model (model_not_found)."),
        411: failed("Neither Content-Length nor Transfer-Encoding: chunked (length_required)."),
        413: failed(f"More than {limits.max_pixel_steps} pixel-steps, width x height x "
                    "num_inference_steps x n (request_too_large, serve --max-pixel-steps; "
                    "JSON Schema cannot bound a product), or a body over 1 MiB "
                    "(body_too_large)."),
        500: failed("A worker failed or died while generating (worker_error, worker_died)."),
        503: failed("Busy (server_busy), starting or stopping (workers_unavailable, "
                    "server_shutting_down); retry after Retry-After seconds."),
        504: failed(f"Not done within serve --request-timeout ({limits.request_timeout:g} s): "
                    "stopped (deadline_exceeded)."),
    }  # fmt: skip


class HealthReport(BaseModel):
    """What ``GET /health`` answers (200 while every worker is up, 503 otherwise)."""

    model_config = ConfigDict(extra="allow")

    status: str = Field(description="ok, starting, stopping or unavailable.")
    model: str | None = None
    workers: list[dict[str, Any]] = Field(
        default_factory=list, description="rank, pid and alive of each worker process."
    )
    queued: int | None = Field(None, description="Generation requests running or waiting.")
    limits: dict[str, Any] | None = Field(None, description="The limits in force.")
    detail: str | None = Field(None, description="Why the launcher could not be asked.")
