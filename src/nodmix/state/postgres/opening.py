"""Creating and loading database transcripts for a `SessionManager` (the postgres backend's
`SessionOpening`): a new session's transcript and index row go in one transaction."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nodmix.errors import SessionError
from nodmix.sessions.backend import EntryMaker
from nodmix.sessions.entries import Entry
from nodmix.sessions.keys import SessionKey
from nodmix.sessions.opening import Openings
from nodmix.sessions.session import Session
from nodmix.sessions.store_entry import SessionEntry, new_session_entry
from nodmix.sessions.transcript import transcript_file_name
from nodmix.state.postgres.index import PgSessionIndex
from nodmix.state.postgres.transcripts import PgTranscript

if TYPE_CHECKING:
    import psycopg

    from nodmix.state.postgres.database import Database

log = logging.getLogger("nodmix.state")


class PgSessionOpener(Openings):
    """Creates and loads database transcripts for a `SessionManager`."""

    def __init__(self, db: Database, state_dir: Path, *, workspace: Path, read_only: bool) -> None:
        super().__init__(state_dir, workspace=workspace, read_only=read_only)
        self.db = db

    def new(
        self,
        conn: psycopg.Connection[Any],
        key: SessionKey,
        path: Path,
        session_id: str,
        workspace: Path | None,
        *,
        parent: str | None = None,
        seed: Sequence[Entry] = (),
    ) -> PgTranscript:
        """A new transcript holding its header (which records `key`; its `cwd` is `workspace`
        or the default) and `seed`, inside the caller's transaction."""
        return PgTranscript.insert(
            conn,
            self.db,
            path,
            agent_id=key.agent_id,
            session_id=session_id,
            cwd=workspace or self.workspace,
            parent_session=parent,
            session_key=str(key),
            entries=seed,
        )

    def _index(self, store: Any) -> PgSessionIndex:
        if not isinstance(store, PgSessionIndex):
            raise TypeError("a database session needs the database index")
        return store

    def create(self, key: SessionKey, store: Any, workspace: Path | None) -> Session:
        """A new session: the transcript and its index row in one transaction."""
        index = self._index(store)
        with index.locked(sync=False) as (conn, data, _):
            existing = data.get(str(key))
            if existing is None:
                session_id = str(uuid.uuid4())
                file_name = transcript_file_name(session_id)
                transcript = self.new(conn, key, self.path(key, file_name), session_id, workspace)
                data[str(key)] = entry = new_session_entry(session_id, file_name)
        if existing is not None:  # another replica created it since we looked
            return self.load(key, index, existing, create=True, workspace=workspace)
        return Session(session_key=key, entry=entry, transcript=transcript, store=index)

    def load(
        self,
        key: SessionKey,
        store: Any,
        entry: SessionEntry,
        *,
        create: bool,
        workspace: Path | None,
    ) -> Session:
        """The session of an index entry, its transcript read from the database."""
        index = self._index(store)
        path = self.path(key, entry.session_file)
        transcript = PgTranscript.fetch(self.db, key.agent_id, path, read_only=self.read_only)
        if transcript is None:
            if not create or self.read_only:
                raise SessionError(f"session {key}: transcript {path.name} is missing")
            log.warning("session %s: transcript %s is missing; starting it afresh", key, path)
            with self.db.transaction() as conn:
                transcript = self.new(conn, key, path, entry.session_id, workspace)
        return Session(session_key=key, entry=entry, transcript=transcript, store=index)

    def swap(
        self,
        key: SessionKey,
        store: Any,
        make_entry: EntryMaker,
        *,
        workspace: Path | None,
        successor: bool,
        seed: Sequence[Entry] = (),
    ) -> Session:
        """Point `key` at a new transcript holding `seed`, in one durable transaction."""
        index = self._index(store)
        with index.locked(sync=True) as (conn, data, _):
            old = data.get(str(key))
            session_id = str(uuid.uuid4())
            file_name = transcript_file_name(session_id)
            entry = make_entry(old, session_id, file_name)
            parent = old.session_file if successor and old else None
            path = self.path(key, file_name)
            transcript = self.new(conn, key, path, session_id, workspace, parent=parent, seed=seed)
            data[str(key)] = entry
        return Session(session_key=key, entry=entry, transcript=transcript, store=index)
