"""Listing sessions: the rows of `SessionManager.list_sessions`, newest first."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from nodmix.config.paths import sessions_dir
from nodmix.sessions.backend import SessionBackend
from nodmix.sessions.entries import MessageEntry
from nodmix.sessions.index import SessionIndex
from nodmix.sessions.keys import parse_session_key
from nodmix.sessions.session import Session, SessionSummary
from nodmix.sessions.store_entry import SessionEntry


class Sessions(Protocol):
    """What listing needs of a `SessionManager`."""

    state_dir: Path
    backend: SessionBackend

    def store(self, agent_id: str) -> SessionIndex: ...

    def cached(self, key: str) -> Session | None: ...


def list_sessions(
    manager: Sessions,
    agents: list[str],
    *,
    limit: int | None,
    where: Callable[[str], bool] | None,
) -> list[SessionSummary]:
    """The sessions of `agents` that pass `where(key)`, most recently updated first, the
    first `limit` of them. Message counts (which read the transcript of a session not open
    in this process) are only taken for the rows returned."""
    found: list[tuple[str, str, SessionEntry]] = []
    for agent in agents:
        for key, entry in manager.store(agent).load().items():
            if where is None or where(key):
                found.append((agent, key, entry))
    found.sort(key=lambda row: (-row[2].updated_at, row[1]))
    rows: list[SessionSummary] = []
    for agent, key, entry in found if limit is None else found[:limit]:
        path = sessions_dir(manager.state_dir, agent) / entry.session_file
        count = _message_count(manager, key, entry, path)
        rows.append(
            SessionSummary(key=key, agent_id=agent, entry=entry, path=path, message_count=count)
        )
    return rows


def _message_count(manager: Sessions, key: str, entry: SessionEntry, path: Path) -> int:
    cached = manager.cached(key)
    if cached is not None and cached.session_id == entry.session_id:
        return sum(
            1
            for e in cached.transcript.entries
            if isinstance(e, MessageEntry) and e.parent_tool_call_id is None
        )
    return manager.backend.message_count(parse_session_key(key), entry, path)
