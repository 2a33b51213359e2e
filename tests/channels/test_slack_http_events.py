"""Slack's Events API (`mode: http`): Bolt verifies each request's signature on the local
listener, answers the URL challenge, and events reach the agent like Socket Mode ones."""

from __future__ import annotations

import hashlib
import hmac
import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest

from nodmix.gateway import BackgroundGateway, GatewaySettings
from nodmix.providers.retry import RetryPolicy
from nodmix.testing.model_server import ScriptedModelServer
from nodmix.testing.scripts.echo import respond as echo
from nodmix.testing.slack_server import ScriptedSlack
from tests.channels.support import model_user_texts, write_config

pytestmark = pytest.mark.integration

OWNER = "U0OWNER"
SECRET = "8f742231b10e8888abcd99yyyzzz85a5"


@pytest.fixture
def slack() -> Iterator[ScriptedSlack]:
    with ScriptedSlack() as server:
        yield server


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _signed(body: dict[str, object], secret: str = SECRET) -> tuple[bytes, dict[str, str]]:
    raw = json.dumps(body).encode()
    stamp = str(int(time.time()))
    digest = hmac.new(secret.encode(), b"v0:" + stamp.encode() + b":" + raw, hashlib.sha256)
    headers = {
        "content-type": "application/json",
        "x-slack-request-timestamp": stamp,
        "x-slack-signature": "v0=" + digest.hexdigest(),
    }
    return raw, headers


def _post(url: str, body: dict[str, object], secret: str = SECRET) -> httpx2.Response:
    raw, headers = _signed(body, secret)
    deadline = time.monotonic() + 20
    while True:  # the listener starts with the gateway's channels
        try:
            return httpx2.post(url, content=raw, headers=headers, timeout=10)
        except httpx2.ConnectError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def test_signed_events_reach_the_agent_and_unsigned_ones_are_refused(
    isolated_state: Path, slack: ScriptedSlack
) -> None:
    port = _free_port()
    with ScriptedModelServer(echo) as model:
        section = {
            "mode": "http",
            "botToken": slack.bot_token,
            "signingSecret": SECRET,
            "httpPort": port,
            "apiBaseUrl": slack.api_url,
            "allowFrom": [OWNER],
        }
        write_config(isolated_state, model.base_url, {"slack": section})
        url = f"http://127.0.0.1:{port}/slack/events"
        with BackgroundGateway(GatewaySettings(port=0, token=None), retry=RetryPolicy(attempts=1)):
            challenge = _post(url, {"type": "url_verification", "challenge": "abc123"})
            assert challenge.json() == {"challenge": "abc123"}

            slack.inject_message(channel="D1", user=OWNER, text="over http", channel_type="im")
            envelope = slack.take_envelopes()[-1]
            forged = _post(url, envelope["payload"], secret="not-the-secret")
            assert forged.status_code == 401
            assert _post(url, envelope["payload"]).status_code == 200
            slack.wait_for(lambda: slack.sent_texts(OWNER))
    assert slack.sent_texts(OWNER) == ["over http"]
    assert model_user_texts(model) == ["over http"]
