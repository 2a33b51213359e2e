"""The run store: records survive as written (atomically, 0600 in a 0700 folder), an
unreadable record is moved aside without hiding the others, and a claim belongs to one
process at a time, released when that process dies."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from nodmix.origin import TurnOrigin
from nodmix.subagents.records import SubagentRun, child_key_for, new_run_id, run_id_of
from nodmix.subagents.store import FileSubagentStore, MemorySubagentStore, SubagentStore


def _run(**changes: object) -> SubagentRun:
    run_id = new_run_id()
    fields: dict[str, object] = {
        "run_id": run_id,
        "child_key": child_key_for("main", run_id),
        "parent_key": "agent:main:main",
        "parent_run_id": "run_1",
        "depth": 1,
        "task": "look it up",
        "timeout_seconds": 60.0,
        "wait": False,
        "origin": TurnOrigin(channel="telegram", chat_id="42", spawned_by=None),
    }
    fields.update(changes)
    return SubagentRun(**fields)  # type: ignore[arg-type]


@pytest.fixture(params=["file", "memory"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> SubagentStore:
    if request.param == "memory":
        return MemorySubagentStore()
    return FileSubagentStore(tmp_path / "runs")


def test_records_come_back_as_written_oldest_first(store: SubagentStore) -> None:
    first, second = _run(created_at=1.0), _run(created_at=2.0, label="two")
    store.save(second)
    store.save(first)
    store.save(second := SubagentRun(**{**_fields(second), "status": "running"}))
    assert store.all() == [first, second]
    assert store.get(second.run_id) == second
    store.remove(first.run_id)
    assert store.get(first.run_id) is None and store.all() == [second]


def _fields(run: SubagentRun) -> dict[str, object]:
    return {name: getattr(run, name) for name in run.__struct_fields__}


def test_a_claim_is_exclusive_until_released(store: SubagentStore) -> None:
    run = _run()
    claim = store.claim(run.run_id)
    assert claim is not None
    assert store.claim(run.run_id) is None
    claim.release()
    again = store.claim(run.run_id)
    assert again is not None
    again.release()


def test_files_are_private_and_an_unreadable_record_is_moved_aside(tmp_path: Path) -> None:
    store = FileSubagentStore(tmp_path / "runs")
    good, bad = _run(), _run()
    store.save(good)
    store.save(bad)
    assert stat.S_IMODE((tmp_path / "runs").stat().st_mode) == 0o700
    assert stat.S_IMODE((tmp_path / "runs" / f"{good.run_id}.json").stat().st_mode) == 0o600
    (tmp_path / "runs" / f"{bad.run_id}.json").write_text('{"runId": "sub_', encoding="utf-8")
    assert store.all() == [good]
    aside = [p.name for p in (tmp_path / "runs").iterdir() if ".corrupt-" in p.name]
    assert len(aside) == 1 and aside[0].startswith(f"{bad.run_id}.json.corrupt-")
    assert store.get("../../etc/passwd") is None


HOLDER = """
import sys
from pathlib import Path
from nodmix.subagents.store import FileSubagentStore
claim = FileSubagentStore(Path(sys.argv[1])).claim(sys.argv[2])
print("held" if claim else "refused", flush=True)
sys.stdin.read()
"""


def test_another_live_process_holds_its_claim_and_loses_it_when_it_dies(tmp_path: Path) -> None:
    run = _run()
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(tmp_path / "runs"), run.run_id],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        store = FileSubagentStore(tmp_path / "runs")
        assert store.claim(run.run_id) is None
    finally:
        holder.kill()
        holder.communicate(timeout=10)  # closes the pipes
    claim = store.claim(run.run_id)
    assert claim is not None
    claim.release()
    assert not (tmp_path / "runs" / f"{run.run_id}.lock").exists()


def test_session_keys_and_run_ids_name_each_other() -> None:
    run_id = new_run_id()
    key = child_key_for("research", run_id)
    assert key == f"agent:research:subagent:{run_id.removeprefix('sub_')}"
    assert run_id_of(key) == run_id
    for other in ("agent:main:main", "agent:main:subagent:", "agent:main:subagent:xyz:1"):
        assert run_id_of(other) is None
    assert os.sep not in run_id
