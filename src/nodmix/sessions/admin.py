"""Renaming and deleting sessions (`nodmix sessions rename|delete`, `sessions.rename|delete`).

A title is the store entry's `label`. Deleting moves the transcript, and the earlier files of
its compaction chain, into the agent's `trash/` folder and drops the key's store entry; nothing
is unlinked, so a deletion can be undone by hand.
"""

from __future__ import annotations

from pathlib import Path

import msgspec

from nodmix.errors import SessionError
from nodmix.sessions.locate import Located
from nodmix.sessions.manager import SessionManager
from nodmix.sessions.store_entry import SessionEntry

MAX_TITLE_LENGTH = 200


def rename_session(manager: SessionManager, found: Located, title: str) -> SessionEntry:
    """Store `title` as the display title of a current session.

    Raises:
        SessionError: the title is empty or too long, or the session is not current (only
            sessions a key points at have an index entry to hold a title).
    """
    title = title.strip()
    if not title or len(title) > MAX_TITLE_LENGTH:
        raise SessionError(f"a session title must be 1 to {MAX_TITLE_LENGTH} characters")
    if found.status != "current" or found.key is None:
        raise SessionError(
            f"session {found.session_id} is {found.status}: only current sessions have a title"
        )
    session_id = found.session_id

    def retitle(entry: SessionEntry) -> SessionEntry:
        if entry.session_id != session_id:
            raise SessionError(f"session {found.key} was replaced meanwhile; try again")
        return msgspec.structs.replace(entry, label=title)

    updated = manager.store(found.agent_id).update_entry(found.key, retitle)
    if updated is None:
        raise SessionError(f"no session {found.key}")
    return updated


def _chain(manager: SessionManager, agent_id: str, path: Path) -> list[Path]:
    """`path` and the earlier transcripts of its compaction chain that are still live."""
    stored = manager.backend.transcripts(agent_id)
    live = {t.path.name: t for t in stored if not t.folder}
    own = next((t for t in stored if t.path == path), None)
    chain = [path]
    header = own.header if own is not None else None
    while header is not None and header.parent_session:
        earlier = live.get(header.parent_session)
        if earlier is None or earlier.path in chain:
            break
        chain.append(earlier.path)
        header = earlier.header
    return chain


def delete_session(manager: SessionManager, found: Located) -> list[Path]:
    """Move a session's transcripts to the trash and drop its index entry; the new paths.

    Raises:
        SessionError: it is in the trash already, or a turn is running on it in this process.
    """
    if found.status == "deleted":
        raise SessionError(f"session {found.session_id} is already deleted ({found.path})")
    files = [found.path]
    if found.status == "current" and found.key is not None:
        gone = manager.archive(found.agent_id, [found.key])
        if found.key not in gone:
            raise SessionError(f"session {found.key} is running a turn; try again when it ends")
        files = _chain(manager, found.agent_id, gone[found.key])
    elif found.status in ("replaced", "unindexed"):
        files = _chain(manager, found.agent_id, found.path)
    return manager.backend.trash(found.agent_id, files)
