from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest
from msgspec.structs import replace

from nodmix.errors import ToolError
from nodmix.hooks import (
    AfterToolCallInfo,
    BeforeToolCallResult,
    Hooks,
    Registered,
    ToolCallInfo,
)
from nodmix.messages import JsonObject, TextBlock, ToolCallBlock
from nodmix.tools.base import FunctionTool, ToolContext, ToolResult
from nodmix.tools.core.read import ReadTool
from nodmix.tools.executor import ToolExecutor

pytestmark = pytest.mark.anyio

ECHO_SCHEMA: JsonObject = {
    "type": "object",
    "properties": {"text": {"type": "string"}},
    "required": ["text"],
    "additionalProperties": False,
}


class Recorder:
    """A tool function that records every call it receives."""

    def __init__(self) -> None:
        self.calls: list[JsonObject] = []

    async def __call__(self, args: JsonObject, ctx: ToolContext) -> ToolResult:
        self.calls.append(args)
        return ToolResult.text(f"echo: {args.get('text')}", details={"seen": args})


def _echo(recorder: Recorder, name: str = "echo") -> FunctionTool:
    return FunctionTool.create(
        recorder, name=name, description="Echo text.", parameters=ECHO_SCHEMA, owner="demo"
    )


def _hooks(
    *, before: Sequence[tuple[str, Any]] = (), after: Sequence[tuple[str, Any]] = ()
) -> Hooks:
    hooks = Hooks()
    hooks.before_tool_call.extend(Registered(owner, hook) for owner, hook in before)
    hooks.after_tool_call.extend(Registered(owner, hook) for owner, hook in after)
    return hooks


async def test_valid_call_runs_the_tool_and_returns_its_result(ctx: ToolContext) -> None:
    recorder = Recorder()
    result = await ToolExecutor(Hooks()).run(_echo(recorder), {"text": "hi"}, ctx)
    assert result.text_content == "echo: hi"
    assert recorder.calls == [{"text": "hi"}]


async def test_invalid_arguments_are_listed_and_the_tool_is_not_called(ctx: ToolContext) -> None:
    recorder = Recorder()
    result = await ToolExecutor(Hooks()).run(_echo(recorder), {"txt": 1}, ctx)
    assert result.is_error
    assert result.text_content == (
        "Invalid arguments for echo:\n"
        "- 'text' is a required property\n"
        "- Additional properties are not allowed ('txt' was unexpected)\n"
        "Fix the arguments to match the tool's schema and call it again."
    )
    assert recorder.calls == []


async def test_trivial_schemas_accept_any_arguments(ctx: ToolContext) -> None:
    recorder = Recorder()
    tool = FunctionTool.create(recorder, name="free", description="Anything goes.")
    await ToolExecutor(Hooks()).run(tool, {"whatever": [1, 2]}, ctx)
    assert recorder.calls == [{"whatever": [1, 2]}]


async def test_tool_error_becomes_an_error_result(ctx: ToolContext) -> None:
    async def fail(args: JsonObject, ctx: ToolContext) -> ToolResult:
        raise ToolError("disk is full")

    tool = FunctionTool.create(fail, name="fail", description="Fails.")
    result = await ToolExecutor(Hooks()).run(tool, {}, ctx)
    assert result.is_error
    assert result.text_content == "disk is full"


async def test_a_crashing_tool_becomes_an_error_result_and_is_logged(
    ctx: ToolContext, caplog: pytest.LogCaptureFixture
) -> None:
    async def crash(args: JsonObject, ctx: ToolContext) -> ToolResult:
        raise ValueError("bad state")

    tool = FunctionTool.create(crash, name="crash", description="Crashes.")
    with caplog.at_level(logging.ERROR):
        result = await ToolExecutor(Hooks()).run(tool, {}, ctx)
    assert result.is_error
    assert result.text_content == "crash failed: ValueError: bad state"
    assert "Traceback" in caplog.text


async def test_a_tool_returning_the_wrong_type_is_an_error(ctx: ToolContext) -> None:
    async def wrong(args: JsonObject, ctx: ToolContext) -> Any:
        return "plain string"

    tool = FunctionTool.create(wrong, name="wrong", description="Wrong.")
    result = await ToolExecutor(Hooks()).run(tool, {}, ctx)
    assert result.is_error
    assert "returned str instead of a ToolResult" in result.text_content


async def test_core_tool_errors_reach_the_model_as_results(ctx: ToolContext) -> None:
    result = await ToolExecutor(Hooks()).run(ReadTool(), {"path": "../etc/passwd"}, ctx)
    assert result.is_error
    assert "outside the workspace" in result.text_content


async def test_blocking_hook_stops_the_call_with_its_reason(ctx: ToolContext) -> None:
    recorder = Recorder()
    seen: list[AfterToolCallInfo] = []

    async def guard(info: ToolCallInfo) -> BeforeToolCallResult:
        return BeforeToolCallResult(block=True, reason="echo is disabled on Sundays")

    async def audit(info: AfterToolCallInfo) -> None:
        seen.append(info)

    executor = ToolExecutor(_hooks(before=[("guard", guard)], after=[("audit", audit)]))
    result = await executor.run(_echo(recorder), {"text": "hi"}, ctx)
    assert result.is_error
    assert result.text_content == "Tool call blocked by guard: echo is disabled on Sundays"
    assert recorder.calls == []
    assert [info.blocked for info in seen] == [True]


async def test_hooks_rewrite_params_in_chain_and_the_tool_gets_the_result(
    ctx: ToolContext,
) -> None:
    recorder = Recorder()
    seen_by_second: list[JsonObject] = []

    async def shout(info: ToolCallInfo) -> BeforeToolCallResult:
        return BeforeToolCallResult(params={"text": str(info.params["text"]).upper()})

    async def observe(info: ToolCallInfo) -> None:
        seen_by_second.append(info.params)

    executor = ToolExecutor(_hooks(before=[("a", shout), ("b", observe)]))
    result = await executor.run(_echo(recorder), {"text": "hi"}, ctx)
    assert result.text_content == "echo: HI"
    assert seen_by_second == [{"text": "HI"}]
    assert recorder.calls == [{"text": "HI"}]


async def test_rewritten_params_are_validated_again(ctx: ToolContext) -> None:
    recorder = Recorder()

    async def breaker(info: ToolCallInfo) -> BeforeToolCallResult:
        return BeforeToolCallResult(params={"text": 42})

    result = await ToolExecutor(_hooks(before=[("b", breaker)])).run(
        _echo(recorder), {"text": "hi"}, ctx
    )
    assert result.is_error
    assert "`text`: 42 is not of type 'string'" in result.text_content
    assert recorder.calls == []


async def test_a_crashing_before_hook_blocks_the_call_naming_its_owner(
    ctx: ToolContext, caplog: pytest.LogCaptureFixture
) -> None:
    recorder = Recorder()

    async def broken(info: ToolCallInfo) -> None:
        raise RuntimeError("policy db unreachable")

    with caplog.at_level(logging.ERROR):
        result = await ToolExecutor(_hooks(before=[("policy-plugin", broken)])).run(
            _echo(recorder), {"text": "hi"}, ctx
        )
    assert result.is_error
    assert "'policy-plugin'" in result.text_content
    assert "RuntimeError: policy db unreachable" in result.text_content
    assert recorder.calls == []
    assert "policy-plugin" in caplog.text


async def test_a_before_hook_returning_garbage_blocks_the_call(ctx: ToolContext) -> None:
    recorder = Recorder()

    async def sloppy(info: ToolCallInfo) -> Any:
        return {"block": False}

    result = await ToolExecutor(_hooks(before=[("sloppy", sloppy)])).run(
        _echo(recorder), {"text": "hi"}, ctx
    )
    assert result.is_error
    assert recorder.calls == []


async def test_after_hooks_see_the_call_and_its_result_and_failures_are_ignored(
    ctx: ToolContext,
) -> None:
    seen: list[AfterToolCallInfo] = []

    async def explode(info: AfterToolCallInfo) -> None:
        raise RuntimeError("observer bug")

    async def audit(info: AfterToolCallInfo) -> None:
        seen.append(info)

    executor = ToolExecutor(_hooks(after=[("x", explode), ("audit", audit)]))
    sub_ctx = replace(ctx, parent_call_id="outer-1")
    result = await executor.run(
        _echo(Recorder()),
        {"text": "hi"},
        sub_ctx,
        kind="code_mode_nested",
        input_kind="javascript",
    )
    assert result.text_content == "echo: hi"
    [info] = seen
    assert info.result_text == "echo: hi"
    assert info.is_error is False
    assert info.blocked is False
    assert info.details == {"seen": {"text": "hi"}}
    assert info.duration_ms >= 0
    call = info.call
    assert (call.tool_name, call.tool_id, call.owner) == ("echo", "nodmix:demo:echo", "demo")
    assert (call.tool_kind, call.tool_input_kind) == ("code_mode_nested", "javascript")
    assert (call.call_id, call.parent_call_id, call.run_id) == ("call-1", "outer-1", "r1")
    assert call.params == {"text": "hi"}


async def test_cancellation_propagates_out_of_a_running_tool(ctx: ToolContext) -> None:
    started = anyio.Event()
    after_run = False

    async def hang(args: JsonObject, ctx: ToolContext) -> ToolResult:
        started.set()
        await anyio.Event().wait()
        return ToolResult.text("never")

    tool = FunctionTool.create(hang, name="hang", description="Hangs.")

    async def run() -> None:
        nonlocal after_run
        await ToolExecutor(Hooks()).run(tool, {}, ctx)
        after_run = True

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(run)
            await started.wait()
            tg.cancel_scope.cancel()
    assert not after_run


def _call(call_id: str, name: str, arguments: JsonObject) -> ToolCallBlock:
    return ToolCallBlock(id=call_id, name=name, arguments=arguments)


def _ctx_factory(workspace: Path) -> Any:
    def factory(call: ToolCallBlock) -> ToolContext:
        return ToolContext(
            agent_id="main",
            session_key="k",
            session_id="s",
            run_id="r",
            call_id=call.id,
            workspace=workspace,
        )

    return factory


async def test_parallel_calls_run_concurrently_and_keep_call_order(workspace: Path) -> None:
    first_may_finish = anyio.Event()

    async def waiter(args: JsonObject, ctx: ToolContext) -> ToolResult:
        # Finishes only after the *later* call has run: impossible if calls were sequential.
        await first_may_finish.wait()
        return ToolResult.text(f"waiter {ctx.call_id}")

    async def releaser(args: JsonObject, ctx: ToolContext) -> ToolResult:
        first_may_finish.set()
        return ToolResult.text(f"releaser {ctx.call_id}")

    tools = {
        "waiter": FunctionTool.create(waiter, name="waiter", description="Waits."),
        "releaser": FunctionTool.create(releaser, name="releaser", description="Releases."),
    }
    calls = [_call("c1", "waiter", {}), _call("c2", "releaser", {})]
    with anyio.fail_after(5):
        messages = await ToolExecutor(Hooks()).run_calls(calls, tools, _ctx_factory(workspace))
    assert [(m.tool_call_id, m.tool_name, m.text) for m in messages] == [
        ("c1", "waiter", "waiter c1"),
        ("c2", "releaser", "releaser c2"),
    ]


async def test_unknown_tool_names_get_an_error_listing_available_tools(workspace: Path) -> None:
    recorder = Recorder()
    tools = {"echo": _echo(recorder), "zap": _echo(recorder, name="zap")}
    calls = [_call("c1", "ecko", {"text": "x"}), _call("c2", "echo", {"text": "ok"})]
    messages = await ToolExecutor(Hooks()).run_calls(calls, tools, _ctx_factory(workspace))
    unknown, known = messages
    assert unknown.is_error
    assert unknown.content == (TextBlock(text="Unknown tool 'ecko'. Available tools: echo, zap."),)
    assert not known.is_error
    assert known.details == {"seen": {"text": "ok"}}
