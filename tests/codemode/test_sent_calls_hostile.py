"""MCP calls sent from sandbox workers (`codemode.sent`) under load and against a hostile
server (`tests/mcp/servers/hostile_server.py`): many cells at once each get their own answers
and leave nothing parked; a second answer to a call goes nowhere; an aborted turn cancels its
calls on the server and leaves nothing behind; a server that stops reading fails calls within
their timeout."""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

import nodmix.codemode.handoff
from nodmix.codemode import CodeModeEngine
from nodmix.codemode.nested import CANCELLED_TEXT
from nodmix.config.schema import MCPServerConfig
from nodmix.mcp import MCPManager
from nodmix.sessions import SessionManager

from .support import Harness, build_harness, transcript_lines, wait_until

HOSTILE_SERVER = Path(__file__).resolve().parents[1] / "mcp" / "servers" / "hostile_server.py"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # (the worker's fast lane exists only there)


@pytest.fixture
def server_log(tmp_path: Path) -> Path:
    """Where the server records the calls it received and was told to cancel."""
    return tmp_path / "server.log"


@pytest.fixture(params=["window", "worker", "loop"])
def window(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """`window`: the worker waits the usual few milliseconds for answers, then hands calls to
    the loop; `worker`: it waits for every answer itself, however loaded the machine; `loop`:
    it hands every call to the loop at once."""
    seconds = {"worker": 30.0, "loop": 0.0}.get(request.param)
    if seconds is not None:
        monkeypatch.setattr(nodmix.codemode.handoff, "FAST_WINDOW_SECONDS", seconds)
    return str(request.param)


@pytest.fixture
async def mcp(server_log: Path) -> AsyncIterator[MCPManager]:
    config = MCPServerConfig(
        command=sys.executable, args=[str(HOSTILE_SERVER)], env={"HOSTILE_LOG": str(server_log)}
    )
    async with MCPManager({"h": config}) as manager:
        yield manager


async def _harness(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path, mcp: MCPManager
) -> Harness:
    return await build_harness(engine, sessions, workspace, sources=[mcp], mcp=mcp)


def _parked(mcp: MCPManager) -> int:
    return len(mcp._connections["h"].parking)  # (what no public surface shows)


def _logged(path: Path, what: str) -> list[str]:
    lines = path.read_text("utf-8").splitlines() if path.exists() else []
    return [line.split()[1] for line in lines if line.split()[0] == what]


def _cancelled_calls(h: Harness) -> list[str]:
    return [
        line["message"]["toolCallId"]
        for line in transcript_lines(h.session)
        if line.get("parentToolCallId")
        and line["message"]["role"] == "toolResult"
        and line["message"]["content"] == [{"type": "text", "text": CANCELLED_TEXT}]
    ]


def _problems(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]


CELL = """
const tag = %s;
const text = (r) => r.isError ? 'error: ' + r.content[0].text : JSON.parse(r.content[0].text);
const together = await Promise.all([0, 1, 2, 3, 4].map((i) =>
  (i %% 2 ? MCP.h.slowEcho({ value: tag + ':' + i, seconds: 0.02 * i })
          : MCP.h.echo({ value: tag + ':' + i })).then(text)));
const inTurn = [];
for (let i = 0; i < 3; i++) inTurn.push(text(await MCP.h.echo({ value: tag + ':s' + i })));
inTurn.push(text(await MCP.h.slowEcho({ value: tag + ':slow', seconds: 0.05 })));
inTurn.push(text(await MCP.h.twice({ value: tag + ':twice' })));
inTurn.push(text(await MCP.h.echo({ value: tag + ':last' })));
return [together, inTurn];
"""


@pytest.mark.anyio
async def test_many_cells_at_once_each_get_their_own_answers_and_park_nothing(
    engine: CodeModeEngine,
    sessions: SessionManager,
    workspace: Path,
    mcp: MCPManager,
    window: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    h = await _harness(engine, sessions, workspace, mcp)
    assert await h.value("return (await MCP.h.echo({ value: 1 })).isError") is False
    results: dict[int, Any] = {}

    async def cell(n: int) -> None:
        results[n] = await h.run_to_end(CELL % json.dumps(f"c{n}"))

    with anyio.fail_after(60):
        async with anyio.create_task_group() as group:
            for n in range(10):
                group.start_soon(cell, n)
    for n, steps in results.items():
        assert steps[-1]["status"] == "completed", steps[-1]
        tag = f"c{n}"
        assert steps[-1]["value"] == [
            [f"{tag}:{i}" for i in range(5)],
            [f"{tag}:s0", f"{tag}:s1", f"{tag}:s2", f"{tag}:slow", f"{tag}:twice", f"{tag}:last"],
        ]
    assert len(results) == 10
    _left_nothing(mcp, engine, caplog)


@pytest.mark.anyio
async def test_an_aborted_turn_cancels_every_call_in_flight_and_leaves_nothing(
    engine: CodeModeEngine,
    sessions: SessionManager,
    workspace: Path,
    mcp: MCPManager,
    server_log: Path,
    window: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    h = await _harness(engine, sessions, workspace, mcp)
    assert await h.value("return (await MCP.h.echo({ value: 1 })).isError") is False
    code = (
        "await Promise.all([1, 2, 3].map((i) => MCP.h.slowEcho({ value: i, seconds: 30 })));"
        "return 1"
    )
    before = set(_logged(server_log, "called"))
    async with anyio.create_task_group() as group:
        group.start_soon(h.exec, code)
        await wait_until(
            lambda: len(set(_logged(server_log, "called")) - before) == 3, "three calls in flight"
        )
        group.cancel_scope.cancel()
    in_flight = set(_logged(server_log, "called")) - before
    await wait_until(
        lambda: set(_logged(server_log, "cancelled")) == in_flight,
        "the server to see the three calls cancelled",
    )
    assert len(engine.store) == 0
    # The calls reached the server: the transcript says so, as for loop calls an abort ends.
    await wait_until(lambda: len(_cancelled_calls(h)) == 3, "three cancelled calls recorded")
    await wait_until(lambda: _parked(mcp) == 0, "nothing parked")
    value = await h.value(
        "return (await Promise.all([MCP.h.echo({ value: 'a' }), MCP.h.echo({ value: 'b' })]))"
        ".map((r) => JSON.parse(r.content[0].text))"
    )
    assert value == ["a", "b"]
    assert _problems(caplog) == []


@pytest.mark.anyio
@pytest.mark.parametrize("window", [None, 0.0])
async def test_calls_to_a_server_that_stops_reading_fail_within_their_timeout(
    engine: CodeModeEngine,
    sessions: SessionManager,
    workspace: Path,
    window: float | None,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    if window is not None:  # (the worker's own wait is bounded by the window, not the call)
        monkeypatch.setattr(nodmix.codemode.handoff, "FAST_WINDOW_SECONDS", window)
    config = MCPServerConfig(command=sys.executable, args=[str(HOSTILE_SERVER)], timeout_ms=500)
    async with MCPManager({"h": config}) as mcp:
        h = await _harness(engine, sessions, workspace, mcp)
        code = """
const big = 'x'.repeat(300000);
const text = (r) => r.content[0].text;
const out = [text(await MCP.h.deafen({}))];
out.push(text(await MCP.h.echo({ value: 1 })));  // the server goes deaf on this one
const many = await Promise.all([0, 1, 2].map(() => MCP.h.echo({ value: big })));
out.push(...many.map(text));
out.push(text(await MCP.h.echo({ value: 2 })));
return out;
"""
        with anyio.fail_after(30):
            steps = await h.run_to_end(code)
        timed_out = "MCP server 'h' did not answer tools/call 'echo' within 0.5 s"
        assert steps[-1]["status"] == "completed", steps[-1]
        assert steps[-1]["value"] == ["deaf"] + [timed_out] * 5
    _left_nothing(mcp, engine, caplog)


@pytest.mark.anyio
async def test_a_program_that_fails_with_calls_in_flight_cancels_them_on_the_server(
    engine: CodeModeEngine,
    sessions: SessionManager,
    workspace: Path,
    mcp: MCPManager,
    server_log: Path,
    window: str,
) -> None:
    h = await _harness(engine, sessions, workspace, mcp)
    assert await h.value("return (await MCP.h.echo({ value: 1 })).isError") is False
    before = set(_logged(server_log, "called"))
    result = await h.exec(
        "MCP.h.slowEcho({ value: 1, seconds: 30 }); MCP.h.slowEcho({ value: 2, seconds: 30 });"
        "await MCP.h.echo({ value: 3 });"
        "throw new Error('gave up')"
    )
    assert result["status"] == "failed"
    in_flight = set(_logged(server_log, "called")) - before
    assert len(in_flight) == 3
    await wait_until(
        lambda: len(set(_logged(server_log, "cancelled")) & in_flight) == 2,
        "the server to see the two slow calls cancelled",
    )
    await wait_until(lambda: len(_cancelled_calls(h)) == 2, "two cancelled calls recorded")
    await wait_until(lambda: _parked(mcp) == 0, "nothing parked")
    assert len(engine.store) == 0


def _left_nothing(
    mcp: MCPManager, engine: CodeModeEngine, caplog: pytest.LogCaptureFixture
) -> None:
    """No request parked, no run stored, nothing logged at warning level or above."""
    assert _parked(mcp) == 0
    assert len(engine.store) == 0
    assert _problems(caplog) == []
