"""Fan-out past `maxPendingToolCalls`: extra calls queue, at most that many run at once, in the
order the program made them; only a batch past the queue cap is refused, before any call runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from nodmix.codemode import CodeModeEngine
from nodmix.sessions import SessionManager
from nodmix.tools import ToolContext, ToolResult

from .support import Gate, build_harness, code_mode, make_tool


class Concurrency:
    """A tool that counts how many of its calls run at the same time."""

    def __init__(self) -> None:
        self.running = 0
        self.most = 0
        self.started: list[int] = []

    @property
    def tool(self) -> Any:
        async def body(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
            self.running += 1
            self.most = max(self.most, self.running)
            self.started.append(int(args.get("n", -1)))
            try:
                for _ in range(3):  # stay in flight across a few scheduler passes
                    await anyio.lowlevel.checkpoint()
            finally:
                self.running -= 1
            return ToolResult.text(str(args.get("n")), details={"n": args.get("n")})

        return make_tool(
            "work",
            body,
            parameters={"type": "object", "properties": {"n": {"type": "integer"}}},
        )


@pytest.mark.anyio
async def test_promise_all_over_200_calls_completes_with_at_most_16_in_flight(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    work = Concurrency()
    h = await build_harness(
        engine,
        sessions,
        workspace,
        extra_tools=[work.tool],
        code_mode_config=code_mode(max_pending_tool_calls=16),
    )
    value = await h.value(
        "const rs = await Promise.all(Array.from({ length: 200 }, (_, n) => tools.work({ n })));"
        "return rs.map(r => r.details.n)"
    )
    assert value == list(range(200))
    assert work.most == 16 and work.started == list(range(200))  # in order, 16 at a time
    assert len(h.finished()) == 200


@pytest.mark.anyio
async def test_a_batch_past_the_queue_cap_is_refused_before_any_call_starts(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    work = Concurrency()
    h = await build_harness(
        engine,
        sessions,
        workspace,
        extra_tools=[work.tool],
        code_mode_config=code_mode(max_pending_tool_calls=16, max_queued_tool_calls=256),
    )
    result = await h.exec(
        "return await Promise.all(Array.from({ length: 300 }, (_, n) => tools.work({ n })))"
    )
    assert result["status"] == "failed" and result["code"] == "too_many_pending_tool_calls"
    assert "16 run at once and 256 more may wait" in result["error"]
    assert work.started == [] and h.started() == []


@pytest.mark.anyio
async def test_promise_all_over_100_fast_calls_completes_in_one_exec_with_the_default_cap(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    work = Concurrency()
    h = await build_harness(engine, sessions, workspace, extra_tools=[work.tool])
    result = await h.exec(
        "const rs = await Promise.all(Array.from({ length: 100 }, (_, n) => tools.work({ n })));"
        "return rs.reduce((s, r) => s + r.details.n, 0)"
    )
    assert result["status"] == "completed" and result["value"] == 4950
    assert work.most <= 16


@pytest.mark.anyio
async def test_queued_calls_keep_starting_while_the_run_is_parked(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    gate = Gate()
    h = await build_harness(
        engine,
        sessions,
        workspace,
        extra_tools=[gate.tool],
        code_mode_config=code_mode(max_pending_tool_calls=2, timeout_ms=150),
    )
    first = await h.exec(
        "const rs = await Promise.all([1, 2, 3, 4, 5].map(i => tools.slow({ tag: 't' + i })));"
        "return rs.map(r => r.text)"
    )
    assert first["status"] == "waiting"
    assert [c["toolName"] for c in first["pendingToolCalls"]] == ["slow"] * 5
    assert [a["tag"] for a in gate.started] == ["t1", "t2"]  # two run, three wait their turn
    gate.release.set()
    results = [first]
    with anyio.fail_after(10):
        while results[-1]["status"] == "waiting":
            results.append(await h.wait(results[-1]["runId"]))
    assert results[-1]["value"] == [f"released t{i}" for i in range(1, 6)]
    assert [a["tag"] for a in gate.started] == [f"t{i}" for i in range(1, 6)]
