"""One agent's session index in PostgreSQL.

The index is one row per key in `nodmix_session_index`, and a version row per agent in
`nodmix_session_versions`. A change locks the version row (`FOR UPDATE`), which serialises
changes of one agent's index across replicas like the file backend's lock file, reads the rows
changed since this replica last looked (each row carries the version that last wrote it; a
removed key leaves a tombstone until the index is compacted), applies the change and bumps the
version, all in one transaction.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import msgspec

from nodmix.sessions.store import _Changes, entry_change
from nodmix.sessions.store_entry import SessionEntry, StoreData

if TYPE_CHECKING:
    import psycopg

    from nodmix.state.postgres.database import Database

T = TypeVar("T")
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
        return self.update(entry_change(session_key, change))

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
