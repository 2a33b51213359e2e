"""Direct mode end to end: the model calls an MCP tool and reads its result."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from nodmix.config import load_config
from nodmix.messages import ToolResultMessage
from nodmix.providers.base import ModelRequest
from nodmix.providers.fake import ModelReply
from nodmix.runtime import Runtime
from nodmix.testing.model_server import ScriptedModelServer


@pytest.mark.anyio
async def test_model_calls_an_mcp_tool_in_direct_mode_and_sees_its_result(
    isolated_state: Path,
) -> None:
    seen_tools: list[list[str]] = []

    def respond(request: ModelRequest) -> ModelReply:
        seen_tools.append([t.name for t in request.tools])
        last = request.messages[-1]
        if isinstance(last, ToolResultMessage):
            return ModelReply.text(f"The tool said: {last.text}")
        return ModelReply.tool_call("time__get_current_time", {"timezone": "Europe/Paris"})

    async with ScriptedModelServer(respond) as server:
        config = {
            "models": {
                "providers": {
                    "local": {
                        "api": "openai-completions",
                        "baseUrl": server.base_url,
                        "apiKey": "x",
                        "models": [{"id": "m"}],
                    }
                }
            },
            "agents": {"defaults": {"model": {"primary": "local/m"}}},
            "mcp": {
                "servers": {"time": {"command": sys.executable, "args": ["-m", "mcp_server_time"]}}
            },
        }
        path = isolated_state / "nodmix.json"
        path.write_text(json.dumps(config), encoding="utf-8")
        async with Runtime.open(load_config(path)) as runtime:
            outcome = await runtime.run_turn("What time is it in Paris?")

    assert "time__get_current_time" in seen_tools[0] and "read" in seen_tools[0]
    assert "Europe/Paris" in outcome.result.reply
    calls = [c.name for c in outcome.result.tool_calls]
    assert calls == ["time__get_current_time"]
