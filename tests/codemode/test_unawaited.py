"""Programs that return without awaiting what they started: the calls still run, the result
says which were still in flight, and their outcomes land in the transcript."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from nodmix.codemode import CodeModeEngine
from nodmix.sessions import SessionManager
from nodmix.tools import ToolContext, ToolResult

from .support import gated_harness, make_tool, transcript_lines, wait_until


def _counter(calls: list[dict[str, Any]]) -> Any:
    async def body(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        calls.append(args)
        return ToolResult.text("counted")

    return make_tool("count", body)


def _projected_results(lines: list[dict[str, Any]], tool: str) -> list[str]:
    return [
        line["message"]["content"][0]["text"]
        for line in lines
        if line.get("type") == "message"
        and line.get("parentToolCallId")
        and line["message"].get("role") == "toolResult"
        and line["message"].get("toolName") == tool
    ]


@pytest.mark.anyio
async def test_a_call_started_without_await_runs_and_the_result_reports_it_in_flight(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    gate, h = await gated_harness(engine, sessions, workspace)
    result = await h.exec("tools.slow({ tag: 'later' }); return 'returned first'")
    assert result["status"] == "completed" and result["value"] == "returned first"
    (in_flight,) = result["inFlightToolCalls"]
    assert in_flight["toolId"] == "nodmix:core:slow"
    (warning,) = result["warnings"]
    assert "1 tool call was still running when the program returned (slow)" in warning
    assert "await the call" in warning
    await wait_until(lambda: len(gate.started) == 1, "the un-awaited call to start")
    gate.release.set()
    await wait_until(lambda: gate.finished == 1, "the un-awaited call to finish")
    await wait_until(
        lambda: _projected_results(transcript_lines(h.session), "slow") == ["released later"],
        "its result in the transcript",
    )
    assert len(engine.store) == 0  # nothing parked: the run is over


@pytest.mark.anyio
async def test_calls_queued_past_max_pending_still_all_run_after_the_program_returns(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    calls: list[dict[str, Any]] = []
    gate, h = await gated_harness(
        engine, sessions, workspace, _counter(calls), max_pending_tool_calls=2
    )
    result = await h.exec(
        "tools.slow({ tag: 'a' }); tools.slow({ tag: 'b' });"
        "for (let i = 0; i < 4; i++) tools.count({ i }); return 1"
    )
    assert result["value"] == 1 and len(result["inFlightToolCalls"]) == 6
    assert "6 tool calls were still running" in result["warnings"][0]
    assert calls == []  # both slots are held by the gate
    gate.release.set()
    await wait_until(lambda: len(calls) == 4, "the queued calls to run")
    assert sorted(c["i"] for c in calls) == [0, 1, 2, 3]


@pytest.mark.anyio
async def test_a_program_that_awaits_everything_reports_nothing_in_flight(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    calls: list[dict[str, Any]] = []
    _, h = await gated_harness(engine, sessions, workspace, _counter(calls))
    result = await h.exec("await tools.count({}); return 2")
    assert result == {**result, "status": "completed", "value": 2}
    assert "inFlightToolCalls" not in result and "warnings" not in result


@pytest.mark.anyio
async def test_aborting_the_turn_cancels_calls_left_running_by_a_returned_program(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    gate, h = await gated_harness(engine, sessions, workspace)
    result = await h.exec("tools.slow({}); return 0")
    assert len(result["inFlightToolCalls"]) == 1
    await wait_until(lambda: len(gate.started) == 1, "the call to start")
    assert engine.abort_turn(h.run_id) == 1
    await wait_until(lambda: gate.cancelled == 1, "the call to be cancelled")
    assert gate.finished == 0


def _failing(name: str = "boom") -> Any:
    async def body(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        return ToolResult.error(f"{name} broke: disk full")

    return make_tool(name, body)


@pytest.mark.anyio
async def test_an_unhandled_rejection_is_a_warning_next_to_the_value(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    _, h = await gated_harness(engine, sessions, workspace, _failing())
    result = await h.exec(
        "tools.boom({}); await sleep(20);\n"
        "Promise.reject(new TypeError('never caught'));\n"
        "return 'went on'"
    )
    assert result["status"] == "completed" and result["value"] == "went on"
    warnings = result["warnings"]
    assert len(warnings) == 2, warnings
    assert warnings[0].startswith("Unhandled promise rejection: Error: boom broke: disk full")
    assert warnings[1].startswith(
        "Unhandled promise rejection: TypeError: never caught (at cell.js:2:20)"
    )
    assert "add .catch()" in warnings[1]


@pytest.mark.anyio
async def test_rejections_handled_late_or_caught_are_not_reported(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    _, h = await gated_harness(engine, sessions, workspace, _failing())
    result = await h.exec(
        "const p = tools.boom({}); await sleep(20);\n"  # rejected before anyone listened...
        "const caught = await p.catch(e => e.message);\n"  # ...then handled
        "tools.boom({}).catch(() => null); await sleep(20);\n"
        "try { await Promise.reject(new Error('x')); } catch (e) {}\n"
        "return caught"
    )
    assert result["value"] == "boom broke: disk full" and "warnings" not in result


@pytest.mark.anyio
async def test_an_unhandled_rejection_survives_a_suspension_and_is_reported_after_wait(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    gate, h = await gated_harness(engine, sessions, workspace, _failing(), timeout_ms=300)
    first = await h.exec(
        "tools.boom({}); await sleep(20);\n"
        "const late = Promise.reject(new RangeError('handled after wait'));\n"
        "await tools.slow({});\n"
        "late.catch(() => null);\n"
        "return 'done'"
    )
    assert first["status"] == "waiting" and "warnings" not in first
    gate.release.set()
    done = await h.wait(first["runId"])
    assert done["status"] == "completed" and done["value"] == "done"
    (warning,) = done["warnings"]
    assert "Error: boom broke: disk full" in warning


@pytest.mark.anyio
async def test_a_failed_program_reports_unhandled_rejections_besides_its_own_error(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    _, h = await gated_harness(engine, sessions, workspace)
    result = await h.exec(
        "Promise.reject(new Error('stray'));\nthrow new Error('the real failure')"
    )
    assert result["status"] == "failed" and result["error"].startswith("Error: the real failure")
    (warning,) = result["warnings"]
    assert "Error: stray (at cell.js:1:20)" in warning


@pytest.mark.anyio
async def test_many_unhandled_rejections_are_kept_to_a_few_and_counted(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    _, h = await gated_harness(engine, sessions, workspace)
    result = await h.exec(
        "for (let i = 0; i < 1000; i++) Promise.reject(new Error('n' + i)); return 1"
    )
    warnings = result["warnings"]
    assert len(warnings) == 17 and warnings[-1] == "...and 984 more unhandled promise rejections."
