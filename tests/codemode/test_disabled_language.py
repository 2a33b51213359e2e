"""A cell in a language `tools.codeMode.languages` disables, through the gateway's OpenAI API:
the call passes schema validation, `exec` answers `failed` / `invalid_input` with what to send
instead, and the model's corrected JavaScript cell runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nodmix.messages import ToolResultMessage
from nodmix.providers.base import ModelRequest
from nodmix.providers.fake import ModelReply
from nodmix.testing.model_server import ScriptedModelServer
from tests.gateway.support import asgi_client, write_config


def _typescript_then_javascript(request: ModelRequest) -> ModelReply:
    results = [m for m in request.messages if isinstance(m, ToolResultMessage)]
    if not results:
        code = "const n: number = 41; return n + 1;"
        return ModelReply.tool_call("exec", {"code": code, "language": "typescript"})
    if len(results) == 1:
        return ModelReply.tool_call("exec", {"code": "const n = 41; return n + 1;"})
    return ModelReply.text(json.dumps([json.loads(r.text) for r in results]))


@pytest.mark.anyio
async def test_a_typescript_cell_with_only_javascript_enabled_fails_as_invalid_input(
    isolated_state: Path,
) -> None:
    with ScriptedModelServer(_typescript_then_javascript) as server:
        write_config(
            isolated_state,
            server.base_url,
            "tools: { codeMode: { enabled: true, languages: ['javascript'] } }",
        )
        async with asgi_client() as client:
            response = await client.post(
                "/v1/chat/completions",
                json={"model": "nodmix", "messages": [{"role": "user", "content": "add"}]},
                timeout=60,
            )
    assert response.status_code == 200, response.text
    refused, ran = json.loads(response.json()["choices"][0]["message"]["content"])
    assert refused["status"] == "failed" and refused["code"] == "invalid_input"
    assert "language 'typescript' is disabled" in refused["error"]
    assert 'pass language "javascript"' in refused["error"]
    assert ran == {"status": "completed", "value": 42}
    exec_tool = next(t for t in server.requests[0].body["tools"] if t["function"]["name"] == "exec")
    assert 'Only language "javascript" is enabled.' in exec_tool["function"]["description"]
