"""A chat `/approve` that lands on another replica than the turn that asked: two real gateway
replicas on one real PostgreSQL, the WhatsApp channel on both (scripted Graph API, signed
webhooks), the owner's answer posted to the other replica. Only the owner's answer counts, and
an unknown id still gets the one-line answer."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from nodmix.channels.approvals import NOT_OWNER
from nodmix.messages import ToolResultMessage
from nodmix.testing.model_server import ScriptedModelServer
from nodmix.testing.whatsapp_server import ScriptedWhatsApp
from tests.security.support import shell_model
from tests.state.replicas import replicas_on_postgres

pytestmark = pytest.mark.integration

OWNER = "15550104242"
FRIEND = "15550109999"
EXEC = {"exec": {"security": "allowlist", "ask": "on-miss", "approvalTimeoutSeconds": 60}}


@pytest.fixture
def wa() -> Iterator[ScriptedWhatsApp]:
    with ScriptedWhatsApp() as server:
        yield server


def test_the_owners_approve_on_another_replica_reaches_the_waiting_turn(
    tmp_path: Path, postgres_url: str, wa: ScriptedWhatsApp
) -> None:
    section = wa.config(allowFrom=[OWNER, FRIEND], ownerIds=[OWNER])
    with (
        ScriptedModelServer(shell_model) as model,
        replicas_on_postgres(
            tmp_path, model.base_url, postgres_url, tools=EXEC, channels={"whatsapp": section}
        ) as (asker, other),
    ):
        wa.webhook_url = f"{asker.url}/whatsapp"
        wa.inject_text(OWNER, "run echo across-replicas")
        asked = wa.wait_for(
            lambda: [t for t in wa.sent_texts(OWNER) if "/approve " in t], timeout=60
        )
        match = re.search(r"/approve (\S+)", asked[0])
        assert match is not None
        request_id = match.group(1)

        wa.webhook_url = f"{other.url}/whatsapp"  # the answers land on the other replica
        wa.inject_text(OWNER, "/approve 0badc0de")
        wa.wait_for(
            lambda: "No approval request '0badc0de' is waiting." in wa.sent_texts(OWNER),
            timeout=60,
        )
        wa.inject_text(FRIEND, f"/approve {request_id}")
        refusal = NOT_OWNER.format(channel="whatsapp")
        wa.wait_for(lambda: refusal in wa.sent_texts(FRIEND), timeout=60)
        assert not [t for t in wa.sent_texts(OWNER) if t.startswith("tool said:")]

        wa.inject_text(OWNER, f"/approve {request_id}")
        wa.wait_for(lambda: "Approved: echo across-replicas" in wa.sent_texts(OWNER), timeout=60)
        done = wa.wait_for(
            lambda: [t for t in wa.sent_texts(OWNER) if t.startswith("tool said:")],
            timeout=60,
        )
    assert "across-replicas" in done[0] and "Exit code: 0" in done[0]
    # The command ran once, on the replica that asked: one tool result, however many model
    # requests carried it (a request retried under load sends the same history again).
    ran = {
        (m.tool_call_id, m.text)
        for r in model.requests
        if r.request is not None
        for m in r.request.messages
        if isinstance(m, ToolResultMessage)
    }
    assert len(ran) == 1, ran
