"""Find a session by key or by session id, including sessions no key points at any more.

A key names the current transcript of a conversation slot; `/new` replaces it, compaction may
continue it in a successor file, the gateway archives one-shot sessions and `nodmix sessions
delete` moves them to the trash. All of those transcripts stay reachable by their session id
(or an unambiguous prefix of it), and `all_transcripts` lists them with their status.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import msgspec

from nodmix.config.paths import sessions_dir
from nodmix.errors import SessionError
from nodmix.sessions.backend import StoredTranscript
from nodmix.sessions.files import ARCHIVE_DIR
from nodmix.sessions.keys import is_agent_id
from nodmix.sessions.manager import SessionManager
from nodmix.sessions.scan import read_header
from nodmix.sessions.store_entry import SessionEntry

Status = Literal["current", "replaced", "continued", "unindexed", "archived", "deleted"]
"""`current`: what its key points at; `replaced`: its key moved on (`/new`); `continued`: an
earlier part of a session compaction continued in a successor file; `unindexed`: no key in
the index names it; `archived` / `deleted`: in `archive/` / `trash/`."""

MIN_ID_PREFIX = 4


class Located(msgspec.Struct, frozen=True, kw_only=True):
    """One transcript and what the index says about it."""

    agent_id: str
    session_id: str
    path: Path
    status: Status
    key: str | None
    """The key it belongs to (from the index, else from its header), if known."""
    entry: SessionEntry | None = None
    """The store entry, for a current session."""
    modified_ms: int | None = None
    """When the transcript last changed (ms since the epoch), where it was listed."""


def _agents(manager: SessionManager) -> list[str]:
    """Agents with a folder (files) or with sessions in the backend (a database)."""
    root = manager.state_dir / "agents"
    folders = (
        {p.name for p in root.iterdir() if is_agent_id(p.name) and p.is_dir()}
        if root.is_dir()
        else set()
    )
    if manager.backend.kind != "files":
        folders.update(manager.agent_ids())
    return sorted(folders)


def _folder_status(folder: str) -> Status:
    return "archived" if folder == ARCHIVE_DIR else "deleted"


def all_transcripts(manager: SessionManager, agent_id: str) -> list[Located]:
    """Every transcript of an agent: current ones first (by the index), then the rest.

    Raises:
        SessionError: the session store is corrupt.
    """
    index = manager.store(agent_id).load()
    current = {e.session_file: (k, e) for k, e in index.items()}
    found: list[Located] = []
    stored = manager.backend.transcripts(agent_id)
    live = [t for t in stored if not t.folder]
    continued = {t.header.parent_session for t in live if t.header is not None}
    for t in live:
        name, header = t.path.name, t.header
        session_id = header.id if header is not None else Path(name).stem
        if name in current:
            key, entry = current[name]
            found.append(
                Located(
                    agent_id=agent_id,
                    session_id=session_id,
                    path=t.path,
                    status="current",
                    key=key,
                    entry=entry,
                    modified_ms=t.modified_ms,
                )
            )
            continue
        own_key = header.session_key if header is not None else None
        status: Status = (
            "continued" if name in continued else "replaced" if own_key in index else "unindexed"
        )
        found.append(
            Located(
                agent_id=agent_id,
                session_id=session_id,
                path=t.path,
                status=status,
                key=own_key,
                modified_ms=t.modified_ms,
            )
        )
    found.extend(_put_away(agent_id, t) for t in stored if t.folder)
    return found


def _put_away(agent_id: str, t: StoredTranscript) -> Located:
    header = t.header if t.header is not None else read_header(t.path)
    return Located(
        agent_id=agent_id,
        session_id=header.id if header is not None else t.path.stem.split(".")[0],
        path=t.path,
        status=_folder_status(t.folder),
        key=header.session_key if header is not None else None,
        modified_ms=t.modified_ms,
    )


def _by_key(manager: SessionManager, text: str) -> Located | None:
    key = manager.resolve_key(text)
    entry = manager.store(key.agent_id).get(str(key))
    if entry is None:
        return None
    path = sessions_dir(manager.state_dir, key.agent_id) / entry.session_file
    return Located(
        agent_id=key.agent_id,
        session_id=entry.session_id,
        path=path,
        status="current",
        key=str(key),
        entry=entry,
    )


def _by_id(manager: SessionManager, text: str) -> Located | None:
    """The transcript whose session id is `text` or starts with it (unambiguously)."""
    if len(text) < MIN_ID_PREFIX or "/" in text or ":" in text:
        return None
    matches: list[tuple[str, StoredTranscript]] = []
    for agent in _agents(manager):
        matches.extend((agent, t) for t in manager.backend.transcripts(agent, prefix=text))
    exact = [m for m in matches if m[1].path.name.split(".")[0] == text]
    matches = exact or matches
    ids = sorted({m[1].path.name.split(".")[0] for m in matches})
    if len(ids) > 1:
        shown = ", ".join(ids[:5]) + (", ..." if len(ids) > 5 else "")
        raise SessionError(f"session id prefix {text!r} is ambiguous: {shown}")
    if not matches:
        return None
    agent, stored = matches[0]
    if not stored.folder:  # a live transcript: the index says whether it is current
        for row in all_transcripts(manager, agent):
            if row.path == stored.path:
                return row
    return _put_away(agent, stored)


def locate(manager: SessionManager, text: str) -> Located:
    """The session named by a key (or bare name) or a session id (or a prefix of one).

    A key wins over an id. When the key's store cannot be read, an id still works (the file
    is found on disk), so a damaged index never hides the transcripts.

    Raises:
        SessionError: nothing matches (one line, naming the key), the prefix is ambiguous, or
            the store is corrupt and `text` is no session id.
    """
    try:
        key = manager.resolve_key(text)
    except SessionError:
        by_id = _by_id(manager, text)
        if by_id is not None:
            return by_id
        raise
    try:
        found = _by_key(manager, str(key))
    except SessionError:  # the store is corrupt or locked: an id may still find the file
        by_id = _by_id(manager, text)
        if by_id is not None:
            return by_id
        raise
    if found is not None:
        return found
    by_id = _by_id(manager, text)
    if by_id is not None:
        return by_id
    raise SessionError(f"no session {key}")
