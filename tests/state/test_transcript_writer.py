"""A turn's appends on PostgreSQL go through the process's writer thread, off the event loop:
what a finished turn appended is stored, in order, before the session lock goes and the reply
returns; a row the database refuses is an error at the turn's end, never lost silently; a
number another writer took is chained after its rows as a direct append would be."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import anyio
import psycopg
import pytest

from nodmix.errors import StateUnavailableError, TranscriptError
from nodmix.sessions.entries import MessageEntry
from nodmix.sessions.manager import SessionManager
from nodmix.state.postgres.backend import PostgresState
from nodmix.state.postgres.locks import lock_key
from nodmix.state.postgres.transcripts import PgTranscript, is_message
from nodmix.state.postgres.writer import Row, TranscriptWriter, Turn
from tests.sessions.sessions_builders import assistant, user
from tests.state.conftest import pg_settings

Process = Callable[[], SessionManager]


@pytest.fixture
def process(postgres_url: str, isolated_state: Path) -> Iterator[Process]:
    """A session manager of a new replica (own pool, locks and writer) per call."""
    opened: list[tuple[PostgresState, SessionManager]] = []

    def make() -> SessionManager:
        backend = PostgresState.open(pg_settings(postgres_url), isolated_state, role="test")
        manager = SessionManager(isolated_state, backend=backend.sessions())
        opened.append((backend, manager))
        return manager

    yield make
    for backend, manager in reversed(opened):
        manager.close()
        backend.close()


def _texts(manager: SessionManager, key: str) -> list[str]:
    entries = manager.open(key, create=False).entries
    return [e.message.text for e in entries if isinstance(e, MessageEntry)]


def _linear(manager: SessionManager, key: str) -> bool:
    entries = manager.open(key, create=False).entries
    return all(e.parent_id == (entries[i - 1].id if i else None) for i, e in enumerate(entries))


def _stored(url: str) -> int:
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT count(*) FROM nodmix_transcript_entries").fetchone()
    return int(row[0]) if row else -1


def _lock_held(url: str, key: int) -> bool:
    classid, objid = (key >> 32) & 0xFFFFFFFF, key & 0xFFFFFFFF
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted"
            " AND classid::bigint = %s AND objid::bigint = %s",
            (classid, objid),
        ).fetchone()
    return bool(row and row[0])


def _insert_waiting(url: str) -> bool:
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
            " AND query LIKE 'INSERT INTO nodmix_transcript_entries%%'"
        ).fetchone()
    return bool(row and row[0])


def _poll(check: Callable[[], bool], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.02)
    return check()


@pytest.mark.parametrize("fails", [False, True], ids=["replied", "failed"])
def test_a_turns_appends_are_stored_before_its_lock_goes(
    process: Process, postgres_url: str, fails: bool
) -> None:
    manager = process()
    manager.open("work").append_message(user("before"))
    before = _stored(postgres_url)
    key = lock_key("session", "agent:main:work")
    seen_after_hold: list[int] = []

    async def turn() -> None:
        with contextlib.suppress(RuntimeError):
            async with manager.hold_turn("work", timeout=10):
                session = manager.open("work")
                session.append_message(user("question"))
                session.append_message(assistant("answer"))
                if fails:
                    raise RuntimeError("the model failed after the turn appended")
        seen_after_hold.append(_stored(postgres_url))

    with psycopg.connect(postgres_url) as blocker:
        # Inserts wait behind this lock: the writer is stuck until it goes.
        blocker.execute("LOCK TABLE nodmix_transcript_entries IN EXCLUSIVE MODE")

        async def main() -> None:
            async with anyio.create_task_group() as group:
                group.start_soon(turn)
                assert await anyio.to_thread.run_sync(
                    _poll, lambda: _insert_waiting(postgres_url), 30.0
                )
                # While the rows wait, the session stays locked and the turn unfinished.
                released = await anyio.to_thread.run_sync(
                    _poll, lambda: not _lock_held(postgres_url, key), 1.0
                )
                assert not released, "the lock went before the turn's rows were written"
                assert not seen_after_hold
                blocker.commit()

        anyio.run(main)
    assert seen_after_hold == [before + 2]
    assert _texts(process(), "work") == ["before", "question", "answer"]


def test_many_appends_of_one_turn_are_stored_in_order(process: Process) -> None:
    manager = process()

    async def turn() -> None:
        async with manager.hold_turn("work", timeout=10):
            session = manager.open("work")
            for i in range(300):
                session.append_message(user(f"m{i}"))

    anyio.run(turn)
    other = process()
    assert _texts(other, "work") == [f"m{i}" for i in range(300)]
    assert _linear(other, "work")


def test_a_refused_append_fails_the_turn(process: Process, postgres_url: str) -> None:
    manager = process()
    manager.open("work").append_message(user("before"))

    async def turn() -> None:
        async with manager.hold_turn("work", timeout=10):
            session = manager.open("work")
            with psycopg.connect(postgres_url, autocommit=True) as conn:
                conn.execute("DELETE FROM nodmix_transcripts")  # the rows' parent is gone
            session.append_message(user("question"))
            session.append_message(assistant("answer"))

    with pytest.raises(TranscriptError, match="the transcript was removed"):
        anyio.run(turn)


def test_a_number_another_writer_took_is_chained_after_its_rows(process: Process) -> None:
    a, b = process(), process()
    stale = a.open("work")
    stale.append_message(user("one"))
    b.open("work").append_message(user("two"))  # a does not know

    async def turn() -> None:
        async with a.hold_turn("work", timeout=10):
            stale.append_message(user("three"))  # queued at the number "two" took
            stale.append_message(assistant("four"))

    anyio.run(turn)
    assert [e.message.text for e in stale.entries if isinstance(e, MessageEntry)] == [
        "one",
        "two",
        "three",
        "four",
    ]
    fresh = process()
    assert _texts(fresh, "work") == ["one", "two", "three", "four"]
    assert _linear(fresh, "work")


def test_a_full_queue_makes_the_appender_wait_then_fail(
    process: Process, postgres_url: str, tmp_path: Path
) -> None:
    manager = process()
    session = manager.open("work")
    transcript = session.transcript
    assert isinstance(transcript, PgTranscript)
    backend = PostgresState.open(pg_settings(postgres_url), tmp_path, role="test")
    writer = TranscriptWriter(backend.db, bound=2, submit_timeout=0.3)
    turn = Turn()
    entries = [session.append_message(user(f"m{i}")) for i in range(4)]  # direct: seq 1-4
    rows = [Row(transcript, 10 + i, b"{}\n", is_message(e), e) for i, e in enumerate(entries)]
    try:
        with psycopg.connect(postgres_url) as blocker:
            blocker.execute("LOCK TABLE nodmix_transcript_entries IN EXCLUSIVE MODE")
            writer.submit(rows[0], turn)  # the thread takes it and waits on the lock
            assert _poll(lambda: _insert_waiting(postgres_url), 30.0)
            writer.submit(rows[1], turn)
            writer.submit(rows[2], turn)  # the queue is full now
            started = time.monotonic()
            with pytest.raises(StateUnavailableError, match="2 wait to be written"):
                writer.submit(rows[3], turn)
            assert time.monotonic() - started >= 0.3  # it waited for room first
            blocker.commit()
        writer.wait(turn.last)
        assert turn.last == 3
    finally:
        writer.close()
        backend.close()
