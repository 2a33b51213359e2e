"""Code-mode cells over the WebSocket: the `exec` call, its nested calls, output and value."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from nodmix.gateway.client import GatewayClient
from nodmix.messages import ToolResultMessage
from nodmix.providers.base import ModelRequest
from nodmix.providers.fake import ModelReply
from nodmix.testing.model_server import ScriptedModelServer
from tests.gateway.support import TOKEN, socket_gateway, workspace_file, write_config

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

PROGRAM = """
const note = await tools.call("read", { path: "notes.txt" });
text("read the note");
return { length: note.text.length, first: note.text.split(" ")[0] };
"""


def code_mode_model(request: ModelRequest) -> ModelReply:
    """Run one program, then answer with what the cell returned."""
    last = request.messages[-1]
    if isinstance(last, ToolResultMessage):
        return ModelReply.text(f"cell said: {last.text[:400]}")
    return ModelReply.tool_call("exec", {"code": PROGRAM})


@pytest.fixture(autouse=True, scope="module")
def _sandbox_runtime_installed() -> None:
    from nodmix.sandbox import status

    report = status()
    if not report.installed:
        pytest.fail(f"the QuickJS-WASI runtime is not installed: {report.hint}")


async def test_exec_cell_events_carry_the_program_nested_calls_and_value(
    isolated_state: Path, model_server: ScriptedModelServer
) -> None:
    write_config(isolated_state, model_server.base_url, "tools: { codeMode: { enabled: true } }")
    workspace_file(isolated_state, "notes.txt", "Ferry at 9:40.")
    model_server.respond = code_mode_model
    events: list[dict[str, Any]] = []
    with socket_gateway() as gateway:
        async with GatewayClient.connect(gateway.url, token=TOKEN) as client:
            answer = await client.request("agent", {"message": "go"}, on_event=events.append)
            history = await client.request("sessions.history", {})
    started = [e for e in events if e["kind"] == "tool_started"]
    finished = [e for e in events if e["kind"] == "tool_finished"]
    cell = next(e for e in started if e["parentCallId"] is None)
    nested = next(e for e in started if e["parentCallId"] is not None)
    assert cell["toolName"] == "exec" and cell["arguments"]["code"] == PROGRAM
    assert nested["parentCallId"] == cell["callId"] and nested["toolName"] == "read"
    nested_done = next(e for e in finished if e["parentCallId"] == cell["callId"])
    assert "Ferry at 9:40." in nested_done["result"]["content"][0]["text"]
    cell_done = next(e for e in finished if e["result"]["toolCallId"] == cell["callId"])
    details = cell_done["result"]["details"]
    assert details["status"] == "completed"
    assert details["value"] == {"length": 14, "first": "Ferry"}
    assert details["output"] == [{"type": "text", "text": "read the note"}]
    assert answer["reply"].startswith("cell said:")
    recorded = [e for e in history["entries"] if e.get("parentToolCallId") == cell["callId"]]
    assert [e["message"]["role"] for e in recorded] == ["assistant", "toolResult"]
