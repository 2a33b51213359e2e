"""What a starting gateway does with runs on disk (`subagents.recovery`), driven directly on a
runtime: an unannounced result is announced once, a run another live process holds is left
alone, a run past its restarts is reported failed, and old records are dropped."""

from __future__ import annotations

import time
from pathlib import Path

import msgspec
import pytest

from nodmix.sessions import CustomMessageEntry
from nodmix.subagents import recovery
from nodmix.subagents.records import SubagentRun, child_key_for, new_run_id
from nodmix.subagents.store import open_subagent_store
from nodmix.testing.model_server import ScriptedModelServer
from nodmix.testing.scripts.subagents import respond
from tests.subagents.support import open_runtime, records, write_config

pytestmark = [pytest.mark.anyio, pytest.mark.integration]


def _run(**changes: object) -> SubagentRun:
    run_id = new_run_id()
    run = SubagentRun(
        run_id=run_id,
        child_key=child_key_for("main", run_id),
        parent_key="agent:main:main",
        parent_run_id="run_1",
        depth=1,
        task="look it up",
        timeout_seconds=60.0,
        wait=False,
    )
    return msgspec.structs.replace(run, **changes)


def _posted(runtime: object) -> list[CustomMessageEntry]:
    main = runtime.sessions.open("agent:main:main")  # type: ignore[attr-defined]
    return [e for e in main.entries if isinstance(e, CustomMessageEntry)]


async def test_an_unannounced_result_is_announced_once_and_a_held_run_left_alone(
    isolated_state: Path,
) -> None:
    store = open_subagent_store(isolated_state)
    finished = _run(status="completed", reply="the answer", ended_at=time.time())
    held = _run(status="running", started_at=time.time())
    store.save(finished)
    store.save(held)
    claim = store.claim(held.run_id)  # as another live process would
    async with ScriptedModelServer(respond) as server:
        write_config(isolated_state, server.base_url)
        async with open_runtime(isolated_state) as runtime:
            runtime.sessions.open("agent:main:main")
            first = await recovery.recover(runtime.subagents)
            again = await recovery.recover(runtime.subagents)
            posted = _posted(runtime)
    assert claim is not None
    claim.release()
    assert (first, again) == (1, 0)
    (entry,) = posted
    assert entry.details["runId"] == finished.run_id and "the answer" in str(entry.content)
    assert store.get(held.run_id) == held  # untouched
    assert store.get(finished.run_id).announced  # type: ignore[union-attr]


async def test_a_run_past_its_restarts_is_reported_failed(isolated_state: Path) -> None:
    store = open_subagent_store(isolated_state)
    worn = _run(status="running", restarts=recovery.MAX_RESTARTS)
    store.save(worn)
    async with ScriptedModelServer(respond) as server:
        write_config(isolated_state, server.base_url)
        async with open_runtime(isolated_state) as runtime:
            runtime.sessions.open("agent:main:main")
            await recovery.recover(runtime.subagents)
            (entry,) = _posted(runtime)
    (run,) = records(isolated_state)
    assert run.status == "failed" and run.announced
    assert run.error == f"interrupted: Nodmix restarted {recovery.MAX_RESTARTS + 1} times"
    assert "failed: interrupted" in str(entry.content)


async def test_only_the_newest_finished_records_are_kept(
    isolated_state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(recovery, "KEEP_ENDED", 3)
    store = open_subagent_store(isolated_state)
    ended = [_run(status="completed", wait=True, created_at=float(i)) for i in range(5)]
    waiting = _run(status="completed", created_at=0.5)  # not announced yet: kept
    for run in [*ended, waiting]:
        store.save(run)
    async with ScriptedModelServer(respond) as server:
        write_config(isolated_state, server.base_url, {"archiveAfterMinutes": 0})
        async with open_runtime(isolated_state) as runtime:
            await recovery.sweep(runtime.subagents)
    kept = {run.run_id for run in records(isolated_state)}
    assert kept == {waiting.run_id, *(run.run_id for run in ended[2:])}
