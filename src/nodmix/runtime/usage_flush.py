"""Usage counters written soon after a turn, even when no other turn follows.

Sessions write their token counters at most once a second (`sessions/pending.py`), folding
what comes sooner into a later write. A one-shot session (a stateless OpenAI API request) has
no later turn, so after a turn with counters left waiting, one task in the runtime's
background group writes them once their interval has passed: `sessions list` shows a
session's tokens within about a second, not only after the gateway stops.
"""

from __future__ import annotations

import logging

import anyio
from anyio.abc import TaskGroup

from nodmix.errors import NodmixError
from nodmix.sessions import SessionManager
from nodmix.sessions.session import USAGE_WRITE_INTERVAL

log = logging.getLogger("nodmix.sessions")


class UsageFlusher:
    """Writes the due usage counters after each turn, and the rest a moment later. With a
    database backend every write runs in a worker thread (one at a time), never on the loop."""

    def __init__(self, sessions: SessionManager, group: TaskGroup) -> None:
        self._sessions = sessions
        self._group = group
        self._scheduled = False
        self._failing = False
        self._off_loop = sessions.backend.round_trips
        self._writer: anyio.CapacityLimiter | None = None

    def after_turn(self) -> None:
        """A turn recorded its usage: write what is due, and schedule the rest."""
        if not self._off_loop:
            self._flush()
        if not self._scheduled and self._sessions.usage_waiting:
            self._scheduled = True
            self._group.start_soon(self._write_later)

    async def _write_later(self) -> None:
        try:
            if self._off_loop:
                await self._flush_off_loop()  # what is due now
            while self._sessions.usage_waiting:
                await anyio.sleep(USAGE_WRITE_INTERVAL)
                await self._flush_off_loop() if self._off_loop else self._flush()
        finally:
            self._scheduled = False

    async def _flush_off_loop(self) -> None:
        if self._writer is None:
            self._writer = anyio.CapacityLimiter(1)
        await anyio.to_thread.run_sync(self._flush, limiter=self._writer)

    def _flush(self) -> None:
        """Write what is due; counters the store cannot take now (a state database outage)
        stay pending for the next try, and the gateway keeps serving."""
        try:
            self._sessions.flush_due()
        except NodmixError as exc:
            if not self._failing:
                log.warning("usage counters not written yet: %s", exc)
            self._failing = True
        else:
            self._failing = False
