"""Google Chat events with a valid token and a body of the wrong shape (what a replayed token
with a body of one's own, or a broken proxy, would post): each is answered 400 or taken as
no message, never a 500 with a traceback, and the next real message is answered."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from nodmix.testing.googlechat_payloads import ChatUser
from nodmix.testing.googlechat_server import ScriptedChat
from nodmix.testing.model_server import ScriptedModelServer
from tests.channels.support import model_user_texts
from tests.channels.webhooks import start_chat

pytestmark = pytest.mark.integration

ANN = ChatUser("ann")


def _mangled(chat: ScriptedChat) -> list[Any]:
    def event(**message: Any) -> dict[str, Any]:
        base = copy.deepcopy(chat.event("junk", user=ANN, kind="SPACE"))
        base["message"] |= message
        return base

    return [
        [1, 2, 3],
        "just a string",
        {"type": "MESSAGE", "message": [], "space": 3},
        {"chat": {"messagePayload": 5}},
        {"chat": {"messagePayload": {"message": "x", "space": []}}},
        event(annotations=5),
        event(annotations=[{"type": "USER_MENTION", "userMention": "x"}]),
        event(attachment=5),
        event(attachment=[{"attachmentDataRef": "x"}]),
        event(sender="users/1"),
        event(sender={"name": 5}),
        event(thread="x", threadReply=True),
        event(name=None),
        event(space="spaces/x"),
    ]


def test_events_of_the_wrong_shape_never_fail_the_endpoint(
    isolated_state: Path, model: ScriptedModelServer
) -> None:
    with ScriptedChat() as chat:
        gateway = start_chat(isolated_state, model, chat, allowFrom=[ANN.id])
        try:
            answers = [chat.post(body) for body in _mangled(chat)]  # type: ignore[arg-type]
            assert all(code in (200, 400) for code in answers), answers
            chat.send("the real one", user=ANN)
            chat.wait_for(lambda: chat.texts(ANN.dm_space))
            assert model_user_texts(model) == ["the real one"]
        finally:
            gateway.__exit__(None, None, None)


def test_an_attachment_resource_that_climbs_out_of_media_is_not_requested(
    isolated_state: Path, model: ScriptedModelServer
) -> None:
    from nodmix.testing.googlechat_payloads import uploaded_attachment

    with ScriptedChat() as chat:
        gateway = start_chat(isolated_state, model, chat, allowFrom=[ANN.id])
        try:
            sneaky = uploaded_attachment("m", "../spaces/AAAAteam/messages", "x.txt", "text/plain")
            chat.send("see attached", user=ANN, attachments=[sneaky])
            chat.wait_for(lambda: chat.texts(ANN.dm_space))
        finally:
            gateway.__exit__(None, None, None)
        assert chat.downloads == [] and chat.refused_calls == []
    (text,) = model_user_texts(model)
    assert "could not be saved: not a Chat attachment resource" in text
