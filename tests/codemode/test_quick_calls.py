"""Quick tools run on the sandbox worker that called them, with every guarantee of a call that
goes through the event loop: policy (hooks, the exec gate, schema checks), approvals, events and
transcript entries in the order the calls ran, cancellation, and other sessions unaffected."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

import nodmix.codemode.quick
import nodmix.sandbox
from nodmix.codemode import CodeModeEngine
from nodmix.codemode.handoff import Handoff
from nodmix.config.schema import ExecToolConfig, NodmixConfig, ToolsConfig
from nodmix.errors import ToolError
from nodmix.events import ToolCallFinished, ToolCallStarted
from nodmix.hooks import BeforeToolCallResult, Registered, ToolCallInfo
from nodmix.messages import JsonObject
from nodmix.security.allowlist import Allowlist
from nodmix.security.approvals import ApprovalBroker, RecordingPresenter
from nodmix.security.gate import ExecGate
from nodmix.security.parts import cached_rules
from nodmix.security.turns import TurnHandle, TurnRegistry
from nodmix.sessions import SessionManager
from nodmix.tools import FunctionTool, Tool, ToolContext, ToolResult

from .support import DEADLINE_S, Gate, build_harness, text_tool, transcript_lines, wait_until

pytestmark = pytest.mark.anyio


class Quick:
    """A quick tool that records the thread of each call (and can hold a call until released)."""

    def __init__(self, name: str = "quick") -> None:
        self.name = name
        self.threads: list[int] = []
        self.inputs: list[dict[str, Any]] = []
        self.hold: threading.Event | None = None
        self.entered = threading.Event()

    def body(self, args: JsonObject, ctx: ToolContext) -> ToolResult:
        self.threads.append(threading.get_ident())
        self.inputs.append(dict(args))
        self.entered.set()
        if self.hold is not None:
            self.hold.wait(10)
        if args.get("fail") == "tool":
            raise ToolError("the quick tool refused")
        if args.get("fail") == "crash":
            raise KeyError("boom")
        return ToolResult.text(f"{self.name} {args.get('i')}", details={"i": args.get("i")})

    @property
    def tool(self) -> FunctionTool:
        return FunctionTool.create_quick(
            self.body,
            name=self.name,
            description="Answers at once (test tool).",
            parameters={
                "type": "object",
                "properties": {"i": {"type": "integer"}, "fail": {"type": "string"}},
            },
        )


@pytest.fixture
def worker_steps(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Names of the worker steps run, and how often a step waited for the event loop."""
    seen: list[str] = []
    real = nodmix.sandbox.run_in_worker

    async def counting(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        seen.append(getattr(fn, "__name__", repr(fn)))
        return await real(fn, *args, **kwargs)

    exchange = Handoff._exchange

    def counted(self: Handoff) -> Any:
        seen.append("exchange")
        return exchange(self)

    monkeypatch.setattr(nodmix.sandbox, "run_in_worker", counting)
    monkeypatch.setattr(Handoff, "_exchange", counted)
    return seen


def _nested(session: Any) -> list[tuple[str, str]]:
    """The persisted nested entries: (role, tool name) in transcript order."""
    out = []
    for line in transcript_lines(session):
        if not line.get("parentToolCallId"):
            continue
        message = line["message"]
        name = (
            message["content"][0]["name"] if message["role"] == "assistant" else message["toolName"]
        )
        out.append((message["role"], name))
    return out


async def test_awaited_quick_calls_run_on_the_worker_without_waiting_for_the_loop(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path, worker_steps: list[str]
) -> None:
    quick = Quick()
    h = await build_harness(engine, sessions, workspace, extra_tools=[quick.tool])
    result = await h.exec(
        "let s = 0; for (let i = 0; i < 20; i++) s += (await tools.quick({ i })).details.i;"
        "return s",
        call_id="cell_q",
    )
    assert result["status"] == "completed" and result["value"] == sum(range(20))
    # One worker step, which never waited for the event loop.
    assert worker_steps == ["boot_and_run"]
    assert threading.get_ident() not in quick.threads and len(set(quick.threads)) == 1
    assert result["telemetry"]["callCount"] == 20
    # Events and transcript entries as for any nested call, in the order the calls ran.
    started, finished = h.started(), h.finished()
    assert [e.call_id for e in started] == [f"cell_q:quick:{i + 1}" for i in range(20)]
    assert [e.result.tool_call_id for e in finished] == [e.call_id for e in started]
    assert all(e.parent_call_id == "cell_q" for e in (*started, *finished))
    calls = (ToolCallStarted, ToolCallFinished)
    kinds = [type(e).__name__ for e in h.events if isinstance(e, calls)]
    assert kinds == ["ToolCallStarted", "ToolCallFinished"] * 20
    assert _nested(h.session) == [("assistant", "quick"), ("toolResult", "quick")] * 20


async def test_quick_and_loop_calls_are_recorded_in_the_order_they_ran(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    quick, loop_threads = Quick(), []

    async def lookup(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        loop_threads.append(threading.get_ident())
        return ToolResult.text("looked up")

    h = await build_harness(
        engine,
        sessions,
        workspace,
        extra_tools=[quick.tool, FunctionTool.create(lookup, name="lookup", description="x")],
    )
    value = await h.value(
        "const a = await tools.quick({ i: 1 }); const b = await tools.lookup({});"
        "const c = await tools.quick({ i: 2 }); return [a.text, b.text, c.text]"
    )
    assert value == ["quick 1", "looked up", "quick 2"]
    # The async tool is not eligible: it ran on the event loop (this test's thread).
    assert loop_threads == [threading.get_ident()]
    assert threading.get_ident() not in quick.threads
    assert [e.call_id for e in h.started()] == [
        "call_1:quick:1",
        "call_1:lookup:2",
        "call_1:quick:3",
    ]
    assert [f.result.tool_name for f in h.finished()] == ["quick", "lookup", "quick"]
    assert [name for _, name in _nested(h.session)] == [
        "quick",
        "quick",
        "lookup",
        "lookup",
        "quick",
        "quick",
    ]


async def test_a_loop_call_finishing_among_quick_calls_is_reported_after_those_that_ran_first(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    loop = asyncio.get_running_loop()
    fifth = asyncio.Event()
    quick = Quick()
    body = quick.body

    def counting(args: JsonObject, ctx: ToolContext) -> ToolResult:
        result = body(args, ctx)
        if args.get("i") == 4:
            loop.call_soon_threadsafe(fifth.set)
        return result

    done_after: list[int] = []

    async def slow(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        await fifth.wait()
        done_after.append(len(quick.inputs))  # the last of these may still be running
        return ToolResult.text("slow done")

    tool = FunctionTool.create_quick(counting, name="quick", description="x")
    h = await build_harness(
        engine,
        sessions,
        workspace,
        extra_tools=[tool, FunctionTool.create(slow, name="slow", description="x")],
    )
    value = await h.value(
        "const p = tools.slow({}); for (let i = 0; i < 40; i++) await tools.quick({ i });"
        "return (await p).text"
    )
    assert value == "slow done"
    order = [
        e.result.tool_name if isinstance(e, ToolCallFinished) else None
        for e in h.events
        if isinstance(e, ToolCallFinished)
    ]
    finished_first = order.index("slow")
    assert finished_first >= done_after[0] - 1, (finished_first, done_after)


async def test_a_loop_result_received_after_quick_calls_is_recorded_after_them(
    engine: CodeModeEngine,
    sessions: SessionManager,
    workspace: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Only the explicit publishing may put quick calls on record here, not the batching timer.
    monkeypatch.setattr(nodmix.codemode.quick, "PUBLISH_DELAY_SECONDS", 3600.0)
    loop = asyncio.get_running_loop()
    release = asyncio.Event()
    events: list[Any] = []
    quick = Quick()
    body = quick.body

    def slow_finished() -> bool:
        return any(isinstance(e, ToolCallFinished) and e.result.tool_name == "slow" for e in events)

    def ordered(args: JsonObject, ctx: ToolContext) -> ToolResult:
        if args.get("i") == 4:
            loop.call_soon_threadsafe(release.set)
        if args.get("i") == 39:  # the slow call has finished, but the program gets it later
            deadline = time.monotonic() + DEADLINE_S
            while not slow_finished() and time.monotonic() < deadline:
                time.sleep(0.001)
        return body(args, ctx)

    async def slow(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        await release.wait()
        return ToolResult.text("slow done")

    h = await build_harness(
        engine,
        sessions,
        workspace,
        extra_tools=[
            FunctionTool.create_quick(ordered, name="quick", description="x"),
            FunctionTool.create(slow, name="slow", description="x"),
        ],
    )
    events = h.events
    value = await h.value(
        "const p = tools.slow({}); for (let i = 0; i < 40; i++) await tools.quick({ i });"
        "return (await p).text"
    )
    assert value == "slow done" and slow_finished()
    # The transcript follows what the program received: every quick result, then the slow one.
    assert [name for role, name in _nested(h.session) if role == "toolResult"] == [
        *(["quick"] * 40),
        "slow",
    ]


async def test_a_call_started_before_quick_calls_runs_without_waiting_for_them(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    slow_started = threading.Event()
    quick = Quick()
    body = quick.body
    waited: list[bool] = []

    def waiting_for_slow(args: JsonObject, ctx: ToolContext) -> ToolResult:
        if args.get("i") == 20:  # the slow call must be running by now, not after the loop
            waited.append(slow_started.wait(DEADLINE_S))
        return body(args, ctx)

    async def slow(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        slow_started.set()
        return ToolResult.text("slow done")

    h = await build_harness(
        engine,
        sessions,
        workspace,
        extra_tools=[
            FunctionTool.create_quick(waiting_for_slow, name="quick", description="x"),
            FunctionTool.create(slow, name="slow", description="x"),
        ],
    )
    value = await h.value(
        "const p = tools.slow({}); for (let i = 0; i < 40; i++) await tools.quick({ i });"
        "return (await p).text"
    )
    assert value == "slow done" and waited == [True]
    # Only the first quick call went through the loop, starting the slow one with it.
    assert quick.threads.count(threading.get_ident()) == 1


async def test_a_quick_call_the_program_does_not_await_has_run_when_it_returns(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    quick = Quick()
    h = await build_harness(engine, sessions, workspace, extra_tools=[quick.tool])
    result = await h.exec("tools.quick({ i: 7 }); return 'saved'")
    assert result["status"] == "completed" and result["value"] == "saved"
    assert "inFlightToolCalls" not in result  # it finished inside the program's call
    assert quick.inputs == [{"i": 7}]
    assert _nested(h.session) == [("assistant", "quick"), ("toolResult", "quick")]


async def test_a_hook_on_the_tool_sends_its_calls_through_the_loop_and_sees_them(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    quick, seen = Quick(), []

    async def hook(info: ToolCallInfo) -> None:
        seen.append(info.tool_name)

    h = await build_harness(engine, sessions, workspace, extra_tools=[quick.tool])
    h.hooks.before_tool_call.append(Registered("audit", hook, tools=frozenset({"other"})))
    assert await h.value("return (await tools.quick({ i: 1 })).text") == "quick 1"
    assert threading.get_ident() not in quick.threads and seen == []  # not this tool's hook
    h.hooks.before_tool_call.append(Registered("audit", hook))  # every tool
    assert await h.value("return (await tools.quick({ i: 2 })).text") == "quick 2"
    assert quick.threads[-1] == threading.get_ident()  # the loop ran it, for the hook
    assert seen == ["exec", "quick"]


async def test_a_policy_hook_blocks_a_quick_tool_before_it_runs(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    quick = Quick()

    async def deny(info: ToolCallInfo) -> BeforeToolCallResult | None:
        if info.tool_name == "quick":
            return BeforeToolCallResult(block=True, reason="not today")
        return None

    h = await build_harness(
        engine, sessions, workspace, extra_tools=[quick.tool], before_hooks=[("policy", deny)]
    )
    value = await h.value(
        "try { await tools.quick({ i: 1 }); return 'ran' } catch (e) { return e.message }"
    )
    assert value == "Tool call blocked by policy: not today"
    assert quick.inputs == []


async def test_a_gate_that_concerns_a_quick_tool_still_decides_its_calls(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    quick = Quick()

    class RefuseQuick:
        def concerns(self, tool: Tool) -> bool:
            return tool.spec.name == "quick"

        async def check(
            self, tool: Tool, params: JsonObject, ctx: ToolContext
        ) -> ToolResult | None:
            if tool.spec.name == "quick":
                return ToolResult.error("Not run: refused by the gate.")
            return None

    h = await build_harness(engine, sessions, workspace, extra_tools=[quick.tool])
    h.executor.gate = RefuseQuick()
    value = await h.value("try { await tools.quick({}) } catch (e) { return e.message }")
    assert value == "Not run: refused by the gate." and quick.inputs == []


async def test_schema_checks_and_tool_errors_reach_the_guest_as_for_any_call(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    quick = Quick()
    h = await build_harness(engine, sessions, workspace, extra_tools=[quick.tool])
    value = await h.value(
        "const out = [];"
        "for (const input of [{ i: 'x' }, { fail: 'tool' }, { fail: 'crash' }]) {"
        "  try { await tools.quick(input); out.push('ran') } catch (e) { out.push(e.message) }"
        "} return out"
    )
    invalid, refused, crashed = value
    assert invalid.startswith("Invalid arguments for quick:") and "`i`" in invalid
    assert refused == "the quick tool refused"
    assert crashed == "quick failed: KeyError: 'boom'"
    assert len(quick.inputs) == 2  # the invalid call never reached the tool
    assert [f.result.is_error for f in h.finished()] == [True, True, True]


async def test_read_of_a_large_file_declines_the_quick_path_and_goes_through_the_loop(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path, worker_steps: list[str]
) -> None:
    (workspace / "big.txt").write_text("line\n" * 20_000, encoding="utf-8")
    h = await build_harness(engine, sessions, workspace)
    value = await h.value(
        "const small = await tools.read({ path: 'notes.txt' });"
        "const big = await tools.read({ path: 'big.txt', limit: 2 });"
        "return [small.text, big.details.totalLines]"
    )
    assert value == ["The ferry leaves at 9:40.", 20_000]
    # Only the large file needed the event loop: one exchange, for the second call.
    assert worker_steps.count("exchange") == 1


@pytest.mark.parametrize(
    "program",
    [
        "for (let i = 0; i < 50; i++) await tools.quick({ i })",
        # Calls not awaited run in one go, with no job boundary where the interrupt would stop
        # the program: the lane itself must refuse the next call.
        "for (let i = 0; i < 50; i++) tools.quick({ i })",
    ],
    ids=["awaited", "not-awaited"],
)
async def test_a_quick_call_in_flight_when_the_turn_is_aborted_is_recorded_and_ends_the_run(
    engine: CodeModeEngine,
    sessions: SessionManager,
    workspace: Path,
    program: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    quick = Quick()
    hold = quick.hold = threading.Event()
    cancel = Handoff.cancel

    def cancelled(self: Handoff) -> None:  # the call in flight ends once the abort is in
        cancel(self)
        hold.set()

    monkeypatch.setattr(Handoff, "cancel", cancelled)
    h = await build_harness(engine, sessions, workspace, extra_tools=[quick.tool])
    async with anyio.create_task_group() as group:
        group.start_soon(h.exec, program)
        await wait_until(quick.entered.is_set, "the first quick call to start")
        group.cancel_scope.cancel()  # the worker is inside the tool: the abort waits for it
    # The call that was running finished and is on record; no other call started after it.
    assert len(quick.inputs) == 1
    assert [e.tool_name for e in h.started()] == ["quick"]
    assert [e.result.tool_name for e in h.finished()] == ["quick"]
    assert _nested(h.session) == [("assistant", "quick"), ("toolResult", "quick")]
    assert len(engine.store) == 0


async def test_an_exec_waiting_for_approval_parks_the_run_beside_quick_calls(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path, isolated_state: Path
) -> None:
    quick = Quick()
    config = NodmixConfig(
        tools=ToolsConfig(exec=ExecToolConfig(security="allowlist", ask="on-miss"))
    )
    turns, broker, presenter = TurnRegistry(), ApprovalBroker(), RecordingPresenter()
    broker.router.register("owner", presenter)
    h = await build_harness(engine, sessions, workspace, extra_tools=[quick.tool])
    turns.add(h.run_id, h.session.key, TurnHandle(None))
    h.executor.gate = ExecGate(
        rules_for=cached_rules(lambda: config),
        allowlist=Allowlist(isolated_state),
        broker=broker,
        turns=turns,
    )
    program = (
        "const a = await tools.quick({ i: 1 });"
        "const e = await tools.call('nodmix:core:exec', { command: 'echo approved' });"
        "const b = await tools.quick({ i: 2 });"
        "return [a.text, e.text.split('\\n')[0], b.text]"
    )
    async with anyio.create_task_group() as group:
        broker.attach(group)
        first = await h.exec(program)
        assert first["status"] == "waiting" and first["reason"] == "approval", first
        assert [i.get("i") for i in quick.inputs] == [1]
        (request,) = broker.pending()
        assert request.command == "echo approved"
        assert broker.resolve(request.id, "allow-once", by="test")
        last = await h.wait(first["runId"])
        group.cancel_scope.cancel()
    assert last["status"] == "completed", last
    assert last["value"] == ["quick 1", "approved", "quick 2"]
    assert threading.get_ident() not in quick.threads
    assert [name for _, name in _nested(h.session)] == [
        "quick",
        "quick",
        "exec",
        "exec",
        "quick",
        "quick",
    ]


async def test_cells_of_several_sessions_run_quick_calls_at_once_without_mixing_them(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    quick, gate = Quick(), Gate()
    harnesses = [
        await build_harness(
            engine,
            sessions,
            workspace / f"ws{n}",
            extra_tools=[quick.tool, gate.tool, text_tool("lookup")],
            session_key=f"agent:main:s{n}",
            run_id=f"run_{n}",
        )
        for n in range(4)
    ]
    program = (
        "const slow = tools.slow({ tag: 'held' }); let s = 0;"
        "for (let i = 0; i < 40; i++) s += (await tools.quick({ i: i + %d })).details.i;"
        "await tools.lookup({}); return [s, (await slow).text]"
    )
    values: dict[int, Any] = {}

    async def run(n: int) -> None:
        values[n] = await harnesses[n].value(program % (n * 1000))

    async with anyio.create_task_group() as group:
        for n in range(4):
            group.start_soon(run, n)
        await wait_until(lambda: len(gate.started) == 4, "every cell's slow call")
        gate.release.set()
    for n, h in enumerate(harnesses):
        assert values[n] == [sum(range(n * 1000, n * 1000 + 40)), "released held"]
        started = [e for e in h.started() if e.tool_name == "quick"]
        assert [e.arguments["i"] for e in started] == [n * 1000 + i for i in range(40)]
        assert _nested(h.session).count(("assistant", "quick")) == 40
