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
from nodmix.sessions.files import ARCHIVE_DIR, TRASH_DIR
from nodmix.sessions.keys import is_agent_id
from nodmix.sessions.manager import SessionManager
from nodmix.sessions.scan import read_header, transcript_files
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


def _agents(manager: SessionManager) -> list[str]:
    root = manager.state_dir / "agents"
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir() if is_agent_id(p.name) and p.is_dir())


def _folder_status(folder: str) -> Status:
    return "archived" if folder == ARCHIVE_DIR else "deleted"


def all_transcripts(manager: SessionManager, agent_id: str) -> list[Located]:
    """Every transcript of an agent: current ones first (by the index), then the rest.

    Raises:
        SessionError: the session store is corrupt.
    """
    folder = sessions_dir(manager.state_dir, agent_id)
    index = manager.store(agent_id).load()
    current = {e.session_file: (k, e) for k, e in index.items()}
    found: list[Located] = []
    headers = {p.name: read_header(p) for p in transcript_files(folder)}
    continued = {h.parent_session for h in headers.values() if h is not None}
    for name, header in headers.items():
        session_id = header.id if header is not None else Path(name).stem
        if name in current:
            key, entry = current[name]
            found.append(
                Located(
                    agent_id=agent_id,
                    session_id=session_id,
                    path=folder / name,
                    status="current",
                    key=key,
                    entry=entry,
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
                path=folder / name,
                status=status,
                key=own_key,
            )
        )
    for sub in (ARCHIVE_DIR, TRASH_DIR):
        for path in transcript_files(folder / sub):
            header = read_header(path)
            found.append(
                Located(
                    agent_id=agent_id,
                    session_id=header.id if header is not None else path.stem.split(".")[0],
                    path=path,
                    status=_folder_status(sub),
                    key=header.session_key if header is not None else None,
                )
            )
    return found


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
    matches: list[tuple[str, Path, str]] = []
    for agent in _agents(manager):
        folder = sessions_dir(manager.state_dir, agent)
        for sub in ("", ARCHIVE_DIR, TRASH_DIR):
            matches.extend(
                (agent, path, sub)
                for path in transcript_files(folder / sub if sub else folder)
                if path.name.startswith(text)
            )
    exact = [m for m in matches if m[1].name.split(".")[0] == text]
    matches = exact or matches
    ids = sorted({m[1].name.split(".")[0] for m in matches})
    if len(ids) > 1:
        shown = ", ".join(ids[:5]) + (", ..." if len(ids) > 5 else "")
        raise SessionError(f"session id prefix {text!r} is ambiguous: {shown}")
    if not matches:
        return None
    agent, path, sub = matches[0]
    if not sub:  # a live transcript: the index says whether it is current
        for row in all_transcripts(manager, agent):
            if row.path == path:
                return row
    header = read_header(path)
    return Located(
        agent_id=agent,
        session_id=header.id if header is not None else path.name.split(".")[0],
        path=path,
        status=_folder_status(sub),
        key=header.session_key if header is not None else None,
    )


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
