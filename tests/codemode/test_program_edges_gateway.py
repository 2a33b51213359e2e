"""Edges of real programs, through the gateway's OpenAI-compatible API: a tool call started
without `await` still runs (the result says it was in flight), a promise rejection nobody
handles reaches the model as a warning, and printing past the output limit says how much was
written and how to print less."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nodmix.messages import ToolResultMessage
from nodmix.providers.base import ModelRequest
from nodmix.providers.fake import ModelReply
from nodmix.testing.model_server import ScriptedModelServer
from tests.gateway.support import asgi_client, workspace_file, write_config

from .support import wait_until

PROGRAMS = [
    "tools.write({ path: 'late.txt', content: 'written after return' }); return 'returned'",
    "Promise.reject(new Error('nobody listens')); return 1",
    "for (let i = 0; i < 100; i++) console.log('row ' + i + ' ' + 'x'.repeat(40)); return 2",
]


def _programs(request: ModelRequest) -> ModelReply:
    results = [m for m in request.messages if isinstance(m, ToolResultMessage)]
    if len(results) < len(PROGRAMS):
        return ModelReply.tool_call("exec", {"code": PROGRAMS[len(results)]})
    return ModelReply.text(json.dumps([json.loads(r.text) for r in results]))


@pytest.mark.anyio
async def test_unawaited_calls_unhandled_rejections_and_output_overflow_reach_the_model(
    isolated_state: Path,
) -> None:
    late = workspace_file(isolated_state, "placeholder.txt", "").parent / "late.txt"
    with ScriptedModelServer(_programs) as server:
        write_config(
            isolated_state,
            server.base_url,
            "tools: { codeMode: { enabled: true, maxOutputBytes: 2048 } }",
        )
        async with asgi_client() as client:
            response = await client.post(
                "/v1/chat/completions",
                json={"model": "nodmix", "messages": [{"role": "user", "content": "go"}]},
                timeout=60,
            )
            assert response.status_code == 200, response.text
            await wait_until(late.exists, "the un-awaited write to happen")
    unawaited, unhandled, overflow = json.loads(response.json()["choices"][0]["message"]["content"])

    assert unawaited["status"] == "completed" and unawaited["value"] == "returned"
    assert (
        "1 tool call was still running when the program returned (write)"
        in (unawaited["warnings"][0])
    )
    assert late.read_text(encoding="utf-8") == "written after return"

    assert unhandled["status"] == "completed" and unhandled["value"] == 1
    assert unhandled["warnings"][0].startswith(
        "Unhandled promise rejection: Error: nobody listens (at cell.js:1:20)."
    )

    assert overflow["status"] == "failed" and overflow["code"] == "output_limit_exceeded"
    assert "console output had written" in overflow["error"]
    assert "2,048-byte limit (maxOutputBytes)" in overflow["error"]
    assert "Print less" in overflow["error"]
