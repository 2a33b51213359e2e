"""Graceful shutdown: running turns finish within the grace period, later ones are cancelled."""

from __future__ import annotations

import json
import socket
import threading
import time
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import httpx2
import pytest

from nodmix.gateway import BackgroundGateway, GatewaySettings
from nodmix.gateway.client import GatewayClient
from nodmix.providers.base import ModelRequest
from nodmix.providers.fake import ModelReply
from nodmix.testing.model_server import ScriptedModelServer
from tests.gateway.support import NO_RETRY, TOKEN, socket_gateway, wait_until

pytestmark = pytest.mark.integration


class GatedModel:
    """Answers only once the test opens the gate."""

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.entered = threading.Event()

    async def __call__(self, request: ModelRequest) -> ModelReply:
        self.entered.set()
        await anyio.to_thread.run_sync(self.gate.wait, abandon_on_cancel=True)
        return ModelReply.text("finished after the stop request")


def _refuses_connections(url: str) -> bool:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    try:
        with socket.create_connection((host, int(port)), timeout=0.2):
            return False
    except OSError:
        return True


def _transcript_messages(state: Path, key: str) -> list[dict[str, Any]]:
    sessions = state / "agents" / "main" / "sessions"
    store = json.loads((sessions / "sessions.json").read_text(encoding="utf-8"))
    lines = (sessions / store[key]["sessionFile"]).read_text(encoding="utf-8").splitlines()
    return [json.loads(line)["message"] for line in lines[1:] if '"type":"message"' in line]


def test_an_http_turn_in_flight_finishes_during_graceful_shutdown(
    configured: Path, model_server: ScriptedModelServer
) -> None:
    model = GatedModel()
    model_server.respond = model
    answer: dict[str, Any] = {}
    gateway = BackgroundGateway(
        GatewaySettings(port=0, token=TOKEN, grace_seconds=10), retry=NO_RETRY
    )
    gateway.start()
    url = gateway.url
    try:

        def ask() -> None:
            answer["response"] = httpx2.post(
                f"{url}/v1/chat/completions",
                headers={"authorization": f"Bearer {TOKEN}"},
                json={
                    "model": "nodmix",
                    "user": "drain",
                    "messages": [{"role": "user", "content": "go"}],
                },
                timeout=30,
            )

        asker = threading.Thread(target=ask)
        asker.start()
        assert model.entered.wait(10)
        stopper = threading.Thread(target=gateway.stop)
        stopper.start()
        wait_until(lambda: _refuses_connections(url), what="the listener to close")
        model.gate.set()
        asker.join(10)
        stopper.join(20)
    finally:
        model.gate.set()
        gateway.stop()
    assert not stopper.is_alive()
    response = answer["response"]
    assert response.status_code == 200
    assert response.json()["choices"][0]["message"]["content"] == "finished after the stop request"
    roles = [m["role"] for m in _transcript_messages(configured, "agent:main:drain")]
    assert roles == ["user", "assistant"]


def test_a_turn_still_running_after_the_grace_period_is_cancelled_and_recorded(
    configured: Path, model_server: ScriptedModelServer
) -> None:
    model = GatedModel()
    model_server.respond = model
    gateway = BackgroundGateway(
        GatewaySettings(port=0, token=TOKEN, grace_seconds=0.3), retry=NO_RETRY
    )
    gateway.start()
    outcome: dict[str, Any] = {}

    async def start_turn() -> None:
        async with GatewayClient.connect(gateway.url, token=TOKEN) as client:
            try:
                await client.request("agent", {"message": "never answered", "sessionKey": "cut"})
            except Exception as exc:  # the gateway closes the connection on shutdown
                outcome["error"] = exc

    client_thread = threading.Thread(target=lambda: anyio.run(start_turn))
    try:
        client_thread.start()
        assert model.entered.wait(10)
        started = time.monotonic()
        gateway.stop()
        stopped_in = time.monotonic() - started
        client_thread.join(10)
    finally:
        model.gate.set()
        gateway.stop()
    assert stopped_in < 5  # bounded: uvicorn's 1 s connection drain plus our 0.3 s grace
    assert "error" in outcome
    messages = _transcript_messages(configured, "agent:main:cut")
    assert [m["role"] for m in messages] == ["user"]  # valid transcript, no dangling call


def test_a_client_that_hangs_up_cancels_its_turn(
    configured: Path, model_server: ScriptedModelServer
) -> None:
    model = GatedModel()
    model_server.respond = model
    body = json.dumps(
        {"model": "nodmix", "user": "gone", "messages": [{"role": "user", "content": "hi"}]}
    ).encode()
    try:
        with socket_gateway() as gateway:
            host, port = gateway.url.removeprefix("http://").rsplit(":", 1)
            with socket.create_connection((host, int(port))) as sock:
                head = (
                    "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                    f"Authorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\n"
                    f"Content-Length: {len(body)}\r\n\r\n"
                )
                sock.sendall(head.encode() + body)
                assert model.entered.wait(10)
            # The socket is closed: the gateway notices and cancels the turn.

            async def runs_left() -> int:
                async with GatewayClient.connect(gateway.url, token=TOKEN) as client:
                    return len((await client.request("runs.list"))["runs"])

            wait_until(lambda: anyio.run(runs_left) == 0, what="the turn to be cancelled")
    finally:
        model.gate.set()
    roles = [m["role"] for m in _transcript_messages(configured, "agent:main:gone")]
    assert roles == ["user"]
