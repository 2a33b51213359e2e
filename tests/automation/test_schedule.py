"""Schedules: cron in a time zone across DST, intervals that keep their rhythm, one-shots."""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from nodmix.automation.jobs import JobError, build_schedule, new_job, parse_target
from nodmix.automation.schedule import (
    ScheduleError,
    at_schedule,
    cron_schedule,
    every_schedule,
    format_duration,
    next_fire,
    parse_duration,
)

PARIS = ZoneInfo("Europe/Paris")


def paris(*args: int) -> float:
    return datetime(*args, tzinfo=PARIS).timestamp()  # type: ignore[misc]


def local(ts: float) -> str:
    return datetime.fromtimestamp(ts, PARIS).isoformat()


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("2s", 2), ("30m", 1800), ("1h30m", 5400), ("1d", 86400), ("1.5h", 5400), ("2 m", 120)],
)
def test_durations_parse_units_and_combinations(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "10", "5x", "m5", "1h 30"])
def test_malformed_durations_are_refused_with_an_example(text: str) -> None:
    with pytest.raises(ScheduleError, match="use e.g. 30s"):
        parse_duration(text)


def test_durations_format_back_compactly() -> None:
    assert format_duration(5400) == "1h30m"
    assert format_duration(2) == "2s"


def test_a_daily_job_keeps_its_local_hour_across_the_spring_change() -> None:
    schedule = cron_schedule("0 7 * * *", "Europe/Paris")
    before = next_fire(schedule, paris(2026, 3, 28, 12, 0), anchor=0)
    after = next_fire(schedule, paris(2026, 3, 29, 12, 0), anchor=0)
    assert before is not None and after is not None
    assert local(before) == "2026-03-29T07:00:00+02:00"
    assert local(after) == "2026-03-30T07:00:00+02:00"
    assert after - before == 86400  # a real day, though the previous one was 23 hours


def test_a_job_in_the_skipped_hour_runs_once_at_the_first_minute_that_exists() -> None:
    schedule = cron_schedule("30 2 * * *", "Europe/Paris")
    fire = next_fire(schedule, paris(2026, 3, 28, 12, 0), anchor=0)
    assert fire is not None and local(fire) == "2026-03-29T03:00:00+02:00"


def test_a_job_in_the_repeated_hour_runs_once_on_the_autumn_night() -> None:
    schedule = cron_schedule("30 2 * * *", "Europe/Paris")
    first = next_fire(schedule, paris(2026, 10, 24, 12, 0), anchor=0)
    assert first is not None and local(first) == "2026-10-25T02:30:00+02:00"
    second = next_fire(schedule, first, anchor=0)
    assert second is not None and local(second) == "2026-10-26T02:30:00+01:00"


def test_intervals_count_from_the_anchor_so_a_restart_keeps_the_rhythm() -> None:
    schedule = every_schedule("10m")
    assert next_fire(schedule, 1000.0, anchor=1000.0) == 1600.0
    assert next_fire(schedule, 1000.0 + 3 * 600 + 5, anchor=1000.0) == 1000.0 + 4 * 600
    assert next_fire(schedule, 500.0, anchor=1000.0) == 1600.0


def test_a_one_shot_fires_once_and_then_never() -> None:
    schedule = at_schedule("+20m", None, now=1000.0)
    assert schedule.at == 2200.0
    assert next_fire(schedule, 1000.0, anchor=1000.0) == 2200.0
    assert next_fire(schedule, 2200.0, anchor=1000.0) is None


def test_a_one_shot_time_without_offset_is_read_in_its_zone() -> None:
    schedule = at_schedule("2030-06-01T09:00", "Europe/Paris", now=0.0)
    assert schedule.at == paris(2030, 6, 1, 9, 0)


def test_bad_schedules_are_refused_with_one_clear_line() -> None:
    with pytest.raises(ScheduleError, match="invalid cron expression"):
        cron_schedule("61 * * * *")
    with pytest.raises(ScheduleError, match="unknown time zone 'Mars/Olympus'"):
        cron_schedule("0 7 * * *", "Mars/Olympus")
    with pytest.raises(ScheduleError, match="in the past"):
        at_schedule("2001-01-01T00:00", None, now=1e9 + 1)
    with pytest.raises(ScheduleError, match="shorter than"):
        every_schedule("0s")


def test_endless_delays_and_intervals_are_refused_before_a_job_holds_them() -> None:
    endless = "9" * 400 + "s"  # parses to infinity
    with pytest.raises(JobError, match="longer than ten years"):
        build_schedule(cron=None, every=endless, at=None, tz=None, now=0)
    with pytest.raises(JobError, match="longer than ten years"):
        build_schedule(cron=None, every=None, at=f"+{endless}", tz=None, now=0)
    with pytest.raises(JobError, match="longer than ten years"):
        build_schedule(cron=None, every=None, at="+999999999999999w", tz=None, now=0)
    far = build_schedule(cron=None, every="520w", at=None, tz=None, now=0)
    assert far.describe() == "every 3640d"


def test_exactly_one_schedule_kind_is_required() -> None:
    with pytest.raises(JobError, match="exactly one"):
        build_schedule(cron=None, every=None, at=None, tz=None, now=0)
    with pytest.raises(JobError, match="exactly one"):
        build_schedule(cron="* * * * *", every="5m", at=None, tz=None, now=0)
    with pytest.raises(JobError, match="tz only applies"):
        build_schedule(cron=None, every="5m", at=None, tz="Europe/Paris", now=0)


def test_new_jobs_validate_fields_and_one_shots_delete_themselves() -> None:
    schedule = at_schedule("+1m", None, now=0.0)
    job = new_job(name="call", message="call Anna", schedule=schedule, now=0.0)
    assert job.delete_after_run and job.session == "isolated"
    with pytest.raises(JobError, match="message is empty"):
        new_job(name="x", message="  ", schedule=schedule, now=0.0)
    with pytest.raises(JobError, match="invalid session"):
        new_job(name="x", message="m", schedule=schedule, now=0.0, session="shared")
    with pytest.raises(JobError, match="invalid delivery target"):
        new_job(name="x", message="m", schedule=schedule, now=0.0, deliver="4242")
    assert parse_target("telegram:-100123") == ("telegram", "-100123")
