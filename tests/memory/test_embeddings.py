"""The embeddings client against hostile endpoints: a reply without end, or one dripped a byte
at a time, fails with one clear error instead of exhausting memory or holding the indexer."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from nodmix.memory.embeddings import MAX_REPLY_BYTES, EmbeddingError, HttpEmbedder
from nodmix.memory.settings import EmbeddingSettings

MAX_SERVER_SECONDS = 60.0
"""How long a hostile handler keeps going at most (the client gives up long before)."""


SENT: list[int] = []
"""Bytes each `/huge/` reply got out before the client hung up."""


class Hostile(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: object) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        stop = time.monotonic() + MAX_SERVER_SECONDS
        try:
            if self.path.startswith("/ok/"):
                data = [{"index": 0, "embedding": [3.0, 4.0]}]
                body = json.dumps({"data": data}).encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                return
            self.send_response(200)
            self.send_header("Content-Length", str(2 * MAX_REPLY_BYTES))
            self.end_headers()
            if self.path.startswith("/huge/"):
                SENT.append(0)
                chunk = b" " * 1024 * 1024
                for _ in range(2 * MAX_REPLY_BYTES // len(chunk)):
                    self.wfile.write(chunk)
                    SENT[-1] += len(chunk)
                return
            while time.monotonic() < stop:  # /drip/: one byte at a time, forever
                self.wfile.write(b" ")
                self.wfile.flush()
                time.sleep(0.05)
        except OSError:
            return  # the client hung up, as it should


@pytest.fixture
def server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Hostile)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


def embedder(base_url: str, timeout: float = 1.0) -> HttpEmbedder:
    return HttpEmbedder(EmbeddingSettings(base_url=base_url, model="m", timeout_seconds=timeout))


def test_a_well_formed_reply_gives_unit_vectors(server: str) -> None:
    client = embedder(f"{server}/ok")
    try:
        vectors = client.embed(["hello"])
    finally:
        client.close()
    assert vectors.tolist() == [[pytest.approx(0.6), pytest.approx(0.8)]]


def test_an_endless_reply_is_refused_once_it_passes_the_byte_cap(server: str) -> None:
    client = embedder(f"{server}/huge", timeout=MAX_SERVER_SECONDS)
    try:
        with pytest.raises(EmbeddingError, match="too large"):
            client.embed(["hello"])
    finally:
        client.close()
    # The client stopped reading at the cap: the rest of the reply was never taken in.
    assert MAX_REPLY_BYTES <= SENT[-1] < 2 * MAX_REPLY_BYTES


def test_a_reply_dripped_a_byte_at_a_time_fails_after_the_timeout(server: str) -> None:
    client = embedder(f"{server}/drip")
    try:
        with pytest.raises(EmbeddingError, match="took longer than 1s"):
            client.embed(["hello"])
    finally:
        client.close()
