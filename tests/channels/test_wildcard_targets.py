"""`allowFrom: ["*"]` means "anyone may DM the bot", not "the agent may post in every group the
bot is in". A prompt-injected `message` tool call, `nodmix message send` and cron targets reach
direct chats; a group must be listed in `groups` (or be the chat the turn came from). Telegram
tells a group by its negative id; Discord, whose users and channels share one id space, only
by the bot having seen the chat as a direct one. Real gateways against the scripted servers."""

from __future__ import annotations

from pathlib import Path

import pytest

from nodmix.gateway import BackgroundGateway, GatewaySettings
from nodmix.messages import ToolResultMessage, UserMessage
from nodmix.providers.base import ModelRequest
from nodmix.providers.fake import ModelReply
from nodmix.providers.retry import RetryPolicy
from nodmix.testing.discord_server import ScriptedDiscord
from nodmix.testing.model_server import ScriptedModelServer
from nodmix.testing.telegram_server import ScriptedBotAPI
from tests.channels.support import write_channel_config, write_config
from tests.gateway.support import run_nodmix

pytestmark = pytest.mark.integration

STRANGER = 4242
LISTED_GROUP = -100777
OTHER_GROUP = -100555


def _gateway() -> BackgroundGateway:
    return BackgroundGateway(GatewaySettings(port=0, token=None), retry=RetryPolicy(attempts=1))


def _tool_results(model: ScriptedModelServer) -> list[str]:
    found = []
    for recorded in model.requests:
        last = recorded.request.messages[-1]
        if isinstance(last, ToolResultMessage):
            found.append(" ".join(getattr(b, "text", "") for b in last.content))
    return found


def test_a_wildcard_lets_the_message_tool_reach_direct_chats_and_listed_groups_only(
    isolated_state: Path, model: ScriptedModelServer
) -> None:
    def respond(request: ModelRequest) -> ModelReply:
        last = request.messages[-1]
        if isinstance(last, UserMessage):  # an injected "post this into ..." in a DM
            to = last.text.split()[-1]
            return ModelReply.tool_call(
                "message", {"channel": "telegram", "to": to, "text": "injected"}
            )
        return ModelReply.text("done")

    model.respond = respond
    with ScriptedBotAPI() as api:
        section = {"allowFrom": ["*"], "groups": [str(LISTED_GROUP)]}
        write_channel_config(isolated_state, model.base_url, api, section)
        with _gateway():
            for n, to in enumerate((OTHER_GROUP, 666, LISTED_GROUP), start=1):
                api.inject_text(chat_id=STRANGER, sender_id=STRANGER, text=f"tell {to}")
                api.wait_for(lambda n=n: len(api.sent_texts(STRANGER)) >= n, timeout=30)
        assert api.sent_texts(OTHER_GROUP) == []
        assert api.sent_texts(666) == ["injected"]
        assert api.sent_texts(LISTED_GROUP) == ["injected"]
    refused = [r for r in _tool_results(model) if str(OTHER_GROUP) in r]
    assert refused and 'allowFrom "*" lets in direct chats only' in refused[0]
    assert "channels.telegram.groups" in refused[0]


def test_a_wildcard_cron_target_or_message_send_to_a_group_is_refused_with_the_rule(
    isolated_state: Path, model: ScriptedModelServer
) -> None:
    with ScriptedBotAPI() as api:
        write_channel_config(isolated_state, model.base_url, api, {"allowFrom": ["*"]})
        cron = run_nodmix(
            isolated_state,
            *("cron", "add", "--name", "leak", "--every", "1h", "--message", "x"),
            *("--deliver", f"telegram:{OTHER_GROUP}"),
        )
        sent = run_nodmix(
            isolated_state, "message", "send", "--channel", "telegram", "--to", "@news", "x"
        )
        direct = run_nodmix(
            isolated_state, "message", "send", "--channel", "telegram", "--to", "666", "hi"
        )
        assert api.sent_texts(666) == ["hi"]
    assert cron.returncode == 1 and len(cron.stderr.strip().splitlines()) == 1
    assert f"telegram chat {OTHER_GROUP} is not allowed" in cron.stderr
    assert sent.returncode == 1 and "lets in direct chats only" in sent.stderr
    assert direct.returncode == 0, direct.stderr


def test_on_discord_a_wildcard_reaches_a_chat_only_once_it_was_seen_as_a_direct_one(
    isolated_state: Path, model: ScriptedModelServer
) -> None:
    with ScriptedDiscord() as discord:
        room = discord.channel_ids[1]
        section = {"token": discord.token, "apiBaseUrl": discord.api_url, "allowFrom": ["*"]}
        write_config(isolated_state, model.base_url, {"discord": section})

        def send(to: str) -> tuple[int, str]:
            done = run_nodmix(
                isolated_state, "message", "send", "--channel", "discord", "--to", to, "hi"
            )
            return done.returncode, done.stderr

        never_seen = send("5151")
        to_room = send(room)
        dm = discord.dm_channel("5151")
        with _gateway():
            discord.inject_dm(sender_id="5151", text="hello")
            discord.wait_for(lambda: discord.sent_texts(dm))
        seen = send("5151")
        assert discord.sent_texts(room) == []
        assert discord.sent_texts(dm)[-1] == "hi"
    assert never_seen[0] == 1 and "lets in direct chats only" in never_seen[1]
    assert to_room[0] == 1 and f"discord chat {room} is not allowed" in to_room[1]
    assert seen[0] == 0, seen[1]
