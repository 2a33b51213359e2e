"""Usage counters written soon after a turn, even when no other turn follows.

Sessions write their token counters at most once a second (`sessions/pending.py`), folding
what comes sooner into a later write. A one-shot session (a stateless OpenAI API request) has
no later turn, so after a turn with counters left waiting, one task in the runtime's
background group writes them once their interval has passed: `sessions list` shows a
session's tokens within about a second, not only after the gateway stops.
"""

from __future__ import annotations

import anyio
from anyio.abc import TaskGroup

from nodmix.sessions import SessionManager
from nodmix.sessions.session import USAGE_WRITE_INTERVAL


class UsageFlusher:
    """Writes the due usage counters after each turn, and the rest a moment later."""

    def __init__(self, sessions: SessionManager, group: TaskGroup) -> None:
        self._sessions = sessions
        self._group = group
        self._scheduled = False

    def after_turn(self) -> None:
        """A turn recorded its usage: write what is due, and schedule the rest."""
        self._sessions.flush_due()
        if not self._scheduled and self._sessions.usage_waiting:
            self._scheduled = True
            self._group.start_soon(self._write_later)

    async def _write_later(self) -> None:
        try:
            while self._sessions.usage_waiting:
                await anyio.sleep(USAGE_WRITE_INTERVAL)
                self._sessions.flush_due()
        finally:
            self._scheduled = False
