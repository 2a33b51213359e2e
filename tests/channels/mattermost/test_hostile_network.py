"""Mattermost behind a hostile network, against the scripted server and a real gateway: a
server (or a proxy in front of it) that takes the WebSocket's connection and then never
answers its upgrade, or upgrades it and then says nothing. Each is noticed within the
connect deadline and the channel connects once the server answers again."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest

from nodmix.channels.mattermost import adapter as mattermost_adapter
from nodmix.gateway import BackgroundGateway, GatewaySettings
from nodmix.providers.retry import RetryPolicy
from nodmix.testing.mattermost_server import ScriptedMattermost
from nodmix.testing.model_server import ScriptedModelServer
from tests.channels.irc_daemon import wait_until
from tests.channels.support import write_config

pytestmark = pytest.mark.integration

ANN = "ann00000000000000000000000"


@pytest.fixture
def mm() -> Iterator[ScriptedMattermost]:
    with ScriptedMattermost() as server:
        server.add_user(ANN, "ann")
        yield server


@pytest.mark.parametrize("stall", ["upgrade", "hello"])
def test_a_websocket_that_never_answers_is_given_up_and_retried(
    isolated_state: Path,
    mm: ScriptedMattermost,
    model: ScriptedModelServer,
    monkeypatch: pytest.MonkeyPatch,
    stall: str,
) -> None:
    monkeypatch.setattr(mattermost_adapter, "CONNECT_TIMEOUT_SECONDS", 2.0)
    section = {"url": mm.url, "token": mm.token, "typing": False, "allowFrom": [ANN]}
    write_config(isolated_state, model.base_url, {"mattermost": section})
    mm.stall = stall
    gateway = BackgroundGateway(GatewaySettings(port=0, token=None), retry=RetryPolicy(attempts=1))
    with gateway:
        status = gateway.runtime.channels.statuses["mattermost"]
        started = time.monotonic()
        wait_until(lambda: status.last_error, what="the stalled socket noticed", timeout=20)
        assert time.monotonic() - started < 15 and not status.connected
        mm.stall = None
        wait_until(lambda: status.connected, what="connected after the stall", timeout=30)
        dm = mm.dm_channel(ANN)
        mm.inject_post(dm, ANN, "still there?", channel_type="D")
        assert mm.wait_for(lambda: mm.texts(dm)) == ["still there?"]


def test_a_malformed_post_is_skipped_and_the_channel_and_gateway_stay_up(
    isolated_state: Path, mm: ScriptedMattermost, model: ScriptedModelServer
) -> None:
    section = {"url": mm.url, "token": mm.token, "typing": False, "allowFrom": [ANN]}
    write_config(isolated_state, model.base_url, {"mattermost": section})
    gateway = BackgroundGateway(GatewaySettings(port=0, token=None), retry=RetryPolicy(attempts=1))
    with gateway:
        status = gateway.runtime.channels.statuses["mattermost"]
        wait_until(lambda: status.connected, what="connected")
        dm = mm.dm_channel(ANN)
        junk: list[tuple[str, object]] = [("props", "x"), ("metadata", ["x"])]
        junk += [("message", {"a": 1}), ("user_id", 7), ("id", None)]
        for field, value in junk:  # what a broken server or a meddling proxy might send
            post = mm._new_post(dm, ANN, f"with {field} {value!r}", "") | {field: value}
            mm._broadcast(post, "D")
        mm.inject_post(dm, ANN, "still there?", channel_type="D")
        texts = mm.wait_for(lambda: "still there?" in mm.texts(dm) and mm.texts(dm))
        # Junk props or metadata are read as none; a post without a text, sender or id is not
        # a post. Nothing stops the channel.
        assert texts == ["with props 'x'", "with metadata ['x']", "still there?"]
        assert status.connected


def test_a_defect_that_stops_the_adapter_restarts_the_channel_and_spares_the_gateway(
    isolated_state: Path,
    mm: ScriptedMattermost,
    model: ScriptedModelServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = mattermost_adapter.posted_inbound
    failures = [RuntimeError("a defect in the adapter")]

    def flaky(*args: object, **kwargs: object) -> object:
        if failures:
            raise failures.pop()
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(mattermost_adapter, "posted_inbound", flaky)
    section = {"url": mm.url, "token": mm.token, "typing": False, "allowFrom": [ANN]}
    write_config(isolated_state, model.base_url, {"mattermost": section})
    gateway = BackgroundGateway(GatewaySettings(port=0, token=None), retry=RetryPolicy(attempts=1))
    with gateway:
        status = gateway.runtime.channels.statuses["mattermost"]
        wait_until(lambda: status.connected, what="connected")
        dm = mm.dm_channel(ANN)
        mm.inject_post(dm, ANN, "first", channel_type="D")
        wait_until(lambda: "stopped by an error" in (status.last_error or ""), what="the error")
        wait_until(lambda: status.connected, what="connected again", timeout=30)
        mm.inject_post(dm, ANN, "second", channel_type="D")
        texts = mm.wait_for(lambda: "second" in mm.texts(dm) and mm.texts(dm))
        assert texts == ["first", "second"], "the post the defect stopped at is read back"
        assert httpx2.get(gateway.url + "/health", timeout=10).status_code == 200


def test_a_connection_that_keeps_dropping_is_retried_ever_more_slowly(
    isolated_state: Path, mm: ScriptedMattermost, model: ScriptedModelServer
) -> None:
    section = {"url": mm.url, "token": mm.token, "typing": False, "allowFrom": [ANN]}
    write_config(isolated_state, model.base_url, {"mattermost": section})
    mm.stall = "flap"  # every socket is closed right after its hello
    gateway = BackgroundGateway(GatewaySettings(port=0, token=None), retry=RetryPolicy(attempts=1))
    with gateway:
        wait_until(lambda: len(mm.connected_at) >= 4, what="four connections", timeout=30)
        times = mm.connected_at[:4]
    gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
    assert gaps[2] >= 2 * gaps[0] and gaps[2] >= 2.5, gaps  # 1 s, 2 s, 4 s: backing off
