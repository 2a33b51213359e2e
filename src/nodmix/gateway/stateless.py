"""Retention of one-shot sessions: the ones the OpenAI API creates for requests that name none.

A stateless client (a script, a chat front end that resends the whole history) gets a fresh
session per request. They are real sessions with transcripts, but a busy client would bury an
agent's session list under them, so each agent keeps the newest `gateway.openai.
statelessSessionsKept` (default 500) listed and archives the rest: the store entry goes, the
transcript moves to `sessions/archive/` and stays on disk. Pruning runs in batches, so a
request pays for it about once every `keep / 10` requests.
"""

from __future__ import annotations

import logging
import re
import uuid
from typing import Final

from nodmix.errors import NodmixError
from nodmix.runtime import Runtime

log = logging.getLogger("nodmix.gateway")

DEFAULT_KEPT: Final = 500
_PREFIX: Final = "openai:"
_NAME: Final = re.compile(r"openai:[0-9a-f]{20}")


def fresh_session_name() -> str:
    """The session name of a request that named none."""
    return f"{_PREFIX}{uuid.uuid4().hex[:20]}"


def is_stateless_key(key: str, agent_id: str) -> bool:
    """Whether `key` is a one-shot session of `agent_id` (`agent:<id>:openai:<20 hex>`)."""
    head = f"agent:{agent_id}:"
    return key.startswith(head) and _NAME.fullmatch(key[len(head) :]) is not None


class StatelessSessions:
    """Counts one-shot sessions per agent and archives the oldest beyond the limit."""

    def __init__(self, runtime: Runtime) -> None:
        """Prune `runtime`'s sessions as its config says."""
        self._runtime = runtime
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
            log.info("archived %d one-shot sessions of %s", len(archived), agent_id)
        return archived
