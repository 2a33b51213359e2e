"""Running jobs: one run of a job at a time, the per-run timeout, failures reported to the
delivery target once (until a success), replies delivered through the channel layer, one-shot
jobs removed after they ran, and the history capped per job."""

from __future__ import annotations

import time
from pathlib import Path

import anyio
import msgspec
import pytest

from nodmix.automation.clock import SystemClock
from nodmix.automation.history import RunHistory, RunRecord
from nodmix.automation.jobs import new_job
from nodmix.automation.runner import RunLimits
from nodmix.automation.schedule import at_schedule, every_schedule
from nodmix.providers.base import ModelRequest
from nodmix.providers.fake import ModelError, ModelReply
from nodmix.testing.model_server import ScriptedModelServer
from nodmix.testing.scripts.echo import respond as echo
from nodmix.testing.scripts.stalls import hang
from nodmix.testing.telegram_server import ScriptedBotAPI
from tests.automation.support import (
    open_runner,
    poll,
    telegram_section,
    user_texts,
    write_config,
)

pytestmark = pytest.mark.anyio
CHAT = 4242


async def test_a_job_runs_once_at_a_time_and_a_run_past_the_timeout_is_ended(
    isolated_state: Path,
) -> None:
    async with ScriptedModelServer(hang) as model:
        config = write_config(isolated_state, model.base_url)
        limits = RunLimits(max_concurrent=2, timeout_seconds=1.0)
        async with open_runner(isolated_state, config, SystemClock(), limits) as (_, runner):
            job = runner.store.add(
                new_job(name="slow", message="m", schedule=every_schedule("1h"), now=time.time())
            )
            records: list[RunRecord | None] = []

            async def run() -> None:
                records.append(await runner.run_job(job, "manual"))

            async with anyio.create_task_group() as group:
                group.start_soon(run)
                await poll(lambda: job.id in runner.running, what="the first run to start")
                assert await runner.run_job(job, "manual") is None  # still running: skipped
            [first] = records
            assert first is not None and first.status == "timeout"
            assert "longer than 1s" in (first.error or "")
            assert [r.run_id for r in runner.history.runs(job.id)] == [first.run_id]
            assert len(model.requests) == 1


async def test_a_failing_job_is_reported_to_its_chat_once_until_it_succeeds_again(
    isolated_state: Path, api: ScriptedBotAPI
) -> None:
    def broken(request: ModelRequest) -> ModelReply | ModelError:
        return ModelError(400, "the model refused the request")

    async with ScriptedModelServer(broken) as model:
        config = write_config(
            isolated_state, model.base_url, channels=telegram_section(api, allowFrom=[CHAT])
        )
        async with open_runner(isolated_state, config, SystemClock()) as (_, runner):
            job = runner.store.add(
                new_job(
                    name="digest",
                    message="summarise the news",
                    schedule=every_schedule("1m"),
                    now=time.time(),
                    deliver=f"telegram:{CHAT}",
                )
            )
            for _ in range(3):
                record = await runner.run_job(job, "schedule")
                assert record is not None and record.status == "error"
            failures = api.sent_texts(CHAT)
            assert len(failures) == 1
            assert failures[0].startswith("Job 'digest' failed:")

            model.respond = echo
            record = await runner.run_job(job, "schedule")
            assert record is not None and record.status == "ok" and record.delivered
            assert api.sent_texts(CHAT)[-1] == "summarise the news"

            model.respond = broken
            await runner.run_job(job, "schedule")
            assert len([t for t in api.sent_texts(CHAT) if "failed" in t]) == 2


async def test_a_one_shot_job_delivers_its_reply_and_removes_itself(
    isolated_state: Path, api: ScriptedBotAPI
) -> None:
    async with ScriptedModelServer(echo) as model:
        config = write_config(
            isolated_state, model.base_url, channels=telegram_section(api, allowFrom=[CHAT])
        )
        async with open_runner(isolated_state, config, SystemClock()) as (_, runner):
            job = runner.store.add(
                new_job(
                    name="anna",
                    message="Time to call Anna.",
                    schedule=at_schedule("+20m", None, now=time.time()),
                    now=time.time(),
                    deliver=f"telegram:{CHAT}",
                )
            )
            record = await runner.run_job(job, "schedule")
            assert record is not None and record.status == "ok"
            assert api.sent_texts(CHAT) == ["Time to call Anna."]
            assert runner.store.load() == []
            assert runner.history.runs(job.id)[0].delivered  # the history outlives the job
            assert record.session_key == f"cron:{job.id}:{record.run_id}"
            assert user_texts(model) == ["Time to call Anna."]


async def test_a_main_session_job_posts_into_the_main_session_as_a_system_event(
    isolated_state: Path,
) -> None:
    async with ScriptedModelServer(echo) as model:
        config = write_config(isolated_state, model.base_url)
        async with open_runner(isolated_state, config, SystemClock()) as (runtime, runner):
            job = runner.store.add(
                new_job(
                    name="standup",
                    message="prepare the standup notes",
                    schedule=every_schedule("1d"),
                    now=time.time(),
                    session="main",
                )
            )
            record = await runner.run_job(job, "manual")
            assert record is not None and record.status == "ok" and not record.delivered
            [text] = user_texts(model)
            assert text == "[System event: scheduled job 'standup'] prepare the standup notes"
            main = runtime.open_session(runtime.agent(None), None)
            assert any("standup notes" in str(e) for e in main.entries)


def test_the_history_keeps_the_newest_runs_of_each_job(isolated_state: Path) -> None:
    history = RunHistory(isolated_state, kept=3)
    for i in range(10):
        history.record(RunRecord(run_id=f"r{i}", job_id="j", trigger="schedule", started_at=i))
        done = RunRecord(run_id=f"r{i}", job_id="j", trigger="schedule", started_at=i, status="ok")
        done.finished_at = i + 0.5
        history.record(done)
    runs = history.runs("j")
    assert [r.run_id for r in runs] == ["r7", "r8", "r9"]
    assert all(r.status == "ok" and r.duration == 0.5 for r in runs)
    lines = (isolated_state / "automation" / "runs" / "j.jsonl").read_text().splitlines()
    assert len(lines) <= 3 * 2 * 2  # trimmed as it grows, never unbounded


def test_a_running_record_reports_its_status_although_files_leave_the_default_out() -> None:
    record = RunRecord(run_id="run_1", job_id="j", trigger="webhook", started_at=1.0)
    assert record.to_json()["status"] == "running"  # what GET /hooks/runs/<id> answers
    assert b"status" not in msgspec.json.encode(record)
