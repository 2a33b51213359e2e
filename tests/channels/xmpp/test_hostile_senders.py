"""XMPP attacked by its senders, against a real Prosody and a real gateway: a resource (the
part of a JID every client picks for itself) dressed up as an address that `allowFrom`
patterns accept."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nodmix.gateway import BackgroundGateway, GatewaySettings
from nodmix.providers.retry import RetryPolicy
from nodmix.testing.model_server import ScriptedModelServer
from nodmix.testing.scripts.echo import respond as echo
from tests.channels.irc_daemon import wait_until
from tests.channels.prosody import Prosody, XmppPerson
from tests.channels.support import model_user_texts, write_config

pytestmark = pytest.mark.integration

BOT = "nodbot@localhost"
BOT_PASSWORD = "bot-secret"


@pytest.fixture
def prosody(tmp_path: Path) -> Iterator[Prosody]:
    server = Prosody(tmp_path / "prosody")
    server.register("nodbot", BOT_PASSWORD)
    server.start()
    yield server
    server.stop()


@pytest.fixture
def model() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer(echo) as server:
        yield server


@pytest.fixture
def people(prosody: Prosody) -> Iterator[dict[str, XmppPerson]]:
    users: dict[str, XmppPerson] = {}
    yield users
    for user in users.values():
        user.close()


def _config(state: Path, model: ScriptedModelServer, prosody: Prosody, **xmpp: Any) -> None:
    section = {
        "jid": BOT,
        "password": BOT_PASSWORD,
        "server": "127.0.0.1",
        "port": prosody.port,
        "tls": "off",
        "typing": False,
        **xmpp,
    }
    write_config(state, model.base_url, {"xmpp": section})


def _gateway() -> BackgroundGateway:
    return BackgroundGateway(GatewaySettings(port=0, token=None), retry=RetryPolicy(attempts=1))


def _connected(gateway: BackgroundGateway) -> None:
    wait_until(lambda: gateway.runtime.channels.statuses["xmpp"].connected, what="connected")


def test_a_resource_that_looks_like_an_allowed_address_does_not_make_a_sender_allowed(
    isolated_state: Path, prosody: Prosody, model: ScriptedModelServer, people: Any
) -> None:
    # Everyone at friends.example may talk to the agent; eve is not at friends.example, but
    # her client binds the resource `x@friends.example` (resources are the client's choice).
    _config(isolated_state, model, prosody, allowFrom=["*@friends.example"])
    eve = people["eve"] = XmppPerson(prosody, "eve", resource="x@friends.example")
    assert eve.client.boundjid.full == "eve@localhost/x@friends.example"
    with _gateway() as gateway:
        _connected(gateway)
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
        _config(isolated_state, model, prosody, allowFrom=["ann@localhost", "*@friends.example"])
        ann = people["ann"] = XmppPerson(prosody, "ann")
        eve = people["eve"] = XmppPerson(prosody, "eve")
        target = "eve@localhost/x@friends.example"
        args = {"channel": "xmpp", "to": target, "text": "the owner's secrets"}
        with _gateway() as gateway:
            _connected(gateway)
            ann.say(BOT, "call message " + json.dumps(args))
            texts = ann.wait_for(lambda: ann.texts(BOT), what="the tool's result")
        assert texts[0].startswith("tool said:")
        assert "not allowed" in texts[0] or "not a" in texts[0], texts[0]
        assert eve.texts() == []
