"""Subagents from a Telegram chat through a real gateway (python-telegram-bot against the
scripted Bot API, the model behind a real scripted model server): a subagent nobody waits for
is announced into the chat the request came from, and `/stop` cancels the children a turn
waits for."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from nodmix.gateway import BackgroundGateway, GatewaySettings
from nodmix.providers.retry import RetryPolicy
from nodmix.sessions import CustomMessageEntry
from nodmix.testing.model_server import ScriptedModelServer
from nodmix.testing.telegram_server import ScriptedBotAPI
from tests.gateway.support import wait_until
from tests.subagents.support import HeldChildren, ended, records, write_config

pytestmark = pytest.mark.integration

OWNER = 4242


@pytest.fixture
def api() -> Iterator[ScriptedBotAPI]:
    with ScriptedBotAPI() as server:
        yield server


def _configure(state: Path, model_url: str, api: ScriptedBotAPI) -> None:
    telegram = {
        "botToken": api.token,
        "apiBaseUrl": api.url,
        "pollTimeoutSeconds": 1,
        "allowFrom": [OWNER],
        "ownerIds": [OWNER],  # the owner's DMs continue the main session
    }
    write_config(state, model_url, channels={"telegram": telegram})


def _gateway() -> BackgroundGateway:
    return BackgroundGateway(GatewaySettings(port=0, token=None), retry=RetryPolicy(attempts=1))


def test_a_subagent_nobody_waits_for_reports_back_into_the_telegram_chat(
    isolated_state: Path, api: ScriptedBotAPI
) -> None:
    model = HeldChildren()
    with ScriptedModelServer(model) as server:
        _configure(isolated_state, server.base_url, api)
        with _gateway() as gateway:
            api.inject_text(chat_id=OWNER, sender_id=OWNER, text="spawn: held check the ferries")
            (accepted,) = api.wait_for(lambda: api.sent_texts(OWNER))
            assert accepted.startswith("held check the ferries: accepted as sub_")
            model.release()
            texts = api.wait_for(lambda: api.sent_texts(OWNER)[1:])
            main = gateway.call(lambda: gateway.runtime.sessions.open("agent:main:main"))
            posted = [e for e in main.entries if isinstance(e, CustomMessageEntry)]
    assert texts == ['Subagent "held check the ferries" finished:\n\ndone: held check the ferries']
    (run,) = records(isolated_state)
    assert run.origin is not None and run.origin.chat_id == str(OWNER)
    assert run.status == "completed" and run.announced
    assert len(posted) == 1 and posted[0].details["runId"] == run.run_id


def test_stop_in_the_chat_cancels_the_subagents_the_turn_waits_for(
    isolated_state: Path, api: ScriptedBotAPI
) -> None:
    model = HeldChildren()
    with ScriptedModelServer(model) as server:
        _configure(isolated_state, server.base_url, api)
        with _gateway():
            api.inject_text(chat_id=OWNER, sender_id=OWNER, text="spawn wait: held one | held two")
            wait_until(lambda: model.in_flight == 2, what="both children working")
            api.inject_text(chat_id=OWNER, sender_id=OWNER, text="/stop")
            texts = api.wait_for(lambda: api.sent_texts(OWNER)[1:] and api.sent_texts(OWNER))
            wait_until(lambda: ended(isolated_state, 2), what="the two ended records")
            model.release()
    assert sorted(texts) == ["Stopped the running turn.", "Stopped."]
    assert {r.status for r in records(isolated_state)} == {"cancelled"}
