"""WhatsApp through a real gateway: pywa's async client against the scripted Graph API, and
updates posted to the gateway's own port, signed with the app secret, as Meta posts them."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from nodmix.channels.pairing import PairingStore
from nodmix.gateway import BackgroundGateway, GatewaySettings
from nodmix.providers.fake import ModelReply
from nodmix.providers.retry import RetryPolicy
from nodmix.testing.model_server import ScriptedModelServer
from nodmix.testing.whatsapp_server import ScriptedWhatsApp
from tests.channels.support import model_user_texts, write_config
from tests.gateway.support import run_nodmix

pytestmark = pytest.mark.integration

OWNER = "15550104242"
STRANGER = "15550109999"
GROUP = "Y2FwaV9ncm91cDoxNTU1MDEwMDAwMDoxMjAzNjM0MA"


@pytest.fixture
def wa() -> Iterator[ScriptedWhatsApp]:
    with ScriptedWhatsApp() as server:
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


def test_group_messages_need_a_listed_group_and_a_mention(
    isolated_state: Path, wa: ScriptedWhatsApp, model: ScriptedModelServer
) -> None:
    other = "Y2FwaV9ncm91cDpub3RfbGlzdGVk"
    section = wa.config(allowFrom=[OWNER], groups=[GROUP])
    write_config(isolated_state, model.base_url, {"whatsapp": section})
    with _gateway() as gateway:
        wa.webhook_url = f"{gateway.url}/whatsapp"
        status = gateway.runtime.channels.statuses
        wa.inject_text(OWNER, "chatting among ourselves", group_id=GROUP)
        wa.inject_text(OWNER, "hello there", group_id=other, mention=True)
        wa.wait_for(lambda: "whatsapp" in status and status["whatsapp"].ignored == 1)
        wa.wait_for(lambda: status["whatsapp"].refused == 1)
        assert model.requests == [] and wa.messages() == []
        wa.inject_text(STRANGER, "what is the plan?", group_id=GROUP, mention=True, name="Bo")
        assert wa.wait_for(lambda: wa.sent_texts(GROUP)) == ["[Bo] what is the plan?"]
        wa.inject_text(STRANGER, "and tomorrow?", group_id=GROUP, reply_to="wamid.x", name="Bo")
        wa.wait_for(lambda: len(wa.sent_texts(GROUP)) == 2)
    assert model_user_texts(model) == ["[Bo] what is the plan?", "[Bo] and tomorrow?"]
    assert wa.messages(GROUP)[0]["recipient_type"] == "group"
    assert wa.sent_texts(STRANGER) == [], "a group member is not sent a pairing code"


def test_a_reply_longer_than_4096_characters_arrives_split(
    isolated_state: Path, wa: ScriptedWhatsApp, model: ScriptedModelServer
) -> None:
    long = " ".join(f"w{i:04d}" for i in range(1500))
    model.respond = lambda request: ModelReply.text(long)
    write_config(isolated_state, model.base_url, {"whatsapp": wa.config(allowFrom=[OWNER])})
    with _gateway() as gateway:
        wa.webhook_url = f"{gateway.url}/whatsapp"
        wa.inject_text(OWNER, "write a lot")
        texts = wa.wait_for(lambda: len(wa.sent_texts(OWNER)) >= 3 and wa.sent_texts(OWNER))
    assert len(texts) == 3 and all(len(t) <= 4096 for t in texts)
    assert " ".join(texts).split() == long.split()


def test_graph_api_failures_are_retried_and_a_long_outage_is_noticed_and_recovered(
    isolated_state: Path, wa: ScriptedWhatsApp, model: ScriptedModelServer
) -> None:
    section = wa.config(allowFrom=[OWNER], requestTimeoutSeconds=1)
    write_config(isolated_state, model.base_url, {"whatsapp": section})
    with _gateway() as gateway:
        wa.webhook_url = f"{gateway.url}/whatsapp"
        status = gateway.runtime.channels.statuses
        wa.wait_for(lambda: status.get("whatsapp") and status["whatsapp"].connected)
        wa.fail_next(1, status=503)
        wa.fail_next(1, hang=True)  # read receipt: not retried, the reply goes on
        wa.fail_next(1, status=500)
        wa.fail_next(1, hang=True)
        wa.inject_text(OWNER, "through the storm")
        wa.wait_for(lambda: wa.sent_texts(OWNER), timeout=30)
        assert wa.sent_texts(OWNER) == ["through the storm"]

        # the read receipt, every retry of the send, then the first three checks after it
        wa.fail_next(8, status=502)
        wa.inject_text(OWNER, "lost in the outage")
        wa.wait_for(lambda: not status["whatsapp"].connected, timeout=30)
        assert "HTTP 502" in (status["whatsapp"].last_error or "")
        wa.wait_for(lambda: status["whatsapp"].connected, timeout=60)
        wa.inject_text(OWNER, "after the outage")
        wa.wait_for(lambda: "after the outage" in wa.sent_texts(OWNER), timeout=30)
    assert "lost in the outage" not in wa.sent_texts(OWNER)


def test_outside_the_24_hour_window_a_send_is_refused_with_one_line(
    isolated_state: Path, wa: ScriptedWhatsApp, model: ScriptedModelServer
) -> None:
    write_config(isolated_state, model.base_url, {"whatsapp": wa.config(allowFrom=[OWNER])})
    never = run_nodmix(
        isolated_state, "message", "send", "--channel", "whatsapp", "--to", OWNER, "hi"
    )
    assert never.returncode == 1 and len(never.stderr.strip().splitlines()) == 1
    assert "24-hour customer-service window" in never.stderr
    assert "template message" in never.stderr and wa.messages() == []
    with _gateway() as gateway:
        wa.webhook_url = f"{gateway.url}/whatsapp"
        status = gateway.runtime.channels.statuses
        wa.inject_text(OWNER, "an old message", sent_at=time.time() - 25 * 3600)
        wa.wait_for(lambda: "whatsapp" in status and status["whatsapp"].ignored == 1)
        assert status["whatsapp"].reasons == {"older than the 24-hour window": 1}
        wa.close_window(OWNER)  # WhatsApp's own record disagrees: it reports the failure
        wa.inject_text(OWNER, "fresh")
        wa.wait_for(lambda: "template message" in (status["whatsapp"].last_error or ""))
    assert model_user_texts(model) == ["fresh"]


def test_doctor_checks_the_token_and_channels_status_shows_the_number(
    isolated_state: Path, wa: ScriptedWhatsApp, model: ScriptedModelServer
) -> None:
    write_config(isolated_state, model.base_url, {"whatsapp": wa.config()})
    doctor = run_nodmix(isolated_state, "doctor")
    assert f"channel whatsapp: connected as {wa.display_number} (Nodmix Test)" in doctor.stdout
    write_config(isolated_state, model.base_url, {"whatsapp": wa.config(accessToken="wrong")})
    doctor = run_nodmix(isolated_state, "doctor")
    assert "✗ channel whatsapp: credentials refused" in doctor.stdout
    assert "error 190" in doctor.stdout
    write_config(isolated_state, model.base_url, {"whatsapp": wa.config()})
    with _gateway() as gateway:
        wa.webhook_url = f"{gateway.url}/whatsapp"
        wa.inject_text(STRANGER, "hi")
        wa.wait_for(lambda: wa.sent_texts(STRANGER))
        status_file = isolated_state / "channels" / "status.json"
        wa.wait_for(lambda: status_file.exists() and '"refused": 1' in status_file.read_text())
        shown = run_nodmix(isolated_state, "channels", "status")
    assert f"whatsapp: connected as {wa.display_number}" in shown.stdout
    assert "pairing requests 1" in shown.stdout
