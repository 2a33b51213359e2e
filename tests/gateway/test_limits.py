"""Request limits: oversized and late bodies, bad UTF-8, stalled sockets, the connection cap."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from pathlib import Path

import anyio
import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect as ws_connect

from nodmix.gateway.auth import WS_PROTOCOL, encode_subprotocol_token
from tests.gateway.support import DEADLINE_S, TOKEN, GatewayProcess, asgi_client, socket_gateway
from tests.support.process import rss_kb

pytestmark = pytest.mark.anyio

POST_ENDPOINTS = ["/v1/chat/completions", "/tools/invoke"]
BAD_UTF8 = {
    "/v1/chat/completions": b'{"model":"nodmix","messages":[{"role":"user","content":"caf\xe9"}]}',
    "/tools/invoke": b'{"tool":"read","args":{"path":"caf\xe9.txt"}}',
}


def _address(url: str) -> tuple[str, int]:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    return host, int(port)


@contextmanager
def raw_socket(url: str) -> Iterator[socket.socket]:
    """A plain TCP connection to the gateway (every read bounded by the test deadline)."""
    sock = socket.create_connection(_address(url), timeout=DEADLINE_S)
    try:
        yield sock
    finally:
        sock.close()


def _head(path: str, *, length: int | None = None, chunked: bool = False) -> bytes:
    lines = [
        f"POST {path} HTTP/1.1",
        "host: 127.0.0.1",
        f"authorization: Bearer {TOKEN}",
        "content-type: application/json",
    ]
    if length is not None:
        lines.append(f"content-length: {length}")
    if chunked:
        lines.append("transfer-encoding: chunked")
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def _read_response(sock: socket.socket) -> tuple[int, dict[str, str], bytes]:
    """Status, headers and body of one response (reads until the server closes)."""
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in header_lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return int(status_line.split()[1]), headers, body


def _drain(sock: socket.socket) -> bytes:
    """What the server sends until it closes the connection (each read bounded by a timeout)."""
    data = b""
    try:
        while chunk := sock.recv(65536):
            data += chunk
    except ConnectionResetError:
        pass
    return data


# ---- body size --------------------------------------------------------------------------------


@pytest.mark.parametrize("path", POST_ENDPOINTS)
def test_declared_oversized_body_gets_413_before_it_is_sent(configured: Path, path: str) -> None:
    with socket_gateway() as gateway, raw_socket(gateway.url) as sock:
        sock.sendall(_head(path, length=50 * 1024 * 1024))  # the 50 MB body is never sent
        status, headers, body = _read_response(sock)
    assert status == 413
    assert headers["connection"] == "close"
    error = json.loads(body)["error"]
    assert error["code"] == "request_too_large"
    assert error["type"] == "invalid_request_error"
    assert "gateway.maxBodyBytes" in error["message"]


@pytest.mark.parametrize("path", POST_ENDPOINTS)
async def test_chunked_body_is_cut_off_once_it_passes_the_limit(
    configured: Path, path: str
) -> None:
    sent = 0

    async def body() -> AsyncIterator[bytes]:
        nonlocal sent
        for _ in range(1000):  # 16 MB if it were all read
            sent += 16 * 1024
            yield b" " * (16 * 1024)

    async with asgi_client(max_body_bytes=64 * 1024) as client:
        response = await client.post(path, content=body())
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "request_too_large"
    assert response.headers["connection"] == "close"
    assert sent <= 128 * 1024


async def test_body_within_the_limit_is_served(configured: Path) -> None:
    message = {"model": "nodmix", "messages": [{"role": "user", "content": "x" * 30_000}]}
    async with asgi_client(max_body_bytes=64 * 1024) as client:
        response = await client.post("/v1/chat/completions", json=message)
    assert response.status_code == 200
    assert response.json()["choices"][0]["message"]["content"] == "x" * 30_000


def test_a_50_mb_upload_does_not_grow_the_gateway_process(configured: Path) -> None:
    with GatewayProcess(configured, "--token", TOKEN) as gateway:
        assert gateway.proc is not None
        before = rss_kb(gateway.proc.pid)
        with raw_socket(gateway.url) as sock:
            payload = _head("/v1/chat/completions", length=50 * 1024 * 1024)
            try:
                sock.sendall(payload + b"x" * (50 * 1024 * 1024))
            except OSError:
                pass  # refused mid-upload: the server closed the connection early
            answer = _drain(sock)
        after = rss_kb(gateway.proc.pid)
    assert after - before < 16 * 1024, f"RSS grew from {before} KB to {after} KB"
    assert answer == b"" or answer.startswith(b"HTTP/1.1 413 ")


def test_websocket_message_over_the_limit_closes_with_1009(configured: Path) -> None:
    with socket_gateway(max_body_bytes=64 * 1024) as gateway:
        url = gateway.url.replace("http://", "ws://") + "/ws"
        protocols = [WS_PROTOCOL, encode_subprotocol_token(TOKEN)]
        with ws_connect(url, subprotocols=protocols, open_timeout=DEADLINE_S) as ws:  # type: ignore[arg-type]
            ws.send(json.dumps({"type": "req", "id": 1, "method": "health", "pad": "x" * 70_000}))
            with pytest.raises(ConnectionClosed) as closed:
                ws.recv(timeout=DEADLINE_S)
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 1009


# ---- invalid UTF-8 -----------------------------------------------------------------------------


@pytest.mark.parametrize("path", POST_ENDPOINTS)
async def test_invalid_utf8_body_is_a_400_naming_the_problem(configured: Path, path: str) -> None:
    async with asgi_client() as client:
        response = await client.post(
            path, content=BAD_UTF8[path], headers={"content-type": "application/json"}
        )
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["message"] == "the request body is not valid UTF-8"
    assert error["code"] == "bad_request"


DEEP = b"[" * 5000 + b"]" * 5000
DEEPLY_NESTED = {
    "/v1/chat/completions": b'{"model":"nodmix","extra":' + DEEP + b',"messages":[]}',
    "/tools/invoke": b'{"tool":"read","args":{"path":' + DEEP + b"}}",
}


@pytest.mark.parametrize("path", POST_ENDPOINTS)
async def test_a_deeply_nested_body_is_a_400_not_an_internal_error(
    configured: Path, path: str
) -> None:
    async with asgi_client() as client:
        response = await client.post(
            path, content=DEEPLY_NESTED[path], headers={"content-type": "application/json"}
        )
    assert response.status_code == 400, response.text
    assert response.json()["error"]["message"] == "the request body is nested too deeply"


def test_a_deeply_nested_websocket_frame_is_refused_and_the_connection_stays_usable(
    configured: Path,
) -> None:
    with socket_gateway() as gateway:
        url = gateway.url.replace("http://", "ws://") + "/ws"
        protocols = [WS_PROTOCOL, encode_subprotocol_token(TOKEN)]
        with ws_connect(url, subprotocols=protocols, open_timeout=DEADLINE_S) as ws:  # type: ignore[arg-type]
            ws.send(DEEP.decode())
            answer = json.loads(ws.recv(timeout=DEADLINE_S))
            assert answer["ok"] is False and answer["error"]["code"] == "bad_request"
            ws.send('{"type":"req","id":1,"method":"health"}')
            assert json.loads(ws.recv(timeout=DEADLINE_S))["ok"] is True


def test_websocket_frames_that_are_not_utf8_text_are_refused(configured: Path) -> None:
    with socket_gateway() as gateway:
        url = gateway.url.replace("http://", "ws://") + "/ws"
        protocols = [WS_PROTOCOL, encode_subprotocol_token(TOKEN)]
        with ws_connect(url, subprotocols=protocols, open_timeout=DEADLINE_S) as ws:  # type: ignore[arg-type]
            ws.send(b"\xff\xfe not text")  # a binary frame
            answer = json.loads(ws.recv(timeout=DEADLINE_S))
            assert answer["ok"] is False and answer["error"]["code"] == "bad_request"
            ws.send(b'{"type":"req","id":1,"method":"health","x":"\xff"}', text=True)
            with pytest.raises(ConnectionClosed) as closed:
                ws.recv(timeout=DEADLINE_S)
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 1007


# ---- slow clients ------------------------------------------------------------------------------


async def test_body_that_stalls_gets_408(configured: Path) -> None:
    stalled = anyio.Event()

    async def body() -> AsyncIterator[bytes]:
        yield b'{"model": "nodmix", '
        await stalled.wait()  # never set: the client stops sending
        yield b"}"

    async with asgi_client(request_timeout_seconds=0.2) as client:
        response = await client.post("/v1/chat/completions", content=body())
    assert response.status_code == 408
    assert response.json()["error"]["code"] == "request_timeout"
    assert response.headers["connection"] == "close"


@pytest.mark.parametrize(
    "sent",
    [b"", b"POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1\r\n"],
    ids=["nothing", "half a request head"],
)
def test_stalled_socket_is_closed_by_the_server(configured: Path, sent: bytes) -> None:
    with socket_gateway(request_timeout_seconds=0.3) as gateway, raw_socket(gateway.url) as sock:
        sock.sendall(sent)
        assert _drain(sock) == b""  # closed (a read times out after DEADLINE_S otherwise)


def test_request_head_over_64_kb_is_refused(configured: Path) -> None:
    with socket_gateway() as gateway, raw_socket(gateway.url) as sock:
        sock.sendall(b"GET /health HTTP/1.1\r\nhost: 127.0.0.1\r\nx-pad: " + b"a" * 70_000)
        status, _, _ = _read_response(sock)
    assert status == 431


def test_connections_beyond_the_cap_get_503_and_the_gateway_recovers(configured: Path) -> None:
    with socket_gateway(max_connections=3) as gateway:
        stalled = [socket.create_connection(_address(gateway.url), timeout=DEADLINE_S)]
        try:
            stalled += [socket.create_connection(_address(gateway.url), timeout=DEADLINE_S)]
            stalled += [socket.create_connection(_address(gateway.url), timeout=DEADLINE_S)]
            _wait_refused(gateway.url)
        finally:
            for sock in stalled:
                sock.close()
        _wait_served(gateway.url)


def _wait_refused(url: str) -> None:
    # The three stalled sockets are accepted asynchronously; poll until a fourth is refused.
    deadline = time.monotonic() + DEADLINE_S
    while True:
        with raw_socket(url) as sock:
            sock.sendall(b"GET /health HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\n\r\n")
            status, headers, body = _read_response(sock)
        if status == 503:
            assert json.loads(body)["error"]["code"] == "too_many_connections"
            assert headers["connection"] == "close"
            return
        assert time.monotonic() < deadline, "a connection beyond the cap was served"


def _wait_served(url: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while True:
        with raw_socket(url) as sock:
            sock.sendall(b"GET /health HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\n\r\n")
            status, _, _ = _read_response(sock)
        if status == 200:
            return
        assert time.monotonic() < deadline, "the gateway kept refusing after sockets closed"
