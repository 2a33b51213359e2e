"""WebSocket events across real gateway replicas on one real PostgreSQL: a client connected to
one replica hears what a turn on another replica asks (and a client connecting later lists
it), and its answer reaches that turn."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from nodmix.gateway.client import GatewayClient, GatewayError
from nodmix.testing.model_server import ScriptedModelServer
from tests.gateway.support import TOKEN, poll_until
from tests.security.support import shell_model
from tests.state.replicas import chat, replicas_on_postgres

pytestmark = [pytest.mark.integration, pytest.mark.anyio]

EXEC = {"exec": {"security": "allowlist", "ask": "on-miss", "approvalTimeoutSeconds": 60}}


def _kinds(events: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [e for e in events if e.get("kind") == kind]


async def test_an_approval_asked_on_one_replica_is_heard_and_answered_on_another(
    tmp_path: Path, postgres_url: str
) -> None:
    with (
        ScriptedModelServer(shell_model) as model,
        replicas_on_postgres(tmp_path, model.base_url, postgres_url, tools=EXEC) as (asker, other),
    ):
        heard: list[dict[str, Any]] = []
        reply: dict[str, str] = {}
        async with (
            GatewayClient.connect(other.url, token=TOKEN) as client,
            anyio.create_task_group() as tg,
        ):
            client.listen("approval", heard.append)

            async def turn() -> None:
                text = await anyio.to_thread.run_sync(
                    lambda: chat(asker, "run echo across-replicas", "s")
                )
                reply["text"] = text

            tg.start_soon(turn)

            async def requested() -> bool:
                return bool(_kinds(heard, "approval_requested"))

            await poll_until(requested, what="the other replica's approval request", timeout=60)
            request = _kinds(heard, "approval_requested")[0]["requests"][0]
            assert request["command"] == "echo across-replicas"
            assert request["sessionKey"] == "agent:main:s"
            async with GatewayClient.connect(other.url, token=TOKEN) as late:  # a reload
                listed = await late.request("approvals.list", {})
                assert [r["id"] for r in listed["requests"]] == [request["id"]]
                with pytest.raises(GatewayError, match="is waiting"):
                    await late.request(
                        "approvals.resolve", {"id": "0badc0de", "decision": "allow-once"}
                    )
            answer = await client.request(
                "approvals.resolve", {"id": request["id"], "decision": "allow-once"}
            )
            assert answer["forwarded"] is True

            async def resolved() -> bool:
                return bool(_kinds(heard, "approval_resolved"))

            await poll_until(resolved, what="the answer heard back", timeout=60)
            assert (await client.request("approvals.list", {}))["requests"] == []
    assert reply["text"].startswith("tool said: across-replicas\n")  # the command ran on the
    assert "Exit code: 0" in reply["text"]  # replica that asked, after the other one's answer
    done = _kinds(heard, "approval_resolved")
    assert [(e["id"], e["decision"]) for e in done] == [(request["id"], "allow-once")]
