"""Sessions in PostgreSQL: the `SessionBackend` of `state.backend: "postgres"`.

The index of an agent is one row per key in `nodmix_session_index`, and a version row per
agent in `nodmix_session_versions`. A change locks the version row (`FOR UPDATE`), which
serialises changes of one agent's index across replicas like the file backend's lock file,
reads the rows changed since this replica last looked (each row carries the version that last
wrote it; a removed key leaves a tombstone until the index is compacted), applies the change
and bumps the version, all in one transaction. Creating a session, `/new` and a compaction's
successor write the new transcript (with its seed) and the index row in that same transaction,
so no reader ever sees a key pointing at a missing or half-written transcript.

Turns are serialised per session by an advisory lock (`locks.AdvisoryLocks`).
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
import msgspec

from nodmix.config.paths import sessions_dir
from nodmix.errors import SessionError, TranscriptError
from nodmix.sessions.backend import EntryMaker
from nodmix.sessions.descriptors import DescriptorPool
from nodmix.sessions.entries import Entry
from nodmix.sessions.keys import SessionKey
from nodmix.sessions.session import Session
from nodmix.sessions.store import _Changes
from nodmix.sessions.store_entry import SessionEntry, StoreData, new_session_entry
from nodmix.sessions.transcript import transcript_file_name
from nodmix.sessions.turn_lock import Waiting
from nodmix.state.postgres.catalogue import PgCatalogue
from nodmix.state.postgres.locks import AdvisoryLocks, lock_key
from nodmix.state.postgres.transcripts import PgTranscript
from nodmix.state.postgres.writer import Turn, turn_scope, writer_for

if TYPE_CHECKING:
    import psycopg

    from nodmix.state.postgres.database import Database

log = logging.getLogger("nodmix.state")

T = TypeVar("T")
FIRST_POLL_S = 0.005
MAX_POLL_S = 0.1
"""A turn waiting for a session another replica holds polls with a growing interval."""
_encoder = msgspec.json.Encoder(order="sorted")
_decoder = msgspec.json.Decoder(SessionEntry)


class PgSessionIndex:
    """One agent's session index in the database (see the module docs)."""

    def __init__(self, db: Database, agent_id: str, *, durable: bool = True) -> None:
        self.db = db
        self.agent_id = agent_id
        self.durable = durable
        self.path = Path(f"postgres/{agent_id}/sessions.json")
        """A name for messages (the index is rows, not a file)."""
        self._cache: StoreData = {}
        self._version = -1
        self._generation = -1

    # ---- reading --------------------------------------------------------------------------

    def get(self, session_key: str) -> SessionEntry | None:
        """One entry (a single indexed read)."""

        def read(conn: psycopg.Connection[Any]) -> bytes | None:
            row = conn.execute(
                "SELECT entry FROM nodmix_session_index WHERE agent_id = %s AND key = %s",
                (self.agent_id, session_key),
            ).fetchone()
            return bytes(row[0]) if row is not None and row[0] is not None else None

        raw = self.db.query(read)
        return _decoder.decode(raw) if raw is not None else None

    def load(self) -> StoreData:
        """Every entry (rows changed since the last look are read, not the whole index)."""
        self.db.run(lambda conn: self._refresh(conn, None))
        return dict(self._cache)

    def _refresh(self, conn: psycopg.Connection[Any], row: tuple[int, int] | None) -> None:
        if row is None:
            found = conn.execute(
                "SELECT version, generation FROM nodmix_session_versions WHERE agent_id = %s",
                (self.agent_id,),
            ).fetchone()
            row = (int(found[0]), int(found[1])) if found is not None else (0, 0)
        version, generation = row
        if generation != self._generation or version < self._version:
            rows = conn.execute(
                "SELECT key, entry FROM nodmix_session_index"
                " WHERE agent_id = %s AND entry IS NOT NULL",
                (self.agent_id,),
            ).fetchall()
            self._cache = {str(k): _decoder.decode(bytes(e)) for k, e in rows}
        elif version != self._version:
            cache = dict(self._cache)
            for key, raw in conn.execute(
                "SELECT key, entry FROM nodmix_session_index WHERE agent_id = %s AND seq > %s",
                (self.agent_id, self._version),
            ):
                if raw is None:
                    cache.pop(str(key), None)
                else:
                    cache[str(key)] = _decoder.decode(bytes(raw))
            self._cache = cache
        self._version, self._generation = version, generation

    # ---- changing -------------------------------------------------------------------------

    @contextmanager
    def locked(self, *, sync: bool) -> Iterator[tuple[psycopg.Connection[Any], _Changes, int]]:
        """A transaction holding the agent's version row, the current entries to change and
        the new version; touched keys are written when the block ends normally."""
        with self.db.transaction(durable=self.durable and sync) as conn:
            conn.execute(
                "INSERT INTO nodmix_session_versions (agent_id) VALUES (%s)"
                " ON CONFLICT (agent_id) DO NOTHING",
                (self.agent_id,),
            )
            found = conn.execute(
                "SELECT version, generation FROM nodmix_session_versions"
                " WHERE agent_id = %s FOR UPDATE",
                (self.agent_id,),
            ).fetchone()
            assert found is not None
            self._refresh(conn, (int(found[0]), int(found[1])))
            data = _Changes(self._cache)
            version = int(found[0]) + 1
            yield conn, data, version
            if data.touched:
                self._write(conn, data, version)
        if data.touched:  # committed: this replica's view moves on with it
            self._cache, self._version = dict(data), version

    def _write(self, conn: psycopg.Connection[Any], data: _Changes, version: int) -> None:
        rows = []
        for key in sorted(data.touched):
            entry = data.get(key)
            rows.append((self.agent_id, key, _encoder.encode(entry) if entry else None, version))
        with conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO nodmix_session_index (agent_id, key, entry, seq)"
                " VALUES (%s, %s, %s, %s) ON CONFLICT (agent_id, key)"
                " DO UPDATE SET entry = EXCLUDED.entry, seq = EXCLUDED.seq",
                rows,
            )
        conn.execute(
            "UPDATE nodmix_session_versions SET version = %s WHERE agent_id = %s",
            (version, self.agent_id),
        )

    def update(self, change: Callable[[StoreData], T], *, sync: bool = True) -> T:
        """Apply `change` under the agent's lock (see the module docs)."""
        with self.locked(sync=sync) as (_, data, _):
            return change(data)

    def update_entry(
        self, session_key: str, change: Callable[[SessionEntry], SessionEntry]
    ) -> SessionEntry | None:
        """Replace one entry with `change(entry)`; None if the key has none."""

        def apply(data: StoreData) -> SessionEntry | None:
            entry = data.get(session_key)
            if entry is None:
                return None
            data[session_key] = change(entry)
            return data[session_key]

        return self.update(apply)

    def compact(self) -> bool:
        """Drop tombstones (readers then reload the index once); False if there were none."""

        def work(conn: psycopg.Connection[Any]) -> bool:
            conn.execute(
                "SELECT 1 FROM nodmix_session_versions WHERE agent_id = %s FOR UPDATE",
                (self.agent_id,),
            )
            gone = conn.execute(
                "DELETE FROM nodmix_session_index WHERE agent_id = %s AND entry IS NULL",
                (self.agent_id,),
            ).rowcount
            if gone:
                conn.execute(
                    "UPDATE nodmix_session_versions SET generation = generation + 1"
                    " WHERE agent_id = %s",
                    (self.agent_id,),
                )
            return bool(gone)

        return self.db.run(work)


class PgSessionOpener:
    """Creates and loads database transcripts for a `SessionManager`."""

    def __init__(self, db: Database, state_dir: Path, *, workspace: Path, read_only: bool) -> None:
        self.db = db
        self.state_dir = state_dir
        self.workspace = workspace
        self.read_only = read_only

    def path(self, key: SessionKey, file_name: str) -> Path:
        """The name a transcript has (as under the state directory with files).

        Raises:
            SessionError: the name would leave the sessions directory.
        """
        if Path(file_name).name != file_name or file_name in ("", ".", ".."):
            raise SessionError(f"session {key} has an invalid sessionFile {file_name!r}")
        return sessions_dir(self.state_dir, key.agent_id) / file_name

    def _index(self, store: Any) -> PgSessionIndex:
        if not isinstance(store, PgSessionIndex):
            raise TypeError("a database session needs the database index")
        return store

    def create(self, key: SessionKey, store: Any, workspace: Path | None) -> Session:
        """A new session: the transcript and its index row in one transaction."""
        index = self._index(store)
        cwd = workspace or self.workspace
        with index.locked(sync=False) as (conn, data, _):
            existing = data.get(str(key))
            if existing is None:
                session_id = str(uuid.uuid4())
                file_name = transcript_file_name(session_id)
                transcript = PgTranscript.insert(
                    conn,
                    self.db,
                    self.path(key, file_name),
                    agent_id=key.agent_id,
                    session_id=session_id,
                    cwd=cwd,
                    session_key=str(key),
                )
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
                transcript = PgTranscript.insert(
                    conn,
                    self.db,
                    path,
                    agent_id=key.agent_id,
                    session_id=entry.session_id,
                    cwd=workspace or self.workspace,
                    session_key=str(key),
                )
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
            transcript = PgTranscript.insert(
                conn,
                self.db,
                self.path(key, file_name),
                agent_id=key.agent_id,
                session_id=session_id,
                cwd=workspace or self.workspace,
                parent_session=old.session_file if successor and old else None,
                session_key=str(key),
                entries=seed,
            )
            data[str(key)] = entry
        return Session(session_key=key, entry=entry, transcript=transcript, store=index)


class PgSessions(PgCatalogue):
    """The `SessionBackend` of the postgres state backend."""

    kind = "postgres"

    def __init__(
        self, db: Database, locks: AdvisoryLocks, state_dir: Path, *, process: str
    ) -> None:
        self.db = db
        self.locks = locks
        self.state_dir = state_dir
        self.process = process
        """This process's id (its row in `nodmix_flushes`)."""

    def index(self, agent_id: str, *, durable: bool) -> PgSessionIndex:
        """The agent's index rows."""
        return PgSessionIndex(self.db, agent_id, durable=durable)

    def agent_ids(self) -> list[str]:
        """Agents with an index, sorted."""

        def read(conn: psycopg.Connection[Any]) -> list[str]:
            rows = conn.execute(
                "SELECT agent_id FROM nodmix_session_versions ORDER BY agent_id"
            ).fetchall()
            return [str(r[0]) for r in rows]

        return self.db.run(read)

    def opening(
        self, *, workspace: Path, read_only: bool, descriptors: DescriptorPool
    ) -> PgSessionOpener:
        """Transcripts in the database (no descriptors needed)."""
        return PgSessionOpener(self.db, self.state_dir, workspace=workspace, read_only=read_only)

    @asynccontextmanager
    async def hold(
        self, key: SessionKey, *, timeout: float, on_wait: Waiting | None
    ) -> AsyncIterator[None]:
        """The session's advisory lock, held by this replica for the turn.

        No round trip of the turn runs on the event loop: the lock is taken and released
        from a worker thread, and the turn's appends go to this process's writer thread
        (`writer`). When the turn ends, the writer's rows of the turn are waited for (a row
        it could not write raises here, as a direct append would), then one synchronous
        commit makes them durable, and only then does the lock go and the reply return
        (appends commit asynchronously: one WAL flush a turn, not one per entry). A turn
        that fails still waits for its queued rows before the lock goes.
        """
        lock = lock_key("session", str(key))
        deadline = time.monotonic() + timeout
        poll = FIRST_POLL_S
        told = False
        while not await anyio.to_thread.run_sync(self.locks.try_lock, lock):
            now = time.monotonic()
            if now >= deadline:
                raise SessionError(
                    f"session {key} is busy: another turn (on another replica) held it for "
                    f"{timeout:g}s"
                )
            if not told and on_wait is not None:
                on_wait(str(key), None)
                told = True
            await anyio.sleep(min(poll, deadline - now))
            poll = min(poll * 2, MAX_POLL_S)
        try:
            with turn_scope() as turn:
                yield
        except BaseException:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(self._abandon, turn, lock)
            raise
        await anyio.to_thread.run_sync(self._finish, turn, lock)

    def _finish(self, turn: Turn, lock: int) -> None:
        """The end of a turn, in one worker thread: its rows written, made durable (a WAL
        flush), then the lock released."""
        try:
            writer_for(self.db).drain(turn)
            self.flush()
        finally:
            self.locks.unlock(lock)

    def _abandon(self, turn: Turn, lock: int) -> None:
        """A failed turn's rows are written before the lock goes (their errors logged: the
        turn's own error is what the caller sees)."""
        try:
            writer_for(self.db).drain(turn)
        except Exception:  # the turn failed already; this is its epilogue
            log.warning("appends of a failed turn could not all be written", exc_info=True)
        finally:
            self.locks.unlock(lock)

    def flush(self) -> None:
        """Wait until every commit of this process so far is durable (a WAL flush)."""

        def work(conn: psycopg.Connection[Any]) -> None:
            # Pipelined: BEGIN, the synchronous commit setting, the write and COMMIT go out
            # together, one round trip besides the flush itself.
            with conn.pipeline(), conn.transaction():
                conn.execute("SET LOCAL synchronous_commit = on")
                conn.execute(
                    "INSERT INTO nodmix_flushes (process) VALUES (%s)"
                    " ON CONFLICT (process) DO UPDATE SET at = now()",
                    (self.process,),
                )

        self.db.query(work)

    def message_count(self, key: SessionKey, entry: SessionEntry, path: Path) -> int:
        """Counted from the entries' message flags (`PgCatalogue.messages_in`)."""
        return self.messages_in(key.agent_id, Path(entry.session_file))

    def read(self, agent_id: str, path: Path) -> PgTranscript:
        """The stored transcript named like `path`, read-only."""
        found = PgTranscript.fetch(self.db, agent_id, path, read_only=True)
        if found is None:
            raise TranscriptError(f"{path.name}: no such transcript in the state database")
        return found

    def archived(self, agent_id: str, gone: Mapping[str, SessionEntry]) -> None:
        """The transcripts of removed keys are archived (kept, out of the live set)."""
        if not gone:
            return
        names = [entry.session_file for entry in gone.values()]

        def work(conn: psycopg.Connection[Any]) -> None:
            conn.execute(
                "UPDATE nodmix_transcripts SET status = 'archived', updated_at = now()"
                " WHERE agent_id = %s AND file_name = ANY(%s)",
                (agent_id, names),
            )

        self.db.run(work)
