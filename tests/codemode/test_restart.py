"""Suspended runs continue after the engine (and its file store) is started again: the program
resumes from its snapshot, calls in flight at the restart reach the guest as failed, calls
that settled keep their results, and the run's owner scope still holds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from nodmix.codemode import CodeModeEngine
from nodmix.codemode.run_files import FileRunStore
from nodmix.codemode.run_records import decode
from nodmix.sessions import SessionManager

from .support import (
    Gate,
    Harness,
    build_harness,
    code_mode,
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
    return await build_harness(
        engine,
        sessions,
        workspace,
        extra_tools=[gate.tool, text_tool("quick", "fast")],
        code_mode_config=code_mode(timeout_ms=300),
        **kwargs,
    )


def _run_file(runs: Path, run_id: str) -> Path:
    return runs / f"{run_id}.run"


@pytest.mark.anyio
async def test_a_run_in_flight_at_a_restart_completes_with_the_call_reported_interrupted(
    sessions: SessionManager, workspace: Path, tmp_path: Path
) -> None:
    runs = tmp_path / "runs"
    before = CodeModeEngine(FileRunStore(runs))
    gate = Gate()
    async with before.running():
        h = await _harness(before, sessions, workspace, gate)
        parked = await h.exec(PROGRAM)
        assert parked["status"] == "waiting"
        await wait_until(lambda: _run_file(runs, parked["runId"]).exists(), "the run file")
    assert gate.started == [{"tag": "x"}] and gate.cancelled == 1  # stopped with the process

    after = CodeModeEngine(FileRunStore(runs))
    again = Gate()
    async with after.running():
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
    before = CodeModeEngine(FileRunStore(runs))
    gate = Gate()
    async with before.running():
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

    after = CodeModeEngine(FileRunStore(runs))
    async with after.running():
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
    before = CodeModeEngine(FileRunStore(runs))
    async with before.running():
        h = await _harness(before, sessions, workspace, Gate())
        parked = await h.exec(PROGRAM)
    after = CodeModeEngine(FileRunStore(runs))
    async with after.running():
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
    engine = CodeModeEngine(FileRunStore(runs))
    gate = Gate()
    async with engine.running():
        h = await _harness(engine, sessions, workspace, gate)
        parked = await h.exec(PROGRAM)
        gate.release.set()
        done = await h.wait(parked["runId"])
        assert done["value"] == {"first": "fast", "slow": "released x"}
        assert isinstance(engine.store, FileRunStore)
        engine.store.flush()
        assert list(runs.iterdir()) == []  # the queued write did not bring the run back
