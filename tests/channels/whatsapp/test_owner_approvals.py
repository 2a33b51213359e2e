"""A WhatsApp group member asks the agent for a shell command and then answers its approval
request (`/approve`, `/always`, `/deny`) herself: against the scripted Graph API, with signed
webhooks posted to a real gateway. Each answer is refused with one line; nothing runs."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from nodmix.gateway import BackgroundGateway, GatewaySettings
from nodmix.providers.retry import RetryPolicy
from nodmix.testing.model_server import ScriptedModelServer
from nodmix.testing.whatsapp_server import ScriptedWhatsApp
from tests.channels.support import chat_model, write_config
from tests.channels.test_owner_approvals_everywhere import _attack, _command

pytestmark = pytest.mark.integration

OWNER = "15550104242"
MEMBER = "15550109999"
GROUP = "Y2FwaV9ncm91cDoxNTU1MDEwMDAwMDoxMjAzNjM0MA"


@pytest.fixture
def model() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer(chat_model) as server:
        yield server


def test_a_group_member_cannot_answer_an_approval_request(
    isolated_state: Path, model: ScriptedModelServer
) -> None:
    command, marker = _command(isolated_state)
    with ScriptedWhatsApp() as wa:
        section = wa.config(allowFrom=[OWNER], ownerIds=[OWNER], groups=[GROUP])
        write_config(isolated_state, model.base_url, {"whatsapp": section})
        settings = GatewaySettings(port=0, token="gateway-token")
        with BackgroundGateway(settings, retry=RetryPolicy(attempts=1)) as gateway:
            wa.webhook_url = f"{gateway.url}/whatsapp"
            _attack(
                "whatsapp",
                lambda text: wa.inject_text(MEMBER, text, group_id=GROUP, mention=True),
                lambda: wa.sent_texts(GROUP),
                model,
                marker,
                command,
            )
