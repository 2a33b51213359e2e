"""The fast lane: a worker step keeps its cell while nested calls settle quickly, and hands the
run back to the event loop (exactly once, nothing lost) when they do not."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

import nodmix.sandbox
from nodmix.catalog import RunCatalog
from nodmix.codemode import CodeModeEngine
from nodmix.codemode import handoff as handoff_module
from nodmix.codemode.handoff import Handoff
from nodmix.codemode.runs import NestedCall, RunScope, RunState
from nodmix.codemode.settings import resolve_settings
from nodmix.config.schema import CodeModeConfig
from nodmix.sandbox import Pending, rendezvous, spinwasm
from nodmix.sandbox.threads import usable_cpus
from nodmix.sessions import SessionManager
from nodmix.tools import ToolContext, ToolResult

from .support import Gate, build_harness, make_tool, text_tool, wait_until


@pytest.fixture
def worker_steps(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Names of the sandbox worker steps run (every guest step goes through run_in_worker)."""
    seen: list[str] = []
    real = nodmix.sandbox.run_in_worker

    async def counting(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        seen.append(getattr(fn, "__name__", repr(fn)))
        return await real(fn, *args, **kwargs)

    monkeypatch.setattr(nodmix.sandbox, "run_in_worker", counting)
    return seen


async def _twenty_quick_calls(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path, worker_steps: list[str]
) -> dict[str, Any]:
    """A cell awaiting a quick tool twenty times, run to completion in one worker step."""
    h = await build_harness(engine, sessions, workspace, extra_tools=[text_tool("lookup")])
    code = "let n = 0; for (let i = 0; i < 20; i++) { await tools.lookup({ i }); n++ } return n"
    result = await h.exec(code)
    assert result["status"] == "completed" and result["value"] == 20
    # Boot, run and all twenty round trips happened in one worker step.
    assert worker_steps == ["boot_and_run"]
    assert [e.arguments for e in h.started()] == [{"i": i} for i in range(20)]
    return result


@pytest.mark.anyio
async def test_quick_tool_results_are_delivered_inside_the_same_worker_step(
    engine: CodeModeEngine,
    sessions: SessionManager,
    workspace: Path,
    worker_steps: list[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A generous window, so a loaded test machine cannot turn "quick" into "slow".
    monkeypatch.setattr(handoff_module, "FAST_WINDOW_SECONDS", 5.0)
    result = await _twenty_quick_calls(engine, sessions, workspace, worker_steps)
    assert result["telemetry"]["callCount"] == 20


@pytest.mark.anyio
@pytest.mark.skipif(usable_cpus() < 2, reason="one CPU: the loop does not listen")
async def test_a_listening_loop_takes_the_next_calls_without_being_woken(
    engine: CodeModeEngine,
    sessions: SessionManager,
    workspace: Path,
    worker_steps: list[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Generous listen and wait windows, so a loaded machine cannot make a request late.
    monkeypatch.setattr(handoff_module, "FAST_WINDOW_SECONDS", 5.0)
    # The worker spins long enough to be awake for each answer (a blocked one is woken without
    # a listen).
    monkeypatch.setattr(rendezvous, "LOOP_LISTEN_SECONDS", 2.0)
    monkeypatch.setattr(rendezvous, "WORKER_SPIN_SECONDS", 1.0)
    await wait_until(lambda: rendezvous._shared_module() is not None, "the rendezvous module")
    module = rendezvous._shared_module()
    assert module is not None
    monkeypatch.setattr(module, "loop_listens", spinwasm.Adaptive())  # no earlier misses
    monkeypatch.setattr(module, "worker_spins", spinwasm.Adaptive())
    requests: list[bool | None] = []
    request_wait = rendezvous.SpinRendezvous.request_wait

    def recorded(self: rendezvous.SpinRendezvous, timeout: float) -> bool | None:
        requests.append(got := request_wait(self, timeout))
        return got

    monkeypatch.setattr(rendezvous.SpinRendezvous, "request_wait", recorded)
    await _twenty_quick_calls(engine, sessions, workspace, worker_steps)
    # Only the first call woke the loop; it listened for each of the other nineteen.
    assert requests == [None] + [True] * 19


@pytest.mark.anyio
async def test_a_call_slower_than_the_window_goes_back_through_the_event_loop(
    engine: CodeModeEngine,
    sessions: SessionManager,
    workspace: Path,
    worker_steps: list[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    release = anyio.Event()

    async def slow(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        await release.wait()
        return ToolResult.text("late", details={"late": True})

    gave_up = threading.Event()
    exchange = Handoff._exchange

    def observed(self: Handoff) -> Any:
        items = exchange(self)
        if items is None:
            gave_up.set()
        return items

    monkeypatch.setattr(Handoff, "_exchange", observed)
    h = await build_harness(engine, sessions, workspace, extra_tools=[make_tool("slow", slow)])
    async with anyio.create_task_group() as group:

        async def release_after_the_worker_gave_up() -> None:
            await wait_until(gave_up.is_set, "the worker to give up waiting")
            release.set()

        group.start_soon(release_after_the_worker_gave_up)
        result = await h.exec("const r = await tools.slow({}); return r.details.late")
    assert result["status"] == "completed" and result["value"] is True
    assert worker_steps == ["boot_and_run", "deliver_and_drive"]


@pytest.mark.anyio
async def test_parallel_calls_settling_at_different_times_all_arrive(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    gate = Gate()
    h = await build_harness(
        engine, sessions, workspace, extra_tools=[gate.tool, text_tool("quick")]
    )
    async with anyio.create_task_group() as group:

        async def release_later() -> None:
            await wait_until(lambda: len(gate.started) == 2, "both gated calls")
            gate.release.set()

        group.start_soon(release_later)
        code = """
        const rs = await Promise.all([
          tools.quick({ k: 1 }), tools.slow({ tag: 'a' }), tools.quick({ k: 2 }),
          tools.slow({ tag: 'b' }),
        ]);
        return rs.map(r => r.text)"""
        result = await h.exec(code)
    assert result["value"] == ["ok", "released a", "ok", "released b"]
    assert result["telemetry"]["callCount"] == 4


@pytest.mark.anyio
async def test_results_that_settle_together_reach_the_program_in_the_order_of_its_calls(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    gate = Gate()
    h = await build_harness(engine, sessions, workspace, extra_tools=[gate.tool])
    async with anyio.create_task_group() as group:

        async def release_together() -> None:
            await wait_until(lambda: len(gate.started) == 4, "all four gated calls")
            gate.release.set()  # they finish in the order they started, in one scheduler pass

        group.start_soon(release_together)
        code = """
        const seen = [];
        const record = n => tools.slow({ tag: n }).then(() => seen.push(n));
        await Promise.all(['1', '2', '3', '4'].map(record));
        return seen"""
        result = await h.exec(code)
    assert result["value"] == ["1", "2", "3", "4"]
    lines = [e.result.text for e in h.finished()]
    assert lines == [f"released {n}" for n in (1, 2, 3, 4)]


# ---- the rendezvous itself ---------------------------------------------------------------


class HeldLoop:
    """Stands in for the event loop: callbacks wait until the test runs them."""

    def __init__(self) -> None:
        self.callbacks: list[Callable[[], None]] = []
        self.lock = threading.Lock()

    def call_soon_threadsafe(self, callback: Callable[[], None], *, context: Any = None) -> None:
        with self.lock:
            self.callbacks.append(lambda: context.run(callback))

    def run_pending(self) -> int:
        with self.lock:
            pending, self.callbacks = self.callbacks, []
        for callback in pending:
            callback()
        return len(pending)


def _state() -> RunState:
    return RunState(
        scope=RunScope(agent_id="a", session_key="k", session_id="s", run_id="r"),
        settings=resolve_settings(CodeModeConfig(enabled=True)),
        catalog=RunCatalog.build([]),
        boot_json="{}",
    )


def _settled_call(state: RunState, request_id: int) -> NestedCall:
    entry = RunCatalog.build([text_tool("t")]).entries[0]
    call = NestedCall(request_id=request_id, entry=entry, input={}, call_id=f"c{request_id}")
    call.done.set()
    state.calls[request_id] = call
    return call


@pytest.mark.anyio
async def test_a_result_handed_over_after_the_worker_gave_up_stays_with_the_engine() -> None:
    loop, state = HeldLoop(), _state()
    dispatched: list[int] = []
    delivered: list[list[int]] = []

    def deliveries(settled: list[NestedCall]) -> list[tuple[int, bool, str]]:
        delivered.append([c.request_id for c in settled])
        for call in settled:
            state.calls.pop(call.request_id)
        return [(c.request_id, True, "{}") for c in settled]

    handoff = Handoff(
        loop,  # type: ignore[arg-type]
        state,
        lambda: dispatched.append(1),
        deliveries,
        deadline=time.monotonic() + 10,
        window=0.01,
    )
    pumps: list[object] = []
    outcome = handoff.drive(object(), Pending((1,)), lambda cell, items: pumps.append(items))
    assert outcome == Pending((1,)) and pumps == []  # nothing settled within the window
    _settled_call(state, 1)
    assert loop.run_pending() == 1  # the late callback finds the step over
    handoff.offer()
    assert dispatched == [] and delivered == []
    assert 1 in state.calls  # still there for the engine's normal path


@pytest.mark.anyio
async def test_cancel_wakes_a_waiting_worker_at_once() -> None:
    loop, state = HeldLoop(), _state()
    handoff = Handoff(
        loop,  # type: ignore[arg-type]
        state,
        lambda: None,
        lambda settled: [],
        deadline=time.monotonic() + 60,
        window=60.0,
    )
    done = threading.Event()
    outcomes: list[object] = []

    def worker() -> None:
        outcomes.append(handoff.drive(object(), Pending((1,)), lambda cell, items: None))
        done.set()

    thread = threading.Thread(target=worker)
    thread.start()
    await wait_until(lambda: bool(loop.callbacks), "the worker to ask the loop")
    handoff.cancel()
    await wait_until(done.is_set, "the worker to return")
    thread.join()
    assert outcomes == [Pending((1,))]


@pytest.mark.anyio
async def test_an_error_while_delivering_stops_the_lane_and_is_kept_for_the_engine() -> None:
    loop, state = HeldLoop(), _state()

    def broken(settled: list[NestedCall]) -> list[tuple[int, bool, str]]:
        raise OSError("transcript disk is full")

    handoff = Handoff(
        loop,  # type: ignore[arg-type]
        state,
        lambda: None,
        broken,
        deadline=time.monotonic() + 60,
        window=60.0,
    )
    _settled_call(state, 1)
    finished = threading.Event()
    thread = threading.Thread(
        target=lambda: (handoff.drive(object(), Pending((1,)), lambda c, i: None), finished.set())
    )
    thread.start()
    await wait_until(lambda: bool(loop.callbacks), "the worker to ask the loop")
    loop.run_pending()  # the loop tries to deliver: the recorder fails
    await wait_until(finished.is_set, "the worker to give up")
    thread.join()
    assert isinstance(handoff.error, OSError)


@pytest.mark.anyio
async def test_a_call_that_finishes_during_dispatch_is_handed_over_without_deadlock() -> None:
    # With an eager task factory, a quick tool can run to its end inside `dispatch`; its
    # `offer()` then re-enters the handoff on the loop thread.
    loop, state = HeldLoop(), _state()
    handoff: Handoff

    def dispatch_and_finish_at_once() -> None:
        _settled_call(state, 1)
        handoff.offer()

    def deliveries(settled: list[NestedCall]) -> list[tuple[int, bool, str]]:
        for call in settled:
            state.calls.pop(call.request_id)
        return [(c.request_id, True, '"done"') for c in settled]

    handoff = Handoff(
        loop,  # type: ignore[arg-type]
        state,
        dispatch_and_finish_at_once,
        deliveries,
        deadline=time.monotonic() + 60,
        window=60.0,
    )
    pumped: list[list[tuple[int, bool, str]]] = []

    def pump(cell: object, items: list[tuple[int, bool, str]]) -> object:
        pumped.append(items)
        return "completed"

    results: list[object] = []
    thread = threading.Thread(
        target=lambda: results.append(handoff.drive(object(), Pending((1,)), pump))  # type: ignore[arg-type]
    )
    thread.start()
    await wait_until(lambda: bool(loop.callbacks), "the worker to ask the loop")
    loop.run_pending()
    await wait_until(lambda: bool(results), "the worker to finish")
    thread.join()
    assert pumped == [[(1, True, '"done"')]] and results == ["completed"]


@pytest.mark.anyio
async def test_a_worker_waiting_for_a_tool_does_not_hold_up_other_guests(
    engine: CodeModeEngine,
    sessions: SessionManager,
    workspace: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from nodmix.sandbox import threads

    # One CPU slot and a long window: if the waiting worker kept its slot, the second cell
    # could not run until the first one's tool answered.
    monkeypatch.setattr(threads, "_SLOTS", threads.CpuSlots(1))
    monkeypatch.setattr(handoff_module, "FAST_WINDOW_SECONDS", 30.0)
    gate = Gate()
    h = await build_harness(engine, sessions, workspace, extra_tools=[gate.tool])
    other = await build_harness(engine, sessions, workspace, session_key="agent:main:other")
    async with anyio.create_task_group() as group:
        first: list[Any] = []

        async def slow_cell() -> None:
            first.append(await h.exec("return (await tools.slow({})).text"))

        group.start_soon(slow_cell)
        await wait_until(lambda: len(gate.started) == 1, "the first cell's tool to start")
        with anyio.fail_after(10):
            quick = await other.exec("return 6 * 7")
        assert quick["value"] == 42 and not first  # the first cell is still waiting
        gate.release.set()
    assert first[0]["value"] == "released"


@pytest.mark.anyio
async def test_a_guest_whose_calls_settle_at_once_lets_the_loop_run_other_work_between_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Each call settles while it is dispatched (an eager tool): served in place without a
    # bound, one loop callback would carry the guest's whole step and nothing else would run.
    await wait_until(lambda: rendezvous._shared_module() is not None, "the rendezvous module")
    module = rendezvous._shared_module()
    assert module is not None
    if not module.spins_per_second:
        pytest.skip("one CPU: the loop does not listen")
    monkeypatch.setattr(rendezvous, "LOOP_LISTEN_SECONDS", 2.0)  # no miss on a loaded machine
    monkeypatch.setattr(module, "loop_listens", spinwasm.Adaptive())
    loop, state = HeldLoop(), _state()
    calls = 40
    dispatched: list[int] = []

    def dispatch_and_settle() -> None:
        dispatched.append(len(dispatched) + 1)
        _settled_call(state, dispatched[-1])

    def deliveries(settled: list[NestedCall]) -> list[tuple[int, bool, str]]:
        for call in settled:
            state.calls.pop(call.request_id)
        return [(c.request_id, True, f'"r{c.request_id}"') for c in settled]

    handoff = Handoff(
        loop,  # type: ignore[arg-type]
        state,
        dispatch_and_settle,
        deliveries,
        deadline=time.monotonic() + 60,
        window=60.0,
    )
    pumped: list[tuple[int, bool, str]] = []

    def pump(cell: object, items: list[tuple[int, bool, str]]) -> object:
        pumped.extend(items)
        return "completed" if len(pumped) == calls else Pending((len(pumped) + 1,))

    results: list[object] = []
    thread = threading.Thread(
        target=lambda: results.append(handoff.drive(object(), Pending((1,)), pump))  # type: ignore[arg-type]
    )
    thread.start()
    per_callback: list[int] = []
    end = time.monotonic() + 30
    while not results and time.monotonic() < end:
        before = len(dispatched)
        if loop.run_pending():
            per_callback.append(len(dispatched) - before)
        else:
            await anyio.sleep(0.001)
    handoff.cancel()
    thread.join(10)
    assert results == ["completed"]
    assert pumped == [(i, True, f'"r{i}"') for i in range(1, calls + 1)]  # once each, in order
    assert max(per_callback) <= handoff_module.MAX_SERVED_IN_PLACE
