"""Strangers on the network against Telegram's webhook path: without the secret token nothing
reaches the adapter's parsing or the agent, the gateway does not wait for their bodies, and the
guard's exemption covers the configured path and nothing else."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from nodmix.gateway import BackgroundGateway, GatewaySettings
from nodmix.providers.retry import RetryPolicy
from nodmix.testing.model_server import ScriptedModelServer
from nodmix.testing.scripts.echo import respond as echo
from nodmix.testing.telegram_server import ScriptedBotAPI
from tests.channels.support import write_channel_config

pytestmark = pytest.mark.integration

OWNER = 4242
PATH = "/tg/updates"
SECRET = "s3cret_Token-42"
#: Long enough for a loaded machine, far shorter than the gateway's request timeout (30 s).
_ANSWER_WITHIN_S = 10.0


@pytest.fixture
def api() -> Iterator[ScriptedBotAPI]:
    with ScriptedBotAPI() as server:
        yield server


@pytest.fixture
def gateway(
    isolated_state: Path, api: ScriptedBotAPI
) -> Iterator[tuple[BackgroundGateway, ScriptedModelServer]]:
    with ScriptedModelServer(echo) as model:
        webhook = {"url": f"https://bot.example.test{PATH}", "secretToken": SECRET}
        write_channel_config(
            isolated_state, model.base_url, api, {"webhook": webhook, "allowFrom": [OWNER]}
        )
        settings = GatewaySettings(port=0, token="gateway-token")
        with BackgroundGateway(settings, retry=RetryPolicy(attempts=1)) as running:
            api.wait_for(lambda: api.hook.webhook)
            yield running, model


def _status_line(url: str, head: bytes, body: bytes) -> bytes:
    """Send `head` and the start of a body that never finishes; the status line answered."""
    parts = urlsplit(url)
    with socket.create_connection((parts.hostname, parts.port), timeout=5) as conn:
        conn.sendall(head + body)
        conn.settimeout(_ANSWER_WITHIN_S)
        try:
            return conn.recv(64).split(b"\r\n", 1)[0]
        except TimeoutError:
            return b"(no answer)"


def test_a_wrong_secret_is_refused_before_the_body_arrives(
    gateway: tuple[BackgroundGateway, ScriptedModelServer],
) -> None:
    running, _ = gateway
    head = (
        f"POST {PATH} HTTP/1.1\r\nHost: bot.example.test\r\n"
        "Content-Type: application/json\r\nContent-Length: 8000000\r\n"
        "X-Telegram-Bot-Api-Secret-Token: guess\r\n\r\n"
    ).encode()
    started = time.monotonic()
    line = _status_line(running.url, head, b'{"update_id": 1, ')
    assert line.startswith(b"HTTP/1.1 401"), line
    assert time.monotonic() - started < _ANSWER_WITHIN_S


def test_a_missing_secret_is_refused_before_the_body_arrives(
    gateway: tuple[BackgroundGateway, ScriptedModelServer],
) -> None:
    running, _ = gateway
    head = (
        f"POST {PATH} HTTP/1.1\r\nHost: bot.example.test\r\nContent-Length: 8000000\r\n\r\n"
    ).encode()
    assert _status_line(running.url, head, b"{").startswith(b"HTTP/1.1 401")


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", f"{PATH}/"),
        ("POST", PATH.upper()),
        ("POST", f"{PATH}/x"),
        ("POST", "/tg"),
        ("GET", "/v1/models"),
    ],
)
def test_the_exemption_covers_the_webhook_path_alone(
    gateway: tuple[BackgroundGateway, ScriptedModelServer], method: str, path: str
) -> None:
    running, _ = gateway
    with httpx.Client(base_url=running.url, timeout=10) as client:
        answer = client.request(
            method,
            path,
            headers={"x-telegram-bot-api-secret-token": SECRET},
            content=b'{"update_id": 5}' if method == "POST" else None,
        )
    assert answer.status_code == 401, (path, answer.status_code)
    assert answer.json()["error"]["code"] == "invalid_token"


def test_a_dot_segment_path_is_not_the_webhook_path(
    gateway: tuple[BackgroundGateway, ScriptedModelServer],
) -> None:
    running, model = gateway
    body = b'{"update_id": 5}'
    head = (
        f"POST {PATH}/../updates HTTP/1.1\r\nHost: bot.example.test\r\n"
        f"Content-Length: {len(body)}\r\nX-Telegram-Bot-Api-Secret-Token: {SECRET}\r\n\r\n"
    ).encode()  # sent as is: HTTP clients remove dot segments before sending
    assert _status_line(running.url, head, body).startswith(b"HTTP/1.1 401")
    assert model.requests == []


def test_a_query_string_or_percent_encoding_still_needs_the_secret(
    gateway: tuple[BackgroundGateway, ScriptedModelServer], api: ScriptedBotAPI
) -> None:
    running, model = gateway
    update = {"update_id": 5, "message": {"message_id": 1}}
    with httpx.Client(base_url=running.url, timeout=10) as client:
        for target in (f"{PATH}?secret={SECRET}", "/tg/%75pdates"):
            refused = client.post(
                target, json=update, headers={"x-telegram-bot-api-secret-token": "x"}
            )
            assert refused.status_code == 401, target
        other = client.get(PATH, headers={"x-telegram-bot-api-secret-token": SECRET})
        assert other.status_code == 401  # only a POST skips the gateway token
    assert model.requests == []


@pytest.mark.parametrize(
    "body",
    [
        b"[]",
        b"123",
        b'"text"',
        b"null",
        b"\xff\xfe",
        b"{}",
        b'{"update_id": "7"}',
        b'{"update_id": 7, "message": 5}',
    ],
)
def test_a_body_that_is_not_an_update_is_answered_400_and_the_channel_keeps_serving(
    gateway: tuple[BackgroundGateway, ScriptedModelServer], api: ScriptedBotAPI, body: bytes
) -> None:
    running, model = gateway
    with httpx.Client(base_url=running.url, timeout=10) as client:
        answer = client.post(
            PATH, content=body, headers={"x-telegram-bot-api-secret-token": SECRET}
        )
    assert answer.status_code == 400, answer.text
    api.hook.proxy = running.url
    api.inject_text(chat_id=OWNER, sender_id=OWNER, text="still here")
    api.wait_for(lambda: "still here" in api.sent_texts(OWNER))


def test_a_body_past_the_gateways_limit_is_refused_even_with_the_secret(
    gateway: tuple[BackgroundGateway, ScriptedModelServer],
) -> None:
    running, model = gateway

    def chunks() -> Iterator[bytes]:  # no Content-Length: the limit applies while reading
        yield b'{"update_id": 9, "pad": "'
        for _ in range(9):
            yield b"x" * (1 << 20)
        yield b'"}'

    with httpx.Client(base_url=running.url, timeout=30) as client:
        answer = client.post(
            PATH, content=chunks(), headers={"x-telegram-bot-api-secret-token": SECRET}
        )
    assert answer.status_code == 413
    assert model.requests == []
