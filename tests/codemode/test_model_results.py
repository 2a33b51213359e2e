"""What the model reads from `exec`/`wait`: compact JSON with only the fields it acts on.

`telemetry` stays on the structured result (details, hooks, transcript) and reaches the model
only with `tools.codeMode.telemetryToModel: true`. Over-long sources are refused up front.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from nodmix.codemode import CodeModeEngine
from nodmix.messages import ToolResultMessage
from nodmix.providers.base import ModelRequest
from nodmix.providers.fake import FunctionProvider, ModelReply
from nodmix.sessions import SessionManager
from nodmix.tools import ToolResult

from .support import (
    Gate,
    Harness,
    build_harness,
    code_mode,
    run_model_turn,
    text_tool,
    transcript_lines,
)


async def _model_reads(h: Harness, tool: str, args: dict[str, Any]) -> ToolResult:
    """The tool result exactly as the agent loop hands it to the model."""
    target = h.exec_tool if tool == "exec" else h.wait_tool
    return await h.executor.run(
        target, args, h.ctx(h.next_call_id()), kind=f"code_mode_{tool}", input_kind=None
    )


@pytest.mark.anyio
async def test_return_1_costs_the_model_32_characters_and_details_keep_telemetry(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    h = await build_harness(engine, sessions, workspace, extra_tools=[text_tool("lookup")])
    result = await _model_reads(h, "exec", {"code": "return 1"})
    assert result.text_content == '{"status":"completed","value":1}'
    assert isinstance(result.details, dict)
    assert result.details["telemetry"]["visibleTools"] == ["exec", "wait"]


@pytest.mark.anyio
async def test_output_and_failures_keep_their_fields_and_drop_empty_ones(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    h = await build_harness(engine, sessions, workspace, extra_tools=[text_tool("lookup")])
    printed = await _model_reads(h, "exec", {"code": "text('hi'); json({a: 1}); return null"})
    assert json.loads(printed.text_content) == {
        "status": "completed",
        "value": None,
        "output": [{"type": "text", "text": "hi"}, {"type": "json", "value": {"a": 1}}],
    }
    failed = await _model_reads(h, "exec", {"code": "throw new Error('nope')"})
    assert failed.is_error
    # The location is the program's own (the async wrapper's columns are taken off); the
    # structured `guestError` stays in the details.
    assert json.loads(failed.text_content) == {
        "status": "failed",
        "error": "Error: nope (at cell.js:1:11)",
        "code": "guest_error",
    }
    assert isinstance(failed.details, dict)
    assert failed.details["guestError"] == {
        "name": "Error",
        "message": "nope",
        "line": 1,
        "column": 11,
    }
    coded = await _model_reads(h, "wait", {"runId": "run_unknown"})
    assert set(json.loads(coded.text_content)) == {"status", "error", "code"}


@pytest.mark.anyio
async def test_a_waiting_result_shows_run_id_reason_and_pending_calls_compactly(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    gate = Gate()
    h = await build_harness(
        engine,
        sessions,
        workspace,
        extra_tools=[gate.tool],
        code_mode_config=code_mode(timeout_ms=200),
    )
    waiting = await _model_reads(h, "exec", {"code": "return (await tools.slow({})).text"})
    seen = json.loads(waiting.text_content)
    assert isinstance(waiting.details, dict)
    run_id = waiting.details["runId"]
    assert seen == {
        "status": "waiting",
        "runId": run_id,
        "reason": "pending_tools",
        "pendingToolCalls": [{"id": "1", "toolId": "nodmix:core:slow", "toolName": "slow"}],
    }
    assert " " not in waiting.text_content
    gate.release.set()
    done = await _model_reads(h, "wait", {"runId": run_id})
    assert done.text_content == '{"status":"completed","value":"released"}'


@pytest.mark.anyio
async def test_telemetry_to_model_puts_telemetry_back_into_the_text(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    h = await build_harness(
        engine,
        sessions,
        workspace,
        extra_tools=[text_tool("lookup")],
        code_mode_config=code_mode(telemetry_to_model=True),
    )
    result = await _model_reads(h, "exec", {"code": "return 1"})
    seen = json.loads(result.text_content)
    assert seen["telemetry"]["catalogSize"] == 6
    assert seen == result.details


@pytest.mark.anyio
async def test_the_model_reads_compact_text_while_the_transcript_keeps_telemetry(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    h = await build_harness(engine, sessions, workspace, extra_tools=[text_tool("lookup")])

    def reply(request: ModelRequest) -> ModelReply:
        if isinstance(request.messages[-1], ToolResultMessage):
            return ModelReply.text("done")
        return ModelReply.tool_call("exec", {"code": "return 1"})

    provider = FunctionProvider(reply)
    assert (await run_model_turn(h, provider)).reply == "done"
    sent = provider.requests[-1].messages[-1]
    assert isinstance(sent, ToolResultMessage)
    assert sent.text == '{"status":"completed","value":1}'
    (stored,) = [
        line["message"]
        for line in transcript_lines(h.session)
        if line.get("message", {}).get("role") == "toolResult"
    ]
    assert stored["details"]["telemetry"]["visibleTools"] == ["exec", "wait"]


@pytest.mark.anyio
async def test_a_source_over_max_source_bytes_is_refused_before_transpiling(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    h = await build_harness(
        engine,
        sessions,
        workspace,
        extra_tools=[text_tool("lookup")],
        code_mode_config=code_mode(max_source_bytes=4096),
    )
    # Broken TypeScript: had it reached the transform, the code would say so.
    big = "const x: number = (;\n" + "// padding\n" * 400
    result = await h.exec(big, language="typescript")
    assert result["status"] == "failed" and result["code"] == "source_too_large", result
    assert "4096-byte limit" in result["error"] and "maxSourceBytes" in result["error"]
    # Multi-byte characters count as bytes: 1500 x "é" is 3000 bytes, 1500 characters.
    assert (await h.exec("return '" + "é" * 1500 + "'.length"))["value"] == 1500
    over = await h.exec("return '" + "é" * 2100 + "'.length")
    assert over["code"] == "source_too_large"
    assert await h.value("return 'fits'") == "fits"
