"""`POST /tools/invoke`: one tool of an agent, through policy and the executor."""

from __future__ import annotations

from pathlib import Path

import pytest

from nodmix.testing.model_server import ScriptedModelServer
from tests.gateway.support import asgi_client, workspace_file, write_config

pytestmark = pytest.mark.anyio


async def test_a_core_tool_runs_and_returns_its_result(configured: Path) -> None:
    workspace_file(configured, "notes.txt", "line one\nline two")
    async with asgi_client() as client:
        response = await client.post(
            "/tools/invoke", json={"tool": "read", "args": {"path": "notes.txt"}}
        )
        by_id = await client.post(
            "/tools/invoke",
            json={"tool": "nodmix:core:read", "args": {"path": "notes.txt"}, "sessionKey": "t"},
        )
    body = response.json()
    assert response.status_code == 200 and body["ok"] is True
    assert body["tool"] == "read" and body["toolId"] == "nodmix:core:read"
    assert "line two" in body["result"]["text"] and body["result"]["isError"] is False
    assert body["sessionKey"] == "agent:main:main"
    assert by_id.json()["ok"] is True and by_id.json()["sessionKey"] == "agent:main:t"


async def test_a_tool_failure_is_a_served_call_with_ok_false(configured: Path) -> None:
    async with asgi_client() as client:
        missing = await client.post(
            "/tools/invoke", json={"tool": "read", "args": {"path": "nope.txt"}}
        )
        invalid = await client.post("/tools/invoke", json={"tool": "read", "args": {"path": 3}})
        escape = await client.post(
            "/tools/invoke", json={"tool": "read", "args": {"path": "../../etc/passwd"}}
        )
    for response in (missing, invalid, escape):
        assert response.status_code == 200
        assert response.json()["ok"] is False and response.json()["result"]["isError"] is True


async def test_policy_denied_tools_are_403_and_unknown_tools_404(
    isolated_state: Path, model_server: ScriptedModelServer
) -> None:
    write_config(isolated_state, model_server.base_url, "tools: { deny: ['exec'] }")
    async with asgi_client() as client:
        denied = await client.post("/tools/invoke", json={"tool": "exec", "args": {}})
        unknown = await client.post("/tools/invoke", json={"tool": "teleport", "args": {}})
        bad = await client.post("/tools/invoke", json={"args": {}})
        ghost = await client.post(
            "/tools/invoke", json={"tool": "read", "args": {}, "agentId": "ghost"}
        )
    assert denied.status_code == 403 and denied.json()["error"]["code"] == "tool_denied"
    assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "unknown_tool"
    assert "read" in unknown.json()["error"]["message"]
    assert "exec" not in unknown.json()["error"]["message"].split("available: ")[1]
    assert bad.status_code == 400
    assert ghost.status_code == 404 and ghost.json()["error"]["code"] == "unknown_agent"


async def test_plugin_tools_are_invocable_and_before_tool_call_hooks_apply(
    isolated_state: Path, model_server: ScriptedModelServer
) -> None:
    write_config(isolated_state, model_server.base_url, "plugins: { entries: { notes: {} } }")
    async with asgi_client() as client:
        added = await client.post(
            "/tools/invoke", json={"tool": "note_add", "args": {"title": "Ferry", "text": "9:40"}}
        )
        overwrite = await client.post(
            "/tools/invoke",
            json={"tool": "write", "args": {"path": "notes/ferry.md", "content": "gone"}},
        )
    assert added.json()["ok"] is True and added.json()["toolId"] == "nodmix:notes:note_add"
    assert overwrite.status_code == 200 and overwrite.json()["ok"] is False
    note = isolated_state / "workspace" / "notes" / "ferry.md"
    assert "9:40" in note.read_text(encoding="utf-8")  # the hook blocked the rewrite
