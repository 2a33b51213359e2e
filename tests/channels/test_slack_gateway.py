"""Slack through a real gateway: a Bolt app on slack_sdk against the scripted Slack server
(Web API and Socket Mode), the agent's model behind a real scripted model server. Nothing from
a sender who is not allowed reaches the model."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nodmix.channels.slack.mapping import to_mrkdwn
from nodmix.gateway import BackgroundGateway, GatewaySettings
from nodmix.providers.fake import ModelReply
from nodmix.providers.retry import RetryPolicy
from nodmix.testing.model_server import ScriptedModelServer
from nodmix.testing.slack_server import ScriptedSlack
from tests.channels.support import model_user_texts, write_config
from tests.gateway.support import run_nodmix

pytestmark = pytest.mark.integration

OWNER = "U0OWNER"
DM = "D0OWNER"
ROOM = "C0ROOM"


@pytest.fixture
def slack() -> Iterator[ScriptedSlack]:
    with ScriptedSlack() as server:
        yield server


def _configure(
    state: Path, model: ScriptedModelServer, slack: ScriptedSlack, **section: Any
) -> None:
    tokens = {"botToken": slack.bot_token, "appToken": slack.app_token}
    write_config(
        state, model.base_url, {"slack": {**tokens, "apiBaseUrl": slack.api_url, **section}}
    )


def _gateway() -> BackgroundGateway:
    return BackgroundGateway(GatewaySettings(port=0, token=None), retry=RetryPolicy(attempts=1))


def _dm(slack: ScriptedSlack, text: str, **kw: Any) -> str:
    return slack.inject_message(channel=DM, user=OWNER, text=text, channel_type="im", **kw)


def test_unknown_sender_gets_a_pairing_code_and_the_model_sees_nothing_until_approved(
    isolated_state: Path, slack: ScriptedSlack, model: ScriptedModelServer
) -> None:
    _configure(isolated_state, model, slack)
    with _gateway():
        _dm(slack, "secret plans")
        texts = slack.wait_for(lambda: slack.sent_texts(OWNER))
        assert "pairing code is" in texts[0]
        code = texts[0].split("pairing code is ", 1)[1][:8]
        assert model.requests == []

        approved = run_nodmix(isolated_state, "pairing", "approve", "slack", code)
        assert approved.returncode == 0, approved.stderr

        _dm(slack, "hello agent")
        slack.wait_for(lambda: "hello agent" in slack.sent_texts(OWNER))
        assert model_user_texts(model) == ["hello agent"]
        assert slack.unacked() == 0, "every envelope was acknowledged"


def test_channels_answer_mentions_once_in_allowed_channels_and_threads_in_their_own_session(
    isolated_state: Path, slack: ScriptedSlack, model: ScriptedModelServer
) -> None:
    _configure(isolated_state, model, slack, groups=[ROOM])
    with _gateway() as gateway:
        slack.inject_message(channel=ROOM, user="U7", text="no mention")
        slack.inject_message(channel="C0OTHER", user="U7", text="other room", mention=True)
        slack.inject_message(
            channel=ROOM, user="U7", text="what time is it", mention=True, as_app_mention=True
        )
        root = slack.next_ts()
        slack.inject_message(
            channel=ROOM,
            user="U7",
            text="in the thread",
            thread_ts=root,
            parent_user=slack.bot_user,
        )
        slack.wait_for(lambda: len(slack.sent_texts(ROOM)) >= 2)
        # Two sessions (the channel and the thread): their turns may finish in either order.
        replies = sorted((p["text"], p.get("thread_ts") or "") for p in slack.posted(ROOM))
        assert replies == [("[Test User] in the thread", root), ("[Test User] what time is it", "")]
        assert slack.sent_texts("C0OTHER") == []
        assert sorted(model_user_texts(model)) == [
            "[Test User] in the thread",
            "[Test User] what time is it",
        ]
        keys = {s.key for s in gateway.runtime.sessions.list_sessions()}
        assert f"agent:main:slack:group:{ROOM}" in keys
        assert f"agent:main:slack:group:{ROOM}:topic:{root}" in keys
        status = gateway.runtime.channels.statuses["slack"]
        assert status.ignored == 1 and status.refused == 1


def test_replies_are_mrkdwn_and_long_ones_arrive_in_several_messages(
    isolated_state: Path, slack: ScriptedSlack, model: ScriptedModelServer
) -> None:
    long = "**Plan** for [the trip](https://example.org/a?b=1&c=2) <today>\n\n" + " ".join(
        f"w{i:04d}" for i in range(1300)
    )
    model.respond = lambda request: ModelReply.text(long)
    _configure(isolated_state, model, slack, allowFrom=[OWNER])
    with _gateway():
        _dm(slack, "write a lot")
        texts = slack.wait_for(
            lambda: len(slack.sent_texts(OWNER)) >= 2 and slack.sent_texts(OWNER)
        )
    assert len(texts) == 2
    assert all(len(t) <= 4000 for t in texts)
    assert texts[0].startswith(
        "*Plan* for <https://example.org/a?b=1&amp;c=2|the trip> &lt;today&gt;"
    )
    assert " ".join(texts).split()[5:] == [f"w{i:04d}" for i in range(1300)]


def test_messages_during_a_turn_are_queued_and_answered_in_order(
    isolated_state: Path, slack: ScriptedSlack, model: ScriptedModelServer
) -> None:
    _configure(isolated_state, model, slack, allowFrom=[OWNER])
    with _gateway():
        for i in range(5):
            _dm(slack, f"message {i}")
        slack.wait_for(lambda: len(slack.sent_texts(OWNER)) >= 5)
    assert slack.sent_texts(OWNER) == [f"message {i}" for i in range(5)]


def test_chat_commands_work_in_slack(
    isolated_state: Path, slack: ScriptedSlack, model: ScriptedModelServer
) -> None:
    _configure(isolated_state, model, slack, allowFrom=[OWNER], ownerIds=[OWNER])
    with _gateway():
        _dm(slack, "/new")
        slack.wait_for(lambda: slack.sent_texts(OWNER))
        _dm(slack, "/status")
        slack.wait_for(lambda: len(slack.sent_texts(OWNER)) >= 2)
    assert slack.sent_texts(OWNER)[0] == "Started a new session."
    assert "agent:main:main" in slack.sent_texts(OWNER)[1]
    assert model.requests == []


def test_files_are_saved_in_the_inbox_and_the_message_tool_uploads_workspace_files(
    isolated_state: Path, slack: ScriptedSlack, model: ScriptedModelServer
) -> None:
    from nodmix.messages import UserMessage
    from nodmix.providers.base import ModelRequest

    def respond(request: ModelRequest) -> ModelReply:
        last = request.messages[-1]
        if isinstance(last, UserMessage):
            path = last.text.split("attached: ", 1)[1].rstrip("]")
            return ModelReply.tool_call(
                "message",
                {"channel": "slack", "to": OWNER, "text": "here", "attachments": [path]},
            )
        return ModelReply.text("done")

    model.respond = respond
    _configure(isolated_state, model, slack, allowFrom=[OWNER])
    with _gateway():
        _dm(slack, "keep this", file=("notes.txt", b"ferry at 9:40"))
        slack.wait_for(lambda: "done" in slack.sent_texts(OWNER))
    prompt = model_user_texts(model)[0]
    assert prompt.startswith("keep this\n[document attached: inbox/")
    saved = isolated_state / "workspace" / prompt.split("attached: ", 1)[1].rstrip("]")
    assert saved.read_bytes() == b"ferry at 9:40"
    assert [data for _, data in slack.uploaded()] == [b"ferry at 9:40"]


def test_doctor_checks_the_token_and_channels_status_shows_counts(
    isolated_state: Path, slack: ScriptedSlack, model: ScriptedModelServer
) -> None:
    _configure(isolated_state, model, slack)
    doctor = run_nodmix(isolated_state, "doctor")
    assert "channel slack: connected as @nodmix (Nodmix Test)" in doctor.stdout
    _configure(isolated_state, model, slack, botToken="xoxb-wrong")
    doctor = run_nodmix(isolated_state, "doctor")
    assert "✗ channel slack: credentials refused" in doctor.stdout

    _configure(isolated_state, model, slack)
    with _gateway():
        _dm(slack, "hi")
        slack.wait_for(lambda: slack.sent_texts(OWNER))
        status_file = isolated_state / "channels" / "status.json"
        slack.wait_for(lambda: status_file.exists() and '"refused": 1' in status_file.read_text())
        shown = run_nodmix(isolated_state, "channels", "status")
    assert "slack: connected as @nodmix (Nodmix Test)" in shown.stdout
    assert "refused 1" in shown.stdout and "pairing requests 1" in shown.stdout


def test_a_refreshed_socket_mode_connection_keeps_delivering(
    isolated_state: Path, slack: ScriptedSlack, model: ScriptedModelServer
) -> None:
    _configure(isolated_state, model, slack, allowFrom=[OWNER])
    with _gateway():
        _dm(slack, "one")
        slack.wait_for(lambda: slack.sent_texts(OWNER))
        slack.refresh()
        slack.wait_for(lambda: len(slack.calls_of("apps.connections.open")) >= 2)
        _dm(slack, "two")
        slack.wait_for(lambda: len(slack.sent_texts(OWNER)) >= 2)
    assert slack.sent_texts(OWNER) == ["one", "two"]


def test_message_send_reaches_a_user_and_a_channel_without_a_running_gateway(
    isolated_state: Path, slack: ScriptedSlack, model: ScriptedModelServer
) -> None:
    _configure(isolated_state, model, slack, allowFrom=[OWNER], groups=[ROOM])
    for to in (OWNER, ROOM):
        sent = run_nodmix(isolated_state, "message", "send", "--channel", "slack", "--to", to, "hi")
        assert sent.returncode == 0, sent.stderr
    assert slack.sent_texts(OWNER) == ["hi"]
    assert slack.sent_texts(ROOM) == ["hi"]


def test_slack_slash_commands_become_chat_commands(
    isolated_state: Path, slack: ScriptedSlack, model: ScriptedModelServer
) -> None:
    _configure(isolated_state, model, slack, allowFrom=[OWNER], ownerIds=[OWNER])
    with _gateway():
        slack.inject_command("/nodmix", "new", user=OWNER, channel=DM)
        slack.wait_for(lambda: slack.sent_texts(OWNER))
        slack.inject_command("/status", "", user=OWNER, channel=DM)
        slack.wait_for(lambda: len(slack.sent_texts(OWNER)) >= 2)
        slack.wait_for(lambda: slack.unacked() == 0)
    assert slack.sent_texts(OWNER)[0] == "Started a new session."
    assert "agent:main:main" in slack.sent_texts(OWNER)[1]
    assert model.requests == []


def test_allowlist_policy_answers_listed_senders_and_refuses_others_silently(
    isolated_state: Path, slack: ScriptedSlack, model: ScriptedModelServer
) -> None:
    _configure(isolated_state, model, slack, dmPolicy="allowlist", allowFrom=[OWNER])
    with _gateway() as gateway:
        slack.inject_message(channel="D666", user="U666", text="let me in", channel_type="im")
        _dm(slack, "it is me")
        slack.wait_for(lambda: slack.sent_texts(OWNER))
        status = gateway.runtime.channels.statuses["slack"]
        slack.wait_for(lambda: status.refused == 1)
    assert slack.sent_texts("U666") == []
    assert model_user_texts(model) == ["it is me"]


def test_a_streamed_reply_is_posted_early_and_updated_until_it_is_whole(
    isolated_state: Path, slack: ScriptedSlack
) -> None:
    reply = "**Plan:** " + "step by step, " * 30 + "done."
    with ScriptedModelServer(lambda r: ModelReply.text(reply), event_seconds=0.6) as model:
        _configure(isolated_state, model, slack, allowFrom=[OWNER], streaming="edit")
        with _gateway():
            _dm(slack, "plan it")
            slack.wait_for(lambda: slack.calls_of("chat.update"), timeout=30)
            final = to_mrkdwn(reply)
            slack.wait_for(lambda: slack.calls_of("chat.update")[-1].params["text"] == final)
    posted = slack.posted(OWNER)
    assert len(posted) == 1 and posted[0]["text"] != final, "the first words went early"
    updates = slack.calls_of("chat.update")  # by the DM's channel id, as Slack requires
    assert {(u.params["channel"], u.params["ts"]) for u in updates} == {(DM, posted[0]["ts"])}
