"""Exec approvals through a real gateway: `approval` events on the WebSocket, answers with
`approvals.resolve`, timeouts, and `/tools/invoke` under the same policy."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

from nodmix.gateway.client import GatewayClient, GatewayError
from nodmix.testing.model_server import ScriptedModelServer
from tests.gateway.support import TOKEN, asgi_client, poll_until, socket_gateway, write_config
from tests.security.support import exec_policy, shell_model

pytestmark = pytest.mark.anyio


@pytest.fixture
def shell_server(model_server: ScriptedModelServer) -> ScriptedModelServer:
    model_server.respond = shell_model
    return model_server


def guard(state: Path, server: ScriptedModelServer, *, timeout: int = 30, extra: str = "") -> None:
    write_config(state, server.base_url, exec_policy(timeout=timeout) + extra)


async def _turn_with_answer(
    url: str, message: str, decision: str | None
) -> tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]], list[Any]]:
    """Run `message` on a session; answer its approval request (unless `decision` is None)."""
    broadcast: list[dict[str, Any]] = []
    stream: list[dict[str, Any]] = []
    listed: list[Any] = []
    async with GatewayClient.connect(url, token=TOKEN) as client, anyio.create_task_group() as tg:
        client.listen("approval", broadcast.append)
        answer: dict[str, Any] = {}

        async def turn() -> None:
            answer.update(
                await client.request(
                    "agent", {"message": message, "sessionKey": "ws"}, on_event=stream.append
                )
            )

        tg.start_soon(turn)

        async def requested() -> bool:
            return any(e["kind"] == "approval_requested" for e in broadcast)

        await poll_until(requested, what="the approval request")
        listed.append(await client.request("approvals.list", {}))
        if decision is not None:
            request_id = broadcast[0]["requests"][0]["id"]
            resolved = await client.request(
                "approvals.resolve", {"id": request_id, "decision": decision}
            )
            assert resolved["decision"] == decision
            with pytest.raises(GatewayError, match="is waiting"):
                await client.request("approvals.resolve", {"id": request_id, "decision": "deny"})
    return answer, broadcast, stream, listed


async def test_a_websocket_client_approves_and_the_command_runs(
    isolated_state: Path, shell_server: ScriptedModelServer
) -> None:
    guard(isolated_state, shell_server)
    with socket_gateway() as gateway:
        answer, broadcast, stream, listed = await _turn_with_answer(
            gateway.url, "run echo from-the-web", "allow-once"
        )
    request = broadcast[0]["requests"][0]
    assert request["command"] == "echo from-the-web"
    assert request["agentId"] == "main" and request["sessionKey"] == "agent:main:ws"
    assert request["reason"] == "the command is not on the exec allowlist"
    assert request["cwd"].endswith("workspace") and request["origin"] == "owner"
    assert listed[0]["requests"][0]["id"] == request["id"]
    assert broadcast[1] == {
        "kind": "approval_resolved",
        "id": request["id"],
        "decision": "allow-once",
        "by": "websocket",
    }
    # the turn's own stream carries the request too (for clients that follow only their run)
    assert [e["kind"] for e in stream].count("approval_requested") == 1
    assert answer["reply"] == "tool said: from-the-web\n\nExit code: 0"


async def test_a_denied_command_does_not_run_and_the_model_reads_why(
    isolated_state: Path, shell_server: ScriptedModelServer
) -> None:
    guard(isolated_state, shell_server)
    marker = isolated_state / "denied-marker"
    with socket_gateway() as gateway:
        answer, *_ = await _turn_with_answer(gateway.url, f"run touch {marker}", "deny")
    assert answer["reply"].startswith("tool said: Not run: the user denied this command")
    assert not marker.exists()


async def test_an_unanswered_request_is_denied_after_the_configured_timeout(
    isolated_state: Path, shell_server: ScriptedModelServer
) -> None:
    guard(isolated_state, shell_server, timeout=1)
    marker = isolated_state / "timeout-marker"
    with socket_gateway() as gateway:
        answer, broadcast, *_ = await _turn_with_answer(gateway.url, f"run touch {marker}", None)
    assert "Not run: nobody approved it within 1 s" in answer["reply"]
    assert broadcast[-1]["kind"] == "approval_resolved"
    assert broadcast[-1]["decision"] == "timeout"
    assert not marker.exists()


async def test_always_allow_from_the_websocket_adds_the_command_to_the_allowlist(
    isolated_state: Path, shell_server: ScriptedModelServer
) -> None:
    guard(isolated_state, shell_server)
    with socket_gateway() as gateway:
        await _turn_with_answer(gateway.url, "run echo twice", "allow-always")
        async with GatewayClient.connect(gateway.url, token=TOKEN) as client:
            again = await client.request("agent", {"message": "run echo twice"})
    assert again["reply"].startswith("tool said: twice")
    saved = (isolated_state / "security" / "exec-allowlist.json").read_text()
    assert '"pattern": "echo twice"' in saved


async def test_resolve_checks_its_params(configured: Path) -> None:
    with socket_gateway() as gateway:
        async with GatewayClient.connect(gateway.url, token=TOKEN) as client:
            with pytest.raises(GatewayError, match="params.decision must be one of"):
                await client.request("approvals.resolve", {"id": "x", "decision": "maybe"})
            with pytest.raises(GatewayError, match="no approval request 'nope'"):
                await client.request("approvals.resolve", {"id": "nope", "decision": "deny"})
            assert await client.request("approvals.list", {}) == {"requests": []}


# ---- /tools/invoke ------------------------------------------------------------------------------


async def test_a_token_less_gateway_refuses_exec_through_tools_invoke(configured: Path) -> None:
    async with asgi_client(token=None) as client:
        refused = await client.post(
            "/tools/invoke", json={"tool": "exec", "args": {"command": "id -u"}}
        )
        read = await client.post("/tools/invoke", json={"tool": "read", "args": {"path": "x"}})
    assert refused.status_code == 403
    assert refused.json()["error"]["code"] == "exec_unauthenticated"
    assert "gateway.tools.allowUnauthenticated" in refused.json()["error"]["message"]
    assert read.status_code == 200  # other tools are unaffected


async def test_allow_unauthenticated_lets_a_token_less_gateway_run_exec(
    isolated_state: Path, model_server: ScriptedModelServer
) -> None:
    write_config(
        isolated_state, model_server.base_url, "gateway: { tools: { allowUnauthenticated: true } }"
    )
    async with asgi_client(token=None) as client:
        ran = await client.post(
            "/tools/invoke", json={"tool": "exec", "args": {"command": "echo allowed"}}
        )
    assert ran.status_code == 200 and ran.json()["ok"] is True
    assert ran.json()["result"]["text"].startswith("allowed")


async def test_tools_invoke_obeys_the_exec_policy_and_its_approvals(
    isolated_state: Path, shell_server: ScriptedModelServer
) -> None:
    write_config(
        isolated_state,
        shell_server.base_url,
        "tools: { exec: { security: 'allowlist', ask: 'on-miss' } }",
    )
    with socket_gateway() as gateway:
        headers = {"authorization": f"Bearer {TOKEN}"}
        async with (
            GatewayClient.connect(gateway.url, token=TOKEN) as client,
            httpx2.AsyncClient(base_url=gateway.url, headers=headers, timeout=30) as http,
            anyio.create_task_group() as tg,
        ):
            seen: list[dict[str, Any]] = []
            client.listen("approval", seen.append)
            result: dict[str, Any] = {}

            async def invoke() -> None:
                response = await http.post(
                    "/tools/invoke", json={"tool": "exec", "args": {"command": "echo invoked"}}
                )
                result.update(response.json())

            tg.start_soon(invoke)

            async def asked() -> bool:
                return bool(seen)

            await poll_until(asked, what="the approval request of /tools/invoke")
            assert seen[0]["requests"][0]["origin"] == "owner"
            await client.request(
                "approvals.resolve", {"id": seen[0]["requests"][0]["id"], "decision": "deny"}
            )
    assert result["ok"] is False
    assert result["result"]["text"].startswith("Not run: the user denied this command")


async def test_exec_security_deny_refuses_without_asking(
    isolated_state: Path, model_server: ScriptedModelServer
) -> None:
    write_config(isolated_state, model_server.base_url, "tools: { exec: { security: 'deny' } }")
    async with asgi_client() as client:
        refused = await client.post(
            "/tools/invoke", json={"tool": "exec", "args": {"command": "echo no"}}
        )
    body = refused.json()
    assert body["ok"] is False and body["result"]["details"]["approval"] == "denied"
    assert "tools.exec.security: deny" in body["result"]["text"]
