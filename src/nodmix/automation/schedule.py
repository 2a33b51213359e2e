"""When a job fires: a cron expression in a time zone, a fixed interval, or one moment.

Cron expressions are evaluated by `cronsim` on time-zone-aware datetimes (`zoneinfo`), so a
job at 02:30 fires once on the night the clocks go forward (at 03:00, the first minute that
exists) and once, not twice, on the night they go back. Times are Unix seconds throughout.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Literal

import msgspec

from nodmix.errors import NodmixError

if TYPE_CHECKING:  # both load when a cron schedule or a zone is used, not with the `cron` tool
    from zoneinfo import ZoneInfo

ScheduleKind = Literal["cron", "every", "at"]

MIN_EVERY_SECONDS = 1.0
MAX_DURATION_SECONDS = 10 * 366 * 86400.0
"""Ten years: longer delays and intervals are refused (a `9999…9s` one would be infinite, and
every later look at the job (listing it, scheduling it) would fail)."""
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*([smhdw])")


class ScheduleError(NodmixError, ValueError):
    """A schedule that cannot be used (one line naming what is wrong)."""


class Schedule(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True, rename="camel"):
    """One of: `cron` (+ `tz`), `every` (seconds), `at` (Unix seconds)."""

    kind: ScheduleKind
    expr: str | None = None
    tz: str | None = None
    every_seconds: float | None = None
    at: float | None = None

    def describe(self) -> str:
        """Short human form (`cron 0 7 * * * Europe/Paris`, `every 30m`, `at 2026-...`)."""
        if self.kind == "cron":
            return f"cron {self.expr}" + (f" ({self.tz})" if self.tz else "")
        if self.kind == "every":
            return f"every {format_duration(self.every_seconds or 0)}"
        return f"at {datetime.fromtimestamp(self.at or 0, UTC).isoformat(timespec='seconds')}"


def parse_duration(text: str) -> float:
    """`30m`, `2s`, `1h30m`, `1d` in seconds.

    Raises:
        ScheduleError: not a duration.
    """
    compact = text.strip().lower().replace(" ", "")
    pos, total = 0, 0.0
    for match in _DURATION.finditer(compact):
        if match.start() != pos:
            break
        total += float(match.group(1)) * _UNITS[match.group(2)]
        pos = match.end()
    if not compact or pos != len(compact):
        raise ScheduleError(f"invalid duration {text!r}: use e.g. 30s, 20m, 2h, 1d, 1h30m")
    if total > MAX_DURATION_SECONDS:
        raise ScheduleError(f"duration {text[:40]!r} is longer than ten years")
    return total


def format_duration(seconds: float) -> str:
    """`90` → `1m30s`."""
    rest = int(round(seconds))
    parts = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if rest >= size:
            parts.append(f"{rest // size}{unit}")
            rest %= size
    return "".join(parts) or f"{seconds:g}s"


def zone(name: str | None) -> ZoneInfo | None:
    """The time zone named `name` (`None` for the machine's local time).

    Raises:
        ScheduleError: unknown zone.
    """
    if not name:
        return None
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ScheduleError(
            f"unknown time zone {name!r} (use an IANA name like Europe/Paris)"
        ) from None


def cron_schedule(expr: str, tz: str | None = None) -> Schedule:
    """A checked cron schedule.

    Raises:
        ScheduleError: bad expression or zone.
    """
    from cronsim import CronSim, CronSimError

    expr = " ".join(expr.split())
    tzinfo = zone(tz)
    try:
        CronSim(expr, datetime.now(tzinfo or UTC))
    except CronSimError as exc:
        raise ScheduleError(f"invalid cron expression {expr!r}: {exc}") from None
    return Schedule(kind="cron", expr=expr, tz=tz)


def every_schedule(text: str) -> Schedule:
    """A checked interval schedule (`30m`).

    Raises:
        ScheduleError: bad or too short duration.
    """
    seconds = parse_duration(text)
    if seconds < MIN_EVERY_SECONDS:
        raise ScheduleError(f"interval {text!r} is shorter than {MIN_EVERY_SECONDS:g}s")
    return Schedule(kind="every", every_seconds=seconds)


def at_schedule(text: str, tz: str | None, *, now: float) -> Schedule:
    """A one-shot schedule at an ISO date-time (in `tz`, else local time, unless it has an
    offset) or after a duration (`+20m`, `in 20m`).

    Raises:
        ScheduleError: unparsable, or in the past.
    """
    raw = text.strip()
    relative = raw.removeprefix("+").removeprefix("in ").strip()
    if raw.startswith(("+", "in ")):
        return Schedule(kind="at", at=now + parse_duration(relative))
    try:
        moment = datetime.fromisoformat(raw)
    except ValueError:
        raise ScheduleError(
            f"invalid time {text!r}: use 2026-12-01T09:00 (optionally with an offset) or +20m"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=zone(tz)) if tz else moment.astimezone()
    at = moment.timestamp()
    if at <= now:
        raise ScheduleError(f"time {text!r} is in the past")
    return Schedule(kind="at", at=at, tz=tz)


def next_fire(schedule: Schedule, after: float, *, anchor: float) -> float | None:
    """The first fire time strictly after `after` (`None`: a one-shot that is past).

    `anchor` is where an interval counts from (the job's creation), so a restarted scheduler
    keeps the same rhythm.
    """
    if schedule.kind == "at":
        at = schedule.at or 0.0
        return at if at > after else None
    if schedule.kind == "every":
        step = max(schedule.every_seconds or MIN_EVERY_SECONDS, MIN_EVERY_SECONDS)
        if after < anchor:
            return anchor + step
        count = int((after - anchor) // step) + 1
        return anchor + count * step
    from cronsim import CronSim

    tzinfo = zone(schedule.tz) or datetime.now().astimezone().tzinfo
    start = datetime.fromtimestamp(after, tzinfo)
    return next(iter(CronSim(schedule.expr or "", start))).timestamp()
