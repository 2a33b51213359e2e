"""A real `nodmix gateway` process killed with SIGKILL in the middle of a Mattermost turn:
after a restart the accepted post is answered once (the pending delivery is on disk; the same
post read back from the channel's history is recognised), and a post made while the gateway
was down is read back and answered."""

from __future__ import annotations

import signal
import threading
from pathlib import Path

import anyio
import pytest

from nodmix.providers.base import ModelRequest
from nodmix.providers.fake import ModelReply
from nodmix.testing.mattermost_server import ScriptedMattermost
from nodmix.testing.model_server import ScriptedModelServer
from tests.channels.support import model_user_texts, write_config
from tests.gateway.support import GatewayProcess, wait_until

pytestmark = pytest.mark.integration

ANN = "ann00000000000000000000000"


def test_sigkill_mid_turn_then_restart_answers_each_post_once(isolated_state: Path) -> None:
    first_call = threading.Event()

    async def respond(request: ModelRequest) -> ModelReply:
        if not first_call.is_set():
            first_call.set()
            await anyio.sleep_forever()  # the gateway dies while the model "thinks"
        text = getattr(request.messages[-1], "text", "")
        return ModelReply.text(f"answer to {text}")

    with ScriptedModelServer(respond) as model, ScriptedMattermost() as mm:
        mm.add_user(ANN, "ann")
        section = {"url": mm.url, "token": mm.token, "typing": False, "allowFrom": [ANN]}
        write_config(isolated_state, model.base_url, {"mattermost": section})
        dm = mm.dm_channel(ANN)
        with GatewayProcess(isolated_state) as gateway:
            mm.wait_for(lambda: mm.connections >= 1)
            mm.inject_post(dm, ANN, "are you there?", channel_type="D")
            wait_until(first_call.is_set, what="the first model request")
            gateway.stop(signal.SIGKILL)
        assert mm.texts(dm) == []
        mm.inject_post(dm, ANN, "made while you were away", channel_type="D")
        with GatewayProcess(isolated_state):
            mm.wait_for(lambda: len(mm.texts(dm)) >= 2, timeout=30)
        assert sorted(mm.texts(dm)) == [
            "answer to are you there?",
            "answer to made while you were away",
        ]
        assert model_user_texts(model).count("are you there?") == 2  # killed, then rerun
