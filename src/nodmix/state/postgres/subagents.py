"""Subagent runs in PostgreSQL: one row per run, and a claim is this replica's advisory lock on
the run id (dropped by the database when the replica dies, like the file store's `flock`)."""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Any

import msgspec

from nodmix.state.postgres.locks import AdvisoryLocks, lock_key
from nodmix.subagents.records import SubagentRun

if TYPE_CHECKING:
    import psycopg

    from nodmix.state.postgres.database import Database

log = logging.getLogger("nodmix.subagents")
_decoder = msgspec.json.Decoder(SubagentRun)


class _Claim:
    def __init__(self, store: PgSubagentStore, run_id: str, key: int) -> None:
        self._store, self._run_id, self._key = store, run_id, key
        self._released = False

    def release(self) -> None:
        if self._released:
            return
        self._released = True
        with self._store.mutex:
            self._store.held.discard(self._run_id)
        self._store.locks.unlock(self._key)


class PgSubagentStore:
    """`SubagentStore` on `nodmix_subagent_runs`."""

    round_trips = True
    """Every call is a database round trip (`nodmix.offload`)."""

    def __init__(self, db: Database, locks: AdvisoryLocks) -> None:
        self.db = db
        self.locks = locks
        self.held: set[str] = set()
        self.mutex = threading.Lock()

    def save(self, run: SubagentRun) -> None:
        body = msgspec.json.encode(run)

        def work(conn: psycopg.Connection[Any]) -> None:
            conn.execute(
                "INSERT INTO nodmix_subagent_runs (id, created_at, record) VALUES (%s, %s, %s)"
                " ON CONFLICT (id) DO UPDATE SET record = EXCLUDED.record",
                (run.run_id, run.created_at, body),
            )

        self.db.run(work, durable=True)

    def get(self, run_id: str) -> SubagentRun | None:
        def work(conn: psycopg.Connection[Any]) -> bytes | None:
            row = conn.execute(
                "SELECT record FROM nodmix_subagent_runs WHERE id = %s", (run_id,)
            ).fetchone()
            return bytes(row[0]) if row else None

        raw = self.db.run(work)
        return self._decode(run_id, raw) if raw is not None else None

    def all(self) -> list[SubagentRun]:
        def work(conn: psycopg.Connection[Any]) -> list[tuple[str, bytes]]:
            rows = conn.execute(
                "SELECT id, record FROM nodmix_subagent_runs ORDER BY created_at"
            ).fetchall()
            return [(str(r[0]), bytes(r[1])) for r in rows]

        runs = (self._decode(run_id, raw) for run_id, raw in self.db.run(work))
        return [run for run in runs if run is not None]

    def remove(self, run_id: str) -> None:
        def work(conn: psycopg.Connection[Any]) -> None:
            conn.execute("DELETE FROM nodmix_subagent_runs WHERE id = %s", (run_id,))

        self.db.run(work)

    def claim(self, run_id: str) -> _Claim | None:
        key = lock_key("subagent", run_id)
        with self.mutex:  # advisory locks are re-entrant per connection: count claims here
            if run_id in self.held or not self.locks.try_lock(key):
                return None
            self.held.add(run_id)
        return _Claim(self, run_id, key)

    @staticmethod
    def _decode(run_id: str, raw: bytes) -> SubagentRun | None:
        try:
            return _decoder.decode(raw)
        except (msgspec.ValidationError, msgspec.DecodeError) as exc:
            log.warning("subagent run %s in the database is unreadable: %s", run_id, exc)
            return None
