"""The HTTP child of ``cardcage-diffusion serve``: OpenAI's images API on FastAPI and uvicorn.

``launch_http_server_only(server_args)`` is the entry ``worker_bootstrap`` calls in the HTTP
child, after plugin registration and hook application and without initializing the platform
backend (this process never touches the device). It binds ``server_args.host:port`` itself
(port 0: a free port, reported to the launcher, which prints the URL) and serves:

* ``POST /v1/images/generations``: OpenAI's body (``openai_api.ImageGenerationRequest``);
  answers ``{"created", "data": [{"b64_json"} | {"url", "image_id"}], ...}`` with the images
  encoded by Pillow in ``output_format`` (png, jpeg or webp);
* ``GET /v1/images/{image_id}``: an image answered with ``response_format: "url"``, kept in
  this process's memory for ``IMAGE_URL_TTL_S`` seconds (and at most ``IMAGE_STORE_BYTES``
  bytes, oldest dropped first);
* ``GET /v1/models`` and ``GET /v1/models/{id}``: the served model;
* ``GET /health``: 200 while every worker is up, 503 otherwise;
* ``GET /docs`` and ``GET /openapi.json``: the OpenAPI description, which declares what the
  server enforces, this server's limits included, and links the ids (``openapi``).

Every error is JSON in OpenAI's shape with a 4xx status for a bad request and a 5xx status when
the workers fail. Each generation gets a request id (``X-Request-Id`` on the answer) that the
launcher and every worker log too. Image requests travel to the workers through the launcher's
authenticated bridge (``bridge``), one blocking bridge call per request on a thread of this
module's pool, while the event loop watches the client: a client that disconnects has its request
cancelled through the bridge (the workers stop at their next denoising step).

HTTP framing is uvicorn's with its h11 parser (bodies are always read by their declared length,
conflicting ``Content-Length`` headers are a 400), TCP_NODELAY on every connection (asyncio's
default), and a listen backlog of 2048. SIGTERM drains: the server stops accepting, answers what
is in flight (the launcher cancels it first, so that is quick) and exits 0; SIGINT is ignored
(Ctrl-C reaches the whole process group, and the launcher stops this process in order).

This module is imported only in the HTTP child, after hooks are applied: the names it binds at
import time (``model_card``) are whatever the hooks made them.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import os
import secrets
import signal
import socket
import threading
import time
import uuid
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from http import HTTPStatus
from typing import TYPE_CHECKING, Any

import uvicorn
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.convertors import Convertor, register_url_convertor
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from cardcage.diffusion import __version__
from cardcage.diffusion.envs import CARDCAGE_DIFFUSION_HTTP_BRIDGE
from cardcage.diffusion.runtime.managers.images import IMAGE_FORMATS, encode_rgb

from .bridge import BridgeClient, error_reply
from .errors import BridgeError, HttpServerError
from .limits import ServeLimits
from .openai_api import (
    MAX_BODY_BYTES,
    ApiError,
    ErrorResponse,
    ImageData,
    ImageGenerationRequest,
    ImagesResponse,
    ModelCard,
    ModelList,
    error_body,
    model_card,
    parse_image_request,
    to_sampling_params,
)
from .openapi import (
    IMAGE_ID_PATTERN,
    MODEL_LIST_LINKS,
    OPERATION_IDS,
    HealthReport,
    generation_responses,
    request_schema,
)

if TYPE_CHECKING:
    from collections.abc import Iterator

    from cardcage.diffusion.configs.sampling_params import SamplingParams
    from cardcage.diffusion.runtime.server_args import ServerArgs

__all__ = [
    "IMAGE_STORE_BYTES",
    "IMAGE_URL_TTL_S",
    "ImageStore",
    "create_app",
    "launch_http_server_only",
]

logger = logging.getLogger(__name__)

IMAGE_URL_TTL_S = 600.0
"""How long ``GET /v1/images/{id}`` serves an image answered with ``response_format: "url"``."""
IMAGE_STORE_BYTES = 256 << 20
"""Most bytes of such images kept at once; beyond it the oldest are dropped early."""
BRIDGE_THREADS = 64
"""Threads making blocking bridge calls (each waiting request holds one while it waits)."""
GRACEFUL_SHUTDOWN_S = 20
"""How long SIGTERM lets in-flight answers finish before the connections are dropped."""

_GENERATIONS = "/v1/images/generations"
_ROUTES_TEXT = (
    f"POST {_GENERATIONS}, GET /v1/images/{{id}}, GET /v1/models, GET /health "
    "(OpenAPI docs at /docs)"
)
_IMAGE_ID_PREFIX = "img_"
_REQUEST_ID_HEADER = "X-Request-Id"
_ERROR: dict[str, Any] = {"model": ErrorResponse}


class ImageStore:
    """Encoded images answered by URL: each kept ``ttl`` seconds, ``max_bytes`` in all."""

    def __init__(self, ttl: float = IMAGE_URL_TTL_S, max_bytes: int = IMAGE_STORE_BYTES) -> None:
        self.ttl = ttl
        self.max_bytes = max_bytes
        self._items: OrderedDict[str, tuple[float, str, bytes]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def _evict(self, now: float, incoming: int) -> None:
        while self._items:
            key, (expires, _, data) = next(iter(self._items.items()))
            if expires > now and self._bytes + incoming <= self.max_bytes:
                return
            del self._items[key]
            self._bytes -= len(data)

    def put(self, data: bytes, media_type: str) -> str:
        """Keep ``data``; return its id (unguessable: the URL is the only credential)."""
        image_id = _IMAGE_ID_PREFIX + secrets.token_urlsafe(18)
        now = time.monotonic()
        with self._lock:
            self._evict(now, len(data))
            self._items[image_id] = (now + self.ttl, media_type, data)
            self._bytes += len(data)
        return image_id

    def get(self, image_id: str) -> tuple[str, bytes] | None:
        with self._lock:
            self._evict(time.monotonic(), 0)
            item = self._items.get(image_id)
        return None if item is None else (item[1], item[2])


def _error_response(error: ApiError, request_id: str | None = None) -> JSONResponse:
    headers = dict(error.headers)
    if request_id is not None:
        headers[_REQUEST_ID_HEADER] = request_id
    return JSONResponse(error.body(), status_code=error.status, headers=headers)


def _no_route(method: str, path: str, allowed: str | None = None) -> ApiError:
    if allowed is not None:
        return ApiError(
            405,
            f"{method} is not allowed on {path}; use {allowed}.",
            code="method_not_allowed",
            headers={"Allow": allowed},
        )
    return ApiError(
        404, f"No route {method} {path}. This server serves {_ROUTES_TEXT}.", code="not_found"
    )


async def _read_body(request: Request) -> bytes:
    """The body, refused early when it is too large (413) or its length is not declared (411)."""
    if request.headers.get("transfer-encoding") is None:
        declared = request.headers.getlist("content-length")
        if not declared:
            raise ApiError(
                411, "A Content-Length header is required on POST.", code="length_required"
            )
        if len(set(declared)) != 1 or not declared[0].isdigit():
            raise ApiError(
                400, f"Invalid Content-Length {declared!r}.", code="invalid_header",
                headers={"Connection": "close"},
            )  # fmt: skip
        if int(declared[0]) > MAX_BODY_BYTES:
            raise ApiError(
                413,
                f"The request body is {declared[0]} bytes; the limit is {MAX_BODY_BYTES} bytes.",
                code="body_too_large",
                headers={"Connection": "close"},
            )
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise ApiError(
                413, f"The request body is larger than {MAX_BODY_BYTES} bytes.",
                code="body_too_large", headers={"Connection": "close"},
            )  # fmt: skip
        chunks.append(chunk)
    return b"".join(chunks)


async def _client_gone(request: Request) -> None:
    """Return once the client disconnects (the body is already read: receive() only reports
    the disconnect, or the end of the response)."""
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            return


def _encode_images(
    images: list[dict[str, Any]], fmt: str, quality: int | None
) -> list[tuple[bytes, int | None]]:
    return [
        (encode_rgb(item["rgb"], item["width"], item["height"], fmt=fmt, quality=quality),
         item.get("seed"))
        for item in images
    ]  # fmt: skip


@dataclass(frozen=True)
class _Served:
    """What the routes share: the served model and its limits, the launcher's bridge, the
    images kept for URLs, and the threads that make the blocking bridge calls (the event loop
    never blocks on the launcher)."""

    model_id: str
    created: int
    limits: ServeLimits
    bridge: BridgeClient
    store: ImageStore
    pool: ThreadPoolExecutor

    async def call(self, op: str, **fields: Any) -> dict[str, Any]:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.pool, partial(self.bridge.call, op, **fields))


def create_app(
    server_args: ServerArgs,
    bridge: BridgeClient,
    *,
    images: ImageStore | None = None,
    limits: ServeLimits | None = None,
) -> FastAPI:
    """The FastAPI application of the images API (``launch_http_server_only`` serves it).

    ``limits`` are the launcher's (it enforces them); here they are declared in
    ``/openapi.json``, so the document says what this server accepts.
    """
    served = _Served(
        model_id=server_args.model_path,
        created=int(time.time()),
        limits=limits or ServeLimits(),
        bridge=bridge,
        store=images or ImageStore(),
        pool=ThreadPoolExecutor(BRIDGE_THREADS, thread_name_prefix="cardcage-diffusion-http"),
    )
    app = FastAPI(
        title="cardcage-diffusion",
        version=__version__,
        description="OpenAI's images API, served by the cardcage diffusion runtime.",
    )
    _add_error_handlers(app)
    _add_model_routes(app, served)
    _add_health_route(app, served)
    _add_image_route(app, served)
    _add_generation_route(app, served)
    app.state.image_store = served.store
    app.state.bridge_pool = served.pool
    return app


# -- errors ---------------------------------------------------------------------------------------


def _allowed_methods(request: Request) -> str:
    """Every method a route serves on this path: Starlette's 405 names only the first route
    whose path matches (``OPTIONS /v1/images/generations`` once said ``Allow: GET``)."""
    methods: set[str] = set()
    for route in request.app.router.routes:
        match, _ = route.matches(request.scope)
        if match is not Match.NONE:
            methods |= set(getattr(route, "methods", None) or ())
    return ", ".join(sorted(methods))


def _add_error_handlers(app: FastAPI) -> None:
    """Every error as OpenAI's JSON error shape, routing errors included."""

    @app.exception_handler(ApiError)
    async def api_error(request: Request, exc: ApiError) -> JSONResponse:
        return _error_response(exc)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        if exc.status_code == 404:
            return _error_response(_no_route(request.method, request.url.path))
        if exc.status_code == 405:
            allowed = _allowed_methods(request) or (exc.headers or {}).get("Allow", "")
            return _error_response(_no_route(request.method, request.url.path, allowed))
        phrase = HTTPStatus(exc.status_code).phrase
        error_type = "invalid_request_error" if exc.status_code < 500 else "server_error"
        return JSONResponse(
            error_body(str(exc.detail), error_type=error_type, code=phrase.lower()),
            status_code=exc.status_code,
            headers=exc.headers,
        )

    @app.exception_handler(RequestValidationError)
    async def request_error(request: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0] if exc.errors() else {}
        location = [str(part) for part in first.get("loc", ())]
        return _error_response(
            ApiError(
                400, f"{'.'.join(location) or 'request'}: {first.get('msg', 'invalid')}",
                param=location[-1] if location else None, code="invalid_value",
            )
        )  # fmt: skip

    @app.exception_handler(Exception)
    async def server_error(request: Request, exc: Exception) -> JSONResponse:
        logger.error(
            "Unhandled error serving %s %s", request.method, request.url.path, exc_info=exc
        )
        return JSONResponse(
            error_body(
                f"Internal error: {type(exc).__name__}: {exc}", error_type="server_error",
                code="internal_error",
            ),
            status_code=500,
        )  # fmt: skip


# -- models and health ----------------------------------------------------------------------------


def _add_model_routes(app: FastAPI, served: _Served) -> None:
    """``GET`` (and ``HEAD``) ``/v1/models`` and ``/v1/models/{id}``.

    Handlers read path parameters from the request, so the document declares them as written
    here (the served id as the only valid value) rather than FastAPI's 422 validation, which
    this server never answers. HEAD routes stay out of the document: one operationId each.
    """

    async def list_models() -> dict[str, Any]:
        return {"object": "list", "data": [model_card(served.model_id, created=served.created)]}

    async def get_model(request: Request) -> dict[str, Any]:
        wanted = request.path_params["wanted"]
        if wanted != served.model_id:
            raise ApiError(
                404,
                f"The model {wanted!r} is not served here; this server serves {served.model_id!r}.",
                param="model",
                code="model_not_found",
            )
        return model_card(served.model_id, created=served.created)

    wanted = {
        "name": "wanted", "in": "path", "required": True,
        "description": "A model id; this server serves one (404 model_not_found otherwise).",
        "schema": {"type": "string", "enum": [served.model_id]},
    }  # fmt: skip
    for method in ("GET", "HEAD"):
        app.add_api_route(
            "/v1/models", list_models, methods=[method], response_model=ModelList,
            include_in_schema=method == "GET", operation_id=OPERATION_IDS["models"],
            responses={200: {"links": MODEL_LIST_LINKS}},
        )  # fmt: skip
        app.add_api_route(
            "/v1/models/{wanted:path}", get_model, methods=[method], response_model=ModelCard,
            include_in_schema=method == "GET", operation_id=OPERATION_IDS["model"],
            responses={404: _ERROR}, openapi_extra={"parameters": [wanted]},
        )  # fmt: skip


def _add_health_route(app: FastAPI, served: _Served) -> None:
    """``GET /health``: 200 while every worker is up, 503 otherwise (the readiness probe)."""

    async def health() -> JSONResponse:
        try:
            reply = await served.call("health")
        except BridgeError as exc:
            return JSONResponse({"status": "unavailable", "detail": str(exc)}, status_code=503)
        status = 200 if reply.get("ok") and reply.get("ready") else 503
        return JSONResponse(dict(reply.get("health", {})), status_code=status)

    report = {"content": {"application/json": {"schema": HealthReport.model_json_schema()}}}
    for method in ("GET", "HEAD"):
        app.add_api_route(
            "/health", health, methods=[method], include_in_schema=method == "GET",
            operation_id=OPERATION_IDS["health"],
            responses={200: {**report, "description": "Every worker is up."},
                       503: {**report, "description": "Starting, stopping, or a worker died."}},
        )  # fmt: skip


# -- images ---------------------------------------------------------------------------------------


class _ImageIdConvertor(Convertor[str]):
    """Matches only ``ImageStore`` ids, so ``/v1/images/generations`` routes to its own POST
    route for every method (and a wrong method there is 405 ``Allow: POST``)."""

    regex = IMAGE_ID_PATTERN

    def convert(self, value: str) -> str:
        return value

    def to_string(self, value: str) -> str:
        return value


register_url_convertor("cardcage_image_id", _ImageIdConvertor())


def _add_image_route(app: FastAPI, served: _Served) -> None:
    """``GET /v1/images/{image_id}``: an image answered with ``response_format: "url"``."""

    async def get_image(request: Request) -> Response:
        image_id = request.path_params["image_id"]
        found = served.store.get(image_id)
        if found is None:
            raise ApiError(
                404,
                f"Image {image_id!r} is unknown or expired: images answered by URL are kept "
                f"{served.store.ttl:g} s.",
                code="image_not_found",
            )
        media_type, data = found
        return Response(data, media_type=media_type, headers={"Cache-Control": "private"})

    image_id = {
        "name": "image_id", "in": "path", "required": True,
        "description": "The `image_id` of a generation answered with `response_format: \"url\"` "
        "(the last segment of its `url`).",
        "schema": {"type": "string", "pattern": f"^{IMAGE_ID_PATTERN}$"},
    }  # fmt: skip
    binary = {"schema": {"type": "string", "format": "binary"}}
    app.add_api_route(
        "/v1/images/{image_id:cardcage_image_id}", get_image, methods=["GET"], name="get_image",
        operation_id=OPERATION_IDS["image"], response_class=Response,
        responses={200: {"description": "The image file.",
                         "content": dict.fromkeys(IMAGE_FORMATS.values(), binary)},
                   404: {**_ERROR, "description": "Unknown or expired (image_not_found)."}},
        openapi_extra={"parameters": [image_id]},
    )  # fmt: skip


def _add_generation_route(app: FastAPI, served: _Served) -> None:
    """``POST /v1/images/generations``, its body declared with this server's limits."""

    async def create_image(request: Request) -> Response:
        return await _generate(served, request)

    app.add_api_route(
        _GENERATIONS, create_image, methods=["POST"], operation_id=OPERATION_IDS["generate"],
        response_model=ImagesResponse, response_model_exclude_none=True,
        responses=generation_responses(served.limits, _ERROR),
    )  # fmt: skip
    body = {
        "required": True,
        "content": {"application/json": {"schema": request_schema(served.model_id, served.limits)}},
    }
    build = app.openapi

    def openapi() -> dict[str, Any]:
        """FastAPI's document with the body schema as written: set through FastAPI, its
        numbers would be read as floats, and the largest seed, 2**62 - 1, is not one."""
        first = app.openapi_schema is None
        document = build()
        if first:
            document["paths"][_GENERATIONS]["post"]["requestBody"] = body
        return document

    app.openapi = openapi  # type: ignore[method-assign]  # FastAPI's documented extension point


async def _generate(served: _Served, request: Request) -> Response:
    """One generation request: parse, ask the launcher (cancelled if the client leaves),
    encode the images, answer."""
    request_id = "req_" + uuid.uuid4().hex[:16]
    started = time.perf_counter()
    try:
        parsed = parse_image_request(await _read_body(request), model_id=served.model_id)
        params = to_sampling_params(parsed)
    except ApiError as rejected:
        logger.info("Request %s rejected (%d): %s", request_id, rejected.status, rejected.message)
        return _error_response(rejected, request_id)
    logger.info(
        "Request %s received: n=%d size=%dx%d steps=%s seed=%s",
        request_id, params.num_images, params.width, params.height,
        "default" if params.num_inference_steps is None else params.num_inference_steps,
        "default" if params.seed is None else params.seed,
    )  # fmt: skip
    reply = await _generate_unless_gone(served, request, request_id, parsed.prompt, params)
    elapsed = time.perf_counter() - started
    if reply is None:
        logger.info("Request %s stopped after %.2f s: the client left", request_id, elapsed)
        return Response(status_code=499)
    if not reply.get("ok"):
        return _failure(reply, request_id, elapsed)
    fmt = parsed.output_format or "png"
    data = await _image_data(served, request, parsed, reply["images"], fmt)
    answer = ImagesResponse(
        created=int(time.time()), data=data, output_format=fmt,
        size=f"{params.width}x{params.height}", warning=reply.get("warning"),
    )  # fmt: skip
    # Logged before the answer goes out, so a client that has its images sees the line.
    logger.info(
        "Request %s done in %.2f s: %d image(s) %dx%d %s",
        request_id, time.perf_counter() - started, len(data), params.width, params.height, fmt,
    )  # fmt: skip
    return JSONResponse(
        answer.model_dump(exclude_none=True), headers={_REQUEST_ID_HEADER: request_id}
    )


async def _generate_unless_gone(
    served: _Served, request: Request, request_id: str, prompt: str, params: SamplingParams
) -> dict[str, Any] | None:
    """The launcher's answer; None when the client left first (its request is cancelled)."""
    loop = asyncio.get_running_loop()
    work = loop.run_in_executor(
        served.pool,
        partial(
            served.bridge.call, "generate", request_id=request_id, prompt=prompt,
            params=params.to_dict(),
        ),
    )  # fmt: skip
    gone = asyncio.ensure_future(_client_gone(request))
    try:
        waiters: list[asyncio.Future[Any]] = [work, gone]
        await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
    finally:
        if not gone.done():
            gone.cancel()
    if work.done():
        return await _reply_of(work)
    logger.info("Request %s: the client disconnected; cancelling it", request_id)
    with contextlib.suppress(BridgeError):
        await served.call("cancel", request_id=request_id, reason="disconnected")
    await _reply_of(work)  # the launcher answers once the workers stopped
    return None


async def _image_data(
    served: _Served,
    request: Request,
    parsed: ImageGenerationRequest,
    images: list[dict[str, Any]],
    fmt: str,
) -> list[ImageData]:
    """The answer's ``data``: each image encoded (on the pool) and inline or kept for its URL."""
    loop = asyncio.get_running_loop()
    encoded = await loop.run_in_executor(
        served.pool, _encode_images, images, fmt, parsed.output_compression
    )
    data: list[ImageData] = []
    for payload, seed in encoded:
        if parsed.response_format == "url":
            image_id = served.store.put(payload, IMAGE_FORMATS[fmt])
            url = str(request.url_for("get_image", image_id=image_id))
            data.append(ImageData(url=url, image_id=image_id, seed=seed))
        else:
            data.append(ImageData(b64_json=base64.b64encode(payload).decode("ascii"), seed=seed))
    return data


async def _reply_of(work: asyncio.Future[dict[str, Any]]) -> dict[str, Any]:
    try:
        return await work
    except BridgeError as exc:
        return error_reply(503, str(exc), error_type="server_error", code="launcher_unavailable")


def _failure(reply: dict[str, Any], request_id: str, elapsed: float) -> JSONResponse:
    status = int(reply.get("status", 500))
    logger.log(
        logging.WARNING if status >= 500 else logging.INFO,
        "Request %s failed after %.2f s (%d): %s",
        request_id, elapsed, status, reply.get("message"),
    )  # fmt: skip
    code = reply.get("code")
    retry = code in ("server_busy", "server_shutting_down", "workers_unavailable")
    error = ApiError(
        status,
        str(reply.get("message")),
        error_type=str(reply.get("type", "server_error")),
        param=reply.get("param"),
        code=code,
        headers={"Retry-After": "1"} if retry else None,
    )
    return _error_response(error, request_id)


# -- the process --------------------------------------------------------------------------------


class _ChildServer(uvicorn.Server):
    """uvicorn's server with this child's signals: SIGTERM drains and exits 0, SIGINT is
    ignored; ``on_started`` runs once the socket accepts connections."""

    def __init__(self, config: uvicorn.Config, on_started: Any) -> None:
        super().__init__(config)
        self._on_started = on_started

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        def drain(signum: int, frame: object) -> None:
            logger.info("HTTP server stopping (%s): draining", signal.Signals(signum).name)
            self.should_exit = True

        previous = {
            signal.SIGTERM: signal.signal(signal.SIGTERM, drain),
            signal.SIGINT: signal.signal(signal.SIGINT, signal.SIG_IGN),
        }
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        if self.started:
            self._on_started()


def _bind(host: str, port: int) -> socket.socket:
    """The listening socket (IPv4 or IPv6, whichever ``host`` resolves to first)."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
    except BaseException:
        sock.close()
        raise
    return sock


def _url_of(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in str(host) else str(host)
    return f"http://{shown}:{port}"


def launch_http_server_only(server_args: ServerArgs) -> None:
    """Serve the images API until SIGTERM (the entry the HTTP child runs).

    Needs ``CARDCAGE_DIFFUSION_HTTP_BRIDGE`` (set by ``cardcage-diffusion serve``). A port that
    cannot be bound is reported to the launcher, which prints it and exits 1.
    """
    address = CARDCAGE_DIFFUSION_HTTP_BRIDGE.get()
    if not address:
        raise HttpServerError(
            f"{CARDCAGE_DIFFUSION_HTTP_BRIDGE.name} is not set: the diffusion HTTP server runs "
            "as the child of `cardcage-diffusion serve`, which sets it. Start the server with "
            "that command."
        )
    bridge = BridgeClient(address)
    try:
        sock = _bind(server_args.host, server_args.port)
    except OSError as exc:
        message = (
            f"Cannot listen on {server_args.host}:{server_args.port}: "
            f"{exc.strerror or exc}. Pass another --port (or --host), or stop the process "
            "using it."
        )
        try:
            bridge.call("failed", message=message)
        except BridgeError:
            logger.error("%s", message)
        raise SystemExit(1) from None
    url = _url_of(sock)
    # The launcher enforces the limits; the app declares them in /openapi.json.
    app = create_app(server_args, bridge, limits=ServeLimits(**bridge.call("limits")["limits"]))
    config = uvicorn.Config(
        app,
        http="h11",
        loop="asyncio",
        lifespan="off",
        log_config=None,
        access_log=False,
        server_header=False,
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S,
    )

    def started() -> None:
        bridge.call("listening", url=url, pid=os.getpid())
        logger.info("HTTP server listening on %s", url)

    server = _ChildServer(config, started)
    try:
        asyncio.run(server.serve(sockets=[sock]))
    finally:
        sock.close()
        app.state.bridge_pool.shutdown(wait=False, cancel_futures=True)
    logger.info("HTTP server stopped")
