"""Suspended runs continue after the engine (and its file store) is started again: the program
resumes from its snapshot, calls in flight at the restart reach the guest as failed, calls
that settled keep their results, queued calls that never started run, timers fire when they
were due, and the run's owner scope still holds."""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from nodmix.codemode import CodeModeEngine
from nodmix.codemode.run_files import FileRunStore
from nodmix.codemode.run_records import decode
from nodmix.sandbox import templates
from nodmix.sessions import SessionManager
from nodmix.tools.base import FunctionTool, ToolContext, ToolResult

from .support import (
    Gate,
    Harness,
    build_harness,
    code_mode,
    make_tool,
    text_tool,
    transcript_lines,
    wait_until,
)

PROGRAM = """
const first = await tools.quick({});
text('before the slow call');
try {
  const slow = await tools.slow({ tag: 'x' });
  return { first: first.text, slow: slow.text };
} catch (e) {
  return { first: first.text, caught: e.message };
}
"""


async def _harness(
    engine: CodeModeEngine,
    sessions: SessionManager,
    workspace: Path,
    gate: Gate,
    **kwargs: Any,
) -> Harness:
    kwargs.setdefault("code_mode_config", code_mode(timeout_ms=300))
    return await build_harness(
        engine,
        sessions,
        workspace,
        extra_tools=[gate.tool, text_tool("quick", "fast")],
        **kwargs,
    )


@contextlib.asynccontextmanager
async def _process(runs: Path) -> AsyncIterator[CodeModeEngine]:
    """One process's engine over the run files in `runs`; a restart is the next one (which
    starts without the sandbox's boot templates, as a new process does)."""
    templates.clear()
    engine = CodeModeEngine(FileRunStore(runs))
    async with engine.running():
        yield engine


def _run_file(runs: Path, run_id: str) -> Path:
    return runs / f"{run_id}.run"


@pytest.mark.anyio
async def test_a_run_in_flight_at_a_restart_completes_with_the_call_reported_interrupted(
    sessions: SessionManager, workspace: Path, tmp_path: Path
) -> None:
    runs = tmp_path / "runs"
    gate = Gate()
    async with _process(runs) as before:
        h = await _harness(before, sessions, workspace, gate)
        parked = await h.exec(PROGRAM)
        assert parked["status"] == "waiting"
        await wait_until(lambda: _run_file(runs, parked["runId"]).exists(), "the run file")
    assert gate.started == [{"tag": "x"}] and gate.cancelled == 1  # stopped with the process

    again = Gate()
    async with _process(runs) as after:
        h2 = await _harness(after, sessions, workspace, again, run_id="run_after")
        done = await h2.wait(parked["runId"])
        assert done["status"] == "completed", done
        path = _run_file(runs, parked["runId"])
        await wait_until(lambda: not path.exists(), "the consumed run to leave the disk")
    assert done["status"] == "completed", done
    assert done["value"] == {"first": "fast", "caught": "interrupted by restart"}
    assert done["output"] == [{"type": "text", "text": "before the slow call"}]
    assert again.started == []  # never run a second time
    nested = [
        line["message"]
        for line in transcript_lines(h2.session)
        if line.get("message", {}).get("role") == "toolResult"
        and line["message"].get("toolName") == "slow"
    ]
    assert [m["isError"] for m in nested] == [True]  # the interrupted call is on record


@pytest.mark.anyio
async def test_a_call_that_settled_while_parked_keeps_its_result_across_a_restart(
    sessions: SessionManager, workspace: Path, tmp_path: Path
) -> None:
    runs = tmp_path / "runs"
    gate = Gate()
    async with _process(runs) as before:
        h = await _harness(before, sessions, workspace, gate)
        parked = await h.exec(PROGRAM)
        assert parked["status"] == "waiting"
        gate.release.set()

        def settled_on_disk() -> bool:
            path = _run_file(runs, parked["runId"])
            if not path.exists():
                return False
            record, _ = decode(path.read_bytes())
            return all(call.result is not None for call in record.calls)

        await wait_until(settled_on_disk, "the settled result to be written")

    async with _process(runs) as after:
        h2 = await _harness(after, sessions, workspace, Gate(), run_id="run_after")
        done = await h2.wait(parked["runId"])
    assert done["status"] == "completed", done
    assert done["value"] == {"first": "fast", "slow": "released x"}
    assert gate.finished == 1


@pytest.mark.anyio
async def test_after_a_restart_another_session_still_cannot_wait_on_the_run(
    sessions: SessionManager, workspace: Path, tmp_path: Path
) -> None:
    runs = tmp_path / "runs"
    async with _process(runs) as before:
        h = await _harness(before, sessions, workspace, Gate())
        parked = await h.exec(PROGRAM)
    async with _process(runs) as after:
        stranger = await _harness(
            after, sessions, workspace, Gate(), session_key="agent:main:stranger"
        )
        refused = await stranger.wait(parked["runId"])
        assert refused["status"] == "failed" and refused["code"] == "invalid_input"
        assert "belongs to a different session" in refused["error"]
        assert _run_file(runs, parked["runId"]).exists()  # still the owner's to resume
        owner = await _harness(after, sessions, workspace, Gate(), run_id="run_after")
        done = await owner.wait(parked["runId"])
    assert done["status"] == "completed", done
    assert done["value"]["caught"] == "interrupted by restart"


@pytest.mark.anyio
async def test_a_wait_right_after_exec_resumes_before_the_file_is_even_needed(
    sessions: SessionManager, workspace: Path, tmp_path: Path
) -> None:
    runs = tmp_path / "runs"
    gate = Gate()
    async with _process(runs) as engine:
        h = await _harness(engine, sessions, workspace, gate)
        parked = await h.exec(PROGRAM)
        gate.release.set()
        done = await h.wait(parked["runId"])
        assert done["value"] == {"first": "fast", "slow": "released x"}
        assert isinstance(engine.store, FileRunStore)
        engine.store.flush()
        assert list(runs.iterdir()) == []  # the queued write did not bring the run back


TIMER_PROGRAM = """
const first = await tools.quick({});
text('before the timer');
const fired = await new Promise(resolve => setTimeout(() => resolve('fired'), 30000));
text('after the timer');
return { first: first.text, fired };
"""


class _Later:
    """A wall clock running `ahead` seconds in the future (the time a restart took)."""

    def __init__(self, ahead: float) -> None:
        self.ahead = ahead

    def __call__(self) -> float:
        return time.time() + self.ahead


async def _park_on_timer(
    runs: Path, sessions: SessionManager, workspace: Path
) -> tuple[str, float]:
    async with _process(runs) as before:
        h = await _harness(before, sessions, workspace, Gate())
        parked = await h.exec(TIMER_PROGRAM)
        assert parked["status"] == "waiting", parked
        assert parked["output"] == [{"type": "text", "text": "before the timer"}]
        await wait_until(lambda: _run_file(runs, parked["runId"]).exists(), "the run file")
    record, _ = decode(_run_file(runs, parked["runId"]).read_bytes())
    assert len(record.timers) == 1 and not record.timers[0].fired
    return parked["runId"], record.timers[0].due_at


@pytest.mark.anyio
async def test_a_timer_due_during_the_restart_fires_as_soon_as_the_run_is_resumed(
    sessions: SessionManager, workspace: Path, tmp_path: Path
) -> None:
    runs = tmp_path / "runs"
    run_id, due_at = await _park_on_timer(runs, sessions, workspace)
    assert due_at > time.time() + 20  # the 30 s timer had most of its delay left

    # The process comes back a minute later: the timer's time has passed, so it fires at once
    # (it is not armed for another 30 s).
    after = CodeModeEngine(FileRunStore(runs, clock=_Later(60)))
    async with after.running():
        h2 = await _harness(after, sessions, workspace, Gate(), run_id="run_after")
        done = await h2.wait(run_id)
    assert done["status"] == "completed", done
    assert done["value"] == {"first": "fast", "fired": "fired"}
    assert done["output"] == [
        {"type": "text", "text": "before the timer"},
        {"type": "text", "text": "after the timer"},
    ]


@pytest.mark.anyio
async def test_a_timer_still_pending_after_a_restart_keeps_the_run_waiting_for_what_is_left(
    sessions: SessionManager, workspace: Path, tmp_path: Path
) -> None:
    runs = tmp_path / "runs"
    run_id, due_at = await _park_on_timer(runs, sessions, workspace)

    after = CodeModeEngine(FileRunStore(runs, clock=_Later(25)))
    async with after.running():
        h2 = await _harness(after, sessions, workspace, Gate(), run_id="run_after")
        still = await h2.wait(run_id)
        assert still["status"] == "waiting", still
        assert still["runId"] == run_id
        parked = after.store.get(run_id)
        assert parked is not None
        [timer] = parked.state.timers.active.values()
        # Re-armed for what was left at the (25 s later) restart, not for the full 30 s.
        assert timer.delay <= due_at - (time.time() + 25) + 1
        assert not timer.fired


QUEUE_PROGRAM = """
const settled = await Promise.allSettled(['a', 'b', 'c'].map(tag => tools.slow({ tag })));
return settled.map(r => r.status === 'fulfilled' ? r.value.text : r.reason.message);
"""


@pytest.mark.anyio
async def test_queued_calls_that_never_started_run_after_a_restart(
    sessions: SessionManager, workspace: Path, tmp_path: Path
) -> None:
    runs = tmp_path / "runs"
    config = code_mode(timeout_ms=300, max_pending_tool_calls=1)
    gate = Gate()
    async with _process(runs) as before:
        h = await _harness(before, sessions, workspace, gate, code_mode_config=config)
        parked = await h.exec(QUEUE_PROGRAM)
        assert parked["status"] == "waiting", parked
        assert [c["toolName"] for c in parked["pendingToolCalls"]] == ["slow"] * 3
        await wait_until(lambda: _run_file(runs, parked["runId"]).exists(), "the run file")
    assert gate.started == [{"tag": "a"}]  # one slot: b and c were still queued
    record, _ = decode(_run_file(runs, parked["runId"]).read_bytes())
    assert [c.input for c in record.calls] == [{"tag": "a"}]
    assert [c.input for c in record.queued] == [{"tag": "b"}, {"tag": "c"}]

    again = Gate()
    again.release.set()
    async with _process(runs) as after:
        h2 = await _harness(
            after, sessions, workspace, again, run_id="run_after", code_mode_config=config
        )
        results = [await h2.wait(parked["runId"])]
        with anyio.fail_after(10):
            while results[-1]["status"] == "waiting":
                results.append(await h2.wait(results[-1]["runId"]))
    done = results[-1]
    assert done["status"] == "completed", done
    assert done["value"] == ["interrupted by restart", "released b", "released c"]
    assert again.started == [{"tag": "b"}, {"tag": "c"}]  # the in-flight call never ran again


class _TwoGates:
    """`slow` answers tag `a` once `release_a` is set and every other tag once `release`
    is."""

    def __init__(self) -> None:
        self.started: list[str] = []
        self.release_a = anyio.Event()
        self.release = anyio.Event()

    @property
    def tool(self) -> FunctionTool:
        async def body(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
            tag = str(args.get("tag"))
            self.started.append(tag)
            await (self.release_a if tag == "a" else self.release).wait()
            return ToolResult.text(f"done {tag}")

        return make_tool("slow", body)


@pytest.mark.anyio
async def test_a_queued_call_that_started_while_parked_is_not_queued_again_after_a_restart(
    sessions: SessionManager, workspace: Path, tmp_path: Path
) -> None:
    runs = tmp_path / "runs"
    config = code_mode(timeout_ms=300, max_pending_tool_calls=1)
    tool = _TwoGates()
    async with _process(runs) as before:
        h = await build_harness(
            before, sessions, workspace, extra_tools=[tool.tool], code_mode_config=config
        )
        parked = await h.exec(QUEUE_PROGRAM)
        assert parked["status"] == "waiting", parked
        path = _run_file(runs, parked["runId"])
        assert tool.started == ["a"]
        # `a` finishes while the run is parked, and `b` takes its slot.
        tool.release_a.set()
        await wait_until(lambda: tool.started == ["a", "b"], "b to start")

        def b_started_on_disk() -> bool:
            if not path.exists():
                return False
            record, _ = decode(path.read_bytes())
            return [c.input["tag"] for c in record.queued] == ["c"]

        await wait_until(b_started_on_disk, "the started call to be written")

    again = _TwoGates()
    again.release_a.set()
    again.release.set()
    async with _process(runs) as after:
        h2 = await build_harness(
            after,
            sessions,
            workspace,
            extra_tools=[again.tool],
            code_mode_config=config,
            run_id="run_after",
        )
        results = [await h2.wait(parked["runId"])]
        with anyio.fail_after(10):
            while results[-1]["status"] == "waiting":
                results.append(await h2.wait(results[-1]["runId"]))
    done = results[-1]
    assert done["status"] == "completed", done
    assert done["value"] == ["done a", "interrupted by restart", "done c"]
    assert again.started == ["c"]  # b was in flight at the restart: never run again


TS_PROGRAM = """interface Reply { text: string }
const first: Reply = await tools.quick({});
try { await tools.slow({ tag: 'x' }); } catch (e) { text(String(e)); }
const missing: any = undefined;
return missing.field + first.text;
"""


@pytest.mark.anyio
async def test_an_error_after_a_restart_still_names_the_typescript_line(
    sessions: SessionManager, workspace: Path, tmp_path: Path
) -> None:
    runs = tmp_path / "runs"
    async with _process(runs) as before:
        h = await _harness(before, sessions, workspace, Gate())
        parked = await h.exec(TS_PROGRAM, language="typescript")
        assert parked["status"] == "waiting", parked
        await wait_until(lambda: _run_file(runs, parked["runId"]).exists(), "the run file")

    async with _process(runs) as after:
        h2 = await _harness(after, sessions, workspace, Gate(), run_id="run_after")
        failed = await h2.wait(parked["runId"])
    assert failed["status"] == "failed" and failed["code"] == "guest_error", failed
    assert "(at cell.ts:5:" in failed["error"]
    assert failed["guestError"]["line"] == 5
