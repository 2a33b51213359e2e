"""Telegram through a real gateway: python-telegram-bot against the scripted Bot API server,
the agent's model behind a real scripted model server. Nothing from a sender who is not
allowed reaches the model."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from nodmix.gateway import BackgroundGateway, GatewaySettings
from nodmix.messages import UserMessage
from nodmix.providers.base import ModelRequest
from nodmix.providers.fake import ModelReply
from nodmix.providers.retry import RetryPolicy
from nodmix.testing.model_server import ScriptedModelServer
from nodmix.testing.telegram_server import ScriptedBotAPI
from tests.channels.support import model_user_texts, write_channel_config
from tests.gateway.support import GatewayProcess, run_nodmix, write_config

pytestmark = pytest.mark.integration

OWNER = 4242
GROUP = -100777


@pytest.fixture
def api() -> Iterator[ScriptedBotAPI]:
    with ScriptedBotAPI() as server:
        yield server


def _gateway() -> BackgroundGateway:
    return BackgroundGateway(GatewaySettings(port=0, token=None), retry=RetryPolicy(attempts=1))


def test_unknown_sender_gets_a_pairing_code_and_the_model_sees_nothing_until_approved(
    isolated_state: Path, api: ScriptedBotAPI, model: ScriptedModelServer
) -> None:
    write_channel_config(isolated_state, model.base_url, api)
    with _gateway():
        api.inject_text(chat_id=OWNER, sender_id=OWNER, text="secret plans")
        texts = api.wait_for(lambda: api.sent_texts(OWNER))
        assert "pairing code is" in texts[0]
        code = texts[0].split("pairing code is ", 1)[1][:8]
        assert len(code) == 8 and code.isalnum() and code.isupper()
        assert not set(code) & set("01IO")
        assert model.requests == []

        listed = run_nodmix(isolated_state, "pairing", "list", "telegram")
        assert code in listed.stdout and str(OWNER) in listed.stdout
        approved = run_nodmix(isolated_state, "pairing", "approve", "telegram", code)
        assert approved.returncode == 0, approved.stderr

        api.inject_text(chat_id=OWNER, sender_id=OWNER, text="hello agent")
        api.wait_for(lambda: "hello agent" in api.sent_texts(OWNER))
        assert model_user_texts(model) == ["hello agent"]
        assert api.calls_of("sendChatAction"), "the typing indicator was shown"


def test_group_answers_only_mentions_in_allowed_groups_in_its_own_session(
    isolated_state: Path, api: ScriptedBotAPI, model: ScriptedModelServer
) -> None:
    write_channel_config(isolated_state, model.base_url, api, {"groups": [GROUP]})
    with _gateway() as gateway:
        api.inject_text(chat_id=GROUP, sender_id=7, text="no mention", chat_type="supergroup")
        api.inject_text(
            chat_id=-5, sender_id=7, text="other group", chat_type="supergroup", mention=True
        )
        api.inject_text(
            chat_id=GROUP,
            sender_id=7,
            text="what time is it",
            mention=True,
            chat_type="supergroup",
            sender_name="Ann",
        )
        api.wait_for(lambda: api.sent_texts(GROUP))
        assert api.sent_texts(GROUP) == ["[Ann] what time is it"]
        assert api.sent_texts(-5) == []
        assert model_user_texts(model) == ["[Ann] what time is it"]
        keys = [s.key for s in gateway.runtime.sessions.list_sessions()]
        assert f"agent:main:telegram:group:{GROUP}" in keys
        status = gateway.runtime.channels.statuses["telegram"]
        assert status.ignored == 1 and status.refused == 1


def test_a_long_reply_arrives_as_several_messages_within_the_limit(
    isolated_state: Path, api: ScriptedBotAPI, model: ScriptedModelServer
) -> None:
    long = " ".join(f"w{i:04d}" for i in range(1667))[:10_000]
    model.respond = lambda request: ModelReply.text(long)
    write_channel_config(isolated_state, model.base_url, api, {"allowFrom": [OWNER]})
    with _gateway():
        api.inject_text(chat_id=OWNER, sender_id=OWNER, text="write a lot")
        texts = api.wait_for(lambda: len(api.sent_texts(OWNER)) >= 3 and api.sent_texts(OWNER))
        assert len(texts) == 3
        assert all(len(t) <= 4096 for t in texts)
        assert " ".join(texts).split() == long.split()


def test_messages_during_a_turn_are_queued_and_answered_in_order(
    isolated_state: Path, api: ScriptedBotAPI, model: ScriptedModelServer
) -> None:
    write_channel_config(isolated_state, model.base_url, api, {"allowFrom": [OWNER]})
    with _gateway():
        for i in range(5):
            api.inject_text(chat_id=OWNER, sender_id=OWNER, text=f"message {i}")
        api.wait_for(lambda: len(api.sent_texts(OWNER)) >= 5)
        assert api.sent_texts(OWNER) == [f"message {i}" for i in range(5)]


def test_chat_commands_help_status_and_new(
    isolated_state: Path, api: ScriptedBotAPI, model: ScriptedModelServer
) -> None:
    write_channel_config(
        isolated_state, model.base_url, api, {"allowFrom": [OWNER], "ownerIds": [OWNER]}
    )
    with _gateway():
        api.inject_text(chat_id=OWNER, sender_id=OWNER, text="/help")
        help_text = api.wait_for(lambda: api.sent_texts(OWNER))[0]
        for name in ("/new", "/compact", "/status", "/stop", "/help"):
            assert name in help_text
        api.inject_text(chat_id=OWNER, sender_id=OWNER, text="/new")
        api.wait_for(lambda: len(api.sent_texts(OWNER)) >= 2)
        assert api.sent_texts(OWNER)[1] == "Started a new session."
        api.inject_text(chat_id=OWNER, sender_id=OWNER, text="/status")
        api.wait_for(lambda: len(api.sent_texts(OWNER)) >= 3)
        assert "agent:main:main" in api.sent_texts(OWNER)[2]
        assert model.requests == []


def test_flood_control_retry_after_is_honoured(
    isolated_state: Path, api: ScriptedBotAPI, model: ScriptedModelServer
) -> None:
    write_channel_config(isolated_state, model.base_url, api, {"allowFrom": [OWNER]})
    api.fail_next("sendMessage", status=429, retry_after=1)
    with _gateway():
        api.inject_text(chat_id=OWNER, sender_id=OWNER, text="still there?")
        api.wait_for(lambda: len(api.sent_texts(OWNER)) >= 2)
    sends = api.calls_of("sendMessage")
    assert len(sends) == 2
    assert sends[1].at - sends[0].at >= 0.9


def test_document_is_saved_in_the_workspace_inbox_and_named_in_the_prompt(
    isolated_state: Path, api: ScriptedBotAPI, model: ScriptedModelServer
) -> None:
    write_channel_config(isolated_state, model.base_url, api, {"allowFrom": [OWNER]})
    with _gateway():
        api.inject_text(
            chat_id=OWNER,
            sender_id=OWNER,
            text="see attached",
            document=("notes.txt", b"ferry at 9:40"),
        )
        api.wait_for(lambda: api.sent_texts(OWNER))
    prompt = model_user_texts(model)[0]
    assert prompt.startswith("see attached\n[document attached: inbox/")
    saved = isolated_state / "workspace" / prompt.split("attached: ", 1)[1].rstrip("]")
    assert saved.read_bytes() == b"ferry at 9:40"


def test_the_message_tool_reaches_allowed_chats_only(
    isolated_state: Path, api: ScriptedBotAPI, model: ScriptedModelServer
) -> None:
    def respond(request: ModelRequest) -> ModelReply:
        last = request.messages[-1]
        if isinstance(last, UserMessage):
            to = last.text.split()[-1]
            return ModelReply.tool_call(
                "message", {"channel": "telegram", "to": to, "text": "note from the agent"}
            )
        return ModelReply.text("done")

    model.respond = respond
    write_channel_config(isolated_state, model.base_url, api, {"allowFrom": [OWNER, 555]})
    with _gateway():
        api.inject_text(chat_id=OWNER, sender_id=OWNER, text="tell 555")
        api.wait_for(lambda: api.sent_texts(555))
        api.inject_text(chat_id=OWNER, sender_id=OWNER, text="tell 666")
        api.wait_for(lambda: len(api.sent_texts(OWNER)) >= 2)
    assert api.sent_texts(555) == ["note from the agent"]
    assert api.sent_texts(666) == []


def test_doctor_checks_the_bot_token_and_channels_status_shows_counts(
    isolated_state: Path, api: ScriptedBotAPI, model: ScriptedModelServer
) -> None:
    write_channel_config(isolated_state, model.base_url, api)
    doctor = run_nodmix(isolated_state, "doctor")
    assert f"channel telegram: connected as @{api.username}" in doctor.stdout
    write_channel_config(isolated_state, model.base_url, api, {"botToken": "1:wrong"})
    doctor = run_nodmix(isolated_state, "doctor")
    assert doctor.returncode == 1
    assert "✗ channel telegram: credentials refused" in doctor.stdout

    write_channel_config(isolated_state, model.base_url, api)
    with _gateway():
        api.inject_text(chat_id=OWNER, sender_id=OWNER, text="hi")
        api.wait_for(lambda: api.sent_texts(OWNER))
        status_file = isolated_state / "channels" / "status.json"
        api.wait_for(lambda: status_file.exists() and '"refused": 1' in status_file.read_text())
        shown = run_nodmix(isolated_state, "channels", "status")
    assert "telegram: connected as @nodmix_test_bot" in shown.stdout
    assert "refused 1" in shown.stdout and "pairing requests 1" in shown.stdout


def test_an_inbox_symlink_left_in_the_workspace_does_not_redirect_saved_files(
    isolated_state: Path, api: ScriptedBotAPI, model: ScriptedModelServer, tmp_path: Path
) -> None:
    # A sandboxed command can replace `inbox` with a symlink to any folder of the host (the
    # link text is not checked by the sandbox); the gateway saves attachments outside the
    # sandbox, so following it would let a chat drop files anywhere the gateway may write.
    outside = tmp_path / "outside"
    outside.mkdir()
    workspace = isolated_state / "workspace"
    workspace.mkdir(parents=True, exist_ok=True)
    (workspace / "inbox").symlink_to(outside)
    write_channel_config(isolated_state, model.base_url, api, {"allowFrom": [OWNER]})
    with _gateway():
        api.inject_text(
            chat_id=OWNER, sender_id=OWNER, text="see attached", document=("x.pth", b"import os")
        )
        api.wait_for(lambda: api.sent_texts(OWNER))
    assert list(outside.iterdir()) == []
    prompt = model_user_texts(model)[0]
    assert "could not be saved" in prompt and "inbox" in prompt


def test_a_stranger_repeating_messages_gets_the_pairing_code_once(
    isolated_state: Path, api: ScriptedBotAPI, model: ScriptedModelServer
) -> None:
    # every reply costs the bot's send quota: a flood of messages from someone unknown must
    # not turn into a flood of replies (and flood control for the allowed users)
    stranger, friend = 666, 4343
    write_channel_config(isolated_state, model.base_url, api, {"allowFrom": [friend]})
    with _gateway():
        for i in range(6):
            api.inject_text(chat_id=stranger, sender_id=stranger, text=f"let me in {i}")
        api.inject_text(chat_id=friend, sender_id=friend, text="after the stranger")
        api.wait_for(lambda: "after the stranger" in api.sent_texts(friend))
    replies = api.sent_texts(stranger)
    assert len(replies) == 1 and "pairing code is" in replies[0]
    assert model_user_texts(model) == ["after the stranger"]


def test_channels_status_names_a_gateway_started_before_the_channel_was_configured(
    isolated_state: Path, api: ScriptedBotAPI, model: ScriptedModelServer
) -> None:
    write_config(isolated_state, model.base_url)
    shown = run_nodmix(isolated_state, "channels", "status")
    assert shown.stdout.startswith("No channels configured")
    with GatewayProcess(isolated_state) as gateway:
        port = int(gateway.url.rsplit(":", 1)[1])
        write_channel_config(isolated_state, model.base_url, api, gateway={"port": port})
        shown = run_nodmix(isolated_state, "channels", "status")
    first = shown.stdout.splitlines()[0]
    assert first.startswith(f"The gateway at {gateway.url} was started before"), shown.stdout
    assert "restart it" in first
    stopped = run_nodmix(isolated_state, "channels", "status")
    assert stopped.stdout.startswith("The gateway is not running (start it with `"), stopped.stdout
    assert "telegram: not connected" in stopped.stdout
