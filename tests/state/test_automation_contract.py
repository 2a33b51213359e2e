"""Cron jobs and run history on files and on a real PostgreSQL: the same behaviour, plus the
database's claim of each scheduled slot."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from nodmix.automation.history import RunRecord, SlotTaken, open_run_history
from nodmix.automation.jobs import Job
from nodmix.automation.schedule import Schedule
from nodmix.automation.store import JobState, open_job_store
from nodmix.state.backend import StateBackend

Opener = Callable[[], StateBackend]


def _job(job_id: str = "j1") -> Job:
    return Job(
        id=job_id,
        name="nightly",
        schedule=Schedule(kind="every", every_seconds=2.0),
        message="hi",
        created_at=1000.0,
    )


def test_jobs_and_scheduler_state_survive_another_process(
    open_backend: Opener, isolated_state: Path
) -> None:
    open_backend()
    store = open_job_store(isolated_state)
    before = store.signature()
    store.add(_job())
    assert store.signature() != before
    store.save_state({"j1": JobState(schedule_key="k", next_run_at=5.0)})
    other = open_job_store(isolated_state)
    assert [j.id for j in other.load()] == ["j1"]
    assert other.get("nightly").id == "j1"
    assert other.load_state()["j1"].next_run_at == 5.0
    assert other.remove("j1") and not other.remove("j1")
    assert store.load() == []


def test_run_records_keep_the_last_state_of_each_run(
    open_backend: Opener, isolated_state: Path
) -> None:
    open_backend()
    history = open_run_history(isolated_state, kept=3)
    for i in range(8):
        run = RunRecord(
            run_id=f"r{i}", job_id="j1", trigger="manual", started_at=float(i), owner=None
        )
        history.record(run)
        run.status, run.finished_at = "ok", float(i) + 0.5
        history.record(run)
    runs = open_run_history(isolated_state, kept=3).runs("j1")
    assert [r.run_id for r in runs] == ["r5", "r6", "r7"]
    assert {r.status for r in runs} == {"ok"}
    assert history.job_ids() == ["j1"]


def test_a_run_left_running_by_a_dead_owner_reads_as_interrupted(
    open_backend: Opener, isolated_state: Path
) -> None:
    open_backend()
    history = open_run_history(isolated_state)
    history.record(
        RunRecord(run_id="r1", job_id="j1", trigger="schedule", started_at=1.0, owner="gone-1")
    )
    (run,) = history.runs("j1")
    assert run.status == "interrupted"
    closed = history.close_interrupted(2.0)
    assert [r.run_id for r in closed] == ["r1"]


@pytest.mark.parametrize("backend_kind", ["postgres"])
def test_only_one_replica_starts_the_run_of_a_scheduled_slot(
    open_backend: Opener, isolated_state: Path
) -> None:
    open_backend()
    a = open_run_history(isolated_state)
    b = open_run_history(isolated_state)
    first = RunRecord(run_id="ra", job_id="j1", trigger="schedule", started_at=1.0, slot=10.0)
    a.record(first)
    a.record(first)  # the same run again: fine
    with pytest.raises(SlotTaken):
        b.record(RunRecord(run_id="rb", job_id="j1", trigger="missed", started_at=1.1, slot=10.0))
    b.record(RunRecord(run_id="rc", job_id="j1", trigger="schedule", started_at=3.0, slot=12.0))
    assert [r.run_id for r in a.runs("j1")] == ["ra", "rc"]


@pytest.mark.parametrize("backend_kind", ["postgres"])
def test_one_run_of_a_job_at_a_time_across_replicas(
    open_backend: Opener, isolated_state: Path
) -> None:
    from nodmix import stores
    from nodmix.state.postgres.backend import PostgresState

    first = open_backend()
    second = open_backend()  # binds itself last; its stores are the second replica's
    assert isinstance(first, PostgresState) and isinstance(second, PostgresState)
    mine = first.provide("automation.jobs")
    theirs = open_job_store(isolated_state)
    assert stores.bound(isolated_state) is second
    with mine.exclusive("j1") as held:
        assert held
        with theirs.exclusive("j1") as other:
            assert not other
    with theirs.exclusive("j1") as other:
        assert other
