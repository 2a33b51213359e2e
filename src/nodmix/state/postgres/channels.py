"""Channel state in PostgreSQL: delivery (resume positions, messages accepted but not answered,
answered keys, append-only records) and pairing, shared by every replica.

A message is accepted with one statement that inserts it as pending unless its key was
answered already (or is pending): whichever replica receives a redelivery, it is answered
once. The replica that takes over a channel's poller runs the messages the previous holder
accepted and did not answer. Pairing state is a document per channel, changed under an
advisory lock, so `nodmix pairing approve` on any machine is seen by every replica.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from nodmix.channels.delivery import ANSWERED_KEPT, DeliveryLog
from nodmix.channels.pairing import PairingState, PairingStore
from nodmix.channels.types import InboundMessage
from nodmix.state.postgres import documents
from nodmix.state.postgres.locks import AdvisoryLocks, lock_key

if TYPE_CHECKING:
    import psycopg

    from nodmix.state.postgres.database import Database

POSITIONS = "channel.position"
PAIRING = "channel.pairing"
PRUNE_EVERY = 200


class PgDeliveryLog(DeliveryLog):
    """`DeliveryLog` on rows (see the module docs)."""

    round_trips = True
    """Every call is a database round trip (`nodmix.offload`)."""

    shared = True

    def __init__(self, db: Database, state_dir: Path, channel: str) -> None:
        # The file log reads its answered keys on construction; this one asks the database.
        self.root = state_dir / "channels" / channel
        self.pending_dir = self.root / "pending"
        self.db = db
        self.channel = channel
        self._done = 0

    def position(self) -> dict[str, Any]:
        """The saved resume point (empty when there is none)."""
        found = documents.read(self.db, POSITIONS, self.channel)
        if not found or not found[0]:
            return {}
        data = json.loads(found[0])
        return data if isinstance(data, dict) else {}

    def save_position(self, position: dict[str, Any]) -> None:
        """Persist the resume point."""
        documents.write(self.db, POSITIONS, self.channel, json.dumps(position).encode())

    def records(self, name: str, after: int = 0) -> tuple[list[dict[str, Any]], int]:
        """The records of `name` with ids past `after` (every replica's), and the last id."""

        def work(conn: psycopg.Connection[Any]) -> list[tuple[int, bytes]]:
            rows = conn.execute(
                "SELECT id, body FROM nodmix_channel_records WHERE channel = %s AND name = %s"
                " AND id > %s ORDER BY id",
                (self.channel, name, after),
            ).fetchall()
            return [(int(r[0]), bytes(r[1])) for r in rows]

        rows = self.db.run(work)
        return _decoded([body for _, body in rows]), max((i for i, _ in rows), default=after)

    def record_names(self) -> list[str]:
        """The names that have records."""

        def work(conn: psycopg.Connection[Any]) -> list[str]:
            rows = conn.execute(
                "SELECT DISTINCT name FROM nodmix_channel_records WHERE channel = %s ORDER BY 1",
                (self.channel,),
            ).fetchall()
            return [str(r[0]) for r in rows]

        return self.db.run(work)

    def append_record(self, name: str, record: dict[str, Any]) -> None:
        """Add one record to `name` (one row, committed durably)."""
        body = json.dumps(record, separators=(",", ":")).encode()

        def work(conn: psycopg.Connection[Any]) -> None:
            conn.execute(
                "INSERT INTO nodmix_channel_records (channel, name, body) VALUES (%s, %s, %s)",
                (self.channel, name, body),
            )

        self.db.run(work, durable=True)

    def compact_records(
        self, name: str, records: list[dict[str, Any]], *, upto: int
    ) -> tuple[list[dict[str, Any]], int]:
        """Replace the rows of `name` up to id `upto` with `records`, in one transaction (a
        crash leaves the old rows or the new ones). Rows other replicas appended after `upto`
        stay; returns them with the new mark."""
        bodies = [json.dumps(r, separators=(",", ":")).encode() for r in records]

        def work(conn: psycopg.Connection[Any]) -> tuple[list[bytes], int]:
            later = conn.execute(
                "SELECT id, body FROM nodmix_channel_records WHERE channel = %s AND name = %s"
                " AND id > %s ORDER BY id",
                (self.channel, name, upto),
            ).fetchall()
            conn.execute(
                "DELETE FROM nodmix_channel_records WHERE channel = %s AND name = %s AND id <= %s",
                (self.channel, name, upto),
            )
            rows = conn.execute(
                "INSERT INTO nodmix_channel_records (channel, name, body)"
                " SELECT %s, %s, b FROM unnest(%s::bytea[]) WITH ORDINALITY AS t(b, n)"
                " ORDER BY n RETURNING id",
                (self.channel, name, bodies),
            ).fetchall()
            ids = [int(r[0]) for r in [*later, *rows]]
            return [bytes(r[1]) for r in later], max(ids, default=upto)

        later, mark = self.db.run(work, durable=True)
        return _decoded(later), mark

    def seen(self, msg: InboundMessage) -> bool:
        """Answered already, or waiting to be."""

        def work(conn: psycopg.Connection[Any]) -> bool:
            row = conn.execute(
                "SELECT 1 FROM nodmix_channel_answered WHERE channel = %s AND key = %s"
                " UNION ALL SELECT 1 FROM nodmix_channel_pending WHERE channel = %s AND key = %s",
                (self.channel, msg.key, self.channel, msg.key),
            ).fetchone()
            return row is not None

        return self.db.run(work)

    def accept(self, msg: InboundMessage) -> bool:
        """Record `msg` as pending (durably); False when it is a duplicate."""
        body = json.dumps(msgspec.to_builtins(msg, enc_hook=str)).encode()

        def work(conn: psycopg.Connection[Any]) -> bool:
            row = conn.execute(
                "INSERT INTO nodmix_channel_pending (channel, key, received_at, message)"
                " SELECT %s, %s, %s, %s WHERE NOT EXISTS (SELECT 1 FROM nodmix_channel_answered"
                " WHERE channel = %s AND key = %s) ON CONFLICT (channel, key) DO NOTHING"
                " RETURNING 1",
                (self.channel, msg.key, time.time(), body, self.channel, msg.key),
            ).fetchone()
            return row is not None

        return self.db.run(work, durable=True)

    def done(self, msg: InboundMessage) -> None:
        """`msg` is answered: remember its key and drop it from pending."""
        self._done += 1
        prune = self._done % PRUNE_EVERY == 0

        def work(conn: psycopg.Connection[Any]) -> None:
            conn.execute(
                "INSERT INTO nodmix_channel_answered (channel, key) VALUES (%s, %s)"
                " ON CONFLICT (channel, key) DO NOTHING",
                (self.channel, msg.key),
            )
            conn.execute(
                "DELETE FROM nodmix_channel_pending WHERE channel = %s AND key = %s",
                (self.channel, msg.key),
            )
            if prune:
                conn.execute(
                    "DELETE FROM nodmix_channel_answered WHERE channel = %s AND key IN ("
                    " SELECT key FROM nodmix_channel_answered WHERE channel = %s"
                    " ORDER BY answered_at DESC OFFSET %s)",
                    (self.channel, self.channel, ANSWERED_KEPT),
                )

        self.db.run(work)

    def pending(self) -> list[InboundMessage]:
        """Messages accepted but not answered (oldest first), by any replica."""

        def work(conn: psycopg.Connection[Any]) -> list[bytes]:
            rows = conn.execute(
                "SELECT message FROM nodmix_channel_pending WHERE channel = %s"
                " ORDER BY received_at",
                (self.channel,),
            ).fetchall()
            return [bytes(r[0]) for r in rows]

        out = []
        for raw in self.db.run(work):
            with contextlib.suppress(msgspec.ValidationError, ValueError):
                out.append(msgspec.convert(json.loads(raw), InboundMessage))
        return out


def _decoded(bodies: list[bytes]) -> list[dict[str, Any]]:
    out = []
    for body in bodies:
        with contextlib.suppress(ValueError):
            record = json.loads(body)
            if isinstance(record, dict):
                out.append(record)
    return out


class PgPairingStore(PairingStore):
    """Pairing documents, one per channel, changed under an advisory lock."""

    round_trips = True
    """Every call is a database round trip (`nodmix.offload`)."""

    def __init__(self, db: Database, locks: AdvisoryLocks, state_dir: Path) -> None:
        super().__init__(state_dir)
        self.db = db
        self.locks = locks
        # The advisory lock is this replica's (its session's): worker threads of one replica
        # changing the same channel at once take this first.
        self._mutex = threading.RLock()

    def load(self, channel: str) -> PairingState:
        """The channel's state, expired codes and old issue-log entries dropped."""
        found = documents.read(self.db, PAIRING, channel)
        if not found or not found[0]:
            return PairingState()
        try:
            state = msgspec.json.decode(found[0], type=PairingState)
        except (msgspec.ValidationError, msgspec.DecodeError):
            return PairingState()
        return self._current(state)

    def _save(self, channel: str, state: PairingState) -> None:
        documents.write(self.db, PAIRING, channel, msgspec.json.encode(state))

    @contextlib.contextmanager
    def _locked(self, channel: str) -> Iterator[None]:
        with (
            self._mutex,
            self.locks.waiting(
                lock_key("pairing", channel), timeout=10.0, what=f"pairing state of {channel}"
            ),
        ):
            yield

    def channels(self) -> list[str]:
        """Channels that have pairing state."""
        return documents.names(self.db, PAIRING)
