"""Google Chat through a real gateway: the scripted Chat service signs events like Chat and
posts them to the gateway's endpoint; the adapter answers through the Chat REST API with a
token google-auth gets for the app's service account from the same service."""

from __future__ import annotations

from pathlib import Path

import pytest

from nodmix.channels.pairing import PairingStore
from nodmix.testing.googlechat_payloads import SPACE, ChatUser
from nodmix.testing.googlechat_server import ScriptedChat
from nodmix.testing.model_server import ScriptedModelServer
from tests.channels.support import model_user_texts
from tests.channels.webhooks import start_chat

pytestmark = pytest.mark.integration

ANN = ChatUser("ann")
EVE = ChatUser("eve")


def test_a_stranger_gets_a_pairing_code_and_an_approved_sender_a_reply(
    isolated_state: Path, chat: ScriptedChat, model: ScriptedModelServer
) -> None:
    gateway = start_chat(isolated_state, model, chat)
    try:
        chat.send("secret plans", user=ANN)
        texts = chat.wait_for(lambda: chat.texts(ANN.dm_space))
        assert "pairing code is" in texts[0] and model.requests == []
        code = texts[0].split("pairing code is ", 1)[1][:8]
        PairingStore(isolated_state).approve("googlechat", code)

        event = chat.send("hello agent", user=ANN)
        chat.wait_for(lambda: "hello agent" in chat.texts(ANN.dm_space))
        assert chat.post(event) == 200  # Chat posting it again: answered once
        chat.send("second", user=ANN)
        chat.wait_for(lambda: "second" in chat.texts(ANN.dm_space))
        assert chat.texts(ANN.dm_space)[1:] == ["hello agent", "second"]
        assert model_user_texts(model) == ["hello agent", "second"]
        status = gateway.runtime.channels.statuses["googlechat"]
        assert status.connected and status.account == chat.service_account()["client_email"]
    finally:
        gateway.__exit__(None, None, None)


def test_spaces_answer_only_mentions_and_replies_stay_in_their_thread(
    isolated_state: Path, chat: ScriptedChat, model: ScriptedModelServer
) -> None:
    gateway = start_chat(
        isolated_state, model, chat, allowFrom=[ANN.id, "*@example.org"], groups=[SPACE]
    )
    try:
        chat.send("no mention here", user=ANN, kind="SPACE")
        chat.send(f"@{chat.app_name} typed, not a mention", user=EVE, kind="SPACE")
        chat.send("what is new?", user=ANN, kind="SPACE", mention=True)
        chat.wait_for(lambda: chat.texts(SPACE))
        thread = f"{SPACE}/threads/t1"
        chat.send("and here?", user=EVE, kind="SPACE", mention=True, thread=thread)
        chat.wait_for(lambda: len(chat.texts(SPACE)) == 2)
        assert model_user_texts(model) == ["[Ann] what is new?", "[Eve] and here?"]
        first, second = chat.messages(SPACE)
        assert first.thread is None and second.thread == thread
        status = gateway.runtime.channels.statuses["googlechat"]
        assert status.reasons.get("not mentioned") == 2
    finally:
        gateway.__exit__(None, None, None)
