"""The structured log: JSON lines with fields, private rotating files, filters, following."""

from __future__ import annotations

import logging
import stat
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from nodmix.errors import NodmixError
from nodmix.observability.logread import (
    LogFilter,
    follow,
    format_text,
    parse_level,
    parse_since,
    read_records,
)
from nodmix.observability.logs import log_file, open_log_file
from tests.gateway.support import wait_until

log = logging.getLogger("nodmix.test.logs")


def test_records_are_json_lines_with_their_fields_in_a_private_file(tmp_path: Path) -> None:
    with open_log_file(tmp_path) as path:
        log.info("turn %s started", "r1", extra={"runId": "r1", "agent": "main"})
        log.debug("not at info level")
        try:
            raise ValueError("bad input")
        except ValueError:
            log.exception("it broke")
    records = read_records(path, LogFilter())
    assert [r["msg"] for r in records] == ["turn r1 started", "it broke"]
    first, second = records
    assert first["level"] == "INFO" and first["logger"] == "nodmix.test.logs"
    assert first["runId"] == "r1" and first["agent"] == "main"
    assert second["error"] == "ValueError: bad input"
    assert path == log_file(tmp_path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert logging.getLogger("nodmix").handlers == []  # removed when the block ends


def test_level_and_since_filters_and_rotated_files_are_read_oldest_first(tmp_path: Path) -> None:
    with open_log_file(tmp_path, max_bytes=400) as path:
        for n in range(12):
            log.warning("record %d", n) if n % 2 else log.info("record %d", n)
    assert path.with_name("nodmix.log.1").is_file()
    everything = read_records(path, LogFilter())
    warnings = read_records(path, LogFilter(min_level=parse_level("WARNING")), last=2)
    future = read_records(path, LogFilter(since=datetime.now(UTC) + timedelta(minutes=1)))
    numbers = [int(r["msg"].split()[1]) for r in everything]
    assert numbers == sorted(numbers) and numbers[-1] == 11
    assert [r["msg"] for r in warnings] == ["record 9", "record 11"]
    assert future == []


def test_rotation_keeps_three_private_backups_and_starts_a_new_file(tmp_path: Path) -> None:
    with open_log_file(tmp_path, max_bytes=300) as path:
        for n in range(40):
            log.info("record %d", n)
    files = sorted(p.name for p in path.parent.iterdir())
    assert files == ["nodmix.log", "nodmix.log.1", "nodmix.log.2", "nodmix.log.3"]
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in path.parent.iterdir())
    assert all(p.stat().st_size <= 300 for p in path.parent.iterdir())
    newest = [r["msg"] for r in read_records(path, LogFilter())]
    assert newest[-1] == "record 39"
    assert int(newest[0].split()[1]) > 0  # the oldest records went with the fourth backup


def test_since_takes_durations_and_times_and_bad_values_are_one_clear_error() -> None:
    now = datetime(2026, 1, 31, 12, 0, tzinfo=UTC)
    assert parse_since("10m", now=now) == now - timedelta(minutes=10)
    assert parse_since("1d", now=now) == now - timedelta(days=1)
    assert parse_since("2026-01-31T09:00:00+00:00") == datetime(2026, 1, 31, 9, tzinfo=UTC)
    with pytest.raises(NodmixError, match="--since 'yesterday'"):
        parse_since("yesterday")
    with pytest.raises(NodmixError, match="unknown log level 'loud'"):
        parse_level("loud")


def test_text_lines_show_time_level_logger_message_and_fields() -> None:
    record = {
        "ts": "2026-01-31T09:00:00.000+00:00",
        "level": "INFO",
        "logger": "nodmix.turns",
        "msg": "turn started",
        "pid": 7,
        "runId": "run_1",
    }
    line = format_text(record)
    assert "INFO" in line and "nodmix.turns: turn started" in line
    assert line.endswith("[runId=run_1]") and "pid" not in line


def test_text_lines_escape_control_characters_a_model_or_a_chat_chose() -> None:
    record = {
        "ts": "2026-01-31T09:00:00.000+00:00",
        "level": "INFO",
        "logger": "nodmix.turns",
        "msg": "tool call \x1b]0;pwned\x07\x1b[2J",
        "sender": "eve\r\nFAKE LINE",
    }
    line = format_text(record)
    assert "\x1b" not in line and "\x07" not in line and "\n" not in line
    assert "tool call \\x1b]0;pwned\\x07\\x1b[2J" in line
    assert "sender=eve\\x0d\\x0aFAKE LINE" in line


def test_follow_reads_a_new_file_from_its_start_and_continues_across_rotation(
    tmp_path: Path,
) -> None:
    path = log_file(tmp_path)
    seen: list[dict[str, Any]] = []
    done = threading.Event()

    records = follow(path, LogFilter(), interval=0.01, stop=done.is_set)

    def reader() -> None:
        seen.extend(records)

    thread = threading.Thread(target=reader, daemon=True)
    thread.start()
    try:
        with open_log_file(tmp_path, max_bytes=300):
            for n in range(8):
                log.info("line %d", n)
                wait_until(lambda n=n: len(seen) > n, what=f"record {n} followed")
    finally:
        done.set()
        thread.join(5)
    assert path.with_name("nodmix.log.1").is_file()  # it did rotate on the way
    assert [r["msg"] for r in seen] == [f"line {n}" for n in range(8)]
