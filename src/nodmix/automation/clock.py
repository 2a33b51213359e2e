"""The scheduler's clock: real time, or a `ManualClock` tests move by hand (DST nights and
week-long schedules run instantly)."""

from __future__ import annotations

import time
from typing import Protocol

import anyio


class Clock(Protocol):
    """Wall-clock time and a wait that ends at a wall-clock time."""

    def now(self) -> float:
        """Unix seconds."""
        ...

    async def sleep_until(self, deadline: float) -> None:
        """Return at `deadline` (or a little after)."""
        ...


class SystemClock:
    """Real time."""

    def now(self) -> float:
        return time.time()

    async def sleep_until(self, deadline: float) -> None:
        await anyio.sleep(max(0.0, deadline - time.time()))


class ManualClock:
    """Time that moves only when told (`advance`, `set`); sleepers wake when it passes their
    deadline."""

    def __init__(self, start: float) -> None:
        self._now = start
        self._moved = anyio.Event()

    def now(self) -> float:
        return self._now

    def set(self, when: float) -> None:
        """Jump to `when` and wake sleepers."""
        self._now = when
        moved, self._moved = self._moved, anyio.Event()
        moved.set()

    def advance(self, seconds: float) -> None:
        """Move forward by `seconds`."""
        self.set(self._now + seconds)

    async def sleep_until(self, deadline: float) -> None:
        while self._now < deadline:
            await self._moved.wait()
