"""An XMPP connection cut again and again soon after each login (a proxy or a network that
drops it), between a real gateway and a real Prosody: the channel backs off instead of
logging in every second."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

import pytest

from nodmix.gateway import BackgroundGateway, GatewaySettings
from nodmix.providers.retry import RetryPolicy
from nodmix.testing.model_server import ScriptedModelServer
from nodmix.testing.scripts.echo import respond as echo
from tests.channels.irc_daemon import wait_until
from tests.channels.prosody import Prosody, write_bot_config

pytestmark = pytest.mark.integration

LIFETIME_SECONDS = 1.5


class CuttingProxy:
    """Forwards TCP to Prosody and cuts each connection `LIFETIME_SECONDS` after it opened."""

    def __init__(self, upstream: int) -> None:
        self.upstream = upstream
        self.opened: list[float] = []
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self._stop = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        self.listener.settimeout(0.2)
        while not self._stop.is_set():
            try:
                client, _ = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.opened.append(time.monotonic())
            server = socket.create_connection(("127.0.0.1", self.upstream))
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()
            timer = threading.Timer(LIFETIME_SECONDS, self._cut, args=(client, server))
            timer.daemon = True
            timer.start()

    @staticmethod
    def _pipe(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass

    @staticmethod
    def _cut(*sockets: socket.socket) -> None:
        for sock in sockets:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()

    def close(self) -> None:
        self._stop.set()
        self.listener.close()


def test_a_session_that_keeps_being_cut_is_retried_ever_more_slowly(
    isolated_state: Path, prosody: Prosody
) -> None:
    proxy = CuttingProxy(prosody.port)
    try:
        with ScriptedModelServer(echo) as model:
            write_bot_config(isolated_state, model.base_url, prosody, port=proxy.port)
            settings = GatewaySettings(port=0, token=None)
            with BackgroundGateway(settings, retry=RetryPolicy(attempts=1)) as gateway:
                status = gateway.runtime.channels.statuses["xmpp"]
                wait_until(lambda: status.connected, what="the first session")
                wait_until(lambda: len(proxy.opened) >= 4, what="four sessions", timeout=40)
    finally:
        proxy.close()
    gaps = [b - a for a, b in zip(proxy.opened, proxy.opened[1:], strict=False)][:3]
    assert gaps[2] - gaps[0] >= 2.0, gaps  # 1 s, 2 s, 4 s after each cut: backing off
