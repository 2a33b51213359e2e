"""A gateway killed with SIGKILL in the middle of a channel turn answers the pending message
once after a restart (the update offset and the pending delivery are on disk)."""

from __future__ import annotations

import signal
import threading
from pathlib import Path

import anyio
import pytest

from nodmix.providers.base import ModelRequest
from nodmix.providers.fake import ModelReply
from nodmix.testing.model_server import ScriptedModelServer
from nodmix.testing.telegram_server import ScriptedBotAPI
from tests.channels.support import model_user_texts, write_channel_config
from tests.gateway.support import GatewayProcess, wait_until

pytestmark = pytest.mark.integration

OWNER = 31337


def test_sigkill_mid_turn_then_restart_answers_the_pending_message_once(
    isolated_state: Path,
) -> None:
    first_call = threading.Event()

    async def respond(request: ModelRequest) -> ModelReply:
        if not first_call.is_set():
            first_call.set()
            await anyio.sleep_forever()  # the gateway dies while the model "thinks"
        return ModelReply.text("the answer")

    with ScriptedModelServer(respond) as model, ScriptedBotAPI() as api:
        write_channel_config(isolated_state, model.base_url, api, {"allowFrom": [OWNER]})
        with GatewayProcess(isolated_state) as gateway:
            api.inject_text(chat_id=OWNER, sender_id=OWNER, text="are you there?")
            wait_until(first_call.is_set, what="the first model request")
            gateway.stop(signal.SIGKILL)
        assert api.sent_texts(OWNER) == []

        with GatewayProcess(isolated_state):
            api.wait_for(lambda: api.sent_texts(OWNER))
            # Let the restarted gateway poll again: the update must not come back.
            polls = len(api.calls_of("getUpdates"))
            api.wait_for(lambda: len(api.calls_of("getUpdates")) >= polls + 2)
        assert api.sent_texts(OWNER) == ["the answer"]
        assert model_user_texts(model)[-1] == "are you there?"
        assert api.pending_updates() == 0
