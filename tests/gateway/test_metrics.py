"""`GET /metrics`: Prometheus text behind the token, counting turns, tools and errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from nodmix.messages import ToolResultMessage
from nodmix.providers.base import ModelRequest
from nodmix.providers.fake import ModelReply
from nodmix.testing.model_server import ScriptedModelServer
from tests.gateway.support import TOKEN, asgi_client, workspace_file, write_config

pytestmark = pytest.mark.anyio


def _sample(text: str, name: str, **labels: str) -> float | None:
    """The value of one sample line of the exposition text, if present."""
    wanted = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    for line in text.splitlines():
        head, _, value = line.rpartition(" ")
        if head == (f"{name}{{{wanted}}}" if labels else name):
            return float(value)
    return None


async def test_metrics_count_turns_tool_calls_latency_and_api_errors(configured: Path) -> None:
    workspace_file(configured, "notes.txt", "The ferry leaves at 9:40.")
    chat = {"model": "nodmix", "messages": [{"role": "user", "content": "read notes.txt"}]}
    async with asgi_client() as client:
        answered = await client.post("/v1/chat/completions", json=chat)
        unknown = await client.post("/v1/chat/completions", json={**chat, "model": "nope/x"})
        refused = await client.get("/metrics", headers={"authorization": "Bearer wrong"})
        response = await client.get("/metrics")
    assert answered.status_code == 200 and unknown.status_code >= 400
    assert refused.status_code == 401
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    text = response.text
    assert _sample(text, "nodmix_turns_total", agent="main", outcome="stop") == 1.0
    assert _sample(text, "nodmix_tool_calls_total", tool="read", status="ok") == 1.0
    count = _sample(text, "nodmix_model_latency_seconds_count", model="local/scripted")
    assert count == 2.0  # the tool call's step and the answer's
    code = unknown.json()["error"]["code"]
    assert _sample(text, "nodmix_errors_total", code=code) == 1.0
    assert "# TYPE nodmix_compactions_total counter" in text
    assert "# TYPE nodmix_codemode_steps_total counter" in text
    assert TOKEN not in text


CELL = 'const note = await tools.call("read", { path: "notes.txt" }); return note.text;'


def _code_mode_model(request: ModelRequest) -> ModelReply:
    last = request.messages[-1]
    if isinstance(last, ToolResultMessage):
        return ModelReply.text(f"cell said: {last.text[:200]}")
    return ModelReply.tool_call("exec", {"code": CELL})


async def test_code_mode_steps_and_their_nested_tool_calls_are_counted(
    isolated_state: Path, model_server: ScriptedModelServer
) -> None:
    write_config(isolated_state, model_server.base_url, "tools: { codeMode: { enabled: true } }")
    workspace_file(isolated_state, "notes.txt", "Ferry at 9:40.")
    model_server.respond = _code_mode_model
    chat = {"model": "nodmix", "messages": [{"role": "user", "content": "go"}]}
    async with asgi_client() as client:
        answered = await client.post("/v1/chat/completions", json=chat)
        text = (await client.get("/metrics")).text
    assert answered.status_code == 200, answered.text
    assert "9:40" in answered.json()["choices"][0]["message"]["content"]
    assert _sample(text, "nodmix_codemode_steps_total", step="exec", status="ok") == 1.0
    assert _sample(text, "nodmix_tool_calls_total", tool="exec", status="ok") == 1.0
    assert _sample(text, "nodmix_tool_calls_total", tool="read", status="ok") == 1.0


def _made_up_tools_model(request: ModelRequest) -> ModelReply:
    calls = sum(isinstance(m, ToolResultMessage) for m in request.messages)
    if calls >= 3:
        return ModelReply.text("done")
    return ModelReply.tool_call(f"made_up_{calls}", {})


async def test_calls_to_made_up_tool_names_share_one_label(
    isolated_state: Path, model_server: ScriptedModelServer
) -> None:
    write_config(isolated_state, model_server.base_url)
    model_server.respond = _made_up_tools_model
    chat = {"model": "nodmix", "messages": [{"role": "user", "content": "go"}]}
    async with asgi_client() as client:
        answered = await client.post("/v1/chat/completions", json=chat)
        text = (await client.get("/metrics")).text
    assert answered.status_code == 200, answered.text
    assert "made_up" not in text
    assert _sample(text, "nodmix_tool_calls_total", tool="(unknown)", status="error") == 3.0
