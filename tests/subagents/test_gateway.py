"""Subagents through a real gateway: a result announced into a web (WebSocket) session reaches
connected clients as a `session` event and `sessions.list` nests the subagent under its
parent; the CLI chat prints the result as it arrives and again when reopened; an HTTP client
that goes away cancels the children its turn waited for."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

from nodmix.gateway import BackgroundGateway, GatewaySettings
from nodmix.gateway.client import GatewayClient
from nodmix.providers.retry import RetryPolicy
from nodmix.testing.model_server import ScriptedModelServer
from tests.automation.test_session_delivery import ChatProcess
from tests.gateway.support import poll_until, wait_until
from tests.subagents.support import HeldChildren, ended, records, write_config

pytestmark = [pytest.mark.integration, pytest.mark.anyio]


def _gateway() -> BackgroundGateway:
    """A gateway with its own token (found by the CLI through the state dir)."""
    return BackgroundGateway(GatewaySettings(port=0), retry=RetryPolicy(attempts=1))


async def test_an_announcement_reaches_web_clients_and_the_subagent_is_listed_under_its_parent(
    isolated_state: Path,
) -> None:
    model = HeldChildren()
    with ScriptedModelServer(model) as server:
        write_config(isolated_state, server.base_url)
        with _gateway() as gateway:
            events: list[dict[str, Any]] = []
            async with GatewayClient.connect(gateway.url, token=gateway.settings.token) as client:
                client.listen("session", events.append)
                answer = await client.request(
                    "agent", {"message": "spawn: held gather sources", "sessionKey": "web"}
                )
                assert "accepted as sub_" in str(answer)
                listing = await client.request("sessions.list", {"agentId": "main"})
                model.release()

                async def heard() -> bool:
                    return bool(events)

                await poll_until(heard, what="the session event")
                history = await client.request("sessions.history", {"sessionKey": "web"})
    (run,) = records(isolated_state)
    (event,) = events
    assert event["sessionKey"] == "agent:main:web"
    assert event["source"] == {
        "kind": "subagent",
        "runId": run.run_id,
        "label": "held gather sources",
        "childSessionKey": run.child_key,
        "status": "completed",
    }
    assert event["entry"]["customType"] == "subagent_result"
    assert history["entries"][-1]["id"] == event["entry"]["id"]
    rows = {row["key"]: row for row in listing["sessions"]}
    child = rows[run.child_key]
    assert child["kind"] == "subagent" and child["spawnedBy"] == "agent:main:web"
    assert child["running"] is True  # it was still working when listed
    assert rows["agent:main:web"]["kind"] == "other"


def test_the_cli_chat_prints_a_result_as_it_arrives_and_again_when_reopened(
    isolated_state: Path,
) -> None:
    model = HeldChildren()
    with ScriptedModelServer(model) as server:
        write_config(isolated_state, server.base_url)
        with _gateway() as gateway:
            chat = ChatProcess(isolated_state, gateway.url)
            try:
                chat.say("spawn: held draft the letter")
                chat.wait_for("accepted as sub_")
                model.release()
                line = chat.wait_for("[from subagent")
            finally:
                assert chat.close() == 0
            reopened = ChatProcess(isolated_state, gateway.url)
            try:
                head = reopened.wait_for("result of subagent")
                body = reopened.wait_for("done: held draft")
            finally:
                assert reopened.close() == 0
    (run,) = records(isolated_state)
    assert line.endswith(
        f"[from subagent 'held draft the letter' ({run.run_id}), completed] "
        "done: held draft the letter"
    )
    assert head == f"result of subagent 'held draft the letter' ({run.run_id}), completed:"
    assert body == "  done: held draft the letter"


async def test_an_http_client_that_goes_away_cancels_the_children_its_turn_waited_for(
    isolated_state: Path,
) -> None:
    model = HeldChildren()
    with ScriptedModelServer(model) as server:
        write_config(isolated_state, server.base_url)
        with _gateway() as gateway:
            body = {
                "model": "nodmix",
                "messages": [{"role": "user", "content": "spawn wait: held x"}],
            }
            async with (
                httpx2.AsyncClient(
                    base_url=gateway.url,
                    timeout=30,
                    headers={"authorization": f"Bearer {gateway.settings.token}"},
                ) as http,
                anyio.create_task_group() as group,
            ):

                async def post() -> None:
                    await http.post("/v1/chat/completions", json=body)

                group.start_soon(post)
                await anyio.to_thread.run_sync(
                    lambda: wait_until(lambda: model.in_flight == 1, what="the child working")
                )
                group.cancel_scope.cancel()  # the client hangs up
            await anyio.to_thread.run_sync(
                lambda: wait_until(lambda: ended(isolated_state, 1), what="the child's end")
            )
            model.release()
    (run,) = records(isolated_state)
    assert run.status == "cancelled"
