"""Reading the structured log back: filter by level and time, print as text, follow.

Used by `nodmix logs` and by `nodmix status` (its last errors). Lines that are not JSON (a
hand edit, a torn last line) are skipped, never fatal.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, BinaryIO

from nodmix.errors import NodmixError
from nodmix.observability.logs import BACKUPS

LEVELS = {"debug": 10, "info": 20, "warning": 30, "error": 40, "critical": 50}
FOLLOW_INTERVAL = 0.25
"""Seconds between polls of a followed log (bounded: a new line shows within this)."""
_CORE_KEYS = ("ts", "level", "logger", "msg", "pid")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def _printable(value: object) -> str:
    """`value` as text with control characters escaped: a tool name or a sender name the
    model or a chat chose must not reach the terminal as escape sequences (titles, the
    clipboard, a cleared screen)."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", str(value))


_DURATION = re.compile(r"^(\d+(?:\.\d+)?)([smhd])$")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


@dataclass(frozen=True, slots=True)
class LogFilter:
    """Which records to show: at or above `min_level`, at or after `since`."""

    min_level: int = 0
    since: datetime | None = None

    def accepts(self, record: dict[str, Any]) -> bool:
        if LEVELS.get(str(record.get("level", "")).lower(), 0) < self.min_level:
            return False
        if self.since is not None:
            stamp = record_time(record)
            return stamp is not None and stamp >= self.since
        return True


def parse_level(text: str) -> int:
    """`info`, `WARNING`, … as a number. Raises `NodmixError` for an unknown name."""
    value = LEVELS.get(text.lower())
    if value is None:
        raise NodmixError(f"unknown log level {text!r} (use one of: {', '.join(LEVELS)})")
    return value


def parse_since(text: str, *, now: datetime | None = None) -> datetime:
    """`30s`, `10m`, `2h`, `1d` ago, or an ISO 8601 time (local if it names no zone)."""
    now = now or datetime.now(UTC)
    match = _DURATION.match(text.strip())
    if match:
        return now - timedelta(seconds=float(match.group(1)) * _UNITS[match.group(2)])
    try:
        stamp = datetime.fromisoformat(text.strip())
    except ValueError:
        raise NodmixError(
            f"--since {text!r}: use a duration like 10m, 2h, 1d or a time like 2026-01-31T09:00"
        ) from None
    return stamp.astimezone(UTC) if stamp.tzinfo is None else stamp


def record_time(record: dict[str, Any]) -> datetime | None:
    """The record's `ts` as an aware datetime, if it has a readable one."""
    try:
        return datetime.fromisoformat(str(record["ts"]))
    except (KeyError, ValueError):
        return None


def parse_line(line: str) -> dict[str, Any] | None:
    """One JSON record, or None for a line that is not one."""
    try:
        value = json.loads(line)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def log_files(path: Path) -> list[Path]:
    """The rotated files (oldest first) and then the current one, those that exist."""
    backups = [path.with_name(f"{path.name}.{n}") for n in range(BACKUPS, 0, -1)]
    return [p for p in [*backups, path] if p.is_file()]


def read_records(path: Path, keep: LogFilter, *, last: int | None = None) -> list[dict[str, Any]]:
    """Records of the log and its rotated files that pass `keep` (the `last` ones if set)."""
    out: deque[dict[str, Any]] = deque(maxlen=last)
    for file in log_files(path):
        with file.open(encoding="utf-8", errors="replace") as handle:
            out.extend(r for r in map(parse_line, handle) if r is not None and keep.accepts(r))
    return list(out)


def format_text(record: dict[str, Any]) -> str:
    """A record as one plain line: local time, level, logger, message, then its fields."""
    stamp = record_time(record)
    clock = stamp.astimezone().strftime("%Y-%m-%d %H:%M:%S") if stamp else "?"
    extras = " ".join(f"{k}={v}" for k, v in record.items() if k not in _CORE_KEYS)
    line = f"{clock} {str(record.get('level', '?')):<7} {record.get('logger', '?')}: "
    line += str(record.get("msg", ""))
    return _printable(f"{line}  [{extras}]" if extras else line)


def follow(
    path: Path,
    keep: LogFilter,
    *,
    interval: float = FOLLOW_INTERVAL,
    stop: Callable[[], bool] = lambda: False,
) -> Iterator[dict[str, Any]]:
    """Records appended to `path` from this call on, across rotations, until `stop()` is true.

    Where the file ends is taken now, not at the first `next()`; a file that does not exist
    yet, or that replaced a rotated one, is read from its start.
    """
    handle: BinaryIO | None = path.open("rb") if path.is_file() else None
    if handle is not None:
        handle.seek(0, os.SEEK_END)
    return _follow(path, keep, handle, interval, stop)


def _follow(
    path: Path,
    keep: LogFilter,
    handle: BinaryIO | None,
    interval: float,
    stop: Callable[[], bool],
) -> Iterator[dict[str, Any]]:
    try:
        while not stop():
            if handle is None and path.is_file():
                handle = path.open("rb")
            if handle is not None:
                yield from _drain(handle, keep)
                if _rotated(path, os.fstat(handle.fileno()).st_ino):
                    yield from _drain(handle, keep)
                    handle.close()
                    handle = None
                    continue
            time.sleep(interval)
    finally:
        if handle is not None:
            handle.close()


def _rotated(path: Path, inode: int) -> bool:
    try:
        return path.stat().st_ino != inode
    except FileNotFoundError:
        return True


def _drain(handle: BinaryIO, keep: LogFilter) -> Iterator[dict[str, Any]]:
    while True:
        start = handle.tell()
        line = handle.readline()
        if not line:
            return
        if not line.endswith(b"\n"):
            handle.seek(start)  # a line still being written: read it whole next time
            return
        record = parse_line(line.decode("utf-8", errors="replace"))
        if record is not None and keep.accepts(record):
            yield record
