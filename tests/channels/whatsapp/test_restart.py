"""A real `nodmix gateway` process killed with SIGKILL in the middle of a WhatsApp turn: after a
restart the accepted message is answered once, and the same update posted again (Meta's
redelivery, or a replay) is not answered a second time."""

from __future__ import annotations

import signal
import threading
from pathlib import Path

import anyio
import pytest

from nodmix.providers.base import ModelRequest
from nodmix.providers.fake import ModelReply
from nodmix.testing.model_server import ScriptedModelServer
from nodmix.testing.whatsapp_server import ScriptedWhatsApp
from tests.channels.support import write_config
from tests.gateway.support import GatewayProcess, wait_until

pytestmark = pytest.mark.integration

OWNER = "15550104242"


def test_sigkill_mid_turn_then_restart_answers_once_even_when_the_update_comes_again(
    isolated_state: Path,
) -> None:
    first_call = threading.Event()

    async def respond(request: ModelRequest) -> ModelReply:
        if not first_call.is_set():
            first_call.set()
            await anyio.sleep_forever()  # the gateway dies while the model "thinks"
        return ModelReply.text("the answer")

    with ScriptedModelServer(respond) as model, ScriptedWhatsApp() as wa:
        write_config(isolated_state, model.base_url, {"whatsapp": wa.config(allowFrom=[OWNER])})
        with GatewayProcess(isolated_state) as gateway:
            wa.webhook_url = f"{gateway.url}/whatsapp"
            index = wa.inject_text(OWNER, "are you there?")
            wait_until(first_call.is_set, what="the first model request")
            gateway.stop(signal.SIGKILL)
        assert wa.sent_texts(OWNER) == []

        with GatewayProcess(isolated_state) as gateway:
            wa.webhook_url = f"{gateway.url}/whatsapp"
            wa.wait_for(lambda: wa.sent_texts(OWNER))
            assert wa.post_again(index) == 200
            wa.inject_text(OWNER, "and now?")
            wa.wait_for(lambda: len(wa.sent_texts(OWNER)) >= 2)
        assert wa.sent_texts(OWNER) == ["the answer", "the answer"]
        assert len(model.requests) == 3  # the killed turn, its rerun, "and now?"
