"""`POST /media/upload` bodies received at once are capped per gateway
(`gateway.maxConcurrentUploads`, 503) and per client address (`gateway.maxUploadsPerClient`,
429), before any body is read; real clients on real sockets against a real gateway."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path

import httpx2
import pytest

from nodmix.gateway import BackgroundGateway
from nodmix.testing.model_server import ScriptedModelServer
from tests.gateway.support import TOKEN, socket_gateway
from tests.media.samples import photo
from tests.support.config import scripted_config

pytestmark = pytest.mark.integration

PICTURE = photo(64, 48, "PNG")


@pytest.fixture
def gateway(isolated_state: Path, model_server: ScriptedModelServer) -> Iterator[BackgroundGateway]:
    config = scripted_config(
        model_server.base_url, gateway={"maxConcurrentUploads": 3, "maxUploadsPerClient": 2}
    )
    (isolated_state / "nodmix.json").write_text(json.dumps(config), encoding="utf-8")
    with socket_gateway() as running:
        yield running


class StalledUpload:
    """An upload from `source` whose body is still on its way once the gateway reads it."""

    def __init__(self, gateway: BackgroundGateway, source: str, stack: ExitStack) -> None:
        host, port = gateway.settings.host, gateway.settings.port
        self.sock = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
        self.sock.settimeout(10)
        self.sock.bind((source, 0))
        self.sock.connect((host, port))
        self.sock.sendall(
            b"POST /media/upload?name=slow.png HTTP/1.1\r\nHost: x\r\n"
            + f"Authorization: Bearer {TOKEN}\r\nContent-Type: image/png\r\n".encode()
            + f"Content-Length: {len(PICTURE)}\r\nExpect: 100-continue\r\n\r\n".encode()
        )
        self.head = _response(self.sock)
        """`100 Continue` once the route reads the body (the slot is taken), else the refusal."""

    def finish(self) -> bytes:
        self.sock.sendall(PICTURE)
        return _response(self.sock)


def _response(sock: socket.socket) -> bytes:
    """One response (head and `Content-Length` body), or an interim `100 Continue`."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            return data
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    while len(body) < length:
        chunk = sock.recv(65536)
        if not chunk:
            break
        body += chunk
    return head + b"\r\n\r\n" + body


def _upload(gateway: BackgroundGateway, source: str = "127.0.0.1") -> httpx2.Response:
    transport = httpx2.HTTPTransport(local_address=source)
    with httpx2.Client(base_url=gateway.url, transport=transport, timeout=10) as client:
        return client.post(
            "/media/upload?name=chart.png",
            content=PICTURE,
            headers={"authorization": f"Bearer {TOKEN}", "content-type": "image/png"},
        )


def test_uploads_beyond_the_per_client_and_gateway_caps_are_refused_before_their_body(
    gateway: BackgroundGateway,
) -> None:
    with ExitStack() as stack:
        first = StalledUpload(gateway, "127.0.0.1", stack)
        second = StalledUpload(gateway, "127.0.0.1", stack)
        assert first.head.startswith(b"HTTP/1.1 100") and second.head.startswith(b"HTTP/1.1 100")
        third = StalledUpload(gateway, "127.0.0.1", stack)
        assert third.head.startswith(b"HTTP/1.1 429"), third.head
        assert b"retry-after: 1" in third.head.lower() and b"connection: close" in third.head
        assert b"too_many_uploads" in third.head and b"gateway.maxUploadsPerClient" in third.head

        other = StalledUpload(gateway, "127.0.0.2", stack)
        assert other.head.startswith(b"HTTP/1.1 100")
        busy = _upload(gateway, "127.0.0.3")
        assert busy.status_code == 503 and busy.headers["retry-after"] == "1"
        error = busy.json()["error"]
        assert (
            error["code"] == "uploads_busy" and "gateway.maxConcurrentUploads" in error["message"]
        )

        assert b"HTTP/1.1 200" in first.finish()
        assert _upload(gateway, "127.0.0.3").status_code == 200, "a finished upload frees its slot"
        assert b"HTTP/1.1 200" in second.finish() and b"HTTP/1.1 200" in other.finish()


def test_a_crowd_of_concurrent_uploaders_gets_answers_never_errors_and_frees_every_slot(
    gateway: BackgroundGateway,
) -> None:
    sources = [f"127.0.0.{1 + n % 6}" for n in range(24)]
    with ThreadPoolExecutor(max_workers=24) as pool:
        statuses = [r.status_code for r in pool.map(lambda s: _upload(gateway, s), sources)]
    assert set(statuses) <= {200, 429, 503}, statuses
    assert 200 in statuses
    assert all(_upload(gateway, f"127.0.0.{n}").status_code == 200 for n in range(1, 4))
