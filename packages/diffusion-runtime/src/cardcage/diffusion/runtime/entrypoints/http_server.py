"""The HTTP child of ``cardcage-diffusion serve``: an OpenAI-style images API on the stdlib.

``launch_http_server_only(server_args)`` is the entry ``worker_bootstrap`` calls in the HTTP
child, after plugin registration and hook application and without initializing the platform
backend (this process never touches the device). It serves, on ``server_args.host:port``:

* ``POST /v1/images/generations``: OpenAI's body (``prompt``, ``n``, ``size``,
  ``response_format``) plus ``seed``, ``num_inference_steps``, ``guidance_scale`` and
  ``negative_prompt``; answers ``{"created", "data": [{"b64_json": <PNG>}]}``;
* ``GET /v1/models`` and ``GET /v1/models/{id}``: the served model;
* ``GET /health``: 200 while every worker is up, 503 otherwise.

Errors are JSON in OpenAI's shape with a 4xx status for a bad request and a 5xx status when the
workers fail (with the worker's message). Image requests travel to the workers through the
launcher's authenticated bridge (``bridge``), which runs them one at a time.

This module is imported only in the HTTP child, after hooks are applied: the names it binds at
import time (``model_card``) are whatever the hooks made them.
"""

from __future__ import annotations

import base64
import contextlib
import itertools
import json
import logging
import os
import signal
import socket
import threading
import time
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

from cardcage.diffusion import __version__
from cardcage.diffusion.envs import CARDCAGE_DIFFUSION_HTTP_BRIDGE

from .bridge import BridgeClient, error_reply
from .errors import BridgeError, HttpServerError
from .openai_api import (
    MAX_BODY_BYTES,
    ApiError,
    error_body,
    images_response,
    model_card,
    parse_image_request,
)

if TYPE_CHECKING:
    from cardcage.diffusion.runtime.server_args import ServerArgs

__all__ = ["ImagesHTTPServer", "launch_http_server_only"]

logger = logging.getLogger(__name__)

_GENERATIONS = "/v1/images/generations"
_MODELS = "/v1/models"
_HEALTH = "/health"
_ROUTES: dict[str, tuple[str, ...]] = {
    _GENERATIONS: ("POST",),
    _MODELS: ("GET", "HEAD"),
    _HEALTH: ("GET", "HEAD"),
}


class ImagesHTTPServer(ThreadingHTTPServer):
    """A threading server that knows the deployment and how to reach the launcher."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, server_args: ServerArgs, bridge: BridgeClient) -> None:
        self.server_args = server_args
        self.bridge = bridge
        self.started = int(time.time())
        self.request_ids = itertools.count(1)
        # IPv4 or IPv6, whichever the host resolves to first (as `python -m http.server` does).
        infos = socket.getaddrinfo(
            server_args.host, server_args.port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
        self.address_family = infos[0][0]
        super().__init__((server_args.host, server_args.port), _Handler)

    @property
    def url(self) -> str:
        host = self.server_address[0]
        port = self.server_address[1]
        text = host.decode() if isinstance(host, bytes) else str(host)
        shown = f"[{text}]" if ":" in text else text
        return f"http://{shown}:{port}"


class _Handler(BaseHTTPRequestHandler):
    """Routes a request, always answering JSON; the work happens in ``_get`` / ``_generate``."""

    server: ImagesHTTPServer
    protocol_version = "HTTP/1.1"
    server_version = f"cardcage-diffusion/{__version__}"
    timeout = 60  # an idle keep-alive connection releases its thread after this
    error_content_type = "application/json"

    # -- plumbing -----------------------------------------------------------------------------
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's name
        logger.debug("%s %s", self.address_string(), format % args)

    def _send_json(
        self, status: int, body: dict[str, Any], headers: dict[str, str] | None = None
    ) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def _send_error(self, error: ApiError, headers: dict[str, str] | None = None) -> None:
        self._send_json(error.status, error.body(), headers)

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """The stdlib's own errors (malformed request line, unsupported method) as JSON too."""
        self.close_connection = True
        phrase = HTTPStatus(code).phrase if code in HTTPStatus._value2member_map_ else "Error"
        text = message or phrase
        if code == HTTPStatus.NOT_IMPLEMENTED:
            code, text = 405, f"Method {self.command!r} is not allowed."
        error_type = "invalid_request_error" if code < 500 else "server_error"
        with contextlib.suppress(OSError):  # the client is gone
            self._send_json(code, error_body(text, error_type=error_type, code=phrase.lower()))

    def _route(self) -> str | None:
        path = urlsplit(self.path).path
        if path in _ROUTES:
            methods = _ROUTES[path]
            if self.command not in methods:
                self._discard_body()
                allowed = ", ".join(methods)
                self._send_error(
                    ApiError(
                        405,
                        f"{self.command} is not allowed on {path}; use {allowed}.",
                        code="method_not_allowed",
                    ),
                    {"Allow": allowed},
                )
                return None
            return path
        if path.startswith(_MODELS + "/") and self.command in ("GET", "HEAD"):
            return path
        self._discard_body()
        self._send_error(
            ApiError(
                404,
                f"No route {self.command} {path}. This server serves POST {_GENERATIONS}, "
                f"GET {_MODELS} and GET {_HEALTH}.",
                code="not_found",
            )
        )
        return None

    def _discard_body(self) -> None:
        """Unread body bytes would be parsed as the next request: close the connection."""
        if self.headers.get("Content-Length") not in (None, "0") or self.headers.get(
            "Transfer-Encoding"
        ):
            self.close_connection = True

    def _read_body(self) -> bytes:
        if self.headers.get("Transfer-Encoding"):
            self.close_connection = True
            raise ApiError(
                411,
                "Chunked request bodies are not supported; send the JSON body with a "
                "Content-Length header.",
                code="length_required",
            )
        raw = self.headers.get("Content-Length")
        if raw is None:
            self.close_connection = True
            raise ApiError(
                411, "A Content-Length header is required on POST.", code="length_required"
            )
        try:
            length = int(raw)
        except ValueError:
            length = -1
        if length < 0:
            self.close_connection = True
            raise ApiError(400, f"Invalid Content-Length {raw!r}.", code="invalid_header")
        if length > MAX_BODY_BYTES:
            self.close_connection = True
            raise ApiError(
                413,
                f"The request body is {length} bytes; the limit is {MAX_BODY_BYTES} bytes.",
                code="body_too_large",
            )
        body = self.rfile.read(length)
        if len(body) != length:
            self.close_connection = True
            raise ApiError(400, "The request body ended early.", code="incomplete_body")
        return body

    # -- methods ------------------------------------------------------------------------------
    def do_GET(self) -> None:
        path = self._route()
        if path is None:
            return
        if path == _HEALTH:
            self._health()
            return
        model_id = self.server.server_args.model_path
        card = model_card(model_id, created=self.server.started)
        if path == _MODELS:
            self._send_json(200, {"object": "list", "data": [card]})
            return
        wanted = unquote(path[len(_MODELS) + 1 :])
        if wanted != model_id:
            self._send_error(
                ApiError(
                    404,
                    f"The model {wanted!r} is not served here; this server serves {model_id!r}.",
                    param="model",
                    code="model_not_found",
                )
            )
            return
        self._send_json(200, card)

    def do_HEAD(self) -> None:
        self.do_GET()

    # Methods no route accepts: 405 on a known path, 404 elsewhere.
    def do_PUT(self) -> None:
        self._route()

    def do_DELETE(self) -> None:
        self._route()

    def do_PATCH(self) -> None:
        self._route()

    def do_OPTIONS(self) -> None:
        self._route()

    def do_POST(self) -> None:
        if self._route() is None:
            return
        request_id = next(self.server.request_ids)
        started = time.perf_counter()
        try:
            body = self._read_body()
            request = parse_image_request(body, model_id=self.server.server_args.model_path)
        except ApiError as rejected:
            logger.info(
                "Request #%d rejected (%d): %s", request_id, rejected.status, rejected.message
            )
            self._send_error(rejected)
            return
        params = request.params
        logger.info(
            "Request #%d received: n=%d size=%s steps=%s seed=%s",
            request_id,
            params.num_images,
            request.size,
            "default" if params.num_inference_steps is None else params.num_inference_steps,
            "default" if params.seed is None else params.seed,
        )
        try:
            reply = self.server.bridge.call(
                "generate", prompt=request.prompt, params=params.to_dict(), request_id=request_id
            )
        except BridgeError as exc:
            reply = error_reply(
                503, str(exc), error_type="server_error", code="launcher_unavailable"
            )
        elapsed = time.perf_counter() - started
        if not reply.get("ok"):
            status = int(reply.get("status", 500))
            logger.log(
                logging.WARNING if status >= 500 else logging.INFO,
                "Request #%d failed after %.2f s (%d): %s",
                request_id, elapsed, status, reply.get("message"),
            )  # fmt: skip
            error = ApiError(
                status,
                str(reply.get("message")),
                error_type=str(reply.get("type", "server_error")),
                param=reply.get("param"),
                code=reply.get("code"),
            )
            busy = error.code == "server_busy"
            self._send_error(error, {"Retry-After": "1"} if busy else None)
            return
        images = [
            {"b64_json": base64.b64encode(item["png"]).decode("ascii"), "seed": item.get("seed")}
            for item in reply["images"]
        ]
        answer = images_response(images, size=request.size)
        # Logged before the answer goes out, so a client that has its images sees the line.
        logger.info(
            "Request #%d done in %.2f s: %d image(s) %s",
            request_id, time.perf_counter() - started, len(images), request.size,
        )  # fmt: skip
        self._send_json(200, answer)

    def _health(self) -> None:
        try:
            reply = self.server.bridge.call("health")
        except BridgeError as exc:
            self._send_json(503, {"status": "unavailable", "detail": str(exc)})
            return
        status = 200 if reply.get("ok") and reply.get("ready") else 503
        self._send_json(status, dict(reply.get("health", {})))


def _serve_until_signalled(httpd: ImagesHTTPServer) -> None:
    def stop(signum: int, frame: object) -> None:
        logger.info("HTTP server stopping (%s)", signal.Signals(signum).name)
        # shutdown() waits for serve_forever() to return: call it off the serving thread.
        threading.Thread(target=httpd.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    # Ctrl-C reaches the whole process group; the launcher stops this process in order.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    httpd.serve_forever(poll_interval=0.5)


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
        httpd = ImagesHTTPServer(server_args, bridge)
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
    try:
        bridge.call("listening", url=httpd.url, pid=os.getpid())
        logger.info("HTTP server listening on %s", httpd.url)
        _serve_until_signalled(httpd)
    finally:
        httpd.server_close()
    logger.info("HTTP server stopped")
