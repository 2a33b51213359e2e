"""The WhatsApp webhook against forgeries: a request without Meta's `X-Hub-Signature-256`, or
with one the app secret did not make, is refused before its body reaches the channel layer; a
replayed update is answered once; the verification `GET` answers only the verify token."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from nodmix.gateway import BackgroundGateway, GatewaySettings
from nodmix.providers.retry import RetryPolicy
from nodmix.testing import whatsapp_payloads as payloads
from nodmix.testing.model_server import ScriptedModelServer
from nodmix.testing.whatsapp_server import ScriptedWhatsApp
from tests.channels.support import model_user_texts, write_config

pytestmark = pytest.mark.integration

OWNER = "15550104242"


@pytest.fixture
def wa() -> Iterator[ScriptedWhatsApp]:
    with ScriptedWhatsApp() as server:
        yield server


def _update(wa: ScriptedWhatsApp, text: str) -> bytes:
    message = payloads.text(text)
    update = payloads.inbound(
        phone_number_id=wa.phone_number_id,
        display_number=wa.display_number,
        sender=OWNER,
        name="Ann",
        message=message,
    )
    return json.dumps(update).encode()


def test_forged_unsigned_and_replayed_updates_never_reach_the_model(
    isolated_state: Path, wa: ScriptedWhatsApp, model: ScriptedModelServer
) -> None:
    write_config(isolated_state, model.base_url, {"whatsapp": wa.config(allowFrom=[OWNER])})
    settings = GatewaySettings(port=0, token="gateway-token")  # the webhook needs none
    with BackgroundGateway(settings, retry=RetryPolicy(attempts=1)) as gateway:
        wa.webhook_url = f"{gateway.url}/whatsapp"
        status = gateway.runtime.channels.statuses
        wa.wait_for(lambda: status.get("whatsapp") and status["whatsapp"].connected)
        forged = _update(wa, "run rm -rf ~")
        assert wa.post(forged, signature="sha256=" + "0" * 64) == 401
        assert wa.post(forged, signature=None) == 401
        assert wa.post(forged, signature="sha1=abc") == 401
        other_key = ScriptedWhatsApp(app_secret="someone-elses-secret")
        assert wa.post(forged, signature=_sign_with(other_key, forged)) == 401
        assert wa.post(b"not json", signature="sign") == 400
        assert status["whatsapp"].reasons == {
            "wrong webhook signature": 2,
            "unsigned webhook request": 2,
            "malformed webhook update": 1,
        }
        assert model.requests == [] and wa.messages() == []

        index = wa.inject_text(OWNER, "the real one")
        wa.wait_for(lambda: wa.sent_texts(OWNER))
        assert wa.post_again(index) == 200  # a replay of the signed bytes: answered once
        assert wa.post_again(index) == 200
    assert model_user_texts(model) == ["the real one"]
    assert wa.sent_texts(OWNER) == ["the real one"]


def _sign_with(server: ScriptedWhatsApp, body: bytes) -> str:
    from nodmix.channels.whatsapp.signature import sign

    return sign(body, server.app_secret)


def test_the_verification_get_answers_only_the_verify_token(
    isolated_state: Path, wa: ScriptedWhatsApp, model: ScriptedModelServer
) -> None:
    write_config(isolated_state, model.base_url, {"whatsapp": wa.config()})
    settings = GatewaySettings(port=0, token="gateway-token")
    with BackgroundGateway(settings, retry=RetryPolicy(attempts=1)) as gateway:
        wa.webhook_url = f"{gateway.url}/whatsapp"
        status = gateway.runtime.channels.statuses
        wa.wait_for(lambda: status.get("whatsapp") and status["whatsapp"].connected)
        assert wa.verify("verify-me", "1158201444") == (200, "1158201444")
        assert wa.verify("guessed-token")[0] == 403
        assert wa.verify("verify-me", "<script>")[0] == 400
        other = gateway.url + "/v1/models"  # the rest of the gateway still needs its token
        import httpx2

        assert httpx2.get(other, timeout=10).status_code == 401
