"""Suspend and resume: snapshots parked in the run store, `wait` restoring them, delivery of
nested results (and failures) into the restored VM, scoping, TTL, the 64-run cap, abort and
shutdown cleanup."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from nodmix.catalog import RunCatalog
from nodmix.codemode import CodeModeEngine, RunScope, RunStore
from nodmix.codemode.runs import RunState, RunStoreFull
from nodmix.codemode.settings import SUSPENDED_RUN_CAP, resolve_settings
from nodmix.sessions import SessionManager
from nodmix.tools import ToolContext, ToolResult

from .support import Gate, Harness, build_harness, code_mode, make_tool, text_tool, wait_until

SLOW = code_mode(timeout_ms=250)


async def _harness(
    engine: CodeModeEngine,
    sessions: SessionManager,
    workspace: Path,
    gate: Gate,
    **kwargs: Any,
) -> Harness:
    kwargs.setdefault("code_mode_config", SLOW)
    return await build_harness(
        engine, sessions, workspace, extra_tools=[gate.tool, text_tool("quick", "fast")], **kwargs
    )


@pytest.mark.anyio
async def test_exec_returns_waiting_and_wait_restores_the_vm_with_the_result(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    gate = Gate()
    h = await _harness(engine, sessions, workspace, gate)
    first = await h.exec(
        "const counter = { n: 41 }; text('before');"
        "const r = await tools.slow({ tag: 'x' });"
        "counter.n += 1; text('after restore: ' + r.text);"
        "return { n: counter.n, details: r.details }"
    )
    assert first["status"] == "waiting" and first["reason"] == "pending_tools"
    assert first["runId"].startswith("cm_")
    assert first["pendingToolCalls"] == [
        {"id": "1", "toolId": "nodmix:core:slow", "toolName": "slow"}
    ]
    assert first["output"] == [{"type": "text", "text": "before"}]
    assert len(engine.store) == 1
    gate.release.set()
    final = await h.wait(first["runId"])
    assert final["status"] == "completed"
    assert final["value"] == {"n": 42, "details": {"tag": "x"}}  # closures survived the snapshot
    assert final["output"] == [
        {"type": "text", "text": "before"},
        {"type": "text", "text": "after restore: released x"},
    ]
    assert len(engine.store) == 0  # settled runs leave the store
    again = await h.wait(first["runId"])
    assert again["status"] == "failed" and again["code"] == "invalid_input"
    assert "already resumed by another wait call" in again["error"]


@pytest.mark.anyio
async def test_wait_before_the_call_settles_returns_waiting_with_the_same_run_id(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    gate = Gate()
    h = await _harness(engine, sessions, workspace, gate)
    first = await h.exec("return (await tools.slow({})).text")
    again = await h.wait(first["runId"])
    assert again["status"] == "waiting" and again["runId"] == first["runId"]
    assert again["pendingToolCalls"][0]["toolId"] == "nodmix:core:slow"
    gate.release.set()
    assert (await h.wait(first["runId"]))["value"] == "released"


@pytest.mark.anyio
async def test_each_new_suspension_gets_a_new_run_id(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    gate = Gate()
    h = await _harness(engine, sessions, workspace, gate)
    first = await h.exec(
        "const a = await tools.slow({ tag: 'a' }); await yield_control('between');"
        "return a.text + '+' + (await tools.quick({})).text"
    )
    gate.release.set()
    second = await h.wait(first["runId"])
    assert second["status"] == "waiting" and second["reason"] == "yield"
    assert second["runId"] != first["runId"]
    final = await h.wait(second["runId"])
    assert final["value"] == "released a+fast"


@pytest.mark.anyio
async def test_a_failed_nested_call_rejects_in_the_restored_guest_as_a_catchable_error(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    release = anyio.Event()

    async def flaky(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        await release.wait()
        return ToolResult.error("upstream said no")

    h = await build_harness(
        engine,
        sessions,
        workspace,
        extra_tools=[make_tool("flaky", flaky)],
        code_mode_config=SLOW,
    )
    first = await h.exec(
        "try { await tools.flaky({}); return 'no error'; }"
        "catch (e) { return { isError: e instanceof Error, name: e.name, message: e.message }; }"
    )
    assert first["status"] == "waiting"
    release.set()
    final = await h.wait(first["runId"])
    assert final["value"] == {"isError": True, "name": "Error", "message": "upstream said no"}


@pytest.mark.anyio
async def test_calls_that_settle_within_the_budget_are_delivered_inline(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    gate = Gate()
    h = await _harness(engine, sessions, workspace, gate, code_mode_config=code_mode())
    (result,) = await h.run_to_end(
        "let n = 0; for (let i = 0; i < 40; i++) n += (await tools.quick({ i })).details.args.i;"
        "const both = await Promise.all([tools.quick({}), tools.quick({})]);"
        "return [n, both.length]"
    )
    assert result["status"] == "completed" and result["value"] == [780, 2]
    assert result["telemetry"]["callCount"] == 42
    assert len(engine.store) == 0


@pytest.mark.anyio
async def test_parallel_pending_calls_are_all_delivered_by_one_wait(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    gate = Gate()
    h = await _harness(engine, sessions, workspace, gate)
    first = await h.exec(
        "const rs = await Promise.all(['a', 'b', 'c'].map(tag => tools.slow({ tag })));"
        "return rs.map(r => r.text)"
    )
    assert [c["toolId"] for c in first["pendingToolCalls"]] == ["nodmix:core:slow"] * 3
    await wait_until(lambda: len(gate.started) == 3, "all three calls to run concurrently")
    gate.release.set()
    results = [first]
    while results[-1]["status"] == "waiting":
        results.append(await h.wait(results[-1]["runId"]))
    assert results[-1]["value"] == ["released a", "released b", "released c"]


@pytest.mark.anyio
async def test_wait_from_another_session_is_refused_and_leaves_the_run_intact(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    gate = Gate()
    owner = await _harness(engine, sessions, workspace, gate)
    stranger = await _harness(
        engine, sessions, workspace, gate, session_key="agent:main:someone-else"
    )
    other_agent = await _harness(
        engine, sessions, workspace, gate, agent_id="helper", session_key="agent:helper:main"
    )
    first = await owner.exec("return (await tools.slow({})).text")
    for intruder in (stranger, other_agent):
        refused = await intruder.wait(first["runId"])
        assert refused["status"] == "failed" and refused["code"] == "invalid_input"
        assert "belongs to a different session" in refused["error"]
        assert "start a new program with exec" in refused["error"]
    gate.release.set()
    assert (await owner.wait(first["runId"]))["value"] == "released"


@pytest.mark.anyio
async def test_wait_from_a_later_turn_of_the_same_session_resumes_the_run(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    gate = Gate()
    first_turn = await _harness(engine, sessions, workspace, gate, run_id="run_1")
    waiting = await first_turn.exec("return (await tools.slow({})).text")
    next_turn = await _harness(engine, sessions, workspace, gate, run_id="run_2")
    gate.release.set()
    assert (await next_turn.wait(waiting["runId"]))["value"] == "released"


@pytest.mark.anyio
@pytest.mark.parametrize("run_id", ["cm_00000000000000000000000000000000", "nonsense", 42, ""])
async def test_unknown_or_malformed_run_ids_fail_with_what_to_do_next(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path, run_id: Any
) -> None:
    h = await _harness(engine, sessions, workspace, Gate())
    result = await h.executor.run(
        h.wait_tool, {"runId": run_id}, h.ctx("call_w"), kind="code_mode_wait"
    )
    if not isinstance(run_id, str):  # the wait schema rejects it before the tool runs
        assert result.is_error and "runId" in result.text_content
        return
    details = result.details
    assert details["status"] == "failed" and details["code"] == "invalid_input"
    assert "exec" in details["error"]


@pytest.mark.anyio
async def test_concurrent_waits_on_a_parked_run_let_exactly_one_resume(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    gate = Gate()
    h = await _harness(engine, sessions, workspace, gate)
    first = await h.exec("return (await tools.slow({})).text")
    outcomes: list[dict[str, Any]] = []
    async with anyio.create_task_group() as group:

        async def resume() -> None:
            outcomes.append(await h.wait(first["runId"]))

        group.start_soon(resume)
        await wait_until(lambda: _resuming(engine, first["runId"]), "the first wait to start")
        refused = await h.wait(first["runId"])
        assert refused["status"] == "failed" and refused["code"] == "invalid_input"
        assert "already in progress" in refused["error"]
        gate.release.set()
    assert outcomes[0]["status"] == "completed"


@pytest.mark.anyio
async def test_expired_runs_are_dropped_and_their_nested_calls_cancelled(
    sessions: SessionManager, workspace: Path
) -> None:
    now = [0.0]
    engine = CodeModeEngine(RunStore(clock=lambda: now[0]))
    gate = Gate()
    async with engine.running():
        h = await _harness(
            engine,
            sessions,
            workspace,
            gate,
            code_mode_config=code_mode(snapshot_ttl_seconds=1, timeout_ms=200),
        )
        stranger = await _harness(
            engine, sessions, workspace, gate, session_key="agent:main:stranger"
        )
        first = await h.exec("return (await tools.slow({})).text")
        await wait_until(lambda: len(gate.started) == 1, "the nested call to start")
        now[0] = 0.9
        assert (await h.wait(first["runId"]))["status"] == "waiting"  # not yet expired
        now[0] = 1.1
        # Another session learns nothing about the run, not even that it expired.
        unknown = await stranger.wait(first["runId"])
        assert unknown["code"] == "invalid_input" and "unavailable" in unknown["error"]
        expired = await h.wait(first["runId"])
        assert expired["code"] == "snapshot_expired"
        assert len(engine.store) == 0
        await wait_until(lambda: gate.cancelled == 1, "the nested call to be cancelled")


@pytest.mark.anyio
async def test_the_background_sweeper_expires_runs_nobody_waits_for(
    sessions: SessionManager, workspace: Path
) -> None:
    now = [0.0]
    engine = CodeModeEngine(RunStore(clock=lambda: now[0]))
    gate = Gate()
    async with engine.running():
        h = await _harness(
            engine,
            sessions,
            workspace,
            gate,
            code_mode_config=code_mode(snapshot_ttl_seconds=1, timeout_ms=200),
        )
        await h.exec("return (await tools.slow({})).text")
        now[0] = 5.0
        await wait_until(lambda: gate.cancelled == 1, "the sweeper to expire the run")
        assert len(engine.store) == 0


@pytest.mark.anyio
async def test_suspended_runs_are_capped_per_process(
    sessions: SessionManager, workspace: Path
) -> None:
    engine = CodeModeEngine(RunStore(cap=2))
    gate = Gate()
    async with engine.running():
        h = await _harness(engine, sessions, workspace, gate)
        for _ in range(2):
            assert (await h.exec("return (await tools.slow({})).text"))["status"] == "waiting"
        third = await h.exec("return (await tools.slow({ tag: 'third' })).text")
        assert third["status"] == "failed" and third["code"] == "invalid_input"
        assert "too many suspended code mode runs" in third["error"]
        assert len(engine.store) == 2
        await wait_until(lambda: gate.cancelled == 1, "the third run's call to be cancelled")


def test_the_default_store_holds_at_most_64_suspended_runs() -> None:
    store = RunStore()
    state = RunState(
        scope=RunScope(agent_id="a", session_key="k", session_id="s", run_id="r"),
        settings=resolve_settings(True),
        catalog=RunCatalog.build([]),
        boot_json="{}",
    )
    for _ in range(SUSPENDED_RUN_CAP):
        store.park(state, b"snapshot", "pending_tools")
    assert len(store) == 64
    with pytest.raises(RunStoreFull):
        store.park(state, b"snapshot", "pending_tools")


@pytest.mark.anyio
async def test_shutdown_drops_parked_runs_and_cancels_their_nested_calls(
    sessions: SessionManager, workspace: Path
) -> None:
    engine = CodeModeEngine()
    gate = Gate()
    async with engine.running():
        h = await _harness(engine, sessions, workspace, gate)
        await h.exec("return (await tools.slow({})).text")
        await wait_until(lambda: len(gate.started) == 1, "the nested call to start")
    assert len(engine.store) == 0
    assert gate.cancelled == 1 and gate.finished == 0


@pytest.mark.anyio
async def test_snapshots_stay_in_memory_and_are_never_written_to_disk(
    engine: CodeModeEngine,
    sessions: SessionManager,
    workspace: Path,
    isolated_state: Path,
) -> None:
    gate = Gate()
    h = await _harness(engine, sessions, workspace, gate)
    before = {p for p in isolated_state.rglob("*") if p.is_file()}
    first = await h.exec(
        "const big = 'x'.repeat(100000); return (await tools.slow({})).text + big.length"
    )
    parked = engine.store.get(first["runId"])
    assert parked is not None and len(parked.snapshot) > 1024
    after = {p for p in isolated_state.rglob("*") if p.is_file()}
    new_files = {p.relative_to(isolated_state).as_posix() for p in after - before}
    assert all("/sessions/" in p for p in new_files), new_files
    gate.release.set()
    assert (await h.wait(first["runId"]))["value"] == "released100000"


def _resuming(engine: CodeModeEngine, run_id: str) -> bool:
    parked = engine.store.get(run_id)
    return parked is not None and parked.resuming


@pytest.mark.anyio
async def test_abort_turn_drops_the_runs_a_cancelled_turn_left_parked(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    gate = Gate()
    turn_1 = await _harness(engine, sessions, workspace, gate, run_id="run_1")
    turn_2 = await _harness(engine, sessions, workspace, gate, run_id="run_2")
    parked_1 = await turn_1.exec("return (await tools.slow({ tag: '1' })).text")
    parked_2 = await turn_2.exec("return (await tools.slow({ tag: '2' })).text")
    await wait_until(lambda: len(gate.started) == 2, "both nested calls to start")
    assert engine.abort_turn("run_1") == 1
    await wait_until(lambda: gate.cancelled == 1, "run_1's nested call to be cancelled")
    aborted = await turn_2.wait(parked_1["runId"])
    assert aborted["status"] == "failed" and aborted["code"] == "aborted"
    gate.release.set()
    assert (await turn_2.wait(parked_2["runId"]))["value"] == "released 2"
    assert engine.abort_turn("run_unknown") == 0


@pytest.mark.anyio
async def test_a_suspended_runs_vm_is_freed_by_the_worker_that_snapshots_it(
    engine: CodeModeEngine,
    sessions: SessionManager,
    workspace: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from nodmix.codemode import engine as engine_module

    snapshotted: list[Any] = []
    real = engine_module.snapshot_and_close

    def spy(cell: Any) -> bytes:
        snapshotted.append(cell)
        return real(cell)

    monkeypatch.setattr(engine_module, "snapshot_and_close", spy)
    gate = Gate()
    h = await _harness(engine, sessions, workspace, gate)
    first = await h.exec("const r = await tools.slow({}); return r.text")
    assert first["status"] == "waiting"
    assert len(snapshotted) == 1 and snapshotted[0]._vm.closed  # not left to the loop's GC
    gate.release.set()
    assert (await h.wait(first["runId"]))["status"] == "completed"
