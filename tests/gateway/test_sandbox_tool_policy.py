"""The tool policy of sandboxed sessions (`tools.sandbox.tools`), through the gateway: a
sandboxed session is offered only the tools that keep to the sandbox, `alsoAllow` lets an MCP
server (`bundle-mcp`) and a plugin back in, in direct and in code mode, and `/tools/invoke`
follows the same policy."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from nodmix.messages import ToolResultMessage
from nodmix.providers.base import ModelRequest
from nodmix.providers.fake import ModelReply
from nodmix.testing.model_server import ScriptedModelServer
from tests.gateway.support import asgi_client, write_config

MCP = {"time": {"command": sys.executable, "args": ["-m", "mcp_server_time"]}}
LISTING = """return { ids: ALL_TOOLS.map(t => t.id), mcp: typeof MCP !== 'undefined' };"""


def _offered(request: ModelRequest) -> ModelReply:
    names = sorted(t.name for t in request.tools)
    if names == ["exec", "wait"]:  # code mode: what the hidden catalog holds
        last = request.messages[-1]
        if isinstance(last, ToolResultMessage):
            return ModelReply.text(json.dumps(json.loads(last.text)["value"]))
        return ModelReply.tool_call("exec", {"code": LISTING})
    return ModelReply.text(json.dumps(names))


def _config(state: Path, base_url: str, *, also_allow: list[str], code_mode: bool) -> None:
    sandbox: dict[str, Any] = {"tools": {"alsoAllow": also_allow}} if also_allow else {}
    write_config(
        state,
        base_url,
        "tools: "
        + json.dumps({"codeMode": code_mode, "deny": ["web_fetch"], "sandbox": sandbox})
        + ", plugins: { entries: { notes: { enabled: true } } }, "
        + f"mcp: {{ servers: {json.dumps(MCP)} }}",
        defaults="sandbox: { mode: 'non-main' }",
    )


async def _ask(client: Any, session: str) -> Any:
    response = await client.post(
        "/v1/chat/completions",
        headers={"x-nodmix-session-key": session},
        json={"model": "nodmix", "messages": [{"role": "user", "content": "tools?"}]},
        timeout=60,
    )
    assert response.status_code == 200, response.text
    return json.loads(response.json()["choices"][0]["message"]["content"])


@pytest.mark.anyio
async def test_a_sandboxed_session_gets_only_sandbox_tools_unless_also_allowed(
    isolated_state: Path,
) -> None:
    with ScriptedModelServer(_offered) as server:
        _config(isolated_state, server.base_url, also_allow=[], code_mode=False)
        async with asgi_client() as client:
            main = await _ask(client, "main")
            sandboxed = await _ask(client, "work")
            denied = await client.post(
                "/tools/invoke",
                json={"tool": "time__get_current_time", "sessionKey": "work", "args": {}},
            )
        more = ["bundle-mcp", "notes"]
        _config(isolated_state, server.base_url, also_allow=more, code_mode=False)
        async with asgi_client() as client:
            allowed = await _ask(client, "work")
            invoked = await client.post(
                "/tools/invoke",
                json={
                    "tool": "time__get_current_time",
                    "sessionKey": "work",
                    "args": {"timezone": "UTC"},
                },
                timeout=60,
            )
    assert {"time__get_current_time", "note_add"} <= set(main)  # the main session: unsandboxed
    assert "time__get_current_time" not in sandboxed and "note_add" not in sandboxed
    assert {"read", "exec", "memory_search"} <= set(sandboxed)
    assert denied.status_code == 403 and "sandbox" in denied.json()["error"]["message"]
    assert {"time__get_current_time", "note_add"} <= set(allowed)
    assert invoked.status_code == 200 and invoked.json()["ok"], invoked.text


@pytest.mark.anyio
async def test_in_code_mode_also_allow_bundle_mcp_brings_the_mcp_namespace_back(
    isolated_state: Path,
) -> None:
    with ScriptedModelServer(_offered) as server:
        _config(isolated_state, server.base_url, also_allow=[], code_mode=True)
        async with asgi_client() as client:
            without = await _ask(client, "work")
        _config(isolated_state, server.base_url, also_allow=["bundle-mcp"], code_mode=True)
        async with asgi_client() as client:
            with_mcp = await _ask(client, "work")
    assert without["mcp"] is False
    assert not any(i.startswith("nodmix:notes:") for i in without["ids"])
    assert with_mcp["mcp"] is True
    assert "nodmix:core:read" in without["ids"] and "nodmix:core:read" in with_mcp["ids"]
