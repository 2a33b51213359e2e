"""The scheduler under an injected clock: cron jobs in a time zone across DST, a run missed
while no gateway ran fires once after the restart (or is skipped), disabled jobs wait, edits
of `jobs.json` are picked up. Turns are real: a runtime and a scripted model server."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import anyio
import msgspec
import pytest

from nodmix.automation.clock import ManualClock
from nodmix.automation.jobs import Job, new_job
from nodmix.automation.runner import JobRunner
from nodmix.automation.schedule import at_schedule, cron_schedule, every_schedule
from nodmix.automation.scheduler import Scheduler
from nodmix.testing.model_server import ScriptedModelServer
from nodmix.testing.scripts.echo import respond as echo
from tests.automation.support import open_runner, poll, user_texts, write_config

pytestmark = pytest.mark.anyio
PARIS = ZoneInfo("Europe/Paris")


def paris(*args: int) -> float:
    return datetime(*args, tzinfo=PARIS).timestamp()  # type: ignore[misc]


def local(ts: float) -> str:
    return datetime.fromtimestamp(ts, PARIS).isoformat(timespec="minutes")


async def _walk(
    scheduler: Scheduler, clock: ManualClock, until: float, step: float = 60.0
) -> list[str]:
    """Move the clock minute by minute, ticking; the local times at which jobs fired. Each
    tick's runs finish before the clock moves on (a turn takes less than a minute)."""
    fired: list[str] = []
    while clock.now() < until:
        clock.advance(step)
        async with anyio.create_task_group() as group:
            if scheduler.tick(group):
                fired.append(local(clock.now()))
    return fired


def _runs_done(runner: JobRunner, job: Job, count: int) -> bool:
    runs = runner.history.runs(job.id)
    return len(runs) == count and all(r.status != "running" for r in runs)


async def test_a_morning_job_fires_at_seven_local_time_on_both_sides_of_the_spring_change(
    isolated_state: Path,
) -> None:
    async with ScriptedModelServer(echo) as model:
        config = write_config(isolated_state, model.base_url)
        clock = ManualClock(paris(2026, 3, 28, 6, 0))
        async with open_runner(isolated_state, config, clock) as (_, runner):
            job = runner.store.add(
                new_job(
                    name="wake",
                    message="good morning",
                    schedule=cron_schedule("0 7 * * *", "Europe/Paris"),
                    now=clock.now(),
                )
            )
            scheduler = Scheduler(runner.store, runner, clock)
            fired = await _walk(scheduler, clock, paris(2026, 3, 30, 12, 0))
            assert fired == [
                "2026-03-28T07:00+01:00",
                "2026-03-29T07:00+02:00",
                "2026-03-30T07:00+02:00",
            ]
            await poll(lambda: _runs_done(runner, job, 3), what="three finished runs")
            assert user_texts(model) == ["good morning"] * 3
            assert {r.status for r in runner.history.runs(job.id)} == {"ok"}


async def _night_job_fires(state: Path, start: float, until: float) -> list[str]:
    async with ScriptedModelServer(echo) as model:
        config = write_config(state, model.base_url)
        clock = ManualClock(start)
        async with open_runner(state, config, clock) as (_, runner):
            runner.store.add(
                new_job(
                    name="night",
                    message="night check",
                    schedule=cron_schedule("30 2 * * *", "Europe/Paris"),
                    now=clock.now(),
                )
            )
            fired = await _walk(Scheduler(runner.store, runner, clock), clock, until)
            assert user_texts(model) == ["night check"] * len(fired)
            return fired


async def test_a_job_in_the_hour_the_clocks_skip_fires_once_at_the_first_minute_after(
    isolated_state: Path,
) -> None:
    fired = await _night_job_fires(
        isolated_state, paris(2026, 3, 28, 12, 0), paris(2026, 3, 30, 12, 0)
    )
    assert fired == ["2026-03-29T03:00+02:00", "2026-03-30T02:30+02:00"]


async def test_a_job_in_the_hour_the_clocks_repeat_fires_once_that_night(
    isolated_state: Path,
) -> None:
    fired = await _night_job_fires(
        isolated_state, paris(2026, 10, 24, 12, 0), paris(2026, 10, 26, 12, 0)
    )
    # 02:30 came twice on the 25th (+02:00, then +01:00); the job ran the first time only.
    assert fired == ["2026-10-25T02:30+02:00", "2026-10-26T02:30+01:00"]


async def test_a_run_missed_while_no_scheduler_ran_fires_once_after_the_restart(
    isolated_state: Path,
) -> None:
    async with ScriptedModelServer(echo) as model:
        config = write_config(isolated_state, model.base_url)
        start = paris(2030, 1, 1, 8, 0)
        clock = ManualClock(start)
        async with open_runner(isolated_state, config, clock) as (_, runner):
            job = runner.store.add(
                new_job(
                    name="hourly",
                    message="hourly check",
                    schedule=every_schedule("1h"),
                    now=start,
                )
            )
            before = Scheduler(runner.store, runner, clock)
            before.reload()
            before.flush(force=True)  # the gateway stops here: next run at 09:00 is stored

            clock.set(start + 5 * 3600 + 600)  # it comes back at 13:10: five runs were missed
            after = Scheduler(runner.store, runner, clock)
            async with anyio.create_task_group() as group:
                assert [j.id for j in after.tick(group)] == [job.id]
                assert after.tick(group) == []
            await poll(lambda: _runs_done(runner, job, 1), what="the catch-up run")
            run = runner.history.runs(job.id)[0]
            assert run.trigger == "missed" and run.status == "ok"
            assert user_texts(model) == ["hourly check"]
            assert after.states[job.id].next_run_at == start + 6 * 3600  # back on the rhythm


async def test_missed_runs_are_skipped_when_configured_so(isolated_state: Path) -> None:
    async with ScriptedModelServer(echo) as model:
        config = write_config(isolated_state, model.base_url)
        start = paris(2030, 1, 1, 8, 0)
        clock = ManualClock(start)
        async with open_runner(isolated_state, config, clock) as (_, runner):
            job = runner.store.add(
                new_job(name="h", message="m", schedule=every_schedule("1h"), now=start)
            )
            before = Scheduler(runner.store, runner, clock)
            before.reload()
            before.flush(force=True)
            clock.set(start + 5 * 3600 + 600)
            after = Scheduler(runner.store, runner, clock, missed="skip")
            async with anyio.create_task_group() as group:
                assert after.tick(group) == []
            assert after.states[job.id].next_run_at == start + 6 * 3600
            assert model.requests == []


async def test_edits_of_the_jobs_file_are_picked_up_and_disabled_jobs_do_not_pile_up(
    isolated_state: Path,
) -> None:
    async with ScriptedModelServer(echo) as model:
        config = write_config(isolated_state, model.base_url)
        start = paris(2030, 1, 1, 8, 0)
        clock = ManualClock(start)
        async with open_runner(isolated_state, config, clock) as (_, runner):
            scheduler = Scheduler(runner.store, runner, clock)
            scheduler.reload()
            assert scheduler.next_due() is None
            job = runner.store.add(
                new_job(name="m", message="every minute", schedule=every_schedule("1m"), now=start)
            )
            assert scheduler.reload() and scheduler.next_due() == start + 60
            runner.store.replace(msgspec.structs.replace(job, enabled=False))
            assert await _walk(scheduler, clock, start + 600) == []
            runner.store.replace(job)  # enabled again: the next minute, not ten catch-ups
            fired = await _walk(scheduler, clock, start + 720)
            assert len(fired) == 2
            runner.store.remove(job.id)
            assert scheduler.reload() and job.id not in scheduler.states
            await poll(lambda: len(user_texts(model)) == 2, what="two turns")


async def test_a_one_shot_whose_moment_passed_while_no_scheduler_ran_fires_once(
    isolated_state: Path,
) -> None:
    async with ScriptedModelServer(echo) as model:
        config = write_config(isolated_state, model.base_url)
        start = paris(2030, 1, 1, 8, 0)
        clock = ManualClock(start)
        async with open_runner(isolated_state, config, clock) as (_, runner):
            job = runner.store.add(
                new_job(
                    name="call",
                    message="call Anna",
                    schedule=at_schedule("+20m", None, now=start),
                    now=start,
                )
            )
            clock.set(start + 3600)  # the gateway starts only an hour later
            scheduler = Scheduler(runner.store, runner, clock)
            async with anyio.create_task_group() as group:
                assert [j.id for j in scheduler.tick(group)] == [job.id]
            assert user_texts(model) == ["call Anna"]
            assert runner.history.runs(job.id)[0].trigger == "missed"
            assert runner.store.load() == []  # and it removed itself


async def test_a_job_that_cannot_be_scheduled_does_not_stop_the_others(
    isolated_state: Path,
) -> None:
    async with ScriptedModelServer(echo) as model:
        config = write_config(isolated_state, model.base_url)
        clock = ManualClock(paris(2026, 3, 28, 6, 0))
        async with open_runner(isolated_state, config, clock) as (_, runner):
            good = new_job(
                name="tick",
                message="still here",
                schedule=every_schedule("1m"),
                now=clock.now(),
            )
            broken = new_job(  # as a hand edit or another machine's zone list leaves it
                name="mars",
                message="never",
                schedule=msgspec.structs.replace(
                    cron_schedule("0 7 * * *", "Europe/Paris"), tz="Mars/Olympus"
                ),
                now=clock.now(),
            )
            runner.store.add(broken)
            runner.store.add(good)
            scheduler = Scheduler(runner.store, runner, clock)
            assert scheduler.reload()
            assert set(scheduler.jobs) == {good.id}
            fired = await _walk(scheduler, clock, clock.now() + 60.0)
            assert len(fired) == 1
            await poll(lambda: _runs_done(runner, good, 1), what="the good job's run")
            assert user_texts(model) == ["still here"]
