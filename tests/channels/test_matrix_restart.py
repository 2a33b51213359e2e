"""A gateway on Matrix killed with SIGKILL in the middle of a turn answers the pending message
once after a restart (the sync token and the pending delivery are on disk), and a password
login's device is kept (owner-only) and reused rather than logging in again."""

from __future__ import annotations

import json
import signal
import stat
import threading
import uuid
from pathlib import Path

import anyio
import pytest

from nodmix.providers.base import ModelRequest
from nodmix.providers.fake import ModelReply
from nodmix.testing.model_server import ScriptedModelServer
from tests.channels.support import model_user_texts, write_matrix_config
from tests.channels.synapse import Synapse, wait_for
from tests.gateway.support import GatewayProcess, wait_until

pytestmark = pytest.mark.integration


def test_sigkill_mid_turn_then_restart_answers_the_pending_message_once(
    isolated_state: Path, synapse: Synapse
) -> None:
    first_call = threading.Event()

    async def respond(request: ModelRequest) -> ModelReply:
        if not first_call.is_set():
            first_call.set()
            await anyio.sleep_forever()  # the gateway dies while the model "thinks"
        return ModelReply.text("the answer")

    tag = uuid.uuid4().hex[:8]
    bot, owner = synapse.register(f"bot{tag}"), synapse.register(f"owner{tag}")
    with ScriptedModelServer(respond) as model:
        write_matrix_config(
            isolated_state,
            model.base_url,
            synapse.url,
            {"userId": bot.user_id, "password": bot.password, "allowFrom": [owner.user_id]},
        )
        with GatewayProcess(isolated_state) as gateway:
            room = owner.create_room([bot.user_id], direct=True)
            wait_for(lambda: owner.members(room).get(bot.user_id) == "join", "the bot to join")
            owner.say(room, "are you there?")
            wait_until(first_call.is_set, what="the first model request", timeout=30)
            gateway.stop(signal.SIGKILL)
        assert owner.texts(room, bot.user_id) == []
        kept = isolated_state / "channels" / "matrix" / "session.json"
        assert stat.S_IMODE(kept.stat().st_mode) == 0o600
        device = json.loads(kept.read_text(encoding="utf-8"))["deviceId"]

        with GatewayProcess(isolated_state):
            wait_for(lambda: owner.texts(room, bot.user_id), "the pending answer")
            owner.say(room, "and now?")
            wait_for(lambda: len(owner.texts(room, bot.user_id)) >= 2, "the second answer")
        assert owner.texts(room, bot.user_id) == ["the answer", "the answer"]
        assert model_user_texts(model) == ["are you there?", "are you there?", "and now?"]
        assert json.loads(kept.read_text(encoding="utf-8"))["deviceId"] == device
