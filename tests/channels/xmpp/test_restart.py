"""A real `nodmix gateway` process killed with SIGKILL in the middle of an XMPP turn, against a
real Prosody: after a restart the message that was being answered is answered once (its
pending delivery is on disk), and one sent while the gateway was dead (kept by Prosody's
offline storage) is answered too."""

from __future__ import annotations

import signal
import threading
from pathlib import Path

import anyio
import pytest

from nodmix.providers.base import ModelRequest
from nodmix.providers.fake import ModelReply
from nodmix.testing.model_server import ScriptedModelServer
from tests.channels.prosody import BOT, Prosody, XmppPerson, write_bot_config
from tests.gateway.support import GatewayProcess, wait_until

pytestmark = pytest.mark.integration


def test_sigkill_mid_turn_then_restart_answers_each_message_once(
    isolated_state: Path, prosody: Prosody
) -> None:
    first_call = threading.Event()

    async def respond(request: ModelRequest) -> ModelReply:
        if not first_call.is_set():
            first_call.set()
            await anyio.sleep_forever()  # the gateway dies while the model "thinks"
        return ModelReply.text(f"answer to {getattr(request.messages[-1], 'text', '')}")

    ann = XmppPerson(prosody, "ann")
    try:
        with ScriptedModelServer(respond) as model:
            write_bot_config(isolated_state, model.base_url, prosody, allowFrom=["ann@localhost"])
            with GatewayProcess(isolated_state) as gateway:
                ann.say(BOT, "are you there?")
                wait_until(first_call.is_set, what="the first model request")
                gateway.stop(signal.SIGKILL)
            ann.say(BOT, "sent while you were dead")
            with GatewayProcess(isolated_state):
                ann.wait_for(lambda: len(ann.texts(BOT)) >= 2, what="two answers")
                ann.say(BOT, "and now?")
                ann.wait_for(lambda: len(ann.texts(BOT)) >= 3, what="the third answer")
        assert sorted(ann.texts(BOT)) == [
            "answer to and now?",
            "answer to are you there?",
            "answer to sent while you were dead",
        ]
    finally:
        ann.close()
