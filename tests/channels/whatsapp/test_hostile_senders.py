"""WhatsApp strangers against a real gateway (signed updates posted to its port, pywa against
the scripted Graph API): a stranger's pairing reply that the Graph API holds up does not hold
up the webhook, so the owner's message behind it reaches the agent at once."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from nodmix.gateway import BackgroundGateway, GatewaySettings
from nodmix.providers.retry import RetryPolicy
from nodmix.testing.model_server import ScriptedModelServer
from nodmix.testing.whatsapp_server import ScriptedWhatsApp
from tests.channels.support import model_user_texts, write_config

pytestmark = pytest.mark.integration

OWNER = "15550104242"
STRANGER = "15550109999"


def test_a_pairing_reply_the_graph_api_holds_up_does_not_hold_up_the_webhook(
    isolated_state: Path, model: ScriptedModelServer
) -> None:
    with ScriptedWhatsApp() as wa:
        section = wa.config(allowFrom=[OWNER], requestTimeoutSeconds=5)
        write_config(isolated_state, model.base_url, {"whatsapp": section})
        settings = GatewaySettings(port=0, token="gateway-token")
        with BackgroundGateway(settings, retry=RetryPolicy(attempts=1)) as gateway:
            status = gateway.runtime.channels.statuses
            wa.webhook_url = f"{gateway.url}/whatsapp"
            wa.wait_for(lambda: status.get("whatsapp") and status["whatsapp"].connected)
            wa.fail_next(8, hang=True)  # the pairing reply's calls never get an answer
            wa.inject_text(STRANGER, "let me in")
            wa.wait_for(lambda: status["whatsapp"].pairing_requests == 1)
            started = time.monotonic()
            wa.inject_text(OWNER, "are you there?")
            wa.wait_for(lambda: model_user_texts(model) == ["are you there?"], timeout=30)
            assert time.monotonic() - started < 10
