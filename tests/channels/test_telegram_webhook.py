"""Telegram in webhook mode through a real gateway: python-telegram-bot registers the webhook
with the scripted Bot API, which posts updates to the gateway's own HTTP server as Telegram
does (through `hook.proxy`, the reverse proxy in front of the gateway). Updates take the
polling path from there: access control, pairing, dedupe, the agent's reply."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from nodmix.channels.pairing import PairingStore
from nodmix.gateway import BackgroundGateway, GatewaySettings
from nodmix.providers.retry import RetryPolicy
from nodmix.testing.model_server import ScriptedModelServer
from nodmix.testing.telegram_payloads import text_message
from nodmix.testing.telegram_server import ScriptedBotAPI
from tests.channels.support import model_user_texts, write_channel_config
from tests.gateway.support import run_nodmix

pytestmark = pytest.mark.integration

OWNER = 4242
STRANGER = 777
URL = "https://bot.example.test/tg/updates"
SECRET = "s3cret_Token-42"


@pytest.fixture
def api() -> Iterator[ScriptedBotAPI]:
    with ScriptedBotAPI() as server:
        yield server


def _gateway(token: str | None = None) -> BackgroundGateway:
    return BackgroundGateway(GatewaySettings(port=0, token=token), retry=RetryPolicy(attempts=1))


def _stranger_update(text: str) -> dict[str, object]:
    message = text_message(
        chat=(STRANGER, "private"), sender=(STRANGER, "Eve"), text=text, bot={"username": "x"}
    )
    return {"update_id": 90_001, "message": {**message, "message_id": 5, "date": int(time.time())}}


def test_webhook_mode_pairs_answers_once_and_refuses_a_wrong_secret(
    isolated_state: Path,
    api: ScriptedBotAPI,
    model: ScriptedModelServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TG_WEBHOOK_SECRET", SECRET)
    webhook = {"url": URL, "secretToken": "${TG_WEBHOOK_SECRET}"}
    write_channel_config(isolated_state, model.base_url, api, {"webhook": webhook})
    # With a gateway token set, the webhook path still needs none (Telegram sends none).
    with _gateway(token="gateway-token") as gateway:
        api.hook.proxy = gateway.url
        registered = api.wait_for(lambda: api.hook.webhook)
        assert registered["url"] == URL and registered["secret_token"] == SECRET
        assert registered["allowed_updates"] == ["message"]

        api.inject_text(chat_id=OWNER, sender_id=OWNER, text="secret plans")
        texts = api.wait_for(lambda: api.sent_texts(OWNER))
        assert "pairing code is" in texts[0] and model.requests == []
        code = texts[0].split("pairing code is ", 1)[1][:8]
        PairingStore(isolated_state).approve("telegram", code)

        update_id = api.inject_text(chat_id=OWNER, sender_id=OWNER, text="hello agent")
        api.wait_for(lambda: "hello agent" in api.sent_texts(OWNER))
        assert api.post_webhook(update_id) == 200  # Telegram posting it again
        assert api.post_webhook(_stranger_update("let me in"), secret="guess") == 401
        assert api.post_webhook(_stranger_update("let me in"), secret="") == 401

        api.inject_text(chat_id=OWNER, sender_id=OWNER, text="second")
        api.wait_for(lambda: "second" in api.sent_texts(OWNER))
        assert api.sent_texts(OWNER)[1:] == ["hello agent", "second"]  # answered once
        assert model_user_texts(model) == ["hello agent", "second"]
        assert api.sent_texts(STRANGER) == []
        status = gateway.runtime.channels.statuses["telegram"]
        assert status.reasons.get("wrong webhook secret token") == 2
        assert status.connected and status.account == f"@{api.username}"
        assert api.calls_of("getUpdates") == []
        assert {d.status for d in api.hook.deliveries} == {200}


def test_switching_back_to_polling_deletes_the_webhook_first(
    isolated_state: Path, api: ScriptedBotAPI, model: ScriptedModelServer
) -> None:
    webhook = {"url": "http://127.0.0.1:9/tg", "secretToken": SECRET}
    write_channel_config(isolated_state, model.base_url, api, {"webhook": webhook})
    with _gateway():
        api.wait_for(lambda: api.hook.webhook)
    write_channel_config(isolated_state, model.base_url, api, {"allowFrom": [OWNER]})
    with _gateway():
        api.inject_text(chat_id=OWNER, sender_id=OWNER, text="polling again")
        api.wait_for(lambda: "polling again" in api.sent_texts(OWNER))
    methods = [c.method for c in api.calls if c.method in ("deleteWebhook", "getUpdates")]
    assert methods[0] == "deleteWebhook" and api.hook.webhook is None


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/hooks/telegram", "/static/tg"])
def test_a_webhook_path_the_gateway_already_serves_stops_the_start_with_one_line(
    isolated_state: Path, api: ScriptedBotAPI, model: ScriptedModelServer, path: str
) -> None:
    webhook = {"url": "https://bot.example.test/tg", "secretToken": SECRET, "path": path}
    write_channel_config(isolated_state, model.base_url, api, {"webhook": webhook})
    done = run_nodmix(isolated_state, "gateway", "--port", "0")
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 1 and len(lines) == 1, done.stderr
    assert "channels.telegram.webhook.path" in lines[0] and path in lines[0]
    assert api.calls == [], "nothing was registered with Telegram"


def test_an_update_posted_again_after_a_restart_is_answered_once(
    isolated_state: Path, api: ScriptedBotAPI, model: ScriptedModelServer
) -> None:
    webhook = {"url": URL, "secretToken": SECRET}
    write_channel_config(
        isolated_state, model.base_url, api, {"webhook": webhook, "allowFrom": [OWNER]}
    )
    with _gateway() as gateway:
        api.hook.proxy = gateway.url
        update_id = api.inject_text(chat_id=OWNER, sender_id=OWNER, text="once")
        api.wait_for(lambda: "once" in api.sent_texts(OWNER))
    with _gateway() as gateway:
        api.hook.proxy = gateway.url
        api.wait_for(lambda: len(api.calls_of("setWebhook")) == 2)
        api.wait_for(lambda: api.post_webhook(update_id) == 200)  # 503 until it serves
        api.inject_text(chat_id=OWNER, sender_id=OWNER, text="and again")
        api.wait_for(lambda: "and again" in api.sent_texts(OWNER))
    assert api.sent_texts(OWNER) == ["once", "and again"]
    assert model_user_texts(model) == ["once", "and again"]
