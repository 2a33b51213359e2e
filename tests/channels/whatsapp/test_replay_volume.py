"""A captured, signed WhatsApp update stays refused however many messages arrive after it: the
store keeps a bounded set of handled ids and refuses anything sent at or before the newest
time it dropped (Meta signs the timestamp with the body). Real gateway, scripted Graph API
and webhook sender."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nodmix.channels import delivery
from nodmix.channels.delivery import DeliveryLog
from nodmix.channels.whatsapp import window
from nodmix.gateway import BackgroundGateway, GatewaySettings
from nodmix.providers.retry import RetryPolicy
from nodmix.testing.model_server import ScriptedModelServer
from nodmix.testing.whatsapp_server import ScriptedWhatsApp
from tests.channels.support import model_user_texts, write_config

pytestmark = pytest.mark.integration

OWNER = "15550104242"
KEPT = 3
"""The bound of the id sets in this test (`MAX_HANDLED`, `ANSWERED_KEPT` in the product)."""


@pytest.fixture
def wa() -> Iterator[ScriptedWhatsApp]:
    with ScriptedWhatsApp() as server:
        yield server


def test_a_replay_after_more_messages_than_the_ids_kept_is_still_refused(
    isolated_state: Path,
    wa: ScriptedWhatsApp,
    model: ScriptedModelServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(window, "MAX_HANDLED", KEPT)
    monkeypatch.setattr(window, "COMPACT_AT", 2 * KEPT)
    monkeypatch.setattr(delivery, "ANSWERED_KEPT", KEPT)  # the layer's own dedupe is bounded too
    write_config(isolated_state, model.base_url, {"whatsapp": wa.config(allowFrom=[OWNER])})
    settings = GatewaySettings(port=0, token="gateway-token")
    start = time.time() - 3600
    with BackgroundGateway(settings, retry=RetryPolicy(attempts=1)) as gateway:
        wa.webhook_url = f"{gateway.url}/whatsapp"
        status = gateway.runtime.channels.statuses
        wa.wait_for(lambda: status.get("whatsapp") and status["whatsapp"].connected)
        first = wa.inject_text(OWNER, "transfer the money", sent_at=start)
        wa.wait_for(lambda: wa.sent_texts(OWNER))
        for n in range(1, KEPT * 2 + 1):  # more messages than the ids kept, in the window
            wa.inject_text(OWNER, f"later {n}", sent_at=start + 60 * n)
            wa.wait_for(lambda n=n: len(wa.sent_texts(OWNER)) >= n + 1)
        assert wa.post_again(first) == 200  # the captured update, replayed
        wa.inject_text(OWNER, "newest", sent_at=time.time())
        wa.wait_for(lambda: "newest" in wa.sent_texts(OWNER))
    assert model_user_texts(model).count("transfer the money") == 1
    assert wa.sent_texts(OWNER).count("transfer the money") == 1
    records = (isolated_state / "channels" / "whatsapp" / "handled.jsonl").read_text()
    assert len(records.splitlines()) <= 2 * KEPT + 1  # compacted past the bound


def test_the_floor_survives_a_restart_and_ages_out_with_the_window(
    isolated_state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(window, "MAX_HANDLED", KEPT)
    now = time.time()
    before = window.FileWhatsAppStore(delivery.open_delivery_log(isolated_state, "whatsapp"))
    for n in range(KEPT + 2):
        before.remember(f"wamid.{n}", now - 600 + n)
    after = window.FileWhatsAppStore(delivery.open_delivery_log(isolated_state, "whatsapp"))
    assert after.handled("wamid.0", now - 600) and after.handled("wamid.1", now - 599)
    assert after.handled(f"wamid.{KEPT + 1}")  # kept by id
    assert not after.handled("wamid.new", now)
    monkeypatch.setattr(window, "COMPACT_AT", 0)  # compact on the next message
    later = window.FileWhatsAppStore(
        delivery.open_delivery_log(isolated_state, "whatsapp"),
        clock=lambda: now + window.WINDOW_SECONDS,
    )
    later.remember("wamid.next", now + window.WINDOW_SECONDS)
    records = (isolated_state / "channels" / "whatsapp" / "handled.jsonl").read_text()
    assert "floor" not in records  # a floor older than the window says nothing more
    assert records.count("wamid.") == 1


class _CountingLog(DeliveryLog):
    """The file delivery log, counting position writes."""

    writes = 0

    def save_position(self, position: dict[str, Any]) -> None:
        self.writes += 1
        super().save_position(position)


def test_a_message_rewrites_the_chats_window_times_only_when_they_move(
    isolated_state: Path,
) -> None:
    now = time.time()
    old = DeliveryLog(isolated_state, "whatsapp")
    old.save_position({"handled": {"wamid.0": now - 60}, "lastInbound": {"491700": now - 60}})
    ids, windows = _CountingLog(isolated_state, "whatsapp"), _CountingLog(isolated_state, "w")
    store = window.FileWhatsAppStore(ids, windows=windows, clock=lambda: now)
    for n in range(1, 11):  # ten messages from one chat within a few minutes
        store.opened("491711", now - 300 + n)
        store.remember(f"wamid.{n}", now - 300 + n)
    assert ids.writes == 2 and windows.writes == 1  # the old position, emptied once
    assert "lastInbound" not in ids.position()  # moved out of the per-message position
    again = window.FileWhatsAppStore(DeliveryLog(isolated_state, "whatsapp"), windows=windows)
    assert again.last_inbound("491700") is not None and again.last_inbound("491711") is not None
    assert again.handled("wamid.0") and again.handled("wamid.10")
