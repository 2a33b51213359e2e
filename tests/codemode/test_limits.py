"""Limits, enforced on the real sandbox: time (without blocking the event loop), memory, output
and snapshot size for completed and suspended runs, and the pending-call cap."""

from __future__ import annotations

import re
import time
from pathlib import Path

import anyio
import pytest

from nodmix.codemode import CodeModeEngine
from nodmix.sessions import SessionManager

from .support import build_harness, code_mode, gated_harness, harness_with, text_tool, wait_until


@pytest.mark.anyio
async def test_an_infinite_loop_times_out_without_blocking_the_event_loop(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    h = await build_harness(engine, sessions, workspace, code_mode_config=code_mode(timeout_ms=400))
    ticks = 0
    result: dict[str, object] = {}

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await anyio.sleep(0.01)
            ticks += 1

    started = time.monotonic()
    async with anyio.create_task_group() as group:
        group.start_soon(ticker)

        async def loops() -> None:
            a, b = await _both(h.exec("while (true) {}"), h.exec("for (;;) { Math.random(); }"))
            result.update(a=a, b=b)
            group.cancel_scope.cancel()

        group.start_soon(loops)
    elapsed = time.monotonic() - started
    assert result["a"]["code"] == "timeout" and result["b"]["code"] == "timeout"  # type: ignore[index]
    assert elapsed < 3.0  # two guests ran side by side, each stopped at its own budget
    assert ticks >= 10  # the loop kept serving other work the whole time


@pytest.mark.anyio
async def test_the_engine_keeps_working_after_a_timed_out_or_out_of_memory_guest(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    h = await build_harness(
        engine,
        sessions,
        workspace,
        code_mode_config=code_mode(timeout_ms=200, memory_limit_bytes=2 << 20),
    )
    assert (await h.exec("while (true) {}"))["code"] == "timeout"
    oom = await h.exec("const a = []; while (true) a.push(new Array(10000).fill(a.length))")
    assert oom["code"] == "memory_limit_exceeded"
    caught = await h.value(
        "try { const a = []; while (true) a.push('y'.repeat(65536) + a.length); }"
        "catch (e) { return e.name + ': ' + e.message }"
    )
    assert caught == "InternalError: out of memory"  # catchable; the VM survives it
    assert await h.value("return 6 * 7") == 42


@pytest.mark.anyio
async def test_output_over_the_cap_fails_a_completed_run(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    h = await build_harness(
        engine, sessions, workspace, code_mode_config=code_mode(max_output_bytes=1024)
    )
    result = await h.exec("text('a'.repeat(600)); text('b'.repeat(600)); return 'unreachable'")
    assert result["status"] == "failed" and result["code"] == "output_limit_exceeded"
    assert result["output"] == [{"type": "text", "text": "a" * 600}]  # what fitted is kept
    # Which limit, how much was written, and how to print less (like a too-large value).
    assert re.search(
        r"output had written 6\d\d bytes, and the next item \(6\d\d bytes\) would pass the "
        r"1,024-byte limit \(maxOutputBytes\)\. Print less",
        result["error"],
    ), result["error"]
    swallowed = await h.exec("try { text('c'.repeat(2000)); } catch (e) {} return 'caught it'")
    assert swallowed["code"] == "output_limit_exceeded"  # catching the error does not help


@pytest.mark.anyio
async def test_a_returned_value_over_the_cap_fails(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    h = await build_harness(
        engine, sessions, workspace, code_mode_config=code_mode(max_output_bytes=1024)
    )
    result = await h.exec("return 'z'.repeat(5000)")
    assert result["status"] == "failed" and result["code"] == "output_limit_exceeded"
    assert "5,002 bytes" in result["error"] and "Return less" in result["error"]
    assert (await h.exec("return 'z'.repeat(500)"))["status"] == "completed"


@pytest.mark.anyio
async def test_output_cap_applies_before_suspending_and_across_restores(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    gate, h = await gated_harness(
        engine, sessions, workspace, max_output_bytes=1024, timeout_ms=200
    )
    over_then_wait = await h.exec(
        "try { text('q'.repeat(3000)); } catch (e) {} return await tools.slow({})"
    )
    assert over_then_wait["code"] == "output_limit_exceeded"  # never parked
    assert len(engine.store) == 0
    first = await h.exec("text('p'.repeat(600)); await tools.slow({}); text('r'.repeat(600))")
    assert first["status"] == "waiting" and len(first["output"]) == 1
    gate.release.set()
    resumed = await h.wait(first["runId"])
    assert resumed["status"] == "failed" and resumed["code"] == "output_limit_exceeded"
    assert resumed["output"] == [{"type": "text", "text": "p" * 600}]


@pytest.mark.anyio
async def test_snapshot_cap_fails_the_suspension_and_cancels_its_calls(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    gate, h = await gated_harness(
        engine, sessions, workspace, max_snapshot_bytes=1024, timeout_ms=200
    )
    result = await h.exec("text('kept'); return await tools.slow({})")
    assert result["status"] == "failed" and result["code"] == "snapshot_limit_exceeded"
    assert result["output"] == [{"type": "text", "text": "kept"}]
    assert len(engine.store) == 0
    await wait_until(lambda: gate.cancelled == 1, "the nested call to be cancelled")


@pytest.mark.anyio
async def test_snapshot_cap_applies_to_a_resumed_run_that_suspends_again(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    # The budget leaves room for building the junk on a loaded machine: the run must fail
    # on its snapshot's size, not on time.
    gate, h = await gated_harness(
        engine, sessions, workspace, max_snapshot_bytes=300_000, timeout_ms=1000
    )
    first = await h.exec(
        "await yield_control();"
        "const junk = [];"
        "for (let i = 0; i < 20000; i++) junk.push(Math.random().toString(36).repeat(8));"
        "await tools.slow({}); return junk.length"
    )
    assert first["status"] == "waiting" and first["reason"] == "yield"
    resumed = await h.wait(first["runId"])
    assert resumed["status"] == "failed" and resumed["code"] == "snapshot_limit_exceeded"
    assert len(engine.store) == 0


@pytest.mark.anyio
async def test_exactly_max_pending_calls_are_allowed_and_one_more_fails_before_dispatch(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    gate, h = await gated_harness(
        engine,
        sessions,
        workspace,
        text_tool("quick"),
        max_pending_tool_calls=3,
        max_queued_tool_calls=0,
        timeout_ms=200,
    )
    over = await h.exec(
        "const ps = [1, 2, 3, 4].map(i => tools.slow({ tag: String(i) }).catch(e => e.message));"
        "return await Promise.all(ps)"
    )
    assert over["status"] == "failed" and over["code"] == "too_many_pending_tool_calls"
    assert gate.started == [] and h.started() == []  # nothing ran, even the first three
    at_cap = await h.exec(
        "return (await Promise.all([1, 2, 3].map(i => tools.slow({ tag: String(i) })))).length"
    )
    assert at_cap["status"] == "waiting" and len(at_cap["pendingToolCalls"]) == 3
    gate.release.set()
    assert (await h.wait(at_cap["runId"]))["value"] == 3


@pytest.mark.anyio
async def test_sequential_batches_under_the_cap_are_fine(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    h = await harness_with(
        engine, sessions, workspace, text_tool("quick"), max_pending_tool_calls=2
    )
    value = await h.value(
        "let n = 0; for (let b = 0; b < 5; b++) {"
        "  n += (await Promise.all([tools.quick({}), tools.quick({})])).length; } return n"
    )
    assert value == 10


@pytest.mark.anyio
async def test_exec_waits_at_most_its_time_budget_for_slow_calls(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    gate, h = await gated_harness(engine, sessions, workspace, timeout_ms=300)
    started = time.monotonic()
    result = await h.exec("return await tools.slow({})")
    elapsed = time.monotonic() - started
    assert result["status"] == "waiting"
    assert 0.25 <= elapsed < 2.0


async def _both(a: object, b: object) -> tuple[dict[str, object], dict[str, object]]:
    out: list[dict[str, object]] = [{}, {}]

    async def run(i: int, aw: object) -> None:
        out[i] = await aw  # type: ignore[misc]

    async with anyio.create_task_group() as group:
        group.start_soon(run, 0, a)
        group.start_soon(run, 1, b)
    return out[0], out[1]
