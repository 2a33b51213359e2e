"""Nested tool calls go through the same executor as direct calls (validation, policy hooks,
abort), emit events under their parent, and are projected into the persisted transcript and the
trajectory export as real tool calls under the parent `exec`/`wait` call."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from nodmix.codemode import CodeModeEngine
from nodmix.hooks import BeforeToolCallResult, ToolCallInfo
from nodmix.messages import ToolCallBlock, ToolResultMessage
from nodmix.origin import TurnOrigin
from nodmix.providers.base import ModelRequest
from nodmix.providers.fake import FunctionProvider, ModelReply
from nodmix.sessions import SessionManager, export_trajectory, messages_for_model
from nodmix.tools import ToolContext, ToolResult

from .support import (
    Gate,
    build_harness,
    code_mode,
    gated_harness,
    harness_with,
    make_tool,
    recording_hook,
    run_model_turn,
    text_tool,
    transcript_lines,
    wait_until,
)


@pytest.mark.anyio
async def test_hooks_see_nested_calls_with_their_parent_and_the_outer_cells(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    seen: list[ToolCallInfo] = []
    h = await build_harness(
        engine,
        sessions,
        workspace,
        extra_tools=[text_tool("lookup")],
        before_hooks=[("audit", recording_hook(seen))],
    )
    await h.exec(
        "await tools.lookup({ q: 1 }); await tools.read({ path: 'notes.txt' })", call_id="cell_1"
    )
    outer, first, second = seen
    assert (outer.tool_name, outer.tool_kind, outer.tool_id) == (
        "exec",
        "code_mode_exec",
        "nodmix:codemode:exec",
    )
    assert outer.params == {"code": outer.params["code"]} and outer.tool_input_kind == "javascript"
    assert (first.tool_id, first.tool_kind, first.parent_call_id) == (
        "nodmix:core:lookup",
        "code_mode_nested",
        "cell_1",
    )
    assert first.params == {"q": 1} and first.call_id == "cell_1:lookup:1"
    assert (second.tool_id, second.call_id) == ("nodmix:core:read", "cell_1:read:2")
    assert {i.session_id for i in seen} == {h.session.session_id}
    assert {i.agent_id for i in seen} == {"main"} and {i.run_id for i in seen} == {h.run_id}


@pytest.mark.anyio
async def test_a_policy_hook_can_block_a_nested_call_and_the_guest_can_catch_it(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    async def no_writes(info: ToolCallInfo) -> BeforeToolCallResult | None:
        if info.tool_id == "nodmix:core:write":
            return BeforeToolCallResult(block=True, reason="writes need approval")
        return None

    h = await build_harness(engine, sessions, workspace, before_hooks=[("policy", no_writes)])
    value = await h.value(
        "try { await tools.write({ path: 'x.txt', content: 'x' }); return 'written'; }"
        "catch (e) { return e.message }"
    )
    assert value == "Tool call blocked by policy: writes need approval"
    assert not (workspace / "x.txt").exists()
    uncaught = await h.exec("await tools.write({ path: 'x.txt', content: 'x' })")
    assert uncaught["code"] == "nested_tool_failed" and "writes need approval" in uncaught["error"]


@pytest.mark.anyio
async def test_a_hook_can_rewrite_nested_call_arguments(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    async def redirect(info: ToolCallInfo) -> BeforeToolCallResult | None:
        if info.tool_id == "nodmix:core:read":
            return BeforeToolCallResult(params={"path": "notes.txt"})
        return None

    h = await build_harness(engine, sessions, workspace, before_hooks=[("policy", redirect)])
    value = await h.value("return (await tools.read({ path: 'secret.txt' })).text")
    assert "9:40" in value


@pytest.mark.anyio
async def test_a_hook_can_block_a_whole_code_mode_cell(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    async def no_shell_in_cells(info: ToolCallInfo) -> BeforeToolCallResult | None:
        if info.tool_kind == "code_mode_exec" and "nodmix:core:exec" in str(info.params):
            return BeforeToolCallResult(block=True, reason="no shell from code")
        return None

    h = await build_harness(
        engine, sessions, workspace, before_hooks=[("policy", no_shell_in_cells)]
    )
    result = await h.executor.run(
        h.exec_tool,
        {"code": "await tools.call('nodmix:core:exec', { command: 'touch pwned' })"},
        h.ctx("cell_x"),
        kind="code_mode_exec",
        input_kind="javascript",
    )
    assert result.is_error and "no shell from code" in result.text_content
    assert not (workspace / "pwned").exists()


@pytest.mark.anyio
async def test_nested_inputs_are_validated_against_the_tool_schema(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    h = await build_harness(engine, sessions, workspace)
    value = await h.value("try { await tools.read({ path: 5 }); } catch (e) { return e.message }")
    assert value.startswith("Invalid arguments for read:")


@pytest.mark.anyio
async def test_nested_tools_run_with_the_turn_context_and_the_parent_call(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    contexts: list[ToolContext] = []

    async def whoami(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        contexts.append(ctx)
        return ToolResult.text("me")

    h = await build_harness(
        engine, sessions, workspace, extra_tools=[make_tool("whoami", whoami)], run_id="run_ctx"
    )
    await h.exec("await tools.whoami({})", call_id="cell_ctx")
    (ctx,) = contexts
    assert (ctx.agent_id, ctx.session_key, ctx.session_id, ctx.run_id) == (
        "main",
        "agent:main:main",
        h.session.session_id,
        "run_ctx",
    )
    assert ctx.parent_call_id == "cell_ctx" and ctx.call_id == "cell_ctx:whoami:1"
    assert ctx.workspace == workspace


@pytest.mark.anyio
async def test_nested_calls_emit_start_and_finish_events_under_their_parent(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    h = await build_harness(engine, sessions, workspace, extra_tools=[text_tool("lookup")])
    await h.exec("await tools.lookup({ q: 'a' })", call_id="cell_ev")
    (started,) = h.started()
    (finished,) = h.finished()
    assert (started.call_id, started.tool_name, started.tool_id, started.parent_call_id) == (
        "cell_ev:lookup:1",
        "lookup",
        "nodmix:core:lookup",
        "cell_ev",
    )
    assert started.arguments == {"q": "a"}
    assert finished.parent_call_id == "cell_ev"
    assert finished.result.tool_call_id == "cell_ev:lookup:1" and not finished.result.is_error


@pytest.mark.anyio
async def test_parallel_nested_calls_really_run_concurrently(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    gate = Gate()
    h = await harness_with(engine, sessions, workspace, gate.tool)
    async with anyio.create_task_group() as group:
        results: list[Any] = []

        async def run() -> None:
            results.append(
                await h.value(
                    "const both = [tools.slow({ tag: 'a' }), tools.slow({ tag: 'b' })];"
                    "return (await Promise.all(both))"
                    ".map(r => r.text)"
                )
            )

        group.start_soon(run)
        await wait_until(lambda: len(gate.started) == 2, "both calls to be running at once")
        gate.release.set()
    assert results == [["released a", "released b"]]


@pytest.mark.anyio
async def test_nested_calls_are_persisted_under_their_parent_and_not_replayed(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    h = await build_harness(engine, sessions, workspace, extra_tools=[text_tool("lookup", "L")])
    provider = FunctionProvider(
        _exec_then_answer(
            "await tools.lookup({ q: 'x' });return (await tools.read({ path: 'notes.txt' })).text"
        )
    )
    result = await run_model_turn(h, provider)
    assert "9:40" in result.reply
    lines = transcript_lines(h.session)[1:]
    exec_call = lines[1]["message"]["content"][0]
    assert exec_call["type"] == "toolCall" and exec_call["name"] == "exec"
    nested = [line for line in lines if line.get("parentToolCallId")]
    assert {line["parentToolCallId"] for line in nested} == {exec_call["id"]}
    assert [(n["message"]["role"], _call_or_result_name(n["message"])) for n in nested] == [
        ("assistant", "lookup"),
        ("toolResult", "lookup"),
        ("assistant", "read"),
        ("toolResult", "read"),
    ]
    assert nested[0]["message"]["content"][0]["arguments"] == {"q": "x"}
    assert nested[0]["message"]["content"][0]["id"] == f"{exec_call['id']}:lookup:1"
    # Replay (what the next model request sees) keeps the outer exec call, not the nested ones.
    reloaded = SessionManager(h.session.transcript.path.parents[3]).open(h.session.key)
    try:
        roles = [(m.role, _name(m)) for m in messages_for_model(reloaded.entries)]
    finally:
        reloaded.transcript.close()
    assert roles == [
        ("user", None),
        ("assistant", "exec"),
        ("toolResult", "exec"),
        ("assistant", None),
    ]


@pytest.mark.anyio
async def test_trajectory_export_shows_nested_calls_under_exec_and_wait(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    gate = Gate()
    seen: list[ToolCallInfo] = []
    h = await build_harness(
        engine,
        sessions,
        workspace,
        extra_tools=[gate.tool, text_tool("lookup", "L")],
        code_mode_config=code_mode(timeout_ms=300),
        before_hooks=[("audit", recording_hook(seen))],
    )

    def respond(request: ModelRequest) -> ModelReply:
        last = request.messages[-1]
        if not isinstance(last, ToolResultMessage):
            return ModelReply.tool_call(
                "exec",
                {
                    "code": "await tools.lookup({}); const r = await tools.slow({ tag: 's' });"
                    "await tools.lookup({ after: true }); return r.text"
                },
            )
        details = last.details
        assert isinstance(details, dict)
        if details["status"] == "waiting":
            gate.release.set()
            return ModelReply.tool_call("wait", {"runId": details["runId"]})
        return ModelReply.text(f"final: {details['value']}")

    result = await run_model_turn(h, FunctionProvider(respond))
    assert result.reply == "final: released s"
    doc = export_trajectory(h.session)
    calls = [c for item in doc["items"] if item["kind"] == "assistant" for c in item["toolCalls"]]
    exec_call, wait_call = calls
    assert exec_call["name"] == "exec" and exec_call["result"]["details"]["status"] == "waiting"
    assert wait_call["name"] == "wait" and wait_call["result"]["details"]["status"] == "completed"
    exec_nested = [(n["name"], n["arguments"], n["result"]["isError"]) for n in exec_call["nested"]]
    wait_nested = [(n["name"], n["arguments"]) for n in wait_call["nested"]]
    # lookup ran inline during exec; slow was started by exec and delivered during wait (its
    # parent is the exec call that made it); the last lookup was made during wait.
    assert exec_nested == [("lookup", {}, False), ("slow", {"tag": "s"}, False)]
    assert wait_nested == [("lookup", {"after": True})]
    # Through the real loop, hooks told the outer cells apart from the nested calls.
    assert [(i.tool_name, i.tool_kind) for i in seen] == [
        ("exec", "code_mode_exec"),
        ("lookup", "code_mode_nested"),
        ("slow", "code_mode_nested"),
        ("wait", "code_mode_wait"),
        ("lookup", "code_mode_nested"),
    ]
    assert seen[4].parent_call_id == wait_call["id"]


@pytest.mark.anyio
async def test_aborting_the_turn_during_exec_cancels_nested_calls_and_keeps_a_valid_transcript(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    gate = Gate()
    h = await harness_with(engine, sessions, workspace, gate.tool)
    provider = FunctionProvider(_exec_then_answer("return (await tools.slow({})).text"))
    async with anyio.create_task_group() as group:
        group.start_soon(run_model_turn, h, provider)
        with anyio.fail_after(5):
            await gate.entered.wait()
        group.cancel_scope.cancel()
    assert gate.cancelled == 1 and gate.finished == 0
    assert len(engine.store) == 0
    _assert_aborted_transcript(h.session)
    # The cancelled call did start, so it is on record under the exec call, as cancelled.
    await wait_until(lambda: len(_nested_lines(h.session)) == 2, "the projection")
    request, result = _nested_lines(h.session)
    assert request["message"]["content"][0]["name"] == "slow"
    assert result["message"]["isError"] and "Cancelled" in result["message"]["content"][0]["text"]


@pytest.mark.anyio
async def test_aborting_the_turn_during_wait_cancels_nested_calls_and_the_run(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    gate, h = await gated_harness(engine, sessions, workspace, timeout_ms=300)
    run_ids: list[str] = []

    def respond(request: ModelRequest) -> ModelReply:
        last = request.messages[-1]
        if isinstance(last, ToolResultMessage):
            assert isinstance(last.details, dict)
            run_ids.append(last.details["runId"])
            return ModelReply.tool_call("wait", {"runId": last.details["runId"]})
        return ModelReply.tool_call("exec", {"code": "return (await tools.slow({})).text"})

    async with anyio.create_task_group() as group:
        group.start_soon(run_model_turn, h, FunctionProvider(respond))
        await wait_until(
            lambda: bool(run_ids) and _resuming(engine, run_ids[0]), "the wait to be running"
        )
        group.cancel_scope.cancel()
    await wait_until(lambda: gate.cancelled == 1, "the nested call to be cancelled")
    assert len(engine.store) == 0
    later = await h.wait(run_ids[0])
    assert later["status"] == "failed" and later["code"] == "aborted"
    _assert_aborted_transcript(h.session, last_tool="wait")


@pytest.mark.anyio
async def test_aborting_a_turn_stuck_in_a_cpu_loop_returns_promptly(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    entered = anyio.Event()

    async def on_exec(info: ToolCallInfo) -> None:
        if info.tool_kind == "code_mode_exec":
            entered.set()

    h = await build_harness(
        engine,
        sessions,
        workspace,
        code_mode_config=code_mode(timeout_ms=20_000),
        before_hooks=[("watch", on_exec)],
    )
    provider = FunctionProvider(_exec_then_answer("while (true) {}"))
    started = time.monotonic()
    async with anyio.create_task_group() as group:
        group.start_soon(run_model_turn, h, provider)
        with anyio.fail_after(5):
            await entered.wait()
        group.cancel_scope.cancel()
    assert time.monotonic() - started < 5.0  # not the 20 s budget
    _assert_aborted_transcript(h.session)
    assert await h.value("return 'still serving'") == "still serving"


@pytest.mark.anyio
@pytest.mark.parametrize("step", ["exec after a delivery", "wait"])
async def test_cancelling_a_step_that_spins_after_resuming_returns_promptly(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path, step: str
) -> None:
    gate = Gate()
    marked = anyio.Event()

    async def mark(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        marked.set()
        return ToolResult.text("marked")

    h = await harness_with(
        engine, sessions, workspace, gate.tool, make_tool("mark", mark), timeout_ms=20_000
    )
    started = time.monotonic()
    # The guest spins in a later worker step than the first: the one that delivers the slow
    # result, or the one that restores the run.
    if step == "wait":
        parked = await h.exec("await yield_control('later'); await tools.mark({}); while (1) {}")
        assert parked["status"] == "waiting"
        running = h.wait(parked["runId"])
    else:
        running = h.exec("await tools.slow({}); await tools.mark({}); while (true) {}")
    async with anyio.create_task_group() as group:

        async def step_then_cancel() -> None:
            await running
            pytest.fail("the step should have been cancelled")

        group.start_soon(step_then_cancel)
        if step != "wait":
            with anyio.fail_after(5):
                await gate.entered.wait()
            gate.release.set()
        await wait_until(marked.is_set, "the guest to be spinning")
        group.cancel_scope.cancel()
    assert time.monotonic() - started < 5.0  # not the 20 s budget
    assert await h.value("return 'still serving'") == "still serving"


@pytest.mark.anyio
async def test_calls_a_failed_program_left_behind_are_still_recorded(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    gate = Gate()
    h = await build_harness(
        engine, sessions, workspace, extra_tools=[gate.tool, text_tool("quick", "q")]
    )
    result = await h.exec(
        "const pending = tools.slow({ tag: 'left behind' });"
        "await tools.quick({}); throw new Error('gave up')",
        call_id="cell_fail",
    )
    assert result["status"] == "failed" and result["error"].startswith("Error: gave up")
    await wait_until(lambda: gate.cancelled == 1, "the left-behind call to be cancelled")
    await wait_until(lambda: len(_nested_lines(h.session)) == 4, "both projections")
    names = [_call_or_result_name(line["message"]) for line in _nested_lines(h.session)]
    assert names == ["quick", "quick", "slow", "slow"]
    assert {line["parentToolCallId"] for line in _nested_lines(h.session)} == {"cell_fail"}


@pytest.mark.anyio
async def test_a_call_cancelled_before_its_task_starts_never_runs(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    from nodmix.codemode.nested import cancel_all, dispatch
    from nodmix.codemode.runs import NestedCall, RunState

    gate = Gate()
    h = await build_harness(engine, sessions, workspace, extra_tools=[gate.tool])
    run = h.exec_tool._run
    state = RunState(
        scope=run.services.scope,
        settings=run.settings,
        catalog=run.services.catalog,
        boot_json=run.boot_json,
    )
    entry = run.services.catalog.find("slow")
    call = NestedCall(request_id=1, entry=entry, input={}, call_id="c:slow:1")
    async with anyio.create_task_group() as group:
        dispatch(group.start_soon, run.services, state, call)
        cancel_all(state)  # the exec is aborted before the task gets to run
    assert call.done.is_set() and call.result is not None and call.result.is_error
    assert gate.started == [] and h.started() == [] and _nested_lines(h.session) == []


def _nested_lines(session: Any) -> list[dict[str, Any]]:
    return [line for line in transcript_lines(session) if line.get("parentToolCallId")]


def _exec_then_answer(code: str) -> Any:
    def respond(request: ModelRequest) -> ModelReply:
        last = request.messages[-1]
        if isinstance(last, ToolResultMessage):
            details = last.details
            assert isinstance(details, dict), last
            return ModelReply.text(f"answer: {details.get('value')}")
        return ModelReply.tool_call("exec", {"code": code})

    return respond


def _assert_aborted_transcript(session: Any, last_tool: str = "exec") -> None:
    reloaded_manager = SessionManager(session.transcript.path.parents[3])
    try:
        reloaded = reloaded_manager.open(session.key)
        messages = messages_for_model(reloaded.entries)
    finally:
        reloaded_manager.close()
    assert messages[0].role == "user"
    # Every tool call has a result; the last one is the cancellation notice.
    calls = [
        b
        for m in messages
        if m.role == "assistant"
        for b in m.content
        if isinstance(b, ToolCallBlock)
    ]
    results = [m for m in messages if isinstance(m, ToolResultMessage)]
    assert [c.id for c in calls] == [r.tool_call_id for r in results]
    assert calls[-1].name == last_tool
    assert results[-1].is_error and "cancelled" in results[-1].text


def _resuming(engine: CodeModeEngine, run_id: str) -> bool:
    parked = engine.store.get(run_id)
    return parked is not None and parked.resuming


def _call_or_result_name(message: dict[str, Any]) -> str:
    if message["role"] == "toolResult":
        return str(message["toolName"])
    return str(message["content"][0]["name"])


def _name(message: Any) -> str | None:
    if isinstance(message, ToolResultMessage):
        return message.tool_name
    calls = [b for b in message.content if isinstance(b, ToolCallBlock)]
    return calls[0].name if calls else None


@pytest.mark.anyio
async def test_nested_calls_carry_the_turns_channel_origin_to_tools_and_hooks(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    origin = TurnOrigin(channel="telegram", chat_id="4242", sender_id="4242", message_id="17")
    tool_saw: list[TurnOrigin | None] = []

    async def reply_to(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        tool_saw.append(ctx.origin)
        return ToolResult.text(f"would answer {ctx.origin.chat_id if ctx.origin else 'nobody'}")

    hooks_saw: list[ToolCallInfo] = []
    h = await build_harness(
        engine,
        sessions,
        workspace,
        extra_tools=[make_tool("reply_to", reply_to)],
        before_hooks=[("audit", recording_hook(hooks_saw))],
        origin=origin,
    )
    value = await h.value("return (await tools.reply_to({})).text")
    assert value == "would answer 4242"
    assert tool_saw == [origin]
    nested = [i for i in hooks_saw if i.tool_kind == "code_mode_nested"]
    assert [i.origin for i in nested] == [origin]
