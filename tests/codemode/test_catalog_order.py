"""The order code mode lists its hidden catalog in, through the gateway's OpenAI-compatible API:
core tools, the plugins Nodmix ships, an external plugin, an MCP server's declaration files,
then the client application's own tool; search ranks as before (by score, ties by id)."""

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

EXTERNAL_PLUGIN = """
from nodmix.plugins import Plugin
from nodmix.tools import ToolResult


def register(api):
    @api.tool(name="acme_lookup", description="Look up an Acme order by number.")
    async def lookup(args, ctx):
        return ToolResult.text("order found")


plugin = Plugin(id="acme", name="Acme", register=register)
"""
PROGRAM = """
const listing = await API.list();
return {
  ids: ALL_TOOLS.map(t => t.id),
  files: listing.files.map(f => f.path),
  search: (await tools.search('note', { limit: 3 })).map(t => t.id),
};
"""
CLIENT_TOOL: Any = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The current weather in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}


def _program_then_value(request: ModelRequest) -> ModelReply:
    last = request.messages[-1]
    if isinstance(last, ToolResultMessage):
        return ModelReply.text(json.dumps(json.loads(last.text)["value"]))
    return ModelReply.tool_call("exec", {"code": PROGRAM})


@pytest.mark.anyio
async def test_all_tools_lists_core_bundled_external_then_client_and_api_lists_mcp_files(
    isolated_state: Path,
) -> None:
    plugin_file = isolated_state / "acme_plugin.py"
    plugin_file.write_text(EXTERNAL_PLUGIN, encoding="utf-8")
    mcp = {"time": {"command": sys.executable, "args": ["-m", "mcp_server_time"]}}
    with ScriptedModelServer(_program_then_value) as server:
        write_config(
            isolated_state,
            server.base_url,
            "tools: { codeMode: true, allow: ['read', 'write', 'acme_lookup', 'note_add', "
            "'note_search', 'mcp:time:*', 'client:app:*'] }, "
            f"plugins: {{ load: {{ paths: [{json.dumps(str(plugin_file))}] }}, "
            "entries: { notes: { enabled: true } } }, "
            f"mcp: {{ servers: {json.dumps(mcp)} }}",
        )
        async with asgi_client() as client:
            response = await client.post(
                "/v1/chat/completions",
                json={
                    "model": "nodmix",
                    "messages": [{"role": "user", "content": "list the catalog"}],
                    "tools": [CLIENT_TOOL],
                },
                timeout=60,
            )
    assert response.status_code == 200, response.text
    value = json.loads(response.json()["choices"][0]["message"]["content"])
    assert value["ids"] == [
        "nodmix:core:read",
        "nodmix:core:write",
        "nodmix:notes:note_add",
        "nodmix:notes:note_search",
        "nodmix:acme:acme_lookup",
        "client:app:get_weather",
    ]
    assert value["files"] == ["mcp/index.d.ts", "mcp/time.d.ts"]
    # Ranking is unchanged: the best match first, ties in id order.
    assert value["search"][:2] == ["nodmix:notes:note_add", "nodmix:notes:note_search"]
