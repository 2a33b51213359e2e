"""signal-cli's event stream dropped again and again right after each connection (a daemon
that keeps crashing, a proxy that cuts streams): the channel backs off instead of
reconnecting (and re-checking the account) every second, against a real gateway."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from nodmix.gateway import BackgroundGateway, GatewaySettings
from nodmix.providers.retry import RetryPolicy
from nodmix.testing.model_server import ScriptedModelServer
from nodmix.testing.scripts.echo import respond as echo
from nodmix.testing.signal_daemon import ScriptedSignalDaemon
from tests.channels.support import write_config

pytestmark = pytest.mark.integration

OWNER = "3f2a9c4e-1b7d-4e8a-9c2f-5d6e7f8a9b0c"


def test_a_stream_that_keeps_dropping_is_retried_ever_more_slowly(isolated_state: Path) -> None:
    with ScriptedModelServer(echo) as model, ScriptedSignalDaemon(keepalive_seconds=1) as daemon:
        write_config(isolated_state, model.base_url, {"signal": daemon.config(allowFrom=[OWNER])})
        seen: list[float] = []
        done = threading.Event()

        def cut_every_stream() -> None:
            while not done.is_set():
                if daemon.connections > len(seen):
                    seen.append(time.monotonic())
                    daemon.drop()
                time.sleep(0.01)

        cutter = threading.Thread(target=cut_every_stream, daemon=True)
        cutter.start()
        settings = GatewaySettings(port=0, token=None)
        try:
            with BackgroundGateway(settings, retry=RetryPolicy(attempts=1)):
                daemon.wait_for(lambda: len(seen) >= 4, timeout=30)
        finally:
            done.set()
            cutter.join(5)
    gaps = [b - a for a, b in zip(seen, seen[1:], strict=False)][:3]
    assert gaps[2] >= 2 * gaps[0] and gaps[2] >= 2.5, gaps  # 1 s, 2 s, 4 s: backing off
