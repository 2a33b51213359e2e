"""XMPP links attacked, against a real Prosody and a real gateway: shared links that lead the
bot to other services of its own network (another loopback address behind a redirect, another
port of the XMPP server's own host), which it must never fetch for a sender."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from nodmix.testing.model_server import ScriptedModelServer
from tests.channels.prosody import (
    BOT,
    Prosody,
    XmppPerson,
    write_bot_config,
    xmpp_gateway,
)

pytestmark = pytest.mark.integration


class _Secret(BaseHTTPRequestHandler):
    """A service of the gateway's own network that must never be fetched for a sender."""

    hits: list[str] = []

    def do_GET(self) -> None:
        type(self).hits.append(self.path)
        body = b"internal secret"
        self.send_response(200)
        self.send_header("Content-Type", "image/png")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


class _Redirect(BaseHTTPRequestHandler):
    """A link that looks harmless and sends the bot elsewhere (`target`)."""

    target = ""

    def do_GET(self) -> None:
        self.send_response(302)
        self.send_header("Location", type(self).target)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


def _serve(handler: type[BaseHTTPRequestHandler], host: str) -> Iterator[ThreadingHTTPServer]:
    server = ThreadingHTTPServer((host, 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def secret() -> Iterator[ThreadingHTTPServer]:
    _Secret.hits = []
    # 127.0.0.2: a loopback address that is not the XMPP server's (`server` is 127.0.0.1).
    yield from _serve(_Secret, "127.0.0.2")


@pytest.fixture
def redirect() -> Iterator[ThreadingHTTPServer]:
    yield from _serve(_Redirect, "127.0.0.1")


def _share(person: XmppPerson, url: str) -> None:
    def send() -> None:
        msg = person.client.make_message(mto=BOT, mbody=url, mtype="chat")
        msg["oob"]["url"] = url
        msg.send()

    person.client.loop.call_soon_threadsafe(send)


def test_a_shared_link_cannot_redirect_the_bot_to_another_private_address(
    isolated_state: Path,
    prosody: Prosody,
    model: ScriptedModelServer,
    people: Any,
    secret: ThreadingHTTPServer,
    redirect: ThreadingHTTPServer,
) -> None:
    write_bot_config(isolated_state, model.base_url, prosody, allowFrom=["ann@localhost"])
    ann = people["ann"] = XmppPerson(prosody, "ann")
    _Redirect.target = f"http://127.0.0.2:{secret.server_address[1]}/admin/keys.png"
    with xmpp_gateway():
        # The link's host is the XMPP server's own address (allowed), but it redirects.
        _share(ann, f"http://127.0.0.1:{redirect.server_address[1]}/upload/cat.png")
        ann.wait_for(lambda: ann.texts(BOT), what="an answer to the link")
    assert _Secret.hits == []
    inbox = isolated_state / "workspace" / "inbox"
    assert not inbox.exists() or not any(
        p.read_bytes() == b"internal secret" for p in inbox.iterdir()
    )


def test_a_shared_link_cannot_reach_other_ports_of_the_servers_own_host(
    isolated_state: Path,
    prosody: Prosody,
    model: ScriptedModelServer,
    people: Any,
) -> None:
    # The server runs beside the gateway (server: 127.0.0.1): its upload service may be
    # fetched, the gateway's other loopback services may not.
    with _serve_secret("127.0.0.1") as other:
        write_bot_config(isolated_state, model.base_url, prosody, allowFrom=["ann@localhost"])
        ann = people["ann"] = XmppPerson(prosody, "ann")
        with xmpp_gateway():
            _share(ann, f"http://127.0.0.1:{other.server_address[1]}/internal/db.png")
            ann.wait_for(lambda: ann.texts(BOT), what="an answer to the link")
    assert _Secret.hits == []


def _serve_secret(host: str) -> Any:
    import contextlib

    _Secret.hits = []
    return contextlib.contextmanager(_serve)(_Secret, host)


def test_every_redirect_of_a_link_is_checked_before_it_is_followed(
    tmp_path: Path, secret: ThreadingHTTPServer, redirect: ThreadingHTTPServer
) -> None:
    import anyio

    from nodmix.channels.links import LinkRefused
    from nodmix.channels.xmpp.files import download_link

    # Even the upload service itself (trusted on its private address) cannot send the bot on.
    port = redirect.server_address[1]
    own = frozenset({("http", "127.0.0.1", port)})
    _Redirect.target = f"http://127.0.0.2:{secret.server_address[1]}/admin/keys.png"
    target = tmp_path / "file.png"
    with pytest.raises(LinkRefused, match="127.0.0.2 is a private address"):
        anyio.run(lambda: download_link(f"http://127.0.0.1:{port}/f/cat.png", target,
                                        max_bytes=1000, own=own))  # fmt: skip
    assert _Secret.hits == [] and not target.exists()


def test_a_name_that_resolves_elsewhere_the_second_time_is_not_followed(
    tmp_path: Path, secret: ThreadingHTTPServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DNS rebinding: the check sees a public address, the connection would get 127.0.0.2."""
    import socket

    import anyio
    import anyio._core._sockets as anyio_sockets

    from nodmix.channels.links import LinkRefused
    from nodmix.channels.xmpp.files import download_link

    public = (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("93.184.215.14", 80))
    private = (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.2", 80))
    answers = [public, public]  # what the checks see; the connection would get 127.0.0.2
    real = anyio_sockets.getaddrinfo

    async def rebinding(host: str, *args: object, **kwargs: object) -> list[object]:
        if host != "rebind.example":
            return await real(host, *args, **kwargs)  # type: ignore[arg-type]
        return [answers.pop(0) if answers else private]

    monkeypatch.setattr(anyio, "getaddrinfo", rebinding)
    monkeypatch.setattr(anyio_sockets, "getaddrinfo", rebinding)
    url = f"http://rebind.example:{secret.server_address[1]}/admin/keys.png"
    target = tmp_path / "file.png"
    with pytest.raises(LinkRefused, match="127.0.0.2"):
        anyio.run(lambda: download_link(url, target, max_bytes=1000, own=frozenset()))
    assert _Secret.hits == [] and not target.exists()
