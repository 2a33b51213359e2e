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
