"""Programs that nest too deeply (runaway recursion, deep values returned, printed or passed to
tools) fail with `stack_overflow` and a message naming the limit; the engine carries on."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from nodmix.codemode import CodeModeEngine
from nodmix.sandbox.prelude import MAX_VALUE_DEPTH
from nodmix.sessions import SessionManager

from .support import Harness, build_harness, text_tool

LIMIT_TEXT = f"nests too deeply (limit {MAX_VALUE_DEPTH} levels)"


def _deep(depth: int) -> str:
    return f"let a = []; for (let i = 0; i < {depth}; i++) a = [a];"


async def _harness(engine: CodeModeEngine, sessions: SessionManager, workspace: Path) -> Harness:
    return await build_harness(engine, sessions, workspace, extra_tools=[text_tool("lookup")])


def _stack_overflow(result: dict[str, Any]) -> str:
    assert result["status"] == "failed", result
    assert result["code"] == "stack_overflow", result
    return str(result["error"])


@pytest.mark.anyio
async def test_runaway_recursion_is_stack_overflow_not_a_plain_guest_error(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    h = await _harness(engine, sessions, workspace)
    error = _stack_overflow(await h.exec("const f = (n) => f(n + 1) + 1;\nreturn f(0)"))
    assert error.startswith("RangeError: Maximum call stack size exceeded")
    assert "recursed too deeply" in error and "cell.js:1" in error
    assert await h.value("return 'alive'") == "alive"


@pytest.mark.anyio
async def test_recursion_the_program_catches_is_its_own_business(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    h = await _harness(engine, sessions, workspace)
    code = "const f = (n) => f(n + 1) + 1; try { f(0) } catch (e) { return e.name } return 0"
    assert await h.value(code) == "RangeError"


@pytest.mark.anyio
@pytest.mark.parametrize("depth", [MAX_VALUE_DEPTH + 1, 2_000, 200_000])
async def test_returning_a_value_nested_past_the_limit_is_stack_overflow(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path, depth: int
) -> None:
    h = await _harness(engine, sessions, workspace)
    error = _stack_overflow(await h.exec(_deep(depth) + " return {a}"))
    assert LIMIT_TEXT in error
    assert await h.value(_deep(MAX_VALUE_DEPTH - 1) + " return a") is not None


@pytest.mark.anyio
@pytest.mark.parametrize(
    "call",
    [
        "await tools.lookup({a})",
        "await tools.call('nodmix:core:lookup', {a})",
        "text(a)",
        "json({a})",
    ],
)
async def test_a_too_deep_value_passed_out_of_the_program_is_stack_overflow_and_nothing_runs(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path, call: str
) -> None:
    h = await _harness(engine, sessions, workspace)
    error = _stack_overflow(await h.exec(f"{_deep(200_000)}\n{call}; return 'sent'"))
    assert LIMIT_TEXT in error and "cell.js:2" in error
    assert h.started() == []  # the tool was never called


@pytest.mark.anyio
async def test_a_program_may_catch_the_too_deep_error_of_a_tool_call(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    h = await _harness(engine, sessions, workspace)
    code = (
        _deep(100_000)
        + """
    try { await tools.lookup({a}); return 'sent'; }
    catch (e) { return (await tools.lookup({depth: 'too deep'})).text; }"""
    )
    assert await h.value(code) == "ok"


@pytest.mark.anyio
@pytest.mark.parametrize(
    "call", ["await tools.lookup({a})", "await tools.call('nodmix:core:lookup', {a})"]
)
async def test_a_tool_input_is_refused_when_its_call_would_nest_past_the_limit(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path, call: str
) -> None:
    h = await _harness(engine, sessions, workspace)
    # `{a}` nests `_deep(n)` n + 2 levels deep, and the call's payload one level more.
    error = _stack_overflow(await h.exec(f"{_deep(MAX_VALUE_DEPTH - 2)}\n{call}; return 'sent'"))
    assert LIMIT_TEXT in error and "cell.js:2" in error
    assert h.started() == []
    assert await h.value(f"{_deep(MAX_VALUE_DEPTH - 3)}\n{call}; return 'sent'") == "sent"
    assert len(h.started()) == 1
