"""`python -m nodmix.testing.model_server` as a real subprocess."""

from __future__ import annotations

import selectors
import signal
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx2
import pytest

pytestmark = pytest.mark.integration

DEADLINE = 10.0


def read_line(proc: subprocess.Popen[str], deadline: float = DEADLINE) -> str:
    """One stdout line, failing instead of hanging if the server never prints it."""
    assert proc.stdout is not None
    with selectors.DefaultSelector() as selector:
        selector.register(proc.stdout, selectors.EVENT_READ)
        if not selector.select(timeout=deadline):
            raise AssertionError("the server printed nothing in time")
    return proc.stdout.readline()


@contextmanager
def running(*args: str) -> Iterator[tuple[subprocess.Popen[str], str]]:
    with subprocess.Popen(
        [sys.executable, "-m", "nodmix.testing.model_server", "--port", "0", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as proc:
        try:
            line = read_line(proc)
            assert line.startswith("listening on http://127.0.0.1:"), line
            yield proc, line.split()[-1]
        finally:
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
                try:
                    proc.wait(timeout=DEADLINE)
                except subprocess.TimeoutExpired:
                    proc.kill()


def chat(base_url: str, text: str) -> str:
    response = httpx2.post(
        f"{base_url}/chat/completions",
        json={"model": "m", "messages": [{"role": "user", "content": text}]},
        timeout=5,
    )
    return str(response.json()["choices"][0]["message"]["content"])


def test_the_echo_server_answers_and_stops_cleanly_on_sigint() -> None:
    start = time.monotonic()
    with running("--script", "echo") as (proc, base_url):
        assert base_url.endswith("/v1")
        assert chat(base_url, "ping") == "ping"
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=DEADLINE) == 0
        assert proc.stderr is not None
        assert proc.stderr.read() == ""
    assert time.monotonic() - start < DEADLINE


def test_a_script_file_defines_the_answers(tmp_path: Path) -> None:
    script = tmp_path / "shout.py"
    script.write_text(
        "from nodmix.providers.fake import ModelReply\n"
        "from nodmix.testing.scripts.echo import last_user_text\n"
        "def respond(request):\n"
        "    return ModelReply.text((last_user_text(request) or '').upper())\n",
        encoding="utf-8",
    )
    with running("--script", str(script)) as (_, base_url):
        assert chat(base_url, "quiet") == "QUIET"


def test_an_unknown_script_exits_with_a_one_line_error() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "nodmix.testing.model_server", "--script", "no-such-script"],
        capture_output=True,
        text=True,
        timeout=DEADLINE,
    )
    assert result.returncode == 2
    assert result.stderr.startswith("model_server: error: unknown script 'no-such-script'")
    assert "code-mode, code_mode, echo, hang, huge, " in result.stderr
    assert "tool-then-answer" in result.stderr


def test_the_server_prints_the_config_lines_that_point_nodmix_at_it() -> None:
    with running("--script", "echo", "--api-key", "k1") as (proc, base_url):
        assert proc.stdout is not None
        # Printed with the "listening" line in one flush: already in the pipe's text buffer.
        lines = [proc.stdout.readline().rstrip("\n") for _ in range(3)]
    assert lines[0].startswith("point nodmix at it")
    provider, primary = lines[1].strip(), lines[2].strip()
    assert "nodmix config set models.providers.scripted '{" in provider
    assert f'baseUrl: "{base_url}"' in provider and 'apiKey: "k1"' in provider
    assert primary.endswith("nodmix config set agents.defaults.model.primary scripted/scripted")


def test_event_seconds_makes_the_server_stream_a_reply_slowly() -> None:
    # With a long pause the first event arrives and the rest is still held back: a slow
    # model, so a channel's streamed reply can be watched growing.
    with running("--script", "echo", "--event-seconds", "60") as (_, base_url):
        body = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
        timeout = httpx2.Timeout(DEADLINE, read=1.0)
        with httpx2.stream("POST", f"{base_url}/chat/completions", json=body, timeout=timeout) as r:
            lines = r.iter_lines()
            first = next(line for line in lines if line)
            assert first.startswith("data: {")
            with pytest.raises(httpx2.ReadTimeout):
                next(line for line in lines if line)


def test_a_negative_event_seconds_is_refused_in_one_line() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "nodmix.testing.model_server", "--event-seconds", "-1"],
        capture_output=True,
        text=True,
        timeout=DEADLINE,
    )
    assert result.returncode == 2
    assert result.stderr.strip().endswith("error: --event-seconds must be 0 or more")


def _vanish(base_url: str, path: str, head: bytes, sent: bytes, *, length: int) -> None:
    """A client that sends `sent` of a `length`-byte body and is killed (a TCP reset)."""
    port = int(base_url.split(":")[-1].split("/")[0])
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(
            f"POST {path} HTTP/1.1\r\nHost: x\r\n".encode()
            + head
            + f"Content-Length: {length}\r\n\r\n".encode()
            + sent
        )
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))


def _read_then_vanish(base_url: str, body: bytes) -> None:
    """A streaming client killed after the first bytes of the reply."""
    port = int(base_url.split(":")[-1].split("/")[0])
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\n"
            + f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
        assert sock.recv(100).startswith(b"HTTP/1.1 200")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))


def test_clients_killed_mid_request_leave_no_traceback() -> None:
    chat_body = b'{"model": "m", "stream": true, "messages": [{"role": "user", "content": "hi"}]}'
    form = b"multipart/form-data; boundary=b"
    with running("--script", "echo", "--event-seconds", "0.2") as (proc, base_url):
        json_head = b"content-type: application/json\r\n"
        _vanish(base_url, "/v1/chat/completions", json_head, chat_body[:20], length=10_000)
        _vanish(base_url, "/v1/messages", json_head, chat_body[:20], length=10_000)
        _vanish(base_url, "/v1/embeddings", json_head, b'{"inp', length=10_000)
        _vanish(
            base_url,
            "/v1/audio/transcriptions",
            b"content-type: " + form + b"\r\n",
            b'--b\r\nContent-Disposition: form-data; name="file"; filename="a.wav"\r\n\r\nRIFF',
            length=100_000,
        )
        _read_then_vanish(base_url, chat_body)
        assert chat(base_url, "still there") == "still there"
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=DEADLINE) == 0
        assert proc.stderr is not None
        errors = proc.stderr.read()
    assert "Traceback" not in errors and "Exception" not in errors, errors
