"""Transcripts in PostgreSQL: `nodmix_transcripts` (header, status) and one row per entry in
`nodmix_transcript_entries`, numbered from 1 in append order.

An entry row holds the very line the file backend would write, so loading decodes all of them
with one `msgspec` call (`jsonl.parse_body`) and `nodmix state migrate` copies lines
unchanged. An append inserts at the next number; the primary key makes a second writer's
insert at the same number fail, and the loser reads the rows it missed, chains its entry to
the new last one and takes the next number: the transcript stays one linear chain even if
two replicas ever wrote at once (the session's advisory lock normally prevents that).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

import msgspec

from nodmix.errors import StateUnavailableError, TranscriptError
from nodmix.sessions.entries import (
    Entry,
    MessageEntry,
    OpaqueEntry,
    SessionHeader,
    iso_now,
    new_entry_id,
)
from nodmix.sessions.files import report_skipped
from nodmix.sessions.jsonl import SkippedLine, encode_header, encode_line, parse_body, parse_header
from nodmix.sessions.transcript import Transcript, _Link
from nodmix.state.postgres.writer import Row, current_turn, writer_for

if TYPE_CHECKING:
    import psycopg

    from nodmix.state.postgres.database import Database

log = logging.getLogger("nodmix.state")

MAX_RELINKS = 20


class PgTranscript(Transcript):
    """A transcript whose entries are rows (see the module docs)."""

    __slots__ = ("_db", "_failure", "_queued", "_seq", "_tid", "_unwritten")

    def __init__(
        self,
        db: Database,
        tid: int,
        path: Path,
        header: SessionHeader,
        entries: list[Entry],
        *,
        seq: int,
        size: int,
        read_only: bool,
        skipped: list[SkippedLine] | None = None,
    ) -> None:
        super().__init__(
            path, header, entries, size=size, lines=None, read_only=read_only, skipped=skipped
        )
        self._db = db
        self._tid = tid
        self._seq = seq
        """The number of the last row read or written (or queued to be written)."""
        self._queued = 0
        """The writer's ticket of this transcript's last queued row."""
        self._failure: BaseException | None = None
        self._unwritten: list[Row] = []
        """Rows the writer could not write (the first failed with `_failure`), in order."""

    @property
    def tid(self) -> int:
        """The transcript's row id."""
        return self._tid

    # ---- opening --------------------------------------------------------------------------

    @classmethod
    def insert(
        cls,
        conn: psycopg.Connection[Any],
        db: Database,
        path: Path,
        *,
        agent_id: str,
        session_id: str,
        cwd: str | Path,
        parent_session: str | None = None,
        session_key: str | None = None,
        entries: Sequence[Entry] = (),
    ) -> Self:
        """Create a transcript holding `entries` inside the caller's transaction.

        Raises:
            TranscriptError: one with this name exists already.
        """
        import psycopg

        header = SessionHeader(
            id=session_id,
            timestamp=iso_now(),
            cwd=str(cwd),
            parent_session=parent_session,
            session_key=session_key,
        )
        head = encode_header(header)
        lines = [encode_line(path, e) for e in entries]
        try:
            with conn.transaction():
                row = conn.execute(
                    "INSERT INTO nodmix_transcripts"
                    " (agent_id, file_name, session_id, session_key, header)"
                    " VALUES (%s, %s, %s, %s, %s) RETURNING id",
                    (agent_id, path.name, session_id, session_key, head),
                ).fetchone()
        except psycopg.errors.UniqueViolation:
            raise TranscriptError(f"{path}: transcript already exists") from None
        assert row is not None
        tid = int(row[0])
        if lines:
            with conn.cursor() as cur:
                cur.executemany(
                    "INSERT INTO nodmix_transcript_entries (transcript_id, seq, body, message)"
                    " VALUES (%s, %s, %s, %s)",
                    [
                        (tid, n, line, is_message(e))
                        for n, (line, e) in enumerate(zip(lines, entries, strict=True), start=1)
                    ],
                )
        size = len(head) + sum(len(line) for line in lines)
        return cls(db, tid, path, header, list(entries), seq=len(lines), size=size, read_only=False)

    @classmethod
    def fetch(
        cls, db: Database, agent_id: str, path: Path, *, read_only: bool = False
    ) -> Self | None:
        """The transcript named `path.name` of `agent_id`, all its entries read; None if none.

        Raises:
            TranscriptError: its header is not valid.
        """

        def read(conn: psycopg.Connection[Any]) -> tuple[int, bytes, list[tuple[int, bytes]]]:
            row = conn.execute(
                "SELECT id, header FROM nodmix_transcripts WHERE agent_id = %s AND file_name = %s",
                (agent_id, path.name),
            ).fetchone()
            if row is None:
                return -1, b"", []
            rows = conn.execute(
                "SELECT seq, body FROM nodmix_transcript_entries WHERE transcript_id = %s"
                " ORDER BY seq",
                (row[0],),
            ).fetchall()
            return int(row[0]), bytes(row[1]), [(int(s), bytes(b)) for s, b in rows]

        tid, head, rows = db.run(read)
        if tid < 0:
            return None
        header, _ = parse_header(path, head)
        skipped: list[SkippedLine] = []
        body = b"".join(b for _, b in rows)
        entries = parse_body(path, body, 0, len(body), skipped=skipped) if body else []
        report_skipped(path, skipped)
        seq = rows[-1][0] if rows else 0
        return cls(
            db,
            tid,
            path,
            header,
            entries,
            seq=seq,
            size=len(head) + len(body),
            read_only=read_only,
            skipped=skipped,
        )

    # ---- reading --------------------------------------------------------------------------

    def catch_up(self) -> list[Entry]:
        """Read rows another replica appended since (one indexed query)."""
        return self.refresh()

    def refresh(self) -> list[Entry]:
        """Read rows appended since this object last read; return the new entries."""
        self.settle()

        def read(conn: psycopg.Connection[Any]) -> list[tuple[int, bytes]]:
            rows = conn.execute(
                "SELECT seq, body FROM nodmix_transcript_entries"
                " WHERE transcript_id = %s AND seq > %s ORDER BY seq",
                (self._tid, self._seq),
            ).fetchall()
            return [(int(s), bytes(b)) for s, b in rows]

        rows = self._db.query(read)
        return self._take(rows)

    def _take(self, rows: list[tuple[int, bytes]]) -> list[Entry]:
        if not rows:
            return []
        body = b"".join(b for _, b in rows)
        skipped: list[SkippedLine] = []
        new = parse_body(self.path, body, 0, len(body), skipped=skipped)
        report_skipped(self.path, skipped)
        self.skipped.extend(skipped)
        self._entries.extend(new)
        self._seq = rows[-1][0]
        self._size += len(body)
        return new

    # ---- appending ------------------------------------------------------------------------

    def append(self, entry: Entry) -> Entry:
        """Insert the entry as the next row (see the module docs for a concurrent writer);
        inside a turn the row is queued to this process's writer (`writer`).

        Raises:
            TranscriptError: the transcript is read-only, or the database refused the write
                (of this entry, or of one queued before it).
        """
        if self.read_only:
            raise TranscriptError(f"{self.path}: transcript was opened read-only")
        if self._failure is not None:
            self.settle()
        turn = current_turn()
        if turn is None:
            return self._append_now(entry)
        line = encode_line(self.path, entry)
        row = Row(self, self._seq + 1, line, is_message(entry), entry)
        writer_for(self._db).submit(row, turn)
        self._seq = row.seq
        self._size += len(line)
        self._entries.append(entry)
        return entry

    # ---- the writer's side ----------------------------------------------------------------

    def queued_up_to(self, ticket: int) -> None:
        """The writer took a row of this transcript with `ticket`."""
        self._queued = ticket

    def failed(self, row: Row, exc: BaseException | None) -> bool:
        """The writer's report: `row` failed with `exc`, or (`exc` None) whether an earlier
        row failed, so `row` must wait too (it is kept unwritten, in order)."""
        if exc is None and self._failure is None:
            return False
        if self._failure is None:
            self._failure = exc
        self._unwritten.append(row)
        return True

    def settle(self) -> None:
        """Wait for this transcript's queued rows; rows the writer could not write are taken
        back and appended directly (after another writer's rows), or their error raised.

        Raises:
            TranscriptError: the database refused a queued row.
            StateUnavailableError: the database could not be reached.
        """
        import psycopg

        if self._queued and not writer_for(self._db).written(self._queued):
            writer_for(self._db).wait(self._queued)
        if self._failure is None:
            return
        exc, rows = self._failure, self._unwritten
        self._failure, self._unwritten = None, []
        gone = {id(r.entry) for r in rows}
        self._entries[:] = [e for e in self._entries if id(e) not in gone]
        self._seq = rows[0].seq - 1
        self._size -= sum(len(r.line) for r in rows)
        if isinstance(exc, psycopg.errors.UniqueViolation):
            for row in rows:  # another writer took the number: chained after its rows
                self._append_now(row.entry)
            return
        if isinstance(exc, psycopg.errors.ForeignKeyViolation):
            raise TranscriptError(f"{self.path}: the transcript was removed") from None
        if isinstance(exc, StateUnavailableError):
            raise exc
        raise TranscriptError(f"{self.path}: the database refused an append: {exc}") from None

    def _append_now(self, entry: Entry) -> Entry:
        import psycopg

        for _ in range(MAX_RELINKS):
            line = encode_line(self.path, entry)
            seq = self._seq + 1
            try:
                self._insert(seq, line, is_message(entry))
            except psycopg.errors.UniqueViolation:
                leaf = self.leaf_id
                new = self.refresh()  # another writer took that number: read what it wrote
                if any(e.id == entry.id for e in new):
                    return entry  # ours after all: a retry of an insert that had committed
                if entry.parent_id == leaf and self.leaf_id != leaf:
                    entry = _relinked(entry, self.leaf_id)
                log.warning("%s: another writer appended meanwhile; chained after it", self.path)
                continue
            except psycopg.errors.ForeignKeyViolation:
                raise TranscriptError(f"{self.path}: the transcript was removed") from None
            self._seq = seq
            self._size += len(line)
            self._entries.append(entry)
            return entry
        raise TranscriptError(f"{self.path}: too many concurrent writers")

    def _link(self) -> _Link:
        """A new entry's id and parent: the last entry this object knows (an append that
        finds another writer's rows chains it after them)."""
        if self.read_only:
            raise TranscriptError(f"{self.path}: transcript was opened read-only")
        return {"id": new_entry_id(), "parent_id": self.leaf_id, "timestamp": iso_now()}

    def _insert(self, seq: int, line: bytes, message: bool) -> None:
        from nodmix.state.postgres.database import StaleConnection

        sql = (
            "INSERT INTO nodmix_transcript_entries (transcript_id, seq, body, message)"
            " VALUES (%s, %s, %s, %s)"
        )
        try:
            with self._db.connection() as conn:
                conn.execute(sql, (self._tid, seq, line, message))
        except StaleConnection:  # a restarted server: once more on a fresh connection
            with self._db.connection() as conn:
                conn.execute(sql, (self._tid, seq, line, message))

    def sync(self) -> None:
        """Make every append so far durable (one synchronous commit flushes them all)."""
        if self.read_only:
            return
        self.settle()
        with self._db.transaction(durable=True) as conn:
            conn.execute(
                "UPDATE nodmix_transcripts SET updated_at = now() WHERE id = %s", (self._tid,)
            )

    def complete_bytes(self) -> bytes:
        """The header and the rows this object has read, as the file backend's bytes."""

        def read(conn: psycopg.Connection[Any]) -> tuple[bytes, list[bytes]]:
            head = conn.execute(
                "SELECT header FROM nodmix_transcripts WHERE id = %s", (self._tid,)
            ).fetchone()
            rows = conn.execute(
                "SELECT body FROM nodmix_transcript_entries WHERE transcript_id = %s"
                " AND seq <= %s ORDER BY seq",
                (self._tid, self._seq),
            ).fetchall()
            return (bytes(head[0]) if head else b""), [bytes(r[0]) for r in rows]

        self.settle()
        header, lines = self._db.run(read)
        return header + b"".join(lines)

    def close(self) -> None:
        """Nothing is held between appends."""

    def __del__(self) -> None:
        pass


def is_message(entry: Entry) -> bool:
    """A top-level message (what listings count; nested code-mode calls are not)."""
    return isinstance(entry, MessageEntry) and entry.parent_tool_call_id is None


def _relinked(entry: Entry, parent_id: str | None) -> Entry:
    if isinstance(entry, OpaqueEntry):
        raw = {**entry.raw, "parentId": parent_id}
        return msgspec.structs.replace(entry, parent_id=parent_id, raw=raw)
    return msgspec.structs.replace(entry, parent_id=parent_id)
