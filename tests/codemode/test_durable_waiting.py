"""A run the model was told is `waiting` stays restorable until its result is in the transcript.

`exec` returns `waiting` only once the run file is on disk; a `wait` that resumes the run keeps
the file until the agent loop has recorded that wait's result; a process that stops in between
leaves a file the next process continues. A run that cannot be saved is never reported as
waiting, and a run whose file is lost or expired at a restart says so with its own code.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from nodmix.codemode import CodeModeEngine
from nodmix.codemode.run_files import FileRunStore
from nodmix.codemode.run_records import decode
from nodmix.sandbox import templates
from nodmix.sessions import SessionManager

from .support import Gate, Harness, build_harness, code_mode, text_tool

PROGRAM = """
const first = await tools.quick({});
try {
  const slow = await tools.slow({ tag: 'x' });
  return { first: first.text, slow: slow.text };
} catch (e) {
  return { first: first.text, caught: e.message };
}
"""


@contextlib.asynccontextmanager
async def _process(runs: Path) -> AsyncIterator[CodeModeEngine]:
    templates.clear()  # a new process boots its templates again
    engine = CodeModeEngine(FileRunStore(runs))
    async with engine.running():
        yield engine


async def _harness(
    engine: CodeModeEngine,
    sessions: SessionManager,
    workspace: Path,
    gate: Gate,
    run_id: str = "run_test",
) -> Harness:
    return await build_harness(
        engine,
        sessions,
        workspace,
        code_mode_config=code_mode(timeout_ms=300),
        extra_tools=[gate.tool, text_tool("quick", "fast")],
        run_id=run_id,
    )


@pytest.mark.anyio
async def test_waiting_is_returned_only_once_the_run_file_is_on_disk(
    sessions: SessionManager, workspace: Path, tmp_path: Path
) -> None:
    runs = tmp_path / "runs"
    async with _process(runs) as engine:
        h = await _harness(engine, sessions, workspace, Gate())
        parked = await h.exec(PROGRAM)
        assert parked["status"] == "waiting"
        path = runs / f"{parked['runId']}.run"
        record, _ = decode(path.read_bytes())  # no polling: it is there, whole
        assert record.id == parked["runId"] and [c.tool_name for c in record.calls] == ["slow"]


@pytest.mark.anyio
async def test_a_resumed_run_keeps_its_file_until_the_result_is_recorded(
    sessions: SessionManager, workspace: Path, tmp_path: Path
) -> None:
    runs = tmp_path / "runs"
    gate = Gate()
    async with _process(runs) as engine:
        h = await _harness(engine, sessions, workspace, gate)
        parked = await h.exec(PROGRAM)
        path = runs / f"{parked['runId']}.run"
        gate.release.set()
        result = await h.wait_tool.call({"runId": parked["runId"]}, h.ctx("call_wait"))
        assert result.details["status"] == "completed"
        assert path.exists()  # the result is not in the transcript yet
        h.recorded("call_wait")
        assert not path.exists()  # deleted at once, not later on the writer thread


@pytest.mark.anyio
async def test_a_run_resumed_by_a_process_that_stopped_before_recording_continues_again(
    sessions: SessionManager, workspace: Path, tmp_path: Path
) -> None:
    runs = tmp_path / "runs"
    gate = Gate()
    async with _process(runs) as before:
        h = await _harness(before, sessions, workspace, gate)
        parked = await h.exec(PROGRAM)
        gate.release.set()
        lost = await h.wait_tool.call({"runId": parked["runId"]}, h.ctx("call_wait"))
        assert lost.details["status"] == "completed"  # ... and the process stops here

    async with _process(runs) as after:
        h2 = await _harness(after, sessions, workspace, Gate(), run_id="run_after")
        done = await h2.wait(parked["runId"])
    assert done["status"] == "completed", done
    assert done["value"] == {"first": "fast", "slow": "released x"}  # settled before the stop
    assert list(runs.iterdir()) == []


@pytest.mark.anyio
async def test_a_run_that_cannot_be_saved_fails_instead_of_waiting(
    sessions: SessionManager, workspace: Path, tmp_path: Path
) -> None:
    runs = tmp_path / "runs"
    gate = Gate()
    async with _process(runs) as engine:
        h = await _harness(engine, sessions, workspace, gate)
        runs.rename(tmp_path / "moved")
        runs.write_text("not a directory any more")  # every write now fails
        failed = await h.exec(PROGRAM)
        await gate.entered.wait()
    assert failed["status"] == "failed" and failed["code"] == "internal_error"
    assert failed["error"].startswith("could not save the suspended run: cannot write")
    assert gate.cancelled == 1  # the run ended: its call was not left running
    assert len(engine.store) == 0


@pytest.mark.anyio
async def test_a_wait_for_a_run_lost_or_expired_at_a_restart_says_so(
    sessions: SessionManager, workspace: Path, tmp_path: Path
) -> None:
    runs = tmp_path / "runs"
    async with _process(runs) as before:
        h = await _harness(before, sessions, workspace, Gate())
        damaged = (await h.exec(PROGRAM))["runId"]
        expired = (await h.exec(PROGRAM))["runId"]
    path = runs / f"{damaged}.run"
    data = bytearray(path.read_bytes())
    data[-10] ^= 0xFF
    path.write_bytes(bytes(data))
    store = FileRunStore(runs, clock=lambda: 10.0**10)  # long after the runs' TTL
    assert [p.name for p in runs.iterdir()] == ["damaged"]  # the damaged one kept aside
    (kept,) = (runs / "damaged").glob(f"*-{damaged}.run")
    assert kept.read_bytes() == bytes(data)
    async with CodeModeEngine(store).running() as after:
        h2 = await _harness(after, sessions, workspace, Gate(), run_id="run_after")
        lost = await h2.wait(damaged)
        gone = await h2.wait(expired)
    assert lost["status"] == "failed" and lost["code"] == "lost_in_restart", lost
    assert "lost when Nodmix restarted" in lost["error"]
    assert gone["status"] == "failed" and gone["code"] == "snapshot_expired", gone


@pytest.mark.anyio
async def test_a_stopping_process_keeps_the_runs_of_the_turns_it_cancels(
    sessions: SessionManager, workspace: Path, tmp_path: Path
) -> None:
    runs = tmp_path / "runs"
    async with _process(runs) as before:
        h = await _harness(before, sessions, workspace, Gate())
        parked = await h.exec(PROGRAM)
        before.retire()
        assert before.abort_turn(h.run_id) == 0  # a turn cancelled by the shutdown
    async with _process(runs) as after:
        h2 = await _harness(after, sessions, workspace, Gate(), run_id="run_after")
        done = await h2.wait(parked["runId"])
    assert done["status"] == "completed", done
    assert done["value"] == {"first": "fast", "caught": "interrupted by restart"}
