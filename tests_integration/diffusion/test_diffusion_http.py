"""``cardcage-diffusion serve`` driven by the official ``openai`` client and by raw HTTP.

Run by the nox session ``scenario-diffusion``, whose venv holds the built wheels and the pinned
``openai`` client. Each server is the real console script started with ``--port 0`` (the test
reads the URL it prints), the built-in CPU platform and real worker processes; nothing is mocked.
Waiting is on events: the "Serving" line, log lines that name a request id, process exits.
Timing never decides a verdict: "served at once after a cancellation" is proven by the log
(the cancelled request stopped before its last step, the next one ran after it).
"""

from __future__ import annotations

import base64
import contextlib
import http.client
import io
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
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

SITES = Path(os.environ.get("CC_SCENARIO_SITES", "/nonexistent")).resolve()

pytestmark = pytest.mark.skipif(
    not SITES.is_dir(), reason="run through `nox -s scenario-diffusion` (needs its venv)"
)

MODEL = "cardcage/tiny-dit"
STARTUP_DEADLINE = 120.0
EVENT_DEADLINE = 120.0
CLIENTS = 32


def _console_script() -> list[str]:
    script = Path(sys.executable).with_name("cardcage-diffusion")
    if script.exists():
        return [str(script)]
    return [sys.executable, "-m", "cardcage.diffusion.runtime.entrypoints.cli"]


def _descendants(pid: int) -> set[int]:
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


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _survivors(pids: set[int]) -> list[int]:
    """``pids`` still alive once they had a bounded moment to finish exiting."""
    end = time.monotonic() + 15.0
    while True:
        left = [pid for pid in pids if _alive(pid)]
        if not left or time.monotonic() > end:
            return left
        time.sleep(0.05)


def _shm_names() -> set[str]:
    return set(os.listdir("/dev/shm")) if os.path.isdir("/dev/shm") else set()


@dataclass
class Server:
    process: subprocess.Popen[bytes]
    url: str
    port: int
    log_path: Path
    tmpdir: Path

    def log(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def wait_for_log(self, pattern: str) -> re.Match[str]:
        """The first match of ``pattern`` in the server's log, waiting for it to be written."""
        end = time.monotonic() + EVENT_DEADLINE
        while True:
            match = re.search(pattern, self.log())
            if match is not None:
                return match
            if self.process.poll() is not None or time.monotonic() > end:
                raise AssertionError(f"no log line matches {pattern!r}:\n{self.log()[-4000:]}")
            time.sleep(0.02)

    def client(self, **options: Any) -> Any:
        import openai

        return openai.OpenAI(
            base_url=f"{self.url}/v1", api_key="not-checked", max_retries=0, **options
        )

    def tree(self) -> set[int]:
        return {self.process.pid, *_descendants(self.process.pid)}


def _read_url(process: subprocess.Popen[bytes], log_path: Path) -> str:
    assert process.stdout is not None
    end = time.monotonic() + STARTUP_DEADLINE
    buffered = b""
    while True:
        match = re.search(rb"Serving \S+ at (http://\S+) with", buffered)
        if match:
            return match.group(1).decode()
        remaining = end - time.monotonic()
        if remaining <= 0:
            raise AssertionError(f"serve did not get ready:\n{log_path.read_text()}")
        readable, _, _ = select.select([process.stdout], [], [], remaining)
        if readable:
            chunk = os.read(process.stdout.fileno(), 4096)
            if not chunk:
                process.wait(timeout=30)
                raise AssertionError(
                    f"serve exited with {process.returncode}:\n{log_path.read_text()}"
                )
            buffered += chunk


@contextlib.contextmanager
def run_server(tmp: Path, *args: str, num_gpus: int = 1) -> Iterator[Server]:
    tmpdir = Path(tempfile.mkdtemp(prefix="cc-http-", dir="/tmp"))  # short bridge socket path
    log_path = tmp / f"serve-{len(list(tmp.glob('serve-*')))}.log"
    env = {**os.environ, "TMPDIR": str(tmpdir)}
    for name in ("SGLANG_PLUGINS", "SGLANG_DIFFUSION_PLATFORM_OVERRIDE", "PYTHONPATH"):
        env.pop(name, None)
    command = [
        *_console_script(), "serve", "--model-path", MODEL, "--num-gpus", str(num_gpus),
        "--host", "127.0.0.1", "--port", "0", *args,
    ]  # fmt: skip
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=log, env=env, start_new_session=True
        )
    try:
        url = _read_url(process, log_path)
        yield Server(process, url, int(url.rsplit(":", 1)[1]), log_path, tmpdir)
    finally:
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=30)
        if process.stdout is not None:
            process.stdout.close()
        shutil.rmtree(tmpdir, ignore_errors=True)


def _raw_post(port: int, body: dict[str, Any]) -> socket.socket:
    """A generation request sent on a raw socket whose answer is never read."""
    data = json.dumps(body).encode()
    sock = socket.create_connection(("127.0.0.1", port), timeout=60)
    sock.sendall(
        b"POST /v1/images/generations HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n%s" % (len(data), data)
    )
    return sock


def _decode(data: bytes) -> Any:
    from PIL import Image

    image = Image.open(io.BytesIO(data))
    image.load()
    return image


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """Two workers, room for the slow requests below (1000 steps of 256x256); DEBUG logs, where
    rank 0 logs each denoising step (the event the cancellation tests wait for)."""
    with run_server(
        tmp_path_factory.mktemp("http"), "--max-steps", "1000", "--max-pixel-steps", "70000000",
        "--log-level", "debug", num_gpus=2,
    ) as running:  # fmt: skip
        yield running


# -- the OpenAI client ----------------------------------------------------------------------------


def test_port_0_binds_a_free_port_and_prints_it(server: Server) -> None:
    assert server.port != 0
    with urllib.request.urlopen(f"{server.url}/health", timeout=30) as reply:
        health = json.load(reply)
    assert [worker["rank"] for worker in health["workers"]] == [0, 1]


@pytest.mark.parametrize("fmt", ["png", "jpeg", "webp"])
def test_the_openai_client_gets_images_inline_and_by_url(server: Server, fmt: str) -> None:
    client = server.client()
    common: dict[str, Any] = {
        "model": MODEL, "prompt": "a white circle at night", "size": "auto", "n": 2,
        "quality": "hd", "style": "vivid", "output_format": fmt,
        "extra_body": {"seed": 21, "num_inference_steps": 2},
    }  # fmt: skip
    inline = client.images.generate(response_format="b64_json", **common)
    linked = client.images.generate(response_format="url", **common)
    assert inline.output_format == fmt
    assert len(inline.data) == len(linked.data) == 2
    for item, link in zip(inline.data, linked.data, strict=True):
        data = base64.b64decode(item.b64_json)
        image = _decode(data)
        assert (image.format, image.size, image.mode) == (fmt.upper(), (64, 64), "RGB")
        assert link.url.startswith(f"{server.url}/v1/images/")
        with urllib.request.urlopen(link.url, timeout=30) as reply:
            assert reply.headers["Content-Type"] == f"image/{fmt}"
            fetched = reply.read()
        if fmt == "png":  # lossless: the same seed gives the same pixels, and Pillow's file
            assert fetched == data
            assert _decode(fetched).tobytes() == image.tobytes()


def test_the_openai_client_keeps_the_image_id_that_the_openapi_link_follows(
    server: Server,
) -> None:
    """``image_id`` is a field OpenAI's answers lack: the official client must still parse the
    answer, and keep the id that ``/openapi.json``'s link to ``GET /v1/images/{image_id}``
    reads."""
    client = server.client()
    linked = client.images.generate(
        prompt="a blue square", size="32x32", response_format="url",
        extra_body={"num_inference_steps": 1},
    )  # fmt: skip
    [image] = linked.data
    image_id = (image.model_extra or {})["image_id"]
    assert image.url == f"{server.url}/v1/images/{image_id}"
    with urllib.request.urlopen(f"{server.url}/v1/images/{image_id}", timeout=30) as reply:
        assert reply.headers["Content-Type"] == "image/png"


def test_the_openai_client_keeps_the_warning_about_a_size_the_model_was_not_trained_at(
    server: Server,
) -> None:
    """``warning`` is cardcage's field too: the client parses the answer and keeps it, and an
    answer at the trained size (64x64) has none."""
    client = server.client()
    small = client.images.generate(
        prompt="a blue square", size="32x32", extra_body={"num_inference_steps": 1}
    )
    assert (
        "the model was trained at 64x64; 32x32 lies outside" in (small.model_extra or {})["warning"]
    )
    trained = client.images.generate(
        prompt="a blue square", size="64x64", extra_body={"num_inference_steps": 1}
    )
    assert "warning" not in (trained.model_extra or {})


def test_the_openai_client_sees_refusals_naming_the_field(server: Server) -> None:
    import openai

    client = server.client()
    with pytest.raises(openai.BadRequestError) as refused:
        client.images.generate(prompt="a", background="transparent")
    assert (refused.value.param, refused.value.code) == ("background", "unsupported_value")
    with pytest.raises(openai.BadRequestError) as refused:
        client.images.generate(prompt="a", size="100x100")
    assert refused.value.param == "size"
    with pytest.raises(openai.BadRequestError) as refused:
        client.images.generate(prompt="a", size="2048x2048")  # above --max-pixels
    assert (refused.value.param, refused.value.status_code) == ("size", 400)
    with pytest.raises(openai.APIStatusError) as too_big:
        client.images.generate(
            prompt="a", size="1024x1024", extra_body={"num_inference_steps": 100}
        )
    assert (too_big.value.status_code, too_big.value.code) == (413, "request_too_large")
    with pytest.raises(openai.NotFoundError) as missing:
        client.images.generate(prompt="a", model="dall-e-3")
    assert missing.value.param == "model"


# -- raw HTTP -------------------------------------------------------------------------------------


def test_malformed_bodies_get_400_and_the_connection_keeps_serving(server: Server) -> None:
    bodies = [
        b'{"prompt": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
        b'{"prompt": "a", "seed": ' + b"7" * 5000 + b"}",
        b'{"prompt": "a \\udfff"}',
    ]
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
    try:
        for body in bodies:
            conn.request("POST", "/v1/images/generations", body=body)
            reply = conn.getresponse()
            error = json.loads(reply.read())["error"]
            assert reply.status == 400, error
            assert error["type"] == "invalid_request_error"
        conn.request("GET", "/health")
        reply = conn.getresponse()
        reply.read()
        assert reply.status == 200
    finally:
        conn.close()


def test_framing_defects_of_the_stdlib_server_are_gone(server: Server) -> None:
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
        smuggled = b"GET /nope HTTP/1.1\r\nHost: x\r\n\r\n"
        sock.sendall(
            b"GET /v1/models HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s"
            b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n" % (len(smuggled), smuggled)
        )
        received = b""
        while received.count(b"HTTP/1.1 ") < 2:
            chunk = sock.recv(65536)
            assert chunk, received
            received += chunk
    assert received.count(b"HTTP/1.1 200 OK") == 2  # the body stayed a body
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
        sock.sendall(
            b"POST /v1/images/generations HTTP/1.1\r\nHost: x\r\nContent-Length: 13\r\n"
            b"Content-Length: 2\r\n\r\n{}"
        )
        assert sock.recv(65536).startswith(b"HTTP/1.1 400 ")


def test_32_simultaneous_clients_are_answered_and_never_reset(server: Server) -> None:
    import openai

    start = threading.Barrier(CLIENTS)
    outcomes: list[object] = []
    lock = threading.Lock()

    def one(index: int) -> None:
        client = server.client(timeout=120)
        start.wait()
        try:
            result: object = client.images.generate(
                prompt=f"client {index}", size="32x32", extra_body={"num_inference_steps": 1}
            )
        except openai.APIStatusError as exc:
            result = exc.status_code
        except Exception as exc:  # a reset or a dropped connection: the failure looked for
            result = exc
        with lock:
            outcomes.append(result)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(CLIENTS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(300)
    assert len(outcomes) == CLIENTS
    failures = [o for o in outcomes if isinstance(o, BaseException)]
    assert failures == []
    statuses = [o if isinstance(o, int) else 200 for o in outcomes]
    assert set(statuses) <= {200, 503}  # admitted, or refused at once as busy
    assert statuses.count(200) >= 1


def test_a_client_that_disconnects_cancels_its_request_on_every_worker(server: Server) -> None:
    slow = _raw_post(
        server.port, {"prompt": "never read", "size": "256x256", "num_inference_steps": 1000,
                      "seed": 990001},
    )  # fmt: skip
    with slow:
        request_id = server.wait_for_log(
            r"Request (req_\w+) received: n=1 size=256x256 steps=1000 seed=990001"
        ).group(1)
        server.wait_for_log(rf"rank 0\] DEBUG \S+: Request {request_id}: denoising step 1/1000")
    client = server.client(timeout=120)
    answer = client.images.with_raw_response.generate(
        prompt="next", size="32x32", extra_body={"num_inference_steps": 1}
    )
    next_id = answer.headers["x-request-id"]
    stopped = server.wait_for_log(rf"Request {request_id} cancelled after step (\d+)/1000")
    assert int(stopped.group(1)) < 1000
    log = server.log()
    assert f"Request {request_id} stopped (disconnected)" in log
    assert f"Request {request_id}: denoising step 1000/1000" not in log
    served = re.search(rf"rank 0\] INFO \S+: Request {next_id}: 1 image", log)
    assert served is not None
    assert stopped.start() < served.start()  # the next request ran once the cancelled one stopped
    assert not re.search(r"rank 1\] (ERROR|CRITICAL)", log)  # rank 1 stopped in step too
    with urllib.request.urlopen(f"{server.url}/health", timeout=30) as reply:
        assert json.load(reply)["status"] == "ok"  # both workers still up


# -- deadline, SIGTERM, leaks ---------------------------------------------------------------------


def test_a_request_past_its_deadline_gets_504_and_the_next_is_served(tmp_path: Path) -> None:
    import openai

    with run_server(
        tmp_path, "--request-timeout", "2", "--max-steps", "1000", "--max-pixel-steps",
        "70000000",
    ) as running:  # fmt: skip
        client = running.client(timeout=120)
        with pytest.raises(openai.APIStatusError) as late:
            client.images.generate(
                prompt="slow", size="256x256", extra_body={"num_inference_steps": 1000}
            )
        assert (late.value.status_code, late.value.code) == (504, "deadline_exceeded")
        stopped = running.wait_for_log(r"Request (req_\w+) cancelled after step (\d+)/1000")
        assert int(stopped.group(2)) < 1000
        assert f"Request {stopped.group(1)} stopped (deadline)" in running.log()
        result = client.images.generate(
            prompt="next", size="32x32", extra_body={"num_inference_steps": 1}
        )
        assert len(result.data) == 1
        running.process.send_signal(signal.SIGTERM)
        assert running.process.wait(timeout=60) == 0


def test_sigterm_mid_request_answers_it_and_leaves_nothing_behind(tmp_path: Path) -> None:
    shm_before = _shm_names()
    # DEBUG logs: rank 0's per-step lines tell when the request is running.
    with run_server(
        tmp_path, "--max-steps", "1000", "--max-pixel-steps", "70000000", "--log-level", "debug",
        num_gpus=2,
    ) as running:  # fmt: skip
        tree = running.tree()
        assert len(tree) >= 4  # launcher, HTTP child, two workers
        answers: list[tuple[int, dict[str, Any]]] = []

        def slow() -> None:
            conn = http.client.HTTPConnection("127.0.0.1", running.port, timeout=120)
            body = {"prompt": "cut short", "size": "256x256", "num_inference_steps": 1000,
                    "seed": 990002}  # fmt: skip
            conn.request("POST", "/v1/images/generations", body=json.dumps(body))
            reply = conn.getresponse()
            answers.append((reply.status, json.loads(reply.read())))
            conn.close()

        thread = threading.Thread(target=slow)
        thread.start()
        request_id = running.wait_for_log(
            r"Request (req_\w+) received: n=1 size=256x256 steps=1000 seed=990002"
        ).group(1)
        running.wait_for_log(rf"Request {request_id}: denoising step 1/1000")
        running.process.send_signal(signal.SIGTERM)
        assert running.process.wait(timeout=60) == 0
        thread.join(60)
        [(status, body)] = answers  # a complete answer, never a dropped connection
        assert status in (200, 503), body
        if status == 503:
            assert body["error"]["code"] == "server_shutting_down"
        assert _survivors(tree) == []
        leaked = {n for n in _shm_names() - shm_before if n.startswith("cardcage-")}
        assert leaked == set()
        assert list(running.tmpdir.iterdir()) == []  # the bridge socket and its directory
        with socket.socket() as probe:  # the port is free again
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind(("127.0.0.1", running.port))
        assert "Traceback" not in running.log()
