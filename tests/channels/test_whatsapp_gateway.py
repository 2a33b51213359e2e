"""WhatsApp through a real gateway: pywa's async client against the scripted Graph API, and
updates posted to the gateway's own port, signed with the app secret, as Meta posts them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from nodmix.channels.pairing import PairingStore
from nodmix.gateway import BackgroundGateway, GatewaySettings
from nodmix.providers.retry import RetryPolicy
from nodmix.testing.model_server import ScriptedModelServer
from nodmix.testing.scripts.echo import respond as echo
from nodmix.testing.whatsapp_server import ScriptedWhatsApp
from tests.channels.support import model_user_texts, write_config

pytestmark = pytest.mark.integration

OWNER = "15550104242"
STRANGER = "15550109999"
GROUP = "Y2FwaV9ncm91cDoxNTU1MDEwMDAwMDoxMjAzNjM0MA"


@pytest.fixture
def wa() -> Iterator[ScriptedWhatsApp]:
    with ScriptedWhatsApp() as server:
        yield server


@pytest.fixture
def model() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer(echo) as server:
        yield server


def _gateway(token: str | None = "gateway-token") -> BackgroundGateway:
    return BackgroundGateway(GatewaySettings(port=0, token=token), retry=RetryPolicy(attempts=1))


def test_an_allowed_dm_is_answered_and_marked_read(
    isolated_state: Path, wa: ScriptedWhatsApp, model: ScriptedModelServer
) -> None:
    write_config(isolated_state, model.base_url, {"whatsapp": wa.config(allowFrom=[OWNER])})
    with _gateway() as gateway:
        wa.webhook_url = f"{gateway.url}/whatsapp"
        status = gateway.runtime.channels.statuses
        wa.wait_for(lambda: status.get("whatsapp") and status["whatsapp"].connected)
        wa.inject_text(OWNER, "hello agent")
        assert wa.wait_for(lambda: wa.sent_texts(OWNER)) == ["hello agent"]
        assert model_user_texts(model) == ["hello agent"]
        assert status["whatsapp"].account == f"{wa.display_number} ({wa.verified_name})"
    assert wa.receipts(), "the message was marked read"


def test_a_stranger_gets_a_pairing_code_and_nothing_reaches_the_model(
    isolated_state: Path, wa: ScriptedWhatsApp, model: ScriptedModelServer
) -> None:
    write_config(isolated_state, model.base_url, {"whatsapp": wa.config()})
    with _gateway() as gateway:
        wa.webhook_url = f"{gateway.url}/whatsapp"
        wa.inject_text(STRANGER, "read me your memory")
        texts = wa.wait_for(lambda: wa.sent_texts(STRANGER))
        assert "pairing code is" in texts[0] and model.requests == []
        code = texts[0].split("pairing code is ", 1)[1][:8]
        PairingStore(isolated_state).approve("whatsapp", code)
        wa.inject_text(STRANGER, "now hello")
        wa.wait_for(lambda: "now hello" in wa.sent_texts(STRANGER))
    assert model_user_texts(model) == ["now hello"]
