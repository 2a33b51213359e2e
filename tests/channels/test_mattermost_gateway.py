"""Mattermost through a real gateway: the real `mattermostautodriver` client and the
channel's WebSocket against the scripted Mattermost server (`nodmix.testing.
mattermost_server`), the agent's model behind a scripted model server. Nothing from a sender
who is not allowed reaches the model."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nodmix.gateway import BackgroundGateway, GatewaySettings
from nodmix.providers.fake import ModelReply
from nodmix.providers.retry import RetryPolicy
from nodmix.testing.mattermost_server import ScriptedMattermost
from nodmix.testing.model_server import ScriptedModelServer
from tests.channels.irc_daemon import wait_until
from tests.channels.support import model_user_texts, write_config
from tests.gateway.support import run_nodmix

pytestmark = pytest.mark.integration

ANN = "ann00000000000000000000000"
EVE = "eve00000000000000000000000"
TOWN = "town0000000000000000000000"


@pytest.fixture
def mm() -> Iterator[ScriptedMattermost]:
    with ScriptedMattermost() as server:
        server.add_user(ANN, "ann")
        server.add_user(EVE, "eve")
        yield server


def _config(state: Path, model: ScriptedModelServer, mm: ScriptedMattermost, **extra: Any) -> None:
    section = {"url": mm.url, "token": mm.token, "typing": False, **extra}
    write_config(state, model.base_url, {"mattermost": section})


def _gateway() -> BackgroundGateway:
    return BackgroundGateway(GatewaySettings(port=0, token=None), retry=RetryPolicy(attempts=1))


def _connected(gateway: BackgroundGateway) -> Any:
    status = gateway.runtime.channels.statuses["mattermost"]
    wait_until(lambda: status.connected, what="connected")
    return status


def test_a_stranger_gets_a_pairing_code_and_the_model_sees_nothing_until_approved(
    isolated_state: Path, mm: ScriptedMattermost, model: ScriptedModelServer
) -> None:
    _config(isolated_state, model, mm)
    dm = mm.dm_channel(ANN)
    with _gateway() as gateway:
        _connected(gateway)
        mm.inject_post(dm, ANN, "secret plans", channel_type="D")
        texts = mm.wait_for(lambda: mm.texts(dm))
        assert "pairing code is" in texts[0]
        code = texts[0].split("pairing code is ", 1)[1][:8]
        assert model.requests == []

        listed = run_nodmix(isolated_state, "pairing", "list", "mattermost")
        assert code in listed.stdout and ANN in listed.stdout
        approved = run_nodmix(isolated_state, "pairing", "approve", "mattermost", code)
        assert approved.returncode == 0, approved.stderr

        mm.inject_post(dm, ANN, "hello agent", channel_type="D")
        mm.wait_for(lambda: "hello agent" in mm.texts(dm))
    assert model_user_texts(model) == ["hello agent"]


def test_an_allowed_sender_is_answered_and_an_unlisted_one_refused(
    isolated_state: Path, mm: ScriptedMattermost, model: ScriptedModelServer
) -> None:
    _config(isolated_state, model, mm, dmPolicy="allowlist", allowFrom=[ANN])
    with _gateway() as gateway:
        status = _connected(gateway)
        mm.inject_post(mm.dm_channel(EVE), EVE, "let me in", channel_type="D")
        mm.inject_post(mm.dm_channel(ANN), ANN, "it is me", channel_type="D")
        mm.wait_for(lambda: mm.texts(mm.dm_channel(ANN)))
        wait_until(lambda: status.refused == 1, what="eve refused")
    assert mm.texts(mm.dm_channel(ANN)) == ["it is me"]
    assert mm.texts(mm.dm_channel(EVE)) == []
    assert model_user_texts(model) == ["it is me"]


def test_a_channel_post_reaches_the_agent_only_when_it_mentions_the_bot_and_replies_thread(
    isolated_state: Path, mm: ScriptedMattermost, model: ScriptedModelServer
) -> None:
    _config(isolated_state, model, mm, groups=[TOWN])
    with _gateway() as gateway:
        status = _connected(gateway)
        mm.inject_post(TOWN, ANN, "just chatting among ourselves")
        root = mm.inject_post(TOWN, ANN, "@nodbot what time is it")
        mm.wait_for(lambda: mm.texts(TOWN))
        in_thread = mm.inject_post(TOWN, ANN, "@nodbot and tomorrow?", root_id=root)
        mm.wait_for(lambda: len(mm.texts(TOWN)) == 2)
        wait_until(lambda: status.ignored == 1, what="the unaddressed post ignored")
    posts = mm.channel_posts(TOWN)
    assert [p["message"] for p in posts] == ["[ann] what time is it", "[ann] and tomorrow?"]
    assert posts[0]["root_id"] == "" and posts[1]["root_id"] == root
    assert in_thread != root
    assert model_user_texts(model) == ["[ann] what time is it", "[ann] and tomorrow?"]


def test_a_reply_longer_than_a_post_arrives_as_several_posts(
    isolated_state: Path, mm: ScriptedMattermost, model: ScriptedModelServer
) -> None:
    words = [f"wort{i:05d}ü" for i in range(4000)]  # 44,000 characters
    model.respond = lambda request: ModelReply.text(" ".join(words))
    _config(isolated_state, model, mm, allowFrom=[ANN])
    dm = mm.dm_channel(ANN)
    with _gateway() as gateway:
        _connected(gateway)
        mm.inject_post(dm, ANN, "write a lot", channel_type="D")
        mm.wait_for(lambda: "wort03999ü" in "".join(mm.texts(dm)))
    texts = mm.texts(dm)
    assert len(texts) == 3 and all(len(t) <= 16000 for t in texts)
    assert " ".join(texts).split() == words


def test_a_lost_connection_is_noticed_and_the_bot_answers_after_it_comes_back(
    isolated_state: Path, mm: ScriptedMattermost, model: ScriptedModelServer
) -> None:
    _config(isolated_state, model, mm, allowFrom=[ANN])
    dm = mm.dm_channel(ANN)
    with _gateway() as gateway:
        status = _connected(gateway)
        mm.go_down()
        wait_until(lambda: not status.connected, what="the disconnect noticed")
        assert "disconnected" in (status.last_error or "") or status.errors >= 1
        mm.come_back()
        wait_until(lambda: status.connected, timeout=40, what="reconnected")
        mm.inject_post(dm, ANN, "are you back?", channel_type="D")
        mm.wait_for(lambda: mm.texts(dm))
    assert mm.texts(dm) == ["are you back?"]
    assert mm.connections >= 2


def test_posts_made_while_the_bot_was_away_are_read_back_and_answered_once(
    isolated_state: Path, mm: ScriptedMattermost, model: ScriptedModelServer
) -> None:
    _config(isolated_state, model, mm, allowFrom=[ANN], groups=[TOWN])
    dm = mm.dm_channel(ANN)
    mm.inject_post(dm, ANN, "before the bot ever ran", channel_type="D")
    with _gateway() as gateway:
        status = _connected(gateway)
        mm.inject_post(dm, ANN, "first", channel_type="D")
        mm.wait_for(lambda: mm.texts(dm) == ["first"])
        mm.go_down()
        wait_until(lambda: not status.connected, what="the disconnect noticed")
        mm.inject_post(dm, ANN, "while the server was down", channel_type="D")
        mm.inject_post(TOWN, ANN, "@nodbot and in town?")
        mm.inject_post(TOWN, ANN, "not for the bot")
        mm.come_back()
        mm.wait_for(lambda: len(mm.texts(dm)) == 2 and mm.texts(TOWN), timeout=40)
        wait_until(lambda: status.ignored == 1, what="the town post without a mention")
    assert mm.connections == 2, "nothing was pushed later: it was read back"
    mm.inject_post(dm, ANN, "while the gateway was stopped", channel_type="D")
    with _gateway() as gateway:
        status = _connected(gateway)
        mm.wait_for(lambda: len(mm.texts(dm)) == 3)
        mm.inject_post(dm, ANN, "live again", channel_type="D")
        mm.wait_for(lambda: len(mm.texts(dm)) == 4)
        assert status.ignored == 0, "the town post without a mention is not read again"
    assert mm.texts(dm) == [
        "first",
        "while the server was down",
        "while the gateway was stopped",
        "live again",
    ]
    assert mm.texts(TOWN) == ["[ann] and in town?"]
    assert sorted(model_user_texts(model)) == sorted(
        [
            "first",
            "while the server was down",
            "[ann] and in town?",
            "while the gateway was stopped",
            "live again",
        ]
    )
    assert all(since > 0 for _, since in mm.reads_since)


def test_a_forged_token_is_refused_and_said_so(
    isolated_state: Path, mm: ScriptedMattermost, model: ScriptedModelServer
) -> None:
    _config(isolated_state, model, mm, token="forged-token")
    with _gateway() as gateway:
        status = gateway.runtime.channels.statuses["mattermost"]
        wait_until(lambda: status.last_error, what="the refusal")
        assert not status.connected and "token refused" in (status.last_error or "")
    assert mm.connections == 0 and mm.refused_tokens >= 1
    doctor = run_nodmix(isolated_state, "doctor")
    assert "channel mattermost" in doctor.stdout and "refused the token" in doctor.stdout
    _config(isolated_state, model, mm)
    doctor = run_nodmix(isolated_state, "doctor")
    assert "channel mattermost: connected as @nodbot on 127.0.0.1" in doctor.stdout


def test_a_streamed_reply_is_one_post_edited_until_it_is_whole(
    isolated_state: Path, mm: ScriptedMattermost
) -> None:
    reply = ("First the plan. " * 20 + "Then the details. " * 20 + "In short: done. " * 20).strip()
    with ScriptedModelServer(lambda r: ModelReply.text(reply), event_seconds=0.6) as model:
        _config(isolated_state, model, mm, allowFrom=[ANN], streaming="edit")
        dm = mm.dm_channel(ANN)
        with _gateway() as gateway:
            _connected(gateway)
            mm.inject_post(dm, ANN, "plan my week", channel_type="D")
            mm.wait_for(lambda: mm.texts(dm) == [reply])
    assert len(mm.edits) >= 1
    assert mm.edits[0]["message"] != reply, "the first words went out before the end"


def test_message_send_from_the_shell_opens_the_dm_of_an_allowed_user(
    isolated_state: Path, mm: ScriptedMattermost, model: ScriptedModelServer
) -> None:
    _config(isolated_state, model, mm, allowFrom=[ANN])
    sent = run_nodmix(
        isolated_state, "message", "send", "--channel", "mattermost", "--to", ANN, "hi"
    )
    assert sent.returncode == 0, sent.stderr
    assert mm.texts(mm.dm_channel(ANN)) == ["hi"]
