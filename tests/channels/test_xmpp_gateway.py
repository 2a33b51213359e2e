"""XMPP through a real gateway: slixmpp against a real Prosody on 127.0.0.1 (accounts made
with prosodyctl, a MUC component beside it), people on slixmpp clients of their own, the
agent's model behind a scripted model server. Nothing from a sender who is not allowed
reaches the model."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from nodmix.providers.fake import ModelReply
from nodmix.testing.model_server import ScriptedModelServer
from tests.channels.irc_daemon import wait_until
from tests.channels.prosody import (
    MUC,
    Prosody,
    XmppPerson,
    write_bot_config,
    xmpp_gateway,
)
from tests.channels.support import model_user_texts
from tests.gateway.support import run_nodmix

pytestmark = pytest.mark.integration

ROOM = f"lounge@{MUC}"


def _config(state: Path, model: ScriptedModelServer, prosody: Prosody, **xmpp: Any) -> None:
    write_bot_config(state, model.base_url, prosody, rooms=[ROOM], **xmpp)


def test_a_stranger_gets_a_pairing_code_and_the_model_sees_nothing_until_approved(
    isolated_state: Path, prosody: Prosody, model: ScriptedModelServer, people: Any
) -> None:
    _config(isolated_state, model, prosody)
    ann = people["ann"] = XmppPerson(prosody, "ann")
    with xmpp_gateway():
        ann.say("nodbot@localhost", "secret plans")
        texts = ann.wait_for(lambda: ann.texts("nodbot@localhost"))
        assert "pairing code is" in texts[0]
        code = texts[0].split("pairing code is ", 1)[1][:8]
        assert model.requests == []

        listed = run_nodmix(isolated_state, "pairing", "list", "xmpp")
        assert code in listed.stdout and "ann@localhost" in listed.stdout
        approved = run_nodmix(isolated_state, "pairing", "approve", "xmpp", code)
        assert approved.returncode == 0, approved.stderr

        ann.say("nodbot@localhost", "hello agent")
        ann.wait_for(lambda: "hello agent" in ann.texts("nodbot@localhost"))
    assert model_user_texts(model) == ["hello agent"]


def test_an_allowed_sender_is_answered_and_an_unlisted_one_refused(
    isolated_state: Path, prosody: Prosody, model: ScriptedModelServer, people: Any
) -> None:
    _config(isolated_state, model, prosody, dmPolicy="allowlist", allowFrom=["ann@localhost"])
    ann = people["ann"] = XmppPerson(prosody, "ann")
    eve = people["eve"] = XmppPerson(prosody, "eve")
    with xmpp_gateway() as gateway:
        eve.say("nodbot@localhost", "let me in")
        ann.say("nodbot@localhost", "it is me")
        ann.wait_for(lambda: ann.texts("nodbot@localhost"))
        status = gateway.runtime.channels.statuses["xmpp"]
        wait_until(lambda: status.refused == 1, what="eve refused")
    assert ann.texts("nodbot@localhost") == ["it is me"]
    assert eve.texts("nodbot@localhost") == []
    assert model_user_texts(model) == ["it is me"]


def test_a_room_message_reaches_the_agent_only_when_it_names_the_bot(
    isolated_state: Path, prosody: Prosody, model: ScriptedModelServer, people: Any
) -> None:
    _config(isolated_state, model, prosody)
    ann = people["ann"] = XmppPerson(prosody, "ann")
    with xmpp_gateway() as gateway:
        ann.join(ROOM)
        assert "nodbot" in ann.occupants(ROOM)
        ann.say(ROOM, "just chatting among ourselves", room=True)
        ann.say(ROOM, "nodbot: what time is it", room=True)
        ann.wait_for(lambda: ann.texts(f"{ROOM}/nodbot"))
        keys = [s.key for s in gateway.runtime.sessions.list_sessions()]
        assert f"agent:main:xmpp:group:{ROOM}" in keys
        status = gateway.runtime.channels.statuses["xmpp"]
        wait_until(lambda: status.ignored == 1, what="the unaddressed message ignored")
    assert ann.texts(f"{ROOM}/nodbot") == ["[ann] what time is it"]
    assert model_user_texts(model) == ["[ann] what time is it"]


def test_a_reply_longer_than_the_limit_arrives_as_several_messages(
    isolated_state: Path, prosody: Prosody, model: ScriptedModelServer, people: Any
) -> None:
    words = [f"wort{i:05d}ü" for i in range(2500)]  # 27,500 characters
    model.respond = lambda request: ModelReply.text(" ".join(words))
    _config(isolated_state, model, prosody, allowFrom=["ann@localhost"])
    ann = people["ann"] = XmppPerson(prosody, "ann")
    with xmpp_gateway():
        ann.say("nodbot@localhost", "write a lot")
        ann.wait_for(lambda: "wort02499ü" in "".join(ann.texts("nodbot@localhost")))
    texts = ann.texts("nodbot@localhost")
    assert len(texts) == 3
    assert all(len(t) <= 10000 for t in texts)
    assert " ".join(texts).split() == words


def test_after_the_server_restarts_the_bot_logs_in_again_rejoins_and_answers(
    isolated_state: Path, prosody: Prosody, model: ScriptedModelServer, people: Any
) -> None:
    _config(isolated_state, model, prosody, groupPolicy="open")
    with xmpp_gateway() as gateway:
        status = gateway.runtime.channels.statuses["xmpp"]
        prosody.stop()
        wait_until(lambda: not status.connected, what="the disconnect noticed")
        prosody.start()
        wait_until(lambda: status.connected, timeout=40, what="reconnected")
        ann = people["ann"] = XmppPerson(prosody, "ann")
        ann.join(ROOM)
        ann.wait_for(lambda: "nodbot" in ann.occupants(ROOM), what="the bot rejoined")
        ann.say(ROOM, "nodbot, are you back?", room=True)
        ann.wait_for(lambda: ann.texts(f"{ROOM}/nodbot"))
    assert ann.texts(f"{ROOM}/nodbot") == ["[ann] are you back?"]
    assert "disconnected" in (status.last_error or "") or status.errors >= 1


def test_a_wrong_password_is_refused_and_said_so(
    isolated_state: Path, prosody: Prosody, model: ScriptedModelServer
) -> None:
    _config(isolated_state, model, prosody, password="forged")
    with xmpp_gateway(connected=False) as gateway:
        status = gateway.runtime.channels.statuses["xmpp"]
        wait_until(lambda: status.last_error, what="the refusal")
        assert not status.connected
        assert "login refused" in (status.last_error or "")
    doctor = run_nodmix(isolated_state, "doctor")
    assert "channel xmpp" in doctor.stdout and "refused" in doctor.stdout
    _config(isolated_state, model, prosody)
    doctor = run_nodmix(isolated_state, "doctor")
    assert "channel xmpp: connected as nodbot@localhost" in doctor.stdout
    listed = run_nodmix(isolated_state, "channels", "list")
    assert "xmpp  enabled  dm: pairing  groups: allowlist (1 listed)" in listed.stdout


def test_a_streamed_reply_is_one_message_corrected_until_it_is_whole(
    isolated_state: Path, prosody: Prosody, people: Any
) -> None:
    reply = ("First the plan. " * 20 + "Then the details. " * 20 + "In short: done. " * 20).strip()
    with ScriptedModelServer(lambda r: ModelReply.text(reply), event_seconds=0.6) as model:
        _config(isolated_state, model, prosody, allowFrom=["ann@localhost"], streaming="edit")
        ann = people["ann"] = XmppPerson(prosody, "ann")
        with xmpp_gateway():
            ann.say("nodbot@localhost", "plan my week")
            ann.wait_for(lambda: ann.texts("nodbot@localhost") == [reply], what="the whole reply")
    assert ann.corrections() >= 1
    first = [e for e in ann.received if not e["replaces"]]
    assert len(first) == 1 and first[0]["body"] != reply, "the first words went out early"


def test_message_send_from_the_shell_reaches_an_allowed_address_only(
    isolated_state: Path, prosody: Prosody, model: ScriptedModelServer, people: Any
) -> None:
    _config(isolated_state, model, prosody, allowFrom=["ann@localhost"])
    ann = people["ann"] = XmppPerson(prosody, "ann")
    sent = run_nodmix(
        isolated_state, "message", "send", "--channel", "xmpp", "--to", "ann@localhost", "hi"
    )
    assert sent.returncode == 0, sent.stderr
    ann.wait_for(lambda: ann.texts("nodbot@localhost"))
    assert ann.texts("nodbot@localhost") == ["hi"]
