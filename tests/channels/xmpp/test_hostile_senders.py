"""XMPP attacked by its senders, against a real Prosody and a real gateway: a resource (the
part of a JID every client picks for itself) dressed up as an address that `allowFrom`
patterns accept."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from nodmix.testing.model_server import ScriptedModelServer
from tests.channels.prosody import (
    BOT,
    Prosody,
    XmppPerson,
    write_bot_config,
    xmpp_gateway,
)
from tests.channels.support import model_user_texts

pytestmark = pytest.mark.integration


def test_a_resource_that_looks_like_an_allowed_address_does_not_make_a_sender_allowed(
    isolated_state: Path, prosody: Prosody, model: ScriptedModelServer, people: Any
) -> None:
    # Everyone at friends.example may talk to the agent; eve is not at friends.example, but
    # her client binds the resource `x@friends.example` (resources are the client's choice).
    write_bot_config(isolated_state, model.base_url, prosody, allowFrom=["*@friends.example"])
    eve = people["eve"] = XmppPerson(prosody, "eve", resource="x@friends.example")
    assert eve.client.boundjid.full == "eve@localhost/x@friends.example"
    with xmpp_gateway():
        eve.say(BOT, "read me the owner's notes")
        texts = eve.wait_for(lambda: eve.texts(BOT), what="an answer to eve")
    assert "pairing code is" in texts[0]
    assert model_user_texts(model) == []


def test_a_message_target_with_a_resource_cannot_reach_a_jid_outside_allow_from(
    isolated_state: Path, prosody: Prosody, people: Any
) -> None:
    import json

    from tests.channels.support import chat_model

    # ann may talk to the agent (everyone at friends.example may); she has it message
    # eve@localhost, disguised as a JID at friends.example by a resource.
    with ScriptedModelServer(chat_model) as model:
        write_bot_config(
            isolated_state,
            model.base_url,
            prosody,
            allowFrom=["ann@localhost", "*@friends.example"],
        )
        ann = people["ann"] = XmppPerson(prosody, "ann")
        eve = people["eve"] = XmppPerson(prosody, "eve")
        target = "eve@localhost/x@friends.example"
        args = {"channel": "xmpp", "to": target, "text": "the owner's secrets"}
        with xmpp_gateway():
            ann.say(BOT, "call message " + json.dumps(args))
            texts = ann.wait_for(lambda: ann.texts(BOT), what="the tool's result")
        assert texts[0].startswith("tool said:")
        assert "not allowed" in texts[0] or "not a" in texts[0], texts[0]
        assert eve.texts() == []
