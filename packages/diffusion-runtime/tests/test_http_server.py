"""``cardcage-diffusion serve`` for real: a server process, its workers, its HTTP child, sockets.

Most tests share one server (module fixture, one worker) started through the console script with
a probe plugin distribution on ``PYTHONPATH``; the probe's AFTER hook on
``openai_api.model_card`` marks every model card, and its ``register()`` records, per process,
whether the server module was already imported. Tests that stop or break a server start their
own. Readiness is the "Serving ... at URL" line the command prints once the workers are ready
and the HTTP child listens, confirmed by ``GET /health``; nothing waits on a fixed sleep.
"""

from __future__ import annotations

import base64
import contextlib
import http.client
import json
import os
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from generation_support import max_difference
from hypothesis import given
from hypothesis import strategies as st
from model_support import parse_png
from picture_support import SCENES, scene_problems

from cardcage.diffusion.runtime.entrypoints.openai_api import (
    ApiError,
    ImageGenerationRequest,
    parse_image_request,
    parse_size,
)
from cardcage.hooks.testing import write_distribution

MODEL = "cardcage/tiny-dit"
PLUGINS = "sglang.multimodal_gen.plugins"
SERVER_MODULE = "cardcage.diffusion.runtime.entrypoints.http_server"
HTTP_CHILD_NAME = "cardcage-diffusion-http"
STARTUP_DEADLINE = 90.0
EARLY_IMPORT_WARNING = "were imported before this worker initialized its platform"

PROBE_SOURCE = f"""
import json
import multiprocessing
import os
import sys

from cardcage.diffusion.runtime.platforms.plugins import plugin_hook


def register():
    with open(os.environ["H8_EVENTS_FILE"], "a", encoding="utf-8") as handle:
        handle.write(json.dumps({{
            "process": multiprocessing.current_process().name,
            "pid": os.getpid(),
            "server_module_imported": {SERVER_MODULE!r} in sys.modules,
        }}) + "\\n")

    @plugin_hook("cardcage.diffusion.runtime.entrypoints.openai_api.model_card")
    def mark(card, *args, **kwargs):
        return {{**card, "hooked_in_pid": os.getpid()}}
"""


def console_script() -> list[str]:
    script = Path(sys.executable).with_name("cardcage-diffusion")
    if script.exists():
        return [str(script)]
    return [sys.executable, "-m", "cardcage.diffusion.runtime.entrypoints.cli"]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def descendants(pid: int) -> set[int]:
    """Every live descendant of ``pid`` (from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z":
            children.setdefault(int(fields[1]), []).append(int(entry))
    found: set[int] = set()
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def survivors(pids: set[int], deadline: float = 15.0) -> list[str]:
    """``pids`` still running once ``deadline`` passed (multiprocessing's resource tracker
    exits on its own, just after the launcher closes its end: give it that moment)."""
    end = time.monotonic() + deadline
    while True:
        left = [pid for pid in pids if alive(pid)]
        if not left or time.monotonic() > end:
            break
        time.sleep(0.05)
    described = []
    for pid in left:
        with contextlib.suppress(OSError):
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
            described.append(f"{pid}: {cmdline.decode(errors='replace')[:200]}")
    return described


def shm_segments_of(pids: set[int]) -> list[str]:
    """``/dev/shm`` entries cardcage.shm created from any of ``pids`` (its names carry the pid)."""
    names = os.listdir("/dev/shm") if os.path.isdir("/dev/shm") else []
    return sorted(n for n in names for p in pids if n.startswith(f"cardcage-shm-{p}-"))


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Server:
    process: subprocess.Popen[bytes]
    port: int
    url: str
    stderr_path: Path
    events_path: Path
    tmpdir: Path

    def request(
        self,
        method: str,
        path: str,
        body: bytes | dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
        timeout: float = 120.0,
    ) -> Reply:
        data = json.dumps(body).encode() if isinstance(body, dict) else body
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            conn.request(method, path, body=data, headers=headers or {})
            response = conn.getresponse()
            return Reply(
                response.status,
                {k.lower(): v for k, v in response.getheaders()},
                response.read(),
            )
        finally:
            conn.close()

    def generate(self, body: bytes | dict[str, Any], **kwargs: Any) -> Reply:
        return self.request("POST", "/v1/images/generations", body, **kwargs)

    def stderr(self) -> str:
        return self.stderr_path.read_text(encoding="utf-8", errors="replace")

    def events(self) -> list[dict[str, Any]]:
        if not self.events_path.exists():
            return []
        lines = self.events_path.read_text(encoding="utf-8").splitlines()
        return [json.loads(line) for line in lines if line.strip()]

    def tree(self) -> set[int]:
        return {self.process.pid, *descendants(self.process.pid)}

    def stop(self, sig: int = signal.SIGTERM, *, group: bool = False) -> int:
        if self.process.poll() is None:
            if group:
                os.killpg(self.process.pid, sig)
            else:
                self.process.send_signal(sig)
        return self.process.wait(timeout=60)


def _read_ready_line(process: subprocess.Popen[bytes], stderr_path: Path) -> str:
    """The URL from the line ``serve`` prints once ready (select() with a deadline, no sleep)."""
    assert process.stdout is not None
    deadline = time.monotonic() + STARTUP_DEADLINE
    buffered = b""
    while True:
        match = re.search(rb"Serving \S+ at (http://\S+) with", buffered)
        if match:
            return match.group(1).decode()
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            process.kill()
            raise AssertionError(f"serve did not get ready:\n{stderr_path.read_text()}")
        readable, _, _ = select.select([process.stdout], [], [], remaining)
        if readable:
            chunk = os.read(process.stdout.fileno(), 4096)
            if not chunk:
                process.wait(timeout=30)
                raise AssertionError(
                    f"serve exited with {process.returncode} before it was ready:\n"
                    + stderr_path.read_text()
                )
            buffered += chunk


@contextlib.contextmanager
def run_server(
    tmp: Path, *args: str, num_gpus: int = 1, port: int | None = None, wait_ready: bool = True
) -> Iterator[Server]:
    site = tmp / "site"
    if not site.exists():
        write_distribution(
            site,
            "h8-http-probe",
            entry_points={PLUGINS: {"h8_probe": "h8_http_probe:register"}},
            modules={"h8_http_probe": PROBE_SOURCE},
        )
    port = free_port() if port is None else port
    # The bridge socket goes under TMPDIR: a short one keeps its path within sun_path.
    tmpdir = Path(tempfile.mkdtemp(prefix="h8-serve-", dir="/tmp"))
    stderr_path = tmp / f"serve-{port}.log"
    events_path = tmp / f"events-{port}.jsonl"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")])),
        "H8_EVENTS_FILE": str(events_path),
        "TMPDIR": str(tmpdir),
    }
    for name in ("SGLANG_PLUGINS", "SGLANG_DIFFUSION_PLATFORM_OVERRIDE", "SGLANG_PLATFORM"):
        env.pop(name, None)
    command = [
        *console_script(), "serve", "--model-path", MODEL, "--num-gpus", str(num_gpus),
        "--host", "127.0.0.1", "--port", str(port), *args,
    ]  # fmt: skip
    with stderr_path.open("wb") as stderr:
        process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=stderr, env=env, start_new_session=True
        )
    server = Server(process, port, f"http://127.0.0.1:{port}", stderr_path, events_path, tmpdir)
    try:
        if wait_ready:
            server.url = _read_ready_line(process, stderr_path)
        yield server
    finally:
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=30)
        if process.stdout is not None:
            process.stdout.close()
        shutil.rmtree(tmpdir, ignore_errors=True)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with run_server(tmp_path_factory.mktemp("serve")) as running:
        yield running


def wait_for_status(server: Server, path: str, status: int, deadline: float = 30.0) -> Reply:
    """Poll ``path`` until it answers ``status`` (a deadline, not a timing assertion)."""
    end = time.monotonic() + deadline
    while True:
        reply = server.request("GET", path, timeout=10)
        if reply.status == status or time.monotonic() > end:
            return reply
        time.sleep(0.05)


def error_of(reply: Reply) -> dict[str, Any]:
    assert reply.headers["content-type"] == "application/json"
    body = reply.json()
    assert set(body) == {"error"}
    error: dict[str, Any] = body["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert isinstance(error["message"], str)
    assert error["message"]
    return error


# -- endpoints ------------------------------------------------------------------------------------


def test_serve_prints_the_url_it_listens_on_and_health_reports_every_worker(
    server: Server,
) -> None:
    assert server.url == f"http://127.0.0.1:{server.port}"
    reply = server.request("GET", "/health")
    assert reply.status == 200
    health = reply.json()
    assert health["status"] == "ok"
    assert health["model"] == MODEL
    assert [w["rank"] for w in health["workers"]] == [0]
    assert all(w["alive"] for w in health["workers"])
    # The workers it reports are real processes of this server.
    assert {w["pid"] for w in health["workers"]} <= descendants(server.process.pid)


def test_models_lists_the_served_model(server: Server) -> None:
    reply = server.request("GET", "/v1/models")
    assert reply.status == 200
    body = reply.json()
    assert body["object"] == "list"
    [card] = body["data"]
    assert card["id"] == MODEL
    assert card["object"] == "model"
    assert isinstance(card["created"], int)
    single = server.request("GET", f"/v1/models/{MODEL}")
    assert single.status == 200
    assert single.json()["id"] == MODEL


def test_unknown_model_id_is_404(server: Server) -> None:
    reply = server.request("GET", "/v1/models/other-model")
    assert reply.status == 404
    assert error_of(reply)["code"] == "model_not_found"


def test_generation_returns_decodable_png_images_of_the_requested_size(server: Server) -> None:
    body = {"prompt": "a white circle at night", "n": 2, "size": "64x48", "seed": 7,
            "num_inference_steps": 2}  # fmt: skip
    reply = server.generate(body)
    assert reply.status == 200, reply.body
    result = reply.json()
    assert isinstance(result["created"], int)
    assert len(result["data"]) == 2
    images = [parse_png(base64.b64decode(item["b64_json"])) for item in result["data"]]
    for image in images:
        assert (image.width, image.height) == (64, 48)
        assert (image.bit_depth, image.color_type) == (8, 2)
        assert image.chunk_types[0] == b"IHDR"
        assert image.chunk_types[-1] == b"IEND"
    assert [item["seed"] for item in result["data"]] == [7, 8]  # image i uses seed + i
    assert images[0].pixels != images[1].pixels
    again = server.generate({**body, "n": 1})
    assert again.status == 200
    alone = parse_png(base64.b64decode(again.json()["data"][0]["b64_json"]))
    # The seed's image, whatever the batch: within one unit per channel, as the pipeline
    # promises (batched matrix products may round differently on some CPUs).
    assert max_difference(alone.pixels, images[0].pixels) <= 1


@pytest.mark.parametrize("prompt", list(SCENES))
def test_the_served_image_shows_what_the_prompt_asks_for(server: Server, prompt: str) -> None:
    reply = server.generate({"prompt": prompt, "size": "64x64", "seed": 5})
    assert reply.status == 200, reply.body
    image = parse_png(base64.b64decode(reply.json()["data"][0]["b64_json"]))
    assert scene_problems(image.pixels, image.width, image.height, *SCENES[prompt]) == []


def test_one_request_id_is_logged_by_the_http_child_the_launcher_and_the_worker(
    server: Server,
) -> None:
    reply = server.generate({"prompt": "a red square", "size": "32x32", "num_inference_steps": 1})
    assert reply.status == 200, reply.body
    request_id = reply.headers["x-request-id"]
    log = server.stderr()
    assert re.search(rf"http\] INFO \S+: Request {request_id} received: n=1 size=32x32", log)
    assert re.search(rf"rank 0\] INFO \S+: Request {request_id}: 1 image\(s\) 32x32 in", log)
    assert re.search(rf"launcher\] INFO \S+: Request {request_id}: 1 image\(s\) generated", log)
    assert re.search(rf"http\] INFO \S+: Request {request_id} done in \d+\.\d+ s: 1 image", log)


def test_a_size_the_model_was_not_trained_at_is_warned_about_in_the_answer_and_the_log(
    server: Server,
) -> None:
    reply = server.generate({"prompt": "a red square", "size": "96x32", "num_inference_steps": 1})
    assert reply.status == 200, reply.body
    warning = reply.json()["warning"]
    assert warning == (
        "cardcage/tiny-dit: the model was trained at 64x64; 96x32 lies outside what it learned, "
        "so expect repeated or distorted shapes rather than the scene asked for. Ask for 64x64 "
        "for a faithful picture."
    )
    request_id = reply.headers["x-request-id"]
    assert f"launcher] WARNING {SERVE_MODULE}: Request {request_id}: {warning}" in server.stderr()
    trained = server.generate({"prompt": "a red square", "size": "64x64", "num_inference_steps": 1})
    assert trained.status == 200, trained.body
    assert "warning" not in trained.json()  # the OpenAI shape, with no extension to ignore
    assert f"Request {trained.headers['x-request-id']}: cardcage" not in server.stderr()


SERVE_MODULE = "cardcage.diffusion.runtime.entrypoints.serve"


BAD_BODIES: list[tuple[str, bytes, int, str | None, str]] = [
    ("not json", b"{nope", 400, None, "invalid_json"),
    ("not an object", b"[1, 2]", 400, None, "invalid_json"),
    ("missing prompt", b'{"n": 1}', 400, "prompt", "missing_parameter"),
    ("empty prompt", b'{"prompt": "   "}', 400, "prompt", "invalid_value"),
    ("prompt not a string", b'{"prompt": 3}', 400, "prompt", "invalid_type"),
    ("prompt too long", json.dumps({"prompt": "x" * 4001}).encode(), 400, "prompt",
     "invalid_value"),
    ("unknown field", b'{"prompt": "a", "qualty": "hd"}', 400, "qualty", "unknown_parameter"),
    ("n is zero", b'{"prompt": "a", "n": 0}', 400, "n", "invalid_value"),
    ("n too large", b'{"prompt": "a", "n": 17}', 400, "n", "invalid_value"),
    ("n is a string", b'{"prompt": "a", "n": "2"}', 400, "n", "invalid_type"),
    ("n is a bool", b'{"prompt": "a", "n": true}', 400, "n", "invalid_type"),
    ("size without x", b'{"prompt": "a", "size": "64"}', 400, "size", "invalid_value"),
    ("size not a multiple of 8", b'{"prompt": "a", "size": "65x64"}', 400, "size",
     "invalid_value"),
    ("size too large", b'{"prompt": "a", "size": "8192x64"}', 400, "size", "invalid_value"),
    ("size is a number", b'{"prompt": "a", "size": 64}', 400, "size", "invalid_type"),
    ("size beyond the model's limit",
     b'{"prompt": "a", "size": "4096x8", "num_inference_steps": 1}', 400, "size",
     "invalid_value"),
    ("transparent background", b'{"prompt": "a", "background": "transparent"}', 400,
     "background", "unsupported_value"),
    ("streaming", b'{"prompt": "a", "stream": true}', 400, "stream", "unsupported_value"),
    ("partial images", b'{"prompt": "a", "partial_images": 2}', 400, "partial_images",
     "unsupported_value"),
    ("unknown quality", b'{"prompt": "a", "quality": "ultra"}', 400, "quality", "invalid_value"),
    ("compression above 100", b'{"prompt": "a", "output_compression": 101}', 400,
     "output_compression", "invalid_value"),
    ("gif output", b'{"prompt": "a", "output_format": "gif"}', 400, "output_format",
     "invalid_value"),
    ("lone surrogate in the prompt", b'{"prompt": "a \\ud800 cat"}', 400, "prompt",
     "invalid_value"),
    ("deeply nested JSON", b'{"prompt": ' + b"[" * 200_000 + b"]" * 200_000 + b"}", 400, None,
     "invalid_json"),
    ("4,300-digit integer", b'{"prompt": "a", "seed": ' + b"9" * 4301 + b"}", 400, None,
     "invalid_json"),
    ("more steps than the server allows", b'{"prompt": "a", "num_inference_steps": 101}', 400,
     "num_inference_steps", "invalid_value"),
    ("more pixels than the server allows", b'{"prompt": "a", "size": "1032x1024"}', 400, "size",
     "invalid_value"),
    ("other response format", b'{"prompt": "a", "response_format": "jpeg"}', 400,
     "response_format", "invalid_value"),
    ("negative seed", b'{"prompt": "a", "seed": -1}', 400, "seed", "invalid_value"),
    ("steps as float", b'{"prompt": "a", "num_inference_steps": 2.5}', 400,
     "num_inference_steps", "invalid_type"),
    ("guidance below 1", b'{"prompt": "a", "guidance_scale": 0.5}', 400, "guidance_scale",
     "invalid_value"),
    ("negative prompt not a string", b'{"prompt": "a", "negative_prompt": 1}', 400,
     "negative_prompt", "invalid_type"),
    ("another model", b'{"prompt": "a", "model": "dall-e-3"}', 404, "model", "model_not_found"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("body", "status", "param", "code"),
    [case[1:] for case in BAD_BODIES],
    ids=[case[0] for case in BAD_BODIES],
)
def test_bad_generation_requests_get_openai_shaped_4xx_errors(
    server: Server, body: bytes, status: int, param: str | None, code: str
) -> None:
    reply = server.generate(body, headers={"Content-Type": "application/json"})
    assert reply.status == status
    error = error_of(reply)
    assert error["type"] == "invalid_request_error"
    assert (error["param"], error["code"]) == (param, code)
    if param is not None:
        assert param in error["message"]


def test_url_response_format_links_to_the_image_on_this_server(server: Server) -> None:
    reply = server.generate({"prompt": "a", "size": "32x32", "num_inference_steps": 1,
                             "response_format": "url", "seed": 5})  # fmt: skip
    assert reply.status == 200, reply.body
    [item] = reply.json()["data"]
    assert "b64_json" not in item
    prefix = f"{server.url}/v1/images/"
    assert item["url"].startswith(prefix)
    image = server.request("GET", item["url"][len(server.url) :])
    assert image.status == 200
    assert image.headers["content-type"] == "image/png"
    inline = server.generate({"prompt": "a", "size": "32x32", "num_inference_steps": 1, "seed": 5})
    assert image.body == base64.b64decode(inline.json()["data"][0]["b64_json"])
    missing = server.request("GET", "/v1/images/img_unknown")
    assert missing.status == 404
    assert error_of(missing)["code"] == "image_not_found"


@pytest.mark.parametrize(("fmt", "magic"), [("jpeg", b"\xff\xd8\xff"), ("webp", b"RIFF")])
def test_every_openai_field_is_accepted_and_output_format_is_honoured(
    server: Server, fmt: str, magic: bytes
) -> None:
    body = {
        "prompt": "a boat", "model": MODEL, "n": 1, "size": "auto", "quality": "hd",
        "style": "natural", "background": "opaque", "moderation": "low", "output_format": fmt,
        "output_compression": 80, "response_format": "b64_json", "stream": False,
        "partial_images": 0, "user": "tester", "num_inference_steps": 1,
    }  # fmt: skip
    reply = server.generate(body)
    assert reply.status == 200, reply.body
    answer = reply.json()
    assert (answer["output_format"], answer["size"]) == (fmt, "64x64")  # "auto": the native size
    assert base64.b64decode(answer["data"][0]["b64_json"]).startswith(magic)


def test_too_much_work_is_413_and_never_reaches_a_worker(server: Server) -> None:
    body = {"prompt": "a", "size": "512x512", "num_inference_steps": 60}  # > 512*512*50
    reply = server.generate(body)
    assert reply.status == 413
    error = error_of(reply)
    assert error["code"] == "request_too_large"
    assert "--max-pixel-steps" in error["message"]
    request_id = reply.headers["x-request-id"]
    assert not re.search(rf"rank \d+\] .*Request {request_id}", server.stderr())


def test_openapi_document_and_docs_page_are_served(server: Server) -> None:
    spec = server.request("GET", "/openapi.json")
    assert spec.status == 200
    paths = spec.json()["paths"]
    assert "/v1/images/generations" in paths
    schema = paths["/v1/images/generations"]["post"]["requestBody"]["content"]
    assert "output_format" in schema["application/json"]["schema"]["properties"]
    assert server.request("GET", "/docs").status == 200


def test_a_get_with_a_body_does_not_desynchronise_the_connection(server: Server) -> None:
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
        fake = b"GET /nope HTTP/1.1\r\nHost: x\r\n\r\n"
        sock.sendall(
            b"GET /v1/models HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s"
            b"GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n" % (len(fake), fake)
        )
        received = b""
        while received.count(b"HTTP/1.1 ") < 2:
            chunk = sock.recv(65536)
            assert chunk, received
            received += chunk
    # Two answers, both for /v1/models: the body was read as a body, not as a request.
    assert received.count(b"HTTP/1.1 200 OK") == 2
    assert b"404" not in received


def test_conflicting_content_lengths_are_refused_with_400(server: Server) -> None:
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
        sock.sendall(
            b"POST /v1/images/generations HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n"
            b"Content-Length: 40\r\n\r\n{}"
        )
        answer = sock.recv(65536)
    assert answer.startswith(b"HTTP/1.1 400 ")


def test_wrong_method_on_a_known_path_is_405_with_allow(server: Server) -> None:
    reply = server.request("GET", "/v1/images/generations")
    assert reply.status == 405
    assert reply.headers["allow"] == "POST"
    assert error_of(reply)["code"] == "method_not_allowed"
    assert server.request("DELETE", "/health").status == 405
    assert server.request("POST", "/v1/models", b"{}").status == 405


def test_unknown_path_is_404(server: Server) -> None:
    for method, path in (("GET", "/v1/images/edits"), ("POST", "/v2/x"), ("PUT", "/")):
        reply = server.request(method, path, b"{}" if method != "GET" else None)
        assert reply.status == 404, (method, path)
        assert "/v1/images/generations" in error_of(reply)["message"]


def test_too_large_body_is_413_without_reading_it(server: Server) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    try:
        conn.putrequest("POST", "/v1/images/generations")
        conn.putheader("Content-Type", "application/json")
        conn.putheader("Content-Length", str(64 << 20))
        conn.endheaders()  # the 64 MiB never follow: the answer must not wait for them
        response = conn.getresponse()
        assert response.status == 413
        assert response.getheader("Connection") == "close"
        error = json.loads(response.read())["error"]
        assert error["code"] == "body_too_large"
    finally:
        conn.close()


def test_missing_content_length_is_411(server: Server) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    try:
        conn.putrequest("POST", "/v1/images/generations")
        conn.endheaders()
        response = conn.getresponse()
        assert response.status == 411
        assert json.loads(response.read())["error"]["code"] == "length_required"
    finally:
        conn.close()


def test_keep_alive_connection_serves_several_requests(server: Server) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    try:
        for _ in range(3):
            conn.request("GET", "/v1/models")
            response = conn.getresponse()
            assert response.status == 200
            response.read()
        conn.request("POST", "/v1/images/generations", body=b'{"prompt": ""}')
        response = conn.getresponse()
        assert response.status == 400
        response.read()
        conn.request("GET", "/health")
        assert conn.getresponse().status == 200
    finally:
        conn.close()


def test_hooks_are_applied_in_the_http_child_before_the_server_module_is_imported(
    server: Server,
) -> None:
    card = server.request("GET", "/v1/models").json()["data"][0]
    # http_server binds model_card at import time: only a hook applied before that import
    # reaches the binding, and the card is built in the HTTP child.
    http_pid = card.get("hooked_in_pid")
    assert http_pid is not None, card
    assert http_pid in descendants(server.process.pid)
    [registered] = [e for e in server.events() if e["pid"] == http_pid]
    assert registered["process"] == HTTP_CHILD_NAME
    assert registered["server_module_imported"] is False


def test_children_of_the_console_script_do_not_warn_about_early_imports(server: Server) -> None:
    assert EARLY_IMPORT_WARNING not in server.stderr()


# -- lifecycle ------------------------------------------------------------------------------------


def test_sigterm_stops_the_server_and_leaves_no_process_socket_or_shared_memory(
    tmp_path: Path,
) -> None:
    with run_server(tmp_path, num_gpus=2) as running:
        health = running.request("GET", "/health").json()
        assert [w["rank"] for w in health["workers"]] == [0, 1]
        image = running.generate({"prompt": "a kite", "size": "32x32", "num_inference_steps": 1})
        assert image.status == 200, image.body
        tree = running.tree()
        assert len(tree) >= 4  # launcher, HTTP child, two workers
        assert list(running.tmpdir.iterdir()), "the bridge socket directory exists while serving"
        assert running.stop(signal.SIGTERM) == 0
        assert survivors(tree) == []
        assert shm_segments_of(tree) == []
        assert list(running.tmpdir.iterdir()) == []
        assert "Stopped in" in running.stderr()


def test_ctrl_c_on_the_process_group_stops_everything_cleanly(tmp_path: Path) -> None:
    with run_server(tmp_path) as running:
        tree = running.tree()
        assert running.stop(signal.SIGINT, group=True) == 0
        assert survivors(tree) == []
        assert shm_segments_of(tree) == []
        assert "Traceback" not in running.stderr()


def test_a_dead_worker_turns_health_to_503_and_requests_to_5xx(tmp_path: Path) -> None:
    with run_server(tmp_path, num_gpus=2) as running:
        workers = running.request("GET", "/health").json()["workers"]
        tree = running.tree()
        os.kill(workers[1]["pid"], signal.SIGKILL)
        reply = wait_for_status(running, "/health", 503)
        assert reply.status == 503
        assert not reply.json()["workers"][1]["alive"]
        failed = running.generate({"prompt": "a red circle", "size": "32x32"})
        assert failed.status == 500
        error = error_of(failed)
        assert (error["type"], error["code"]) == ("server_error", "worker_died")
        assert "rank 1" in error["message"]
        assert "Traceback" not in error["message"]
        # The group is shut down now: later requests are refused as unavailable.
        later = running.generate({"prompt": "a red circle", "size": "32x32"})
        assert later.status == 503
        assert error_of(later)["code"] == "workers_unavailable"
        assert running.stop(signal.SIGTERM) == 0
        assert survivors(tree) == []
        assert shm_segments_of(tree) == []
        assert "rank 1" in running.stderr()


def test_requests_beyond_the_queue_bound_get_503_busy_and_stop_still_cleans_up(
    tmp_path: Path,
) -> None:
    with run_server(tmp_path, "--max-queue", "0") as running:
        tree = running.tree()
        answers: list[object] = []

        def slow() -> None:
            body = {"prompt": "a long one", "n": 4, "size": "128x128", "num_inference_steps": 100}
            try:
                answers.append(running.generate(body).status)
            except (OSError, http.client.HTTPException) as exc:  # the server stopped under it
                answers.append(exc)

        thread = threading.Thread(target=slow, daemon=True)
        thread.start()
        end = time.monotonic() + 30
        while running.request("GET", "/health").json()["queued"] < 1:
            assert time.monotonic() < end, "the slow request never reached the launcher"
            time.sleep(0.02)
        busy = running.generate({"prompt": "one more", "size": "32x32"})
        assert busy.status == 503
        assert busy.headers["retry-after"] == "1"
        error = error_of(busy)
        assert error["code"] == "server_busy"
        assert "limit 1" in error["message"]
        # Stopping while a worker is busy: it is terminated after a short grace, not awaited.
        assert running.stop(signal.SIGTERM) == 0
        thread.join(30)
        assert answers
        assert survivors(tree) == []
        assert shm_segments_of(tree) == []


def test_a_port_in_use_fails_serve_with_exit_1_naming_the_port(tmp_path: Path) -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        with run_server(tmp_path, port=port, wait_ready=False) as running:
            assert running.process.wait(timeout=STARTUP_DEADLINE) == 1
            stderr = running.stderr()
            assert f"Cannot listen on 127.0.0.1:{port}" in stderr
            assert "Traceback" not in stderr


# -- the request parser (no processes) ------------------------------------------------------------


@given(st.integers(1, 512), st.integers(1, 512))
def test_size_parses_width_then_height(width: int, height: int) -> None:
    assert parse_size(f"{width}x{height}") == (width, height)


@given(
    st.text(max_size=12).filter(
        lambda s: s != "auto" and re.fullmatch(r"\s*\d{1,5}x\d{1,5}\s*", s) is None
    )
)
def test_size_that_is_not_width_x_height_is_refused(value: str) -> None:
    with pytest.raises(ApiError) as caught:
        parse_size(value)
    assert (caught.value.status, caught.value.param) == (400, "size")


@given(
    st.dictionaries(
        st.text(min_size=1, max_size=10).filter(
            lambda k: k not in ImageGenerationRequest.model_fields
        ),
        st.none() | st.integers() | st.text(max_size=5),
        min_size=1,
        max_size=3,
    )
)
def test_any_unknown_field_is_refused_by_name(extra: dict[str, object]) -> None:
    body = json.dumps({"prompt": "a red circle", **extra}).encode()
    with pytest.raises(ApiError) as caught:
        parse_image_request(body, model_id=MODEL)
    assert caught.value.code == "unknown_parameter"
    assert caught.value.param in extra


# -- the bridge and the child's preconditions (in process, real sockets) --------------------------


class _Echo:
    def handle(self, message: dict[str, Any]) -> dict[str, Any]:
        return {"ok": True, "echo": message}


def test_the_bridge_answers_only_clients_holding_the_authkey_and_cleans_up() -> None:
    from multiprocessing import AuthenticationError
    from multiprocessing.connection import Client

    from cardcage.diffusion.runtime.entrypoints.bridge import BridgeClient, BridgeServer

    bridge = BridgeServer(_Echo())
    bridge.start()
    directory = Path(bridge.address).parent
    try:
        assert directory.stat().st_mode & 0o777 == 0o700
        reply = BridgeClient(bridge.address).call("health", extra=1)
        assert reply == {"ok": True, "echo": {"op": "health", "extra": 1}}
        with pytest.raises(AuthenticationError):
            Client(bridge.address, family="AF_UNIX", authkey=b"not the launcher's key")
        # The server survives a rejected client.
        assert BridgeClient(bridge.address).call("health")["ok"] is True
    finally:
        bridge.close()
    assert not directory.exists()


def test_the_http_server_refuses_to_start_outside_serve(monkeypatch: pytest.MonkeyPatch) -> None:
    from cardcage.diffusion.runtime.entrypoints.errors import HttpServerError
    from cardcage.diffusion.runtime.entrypoints.http_server import launch_http_server_only
    from cardcage.diffusion.runtime.server_args import ServerArgs

    monkeypatch.delenv("CARDCAGE_DIFFUSION_HTTP_BRIDGE", raising=False)
    with pytest.raises(HttpServerError, match="CARDCAGE_DIFFUSION_HTTP_BRIDGE is not set"):
        launch_http_server_only(ServerArgs(model_path=MODEL, port=free_port()))


def test_the_http_child_reports_a_port_it_cannot_bind_to_the_launcher(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from cardcage.diffusion.runtime.entrypoints.bridge import BridgeServer
    from cardcage.diffusion.runtime.entrypoints.http_server import launch_http_server_only
    from cardcage.diffusion.runtime.server_args import ServerArgs

    reports: list[dict[str, Any]] = []

    class Recorder:
        def handle(self, message: dict[str, Any]) -> dict[str, Any]:
            reports.append(message)
            return {"ok": True}

    bridge = BridgeServer(Recorder())
    bridge.start()
    try:
        with socket.create_server(("127.0.0.1", 0)) as taken:
            port = taken.getsockname()[1]
            monkeypatch.setenv("CARDCAGE_DIFFUSION_HTTP_BRIDGE", bridge.address)
            with pytest.raises(SystemExit) as exited:
                launch_http_server_only(ServerArgs(model_path=MODEL, port=port))
    finally:
        bridge.close()
    assert exited.value.code == 1
    [report] = reports
    assert report["op"] == "failed"
    assert report["message"].startswith(f"Cannot listen on 127.0.0.1:{port}: ")


# -- the store behind response_format "url" (in process) -------------------------------------------


def test_the_image_store_keeps_images_within_its_byte_budget_dropping_the_oldest() -> None:
    from cardcage.diffusion.runtime.entrypoints.http_server import ImageStore

    store = ImageStore(ttl=600, max_bytes=10)
    first = store.put(b"aaaa", "image/png")
    second = store.put(b"bbbb", "image/png")
    assert store.get(first) == ("image/png", b"aaaa")
    third = store.put(b"cccc", "image/webp")  # 12 bytes would exceed 10: the oldest goes
    assert store.get(first) is None
    assert store.get(second) == ("image/png", b"bbbb")
    assert store.get(third) == ("image/webp", b"cccc")
    assert len({first, second, third}) == 3
    assert all(key.startswith("img_") for key in (first, second, third))


def test_the_image_store_forgets_an_image_once_its_time_is_up() -> None:
    from cardcage.diffusion.runtime.entrypoints.http_server import ImageStore

    store = ImageStore(ttl=0, max_bytes=1 << 20)  # expired as soon as it is stored
    assert store.get(store.put(b"data", "image/png")) is None
