"""Discord through a real gateway: discord.py against the scripted Discord server (REST and
Gateway WebSocket), the agent's model behind a real scripted model server. Nothing from a
sender who is not allowed reaches the model."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nodmix.gateway import BackgroundGateway, GatewaySettings
from nodmix.providers.fake import ModelReply
from nodmix.providers.retry import RetryPolicy
from nodmix.testing.discord_server import ScriptedDiscord
from nodmix.testing.model_server import ScriptedModelServer
from tests.channels.support import model_user_texts, write_config
from tests.gateway.support import run_nodmix

pytestmark = pytest.mark.integration

OWNER = "4242"


@pytest.fixture
def discord() -> Iterator[ScriptedDiscord]:
    with ScriptedDiscord() as server:
        yield server


def _configure(
    state: Path, model: ScriptedModelServer, discord: ScriptedDiscord, **section: Any
) -> None:
    write_config(
        state,
        model.base_url,
        {"discord": {"token": discord.token, "apiBaseUrl": discord.api_url, **section}},
    )


def _gateway() -> BackgroundGateway:
    return BackgroundGateway(GatewaySettings(port=0, token=None), retry=RetryPolicy(attempts=1))


def test_unknown_sender_gets_a_pairing_code_and_the_model_sees_nothing_until_approved(
    isolated_state: Path, discord: ScriptedDiscord, model: ScriptedModelServer
) -> None:
    _configure(isolated_state, model, discord)
    dm = discord.dm_channel(OWNER)
    with _gateway():
        discord.inject_dm(sender_id=OWNER, text="secret plans")
        texts = discord.wait_for(lambda: discord.sent_texts(dm))
        assert "pairing code is" in texts[0]
        code = texts[0].split("pairing code is ", 1)[1][:8]
        assert model.requests == []

        approved = run_nodmix(isolated_state, "pairing", "approve", "discord", code)
        assert approved.returncode == 0, approved.stderr

        discord.inject_dm(sender_id=OWNER, text="hello agent")
        discord.wait_for(lambda: "hello agent" in discord.sent_texts(dm))
        assert model_user_texts(model) == ["hello agent"]
        assert discord.calls_of("POST /channels/{id}/typing"), "the typing indicator was shown"


def test_guild_channels_answer_mentions_in_allowed_channels_and_threads_in_their_own_session(
    isolated_state: Path, discord: ScriptedDiscord, model: ScriptedModelServer
) -> None:
    allowed, other = discord.channel_ids
    _configure(isolated_state, model, discord, groups=[allowed])
    with _gateway() as gateway:
        discord.inject_guild(channel_id=allowed, sender_id="7", text="no mention")
        discord.inject_guild(channel_id=other, sender_id="7", text="other room", mention=True)
        discord.inject_guild(
            channel_id=allowed,
            sender_id="7",
            text="what time is it",
            mention=True,
            sender_name="Ann",
        )
        discord.inject_guild(
            channel_id=discord.thread_id,
            sender_id="7",
            text="in the thread",
            reply_to_bot=True,
            sender_name="Ann",
        )
        discord.wait_for(lambda: discord.sent_texts(discord.thread_id))
        discord.wait_for(lambda: discord.sent_texts(allowed))
        assert discord.sent_texts(allowed) == ["[Ann] what time is it"]
        assert discord.sent_texts(discord.thread_id) == ["[Ann] in the thread"]
        assert discord.sent_texts(other) == []
        # Two sessions: their turns may reach the model in either order.
        assert sorted(model_user_texts(model)) == ["[Ann] in the thread", "[Ann] what time is it"]
        keys = {s.key for s in gateway.runtime.sessions.list_sessions()}
        assert f"agent:main:discord:group:{allowed}" in keys
        assert f"agent:main:discord:group:{allowed}:topic:{discord.thread_id}" in keys
        status = gateway.runtime.channels.statuses["discord"]
        assert status.ignored == 1 and status.refused == 1


def test_guild_allowlist_ignores_other_guilds(
    isolated_state: Path, discord: ScriptedDiscord, model: ScriptedModelServer
) -> None:
    room = discord.channel_ids[0]
    _configure(isolated_state, model, discord, groupPolicy="open", guilds=["1"])
    with _gateway() as gateway:
        discord.inject_guild(channel_id=room, sender_id="7", text="hello", mention=True)
        status = gateway.runtime.channels.statuses
        discord.wait_for(lambda: "discord" in status and status["discord"].ignored == 1)
    assert discord.sent_texts(room) == []
    assert model.requests == []


def test_a_long_reply_arrives_as_several_messages_within_2000_characters(
    isolated_state: Path, discord: ScriptedDiscord, model: ScriptedModelServer
) -> None:
    long = " ".join(f"w{i:04d}" for i in range(900))
    model.respond = lambda request: ModelReply.text(long)
    _configure(isolated_state, model, discord, allowFrom=[OWNER])
    dm = discord.dm_channel(OWNER)
    with _gateway():
        discord.inject_dm(sender_id=OWNER, text="write a lot")
        texts = discord.wait_for(
            lambda: len(discord.sent_texts(dm)) >= 3 and discord.sent_texts(dm)
        )
    assert len(texts) == 3
    assert all(len(t) <= 2000 for t in texts)
    assert " ".join(texts).split() == long.split()


def test_slash_commands_are_registered_and_answered_as_follow_up_embeds(
    isolated_state: Path, discord: ScriptedDiscord, model: ScriptedModelServer
) -> None:
    _configure(isolated_state, model, discord, allowFrom=[OWNER], ownerIds=[OWNER])
    dm = discord.dm_channel(OWNER)
    with _gateway():
        discord.wait_for(lambda: discord.sessions_ready)
        assert {c["name"] for c in discord.commands} >= {"new", "compact", "status"}
        discord.inject_command("status", sender_id=OWNER)
        discord.wait_for(lambda: discord.sent_texts(dm))
        discord.inject_command("new", sender_id=OWNER)
        discord.wait_for(lambda: len(discord.sent_texts(dm)) >= 2)
    callbacks = discord.calls_of("POST /interactions/{id}/{token}/callback")
    assert [c.body["type"] for c in callbacks] == [5, 5]  # "thinking…" at once
    follow_ups = [c.body for c in discord.calls_of("POST /webhooks/{app}/{token}")]
    assert "agent:main:main" in follow_ups[0]["embeds"][0]["description"]
    assert follow_ups[1]["embeds"][0]["description"] == "Started a new session."
    assert model.requests == []


def test_attachment_is_saved_in_the_workspace_inbox_and_named_in_the_prompt(
    isolated_state: Path, discord: ScriptedDiscord, model: ScriptedModelServer
) -> None:
    _configure(isolated_state, model, discord, allowFrom=[OWNER])
    with _gateway():
        discord.inject_dm(sender_id=OWNER, text="see attached", attachment=("notes.txt", b"9:40"))
        discord.wait_for(lambda: discord.sent_texts(discord.dm_channel(OWNER)))
    prompt = model_user_texts(model)[0]
    assert prompt.startswith("see attached\n[document attached: inbox/")
    saved = isolated_state / "workspace" / prompt.split("attached: ", 1)[1].rstrip("]")
    assert saved.read_bytes() == b"9:40"


def test_doctor_checks_the_token_and_channels_status_shows_counts(
    isolated_state: Path, discord: ScriptedDiscord, model: ScriptedModelServer
) -> None:
    _configure(isolated_state, model, discord)
    doctor = run_nodmix(isolated_state, "doctor")
    assert "channel discord: connected as @nodmix_bot" in doctor.stdout
    _configure(isolated_state, model, discord, token="wrong")
    doctor = run_nodmix(isolated_state, "doctor")
    assert "✗ channel discord: credentials refused" in doctor.stdout

    _configure(isolated_state, model, discord)
    with _gateway():
        discord.inject_dm(sender_id=OWNER, text="hi")
        discord.wait_for(lambda: discord.sent_texts(discord.dm_channel(OWNER)))
        status_file = isolated_state / "channels" / "status.json"
        discord.wait_for(lambda: status_file.exists() and '"refused": 1' in status_file.read_text())
        shown = run_nodmix(isolated_state, "channels", "status")
    assert "discord: connected as @nodmix_bot" in shown.stdout
    assert "refused 1" in shown.stdout and "pairing requests 1" in shown.stdout


def test_message_send_reaches_a_user_and_a_channel_without_a_running_gateway(
    isolated_state: Path, discord: ScriptedDiscord, model: ScriptedModelServer
) -> None:
    room = discord.channel_ids[1]
    _configure(isolated_state, model, discord, allowFrom=[OWNER], groups=[room])
    to_user = run_nodmix(
        isolated_state, "message", "send", "--channel", "discord", "--to", OWNER, "hi"
    )
    assert to_user.returncode == 0, to_user.stderr
    to_room = run_nodmix(
        isolated_state, "message", "send", "--channel", "discord", "--to", room, "all"
    )
    assert to_room.returncode == 0, to_room.stderr
    assert discord.sent_texts(discord.dm_channel(OWNER)) == ["hi"]
    assert discord.sent_texts(room) == ["all"]
    refused = run_nodmix(
        isolated_state, "message", "send", "--channel", "discord", "--to", "9", "x"
    )
    assert refused.returncode != 0 and "not allowed" in refused.stderr


def test_rate_limited_send_is_retried_after_the_wait_discord_asks_for(
    isolated_state: Path, discord: ScriptedDiscord, model: ScriptedModelServer
) -> None:
    _configure(isolated_state, model, discord, allowFrom=[OWNER])
    discord.fail_next("POST /channels/{id}/messages", status=429, retry_after=1.0)
    with _gateway():
        discord.inject_dm(sender_id=OWNER, text="still there?")
        discord.wait_for(lambda: discord.sent_texts(discord.dm_channel(OWNER)))
    posts = discord.calls_of("POST /channels/{id}/messages")
    assert len(posts) == 2
    assert posts[1].at - posts[0].at >= 0.9


def test_a_dropped_gateway_connection_is_reestablished(
    isolated_state: Path, discord: ScriptedDiscord, model: ScriptedModelServer
) -> None:
    _configure(isolated_state, model, discord, allowFrom=[OWNER])
    dm = discord.dm_channel(OWNER)
    with _gateway():
        discord.inject_dm(sender_id=OWNER, text="one")
        discord.wait_for(lambda: discord.sent_texts(dm))
        discord.drop_sessions()
        discord.wait_for(lambda: discord.sessions_ready >= 2)
        discord.inject_dm(sender_id=OWNER, text="two")
        discord.wait_for(lambda: len(discord.sent_texts(dm)) >= 2)
    assert discord.sent_texts(dm) == ["one", "two"]


def test_a_message_content_intent_left_off_is_named_by_doctor_and_status(
    isolated_state: Path, model: ScriptedModelServer
) -> None:
    with ScriptedDiscord(message_content=False) as discord:
        _configure(isolated_state, model, discord)
        doctor = run_nodmix(isolated_state, "doctor")
        assert "the Message Content intent is off" in doctor.stdout
        with _gateway() as gateway:
            statuses = gateway.runtime.channels.statuses
            discord.wait_for(
                lambda: "discord" in statuses and statuses["discord"].last_error is not None
            )
            error = statuses["discord"].last_error
    assert error is not None and "Privileged Gateway Intents" in error
    assert discord.identifies >= 1 and discord.sessions_ready == 0


def test_allowlist_policy_answers_listed_senders_and_refuses_others_silently(
    isolated_state: Path, discord: ScriptedDiscord, model: ScriptedModelServer
) -> None:
    _configure(isolated_state, model, discord, dmPolicy="allowlist", allowFrom=[OWNER])
    with _gateway() as gateway:
        discord.inject_dm(sender_id="666", text="let me in")
        discord.inject_dm(sender_id=OWNER, text="it is me")
        discord.wait_for(lambda: discord.sent_texts(discord.dm_channel(OWNER)))
        status = gateway.runtime.channels.statuses["discord"]
        discord.wait_for(lambda: status.refused == 1)
    assert discord.sent_texts(discord.dm_channel("666")) == []
    assert model_user_texts(model) == ["it is me"]
