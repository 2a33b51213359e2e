"""The transcript writer of one process: a turn's appends leave the event loop.

Inside a turn (`PgSessions.hold` opens a `Turn`), `PgTranscript.append` encodes the entry,
updates its in-memory view and queues the row here instead of inserting it on the event
loop; this thread inserts queued rows in order, several at once in one pipelined transaction
when they pile up. The turn's end waits until its last row is written (`drain`), then makes
them durable and only then releases the session lock and returns the reply, so another
replica taking the session next, or a history load, sees every append of a finished turn.

A row that cannot be written is not lost silently: its transcript keeps the failure and the
rows queued after it, the turn's end (or the transcript's next call) hands them back
(`PgTranscript.settle`): a number another writer took is re-appended after what it wrote, as
a direct append would, and any other failure is raised as the error a direct append raises.
Outside a turn (CLI commands, migrations) appends stay direct. The queue is bounded: a full
queue makes the appender wait (backpressure), at most `SUBMIT_TIMEOUT_S`.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import queue
import threading
import time
import weakref
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from nodmix.errors import StateUnavailableError
from nodmix.state.postgres.database import Database, StaleConnection

if TYPE_CHECKING:
    from nodmix.sessions.entries import Entry

log = logging.getLogger("nodmix.state")

QUEUE_BOUND = 1024
"""Rows waiting at most (a full queue makes appenders wait)."""
BATCH = 128
"""Rows written in one transaction at most."""
SUBMIT_TIMEOUT_S = 30.0
DRAIN_TIMEOUT_S = 60.0

_SQL = (
    "INSERT INTO nodmix_transcript_entries (transcript_id, seq, body, message)"
    " VALUES (%s, %s, %s, %s)"
)


class Appendable(Protocol):
    """What the writer needs of a transcript (`transcripts.PgTranscript`)."""

    @property
    def tid(self) -> int:
        """The transcript's row id."""
        ...

    def queued_up_to(self, ticket: int) -> None:
        """The writer took a row of this transcript with `ticket`."""

    def failed(self, row: Row, exc: BaseException | None) -> bool:
        """`row` failed with `exc`; or (None) whether an earlier row failed."""
        ...

    def settle(self) -> None:
        """Wait for the transcript's rows; hand back or raise what failed."""


@dataclass(eq=False)
class Row:
    """One queued append."""

    transcript: Appendable
    seq: int
    line: bytes
    message: bool
    entry: Entry
    ticket: int = 0


@dataclass(eq=False)
class Turn:
    """The appends of one turn: its last ticket and the transcripts it wrote to."""

    last: int = 0
    transcripts: set[Appendable] = field(default_factory=set)
    closed: bool = False


_current: contextvars.ContextVar[Turn | None] = contextvars.ContextVar(
    "nodmix_pg_turn", default=None
)


def current_turn() -> Turn | None:
    """The open turn of this task (appends are queued), or None (appends are direct)."""
    turn = _current.get()
    return turn if turn is not None and not turn.closed else None


@contextlib.contextmanager
def turn_scope() -> Any:
    """Open a `Turn` for the block (its appends queue to the writer)."""
    turn = Turn()
    token = _current.set(turn)
    try:
        yield turn
    finally:
        turn.closed = True
        _current.reset(token)


class TranscriptWriter:
    """The writer thread of one process (see the module docs)."""

    def __init__(
        self, db: Database, *, bound: int = QUEUE_BOUND, submit_timeout: float = SUBMIT_TIMEOUT_S
    ) -> None:
        self._db = db
        self._submit_timeout = submit_timeout
        self._queue: queue.Queue[Row | None] = queue.Queue(maxsize=bound)
        self._submit = threading.Lock()
        self._done = threading.Condition()
        self._issued = 0
        self._written = 0
        self._thread: threading.Thread | None = None
        self._closed = False

    def submit(self, row: Row, turn: Turn) -> None:
        """Queue `row` (in order); waits while the queue is full.

        Raises:
            StateUnavailableError: the queue stayed full for `submit_timeout` seconds.
        """
        with self._submit:
            if self._closed:
                raise StateUnavailableError(f"the state database {self._db.where} was closed")
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="nodmix-transcript-writer", daemon=True
                )
                self._thread.start()
            row.ticket = self._issued + 1
            try:
                self._queue.put(row, timeout=self._submit_timeout)
            except queue.Full:
                raise StateUnavailableError(
                    f"the state database {self._db.where} takes no appends: "
                    f"{self._queue.maxsize} wait to be written"
                ) from None
            self._issued = row.ticket
        turn.last = row.ticket
        turn.transcripts.add(row.transcript)
        row.transcript.queued_up_to(row.ticket)

    def written(self, ticket: int) -> bool:
        """Whether every row up to `ticket` was written (or handed back)."""
        return self._written >= ticket

    def wait(self, ticket: int, *, timeout: float = DRAIN_TIMEOUT_S) -> None:
        """Block until every row up to `ticket` was written (or handed back).

        Raises:
            StateUnavailableError: the writer did not get there in `timeout` seconds.
        """
        deadline = time.monotonic() + timeout
        with self._done:
            while self._written < ticket:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise StateUnavailableError(
                        f"appends to the state database {self._db.where} did not finish"
                        f" within {timeout:g}s"
                    )
                self._done.wait(left)

    def drain(self, turn: Turn) -> None:
        """Wait for the turn's rows, then settle every transcript it wrote (raises the
        first failure, as a direct append would have)."""
        self.wait(turn.last)
        for transcript in list(turn.transcripts):
            transcript.settle()

    def close(self) -> None:
        """Write what is queued and stop the thread."""
        with self._submit:
            self._closed = True
            thread = self._thread
        if thread is not None:
            with contextlib.suppress(queue.Full):
                self._queue.put(None, timeout=5.0)
            thread.join(timeout=10.0)

    # ---- the thread -----------------------------------------------------------------------

    def _run(self) -> None:
        while True:
            first = self._queue.get()
            if first is None:
                return
            batch = [first]
            stop = False
            while len(batch) < BATCH:
                try:
                    more = self._queue.get_nowait()
                except queue.Empty:
                    break
                if more is None:
                    stop = True
                    break
                batch.append(more)
            try:
                self._write(batch)
            except Exception as exc:  # never lose the thread: hand the rows back
                log.exception("transcript writer failed")
                for row in batch:
                    row.transcript.failed(row, exc)
            with self._done:
                self._written = batch[-1].ticket
                self._done.notify_all()
            if stop:
                return

    def _write(self, batch: list[Row]) -> None:
        rows = [r for r in batch if not r.transcript.failed(r, None)]
        if len(rows) > 1:
            try:
                with (
                    self._db.connection() as conn,
                    conn.pipeline(),
                    conn.transaction(),
                    conn.cursor() as cur,
                ):
                    cur.executemany(_SQL, [_params(r) for r in rows])
                return
            except Exception:  # one at a time below tells which row failed
                log.debug("a batch of %d appends failed; writing them one by one", len(rows))
        for row in rows:
            if row.transcript.failed(row, None):
                continue
            try:
                self._insert(row)
            except Exception as exc:  # handed back to the appender
                row.transcript.failed(row, exc)

    def _insert(self, row: Row) -> None:
        try:
            with self._db.connection() as conn:
                conn.execute(_SQL, _params(row))
        except StaleConnection:  # a restarted server: once more on a fresh connection
            self._db.retry_now()
            with self._db.connection() as conn:
                conn.execute(_SQL, _params(row))


_writers: weakref.WeakKeyDictionary[Database, TranscriptWriter] = weakref.WeakKeyDictionary()
_writers_lock = threading.Lock()


def writer_for(db: Database) -> TranscriptWriter:
    """The writer of `db`'s process, started on first use and closed with the pool."""
    with _writers_lock:
        found = _writers.get(db)
        if found is None:
            found = _writers[db] = TranscriptWriter(db)
            db.closing.append(found.close)
        return found


def _params(row: Row) -> tuple[int, int, bytes, bool]:
    return (row.transcript.tid, row.seq, row.line, row.message)
