"""A gateway killed with SIGKILL in the middle of a Discord turn answers the pending message
once after a restart, even when the message is dispatched again."""

from __future__ import annotations

import signal
import threading
from pathlib import Path

import anyio
import pytest

from nodmix.providers.base import ModelRequest
from nodmix.providers.fake import ModelReply
from nodmix.testing.discord_server import ScriptedDiscord
from nodmix.testing.model_server import ScriptedModelServer
from tests.channels.support import model_user_texts, write_config
from tests.gateway.support import GatewayProcess, wait_until

pytestmark = pytest.mark.integration

OWNER = "31337"


def test_sigkill_mid_turn_then_restart_answers_the_pending_message_once(
    isolated_state: Path,
) -> None:
    first_call = threading.Event()

    async def respond(request: ModelRequest) -> ModelReply:
        if not first_call.is_set():
            first_call.set()
            await anyio.sleep_forever()  # the gateway dies while the model "thinks"
        return ModelReply.text("the answer")

    with ScriptedModelServer(respond) as model, ScriptedDiscord() as discord:
        section = {"token": discord.token, "apiBaseUrl": discord.api_url, "allowFrom": [OWNER]}
        write_config(isolated_state, model.base_url, {"discord": section})
        dm = discord.dm_channel(OWNER)
        with GatewayProcess(isolated_state) as gateway:
            discord.inject_dm(sender_id=OWNER, text="are you there?")
            wait_until(first_call.is_set, what="the first model request")
            gateway.stop(signal.SIGKILL)
        assert discord.sent_texts(dm) == []

        with GatewayProcess(isolated_state):
            discord.wait_for(lambda: discord.sent_texts(dm))
            # The same message dispatched again must not be answered twice.
            discord.replay()
            discord.inject_dm(sender_id=OWNER, text="and now?")
            discord.wait_for(lambda: len(discord.sent_texts(dm)) >= 2)
            discord.wait_for(lambda: discord.pending_events() == 0)
        assert discord.sent_texts(dm) == ["the answer", "the answer"]
        assert model_user_texts(model)[-2:] == ["are you there?", "and now?"]
        assert len(model.requests) == 3


def test_messages_sent_while_the_gateway_was_stopped_are_read_back_and_answered_once(
    isolated_state: Path,
) -> None:
    from nodmix.gateway import BackgroundGateway, GatewaySettings
    from nodmix.providers.retry import RetryPolicy
    from nodmix.testing.scripts.echo import respond as echo

    def gateway() -> BackgroundGateway:
        settings = GatewaySettings(port=0, token=None)
        return BackgroundGateway(settings, retry=RetryPolicy(attempts=1))

    with ScriptedModelServer(echo) as model, ScriptedDiscord(queue_offline=False) as discord:
        room = discord.channel_ids[0]
        section = {
            "token": discord.token,
            "apiBaseUrl": discord.api_url,
            "allowFrom": [OWNER],
            "groups": [room],
        }
        write_config(isolated_state, model.base_url, {"discord": section})
        dm = discord.dm_channel(OWNER)
        with gateway():
            discord.wait_for(lambda: discord.gateway.live)
            discord.inject_dm(sender_id=OWNER, text="one")
            discord.inject_guild(channel_id=room, sender_id="7", text="hi room", mention=True)
            discord.wait_for(lambda: discord.sent_texts(dm) and discord.sent_texts(room))

        discord.inject_dm(sender_id=OWNER, text="two")  # nobody connected: Discord drops it
        discord.inject_guild(channel_id=room, sender_id="7", text="anyone?", mention=True)
        assert discord.pending_events() == 0

        with gateway():
            discord.wait_for(lambda: len(discord.sent_texts(dm)) >= 2)
            discord.wait_for(lambda: len(discord.sent_texts(room)) >= 2)
        assert discord.sent_texts(dm) == ["one", "two"]
        assert discord.sent_texts(room) == ["[Test User] hi room", "[Test User] anyone?"]
        assert sorted(model_user_texts(model)) == sorted(
            ["one", "[Test User] hi room", "two", "[Test User] anyone?"]
        )  # two sessions: their turns may interleave
