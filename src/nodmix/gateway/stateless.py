"""Retention of one-shot sessions: the ones the OpenAI API creates for requests that name none.

A stateless client (a script, a chat front end that resends the whole history) gets a fresh
session per request. They are real sessions with transcripts, but a busy client would bury an
agent's session list under them (and, on ext4, creating a file gets slower as its directory
fills up), so each agent keeps the newest `gateway.openai.statelessSessionsKept` (default 500)
listed and archives the rest: the store entry goes at once, and a background worker thread
moves the transcripts to `sessions/archive/`, where they stay. Pruning runs in batches, about
once every `keep / 10` one-shot requests.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Final

import anyio.to_thread

from nodmix.errors import NodmixError
from nodmix.runtime import Runtime
from nodmix.sessions.keys import is_stateless_key
from nodmix.sessions.transcript import move_to_archive

log = logging.getLogger("nodmix.gateway")

DEFAULT_KEPT: Final = 500


class StatelessSessions:
    """Counts one-shot sessions per agent and archives the oldest beyond the limit."""

    def __init__(self, runtime: Runtime, background: Callable[..., bool]) -> None:
        """Prune `runtime`'s sessions as its config says; `background(fn, *args)` starts the
        file moves without anyone waiting for them, or returns False (then they run here)."""
        self._runtime = runtime
        self._background = background
        self._counts: dict[str, int] = {}

    @property
    def kept(self) -> int:
        """How many one-shot sessions an agent keeps listed."""
        value = self._runtime.config.gateway.openai.stateless_sessions_kept
        return DEFAULT_KEPT if value is None else value

    def created(self, agent_id: str) -> list[str]:
        """A one-shot request of `agent_id` finished: prune if over the limit. Returns the
        archived keys. Never raises: retention must not fail a request."""
        kept = self.kept
        count = self._counts.get(agent_id)
        if count is None:
            count = len(self._keys(agent_id))
        count += 1
        self._counts[agent_id] = count
        if count <= kept + max(1, kept // 10):
            return []
        try:
            return self._prune(agent_id, kept)
        except (NodmixError, OSError):
            log.warning("could not archive old one-shot sessions of %s", agent_id, exc_info=True)
            return []

    def _keys(self, agent_id: str) -> list[tuple[int, str]]:
        store = self._runtime.sessions.store(agent_id)
        return [
            (entry.updated_at, key)
            for key, entry in store.load().items()
            if is_stateless_key(key, agent_id)
        ]

    def _prune(self, agent_id: str, kept: int) -> list[str]:
        keys = sorted(self._keys(agent_id))  # least recently used first
        excess = [key for _, key in keys[: max(0, len(keys) - kept)]]
        archived = self._runtime.sessions.archive(agent_id, excess)
        self._counts[agent_id] = len(keys) - len(archived)
        if archived:
            log.info("archiving %d one-shot sessions of %s", len(archived), agent_id)
            paths = list(archived.values())
            if not self._background(_move_in_worker, paths):
                _move(paths)
        return list(archived)


def _move(paths: list[Path]) -> None:
    for path in paths:
        try:
            move_to_archive(path)
        except OSError:
            log.warning("could not move %s to the archive", path, exc_info=True)


async def _move_in_worker(paths: list[Path]) -> None:
    await anyio.to_thread.run_sync(_move, paths)
