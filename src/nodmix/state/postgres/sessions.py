"""Sessions in PostgreSQL: the `SessionBackend` of `state.backend: "postgres"`.

The index of an agent is rows (`index.py`); creating a session, `/new` and a compaction's
successor write the new transcript (with its seed) and the index row in one transaction
(`opening.py`), so no reader ever sees a key pointing at a missing or half-written transcript.

Turns are serialised per session by an advisory lock (`locks.AdvisoryLocks`). Reads are round
trips (`round_trips`): the runtime opens sessions and writes usage counters from worker
threads, so a database that answers slowly holds up only the turns that wait for it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from nodmix.errors import SessionError, TranscriptError
from nodmix.sessions.descriptors import DescriptorPool
from nodmix.sessions.keys import SessionKey
from nodmix.sessions.store_entry import SessionEntry
from nodmix.sessions.turn_lock import Waiting
from nodmix.state.postgres.catalogue import PgCatalogue
from nodmix.state.postgres.index import PgSessionIndex
from nodmix.state.postgres.locks import AdvisoryLocks, lock_key
from nodmix.state.postgres.opening import PgSessionOpener
from nodmix.state.postgres.transcripts import PgTranscript
from nodmix.state.postgres.writer import Turn, turn_scope, writer_for

if TYPE_CHECKING:
    import psycopg

    from nodmix.state.postgres.database import Database

log = logging.getLogger("nodmix.state")

FIRST_POLL_S = 0.005
MAX_POLL_S = 0.1
"""A turn waiting for a session another replica holds polls with a growing interval."""


class PgSessions(PgCatalogue):
    """The `SessionBackend` of the postgres state backend."""

    kind = "postgres"
    round_trips = True

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
