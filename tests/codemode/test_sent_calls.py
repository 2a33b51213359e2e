"""MCP calls sent from the sandbox worker straight to a stdio server (`codemode.sent`), against
real servers: the same results, events and transcript entries as through the event loop; calls
started together run together; hooks still see every call; a slow call is handed to the loop
and reaches the server once; an aborted turn cancels the call on the server."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

import nodmix.codemode.handoff
import nodmix.codemode.quick
from nodmix.codemode import CodeModeEngine
from nodmix.codemode.handoff import Handoff
from nodmix.config.schema import MCPServerConfig
from nodmix.events import ToolCallFinished, ToolCallStarted
from nodmix.hooks import ToolCallInfo
from nodmix.mcp import MCPManager
from nodmix.sessions import SessionManager

from .support import Harness, build_harness, code_mode, recording_hook, transcript_lines, wait_until

LIFECYCLE_SERVER = Path(__file__).resolve().parents[1] / "mcp" / "servers" / "lifecycle_server.py"


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    """Module scope, so the MCP servers start once for this module (asyncio: the worker's
    fast lane exists only there)."""
    return "asyncio"


@pytest.fixture(scope="module")
async def mcp() -> AsyncIterator[MCPManager]:
    servers = {
        "time": MCPServerConfig(command=sys.executable, args=["-m", "mcp_server_time"]),
        "life": MCPServerConfig(command=sys.executable, args=[str(LIFECYCLE_SERVER)]),
    }
    async with MCPManager(servers) as manager:
        yield manager


async def _harness(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path, mcp: MCPManager, **kw: Any
) -> Harness:
    return await build_harness(engine, sessions, workspace, sources=[mcp], mcp=mcp, **kw)


def _ran_on_worker() -> Callable[[], int]:
    """How many calls ran (or were answered) on sandbox workers since this was called."""
    start = nodmix.codemode.quick.quick_counts.ran
    return lambda: nodmix.codemode.quick.quick_counts.ran - start


def _nested(session: Any) -> list[tuple[str, str]]:
    out = []
    for line in transcript_lines(session):
        if line.get("parentToolCallId"):
            message = line["message"]
            role = message["role"]
            name = message["content"][0]["name"] if role == "assistant" else message["toolName"]
            out.append((role, name))
    return out


@pytest.mark.anyio
async def test_awaited_mcp_calls_are_answered_on_the_worker_with_events_and_transcript(
    engine: CodeModeEngine,
    sessions: SessionManager,
    workspace: Path,
    mcp: MCPManager,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # However loaded the machine, the worker waits for every answer here.
    monkeypatch.setattr(nodmix.codemode.handoff, "FAST_WINDOW_SECONDS", 30.0)
    h = await _harness(engine, sessions, workspace, mcp)
    ran = _ran_on_worker()
    result = await h.exec(
        "const zones = ['UTC', 'Europe/Paris', 'Asia/Tokyo', 'America/New_York'];"
        "const out = [];"
        "for (const tz of zones) out.push((await MCP.time.getCurrentTime({ timezone: tz }))"
        "  .structuredContent.timezone);"
        "return out",
        call_id="cell_mcp",
    )
    assert result["status"] == "completed"
    assert result["value"] == ["UTC", "Europe/Paris", "Asia/Tokyo", "America/New_York"]
    assert ran() == 4
    assert result["telemetry"]["callCount"] == 4
    started, finished = h.started(), h.finished()
    assert [e.call_id for e in started] == [
        f"cell_mcp:time__get_current_time:{i}" for i in range(1, 5)
    ]
    assert [e.result.tool_call_id for e in finished] == [e.call_id for e in started]
    kinds = [
        type(e).__name__ for e in h.events if isinstance(e, ToolCallStarted | ToolCallFinished)
    ]
    assert kinds == ["ToolCallStarted", "ToolCallFinished"] * 4
    nested = [entry for entry in _nested(h.session) if entry[1] == "time__get_current_time"]
    assert (
        nested[-8:]
        == [
            ("assistant", "time__get_current_time"),
            ("toolResult", "time__get_current_time"),
        ]
        * 4
    )


@pytest.mark.anyio
async def test_mcp_calls_started_together_run_together(
    engine: CodeModeEngine,
    sessions: SessionManager,
    workspace: Path,
    mcp: MCPManager,
    tmp_path: Path,
) -> None:
    h = await _harness(engine, sessions, workspace, mcp)
    marker = tmp_path / "barrier"
    value = await h.value(
        f"const m = {str(marker)!r};"
        "return await Promise.all([1, 2, 3].map(() => MCP.life.gather({ count: 3, marker: m })))"
        ".then(rs => rs.map(r => r.structuredContent.result))"
    )
    assert value == ["together", "together", "together"]


@pytest.mark.anyio
async def test_a_hook_on_an_mcp_tool_sees_every_call_through_the_loop(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path, mcp: MCPManager
) -> None:
    seen: list[ToolCallInfo] = []
    h = await _harness(engine, sessions, workspace, mcp, before_hooks=[("a", recording_hook(seen))])
    ran = _ran_on_worker()
    value = await h.value(
        "const a = await MCP.time.getCurrentTime({ timezone: 'UTC' });"
        "const b = await MCP.time.getCurrentTime({ timezone: 'UTC' });"
        "return [a.isError, b.isError]"
    )
    assert value == [False, False]
    assert [i.tool_id for i in seen if i.tool_kind == "code_mode_nested"] == [
        "mcp:time:get_current_time"
    ] * 2
    assert ran() == 0


@pytest.mark.anyio
async def test_a_slow_mcp_call_is_handed_to_the_loop_and_reaches_the_server_once(
    engine: CodeModeEngine,
    sessions: SessionManager,
    workspace: Path,
    mcp: MCPManager,
    tmp_path: Path,
) -> None:
    h = await _harness(engine, sessions, workspace, mcp)
    marker = tmp_path / "tally"
    ran = _ran_on_worker()
    value = await h.value(
        f"const r = await MCP.life.tally({{ marker: {str(marker)!r}, seconds: 0.2 }});"
        "return r.structuredContent.result"
    )
    assert value == 1
    assert marker.read_text(encoding="utf-8").splitlines() == ["call"]
    assert ran() == 0  # (answered through the loop)
    assert [e.tool_name for e in h.started()] == ["life__tally"]
    assert [e.result.is_error for e in h.finished()] == [False]


@pytest.mark.anyio
async def test_a_slow_mcp_call_suspends_and_its_answer_arrives_through_wait(
    engine: CodeModeEngine,
    sessions: SessionManager,
    workspace: Path,
    mcp: MCPManager,
    tmp_path: Path,
) -> None:
    h = await _harness(engine, sessions, workspace, mcp, code_mode_config=code_mode(timeout_ms=100))
    marker = tmp_path / "tally"
    results = await h.run_to_end(
        f"const r = await MCP.life.tally({{ marker: {str(marker)!r}, seconds: 0.5 }});"
        "return r.structuredContent.result"
    )
    assert results[0]["status"] == "waiting"
    assert results[-1]["status"] == "completed" and results[-1]["value"] == 1
    assert marker.read_text(encoding="utf-8").splitlines() == ["call"]


@pytest.mark.anyio
@pytest.mark.parametrize("waiting", ["on the loop", "on the worker", "handed over"])
async def test_an_aborted_turn_cancels_an_mcp_call_sent_from_the_worker(
    engine: CodeModeEngine,
    sessions: SessionManager,
    workspace: Path,
    mcp: MCPManager,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    waiting: str,
) -> None:
    if waiting == "on the worker":  # the abort finds the worker still waiting for the answer
        monkeypatch.setattr(nodmix.codemode.handoff, "FAST_WINDOW_SECONDS", 30.0)
    if waiting == "handed over":  # ... or the call handed over, before the loop started it
        monkeypatch.setattr(nodmix.codemode.handoff, "FAST_WINDOW_SECONDS", 0.0)

        def held_exchange(self: Handoff) -> None:
            self._ready.wait(30)  # until the abort wakes the worker; the loop never ran it
            return None

        monkeypatch.setattr(Handoff, "_exchange", held_exchange)
    h = await _harness(engine, sessions, workspace, mcp)
    marker = tmp_path / "wait"
    async with anyio.create_task_group() as group:
        group.start_soon(
            h.exec, f"await MCP.life.wait({{ seconds: 30, marker: {str(marker)!r} }}); return 1"
        )
        await wait_until(
            lambda: marker.exists() and marker.read_text("utf-8") == "started", "the call"
        )
        group.cancel_scope.cancel()
    await wait_until(
        lambda: marker.read_text("utf-8") == "cancelled", "the server to cancel the call"
    )
    assert len(engine.store) == 0
