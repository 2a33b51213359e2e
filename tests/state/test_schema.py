"""Schema migrations on a real PostgreSQL: a fresh database reaches the newest version once, a
database from a newer Nodmix is refused, and a migration that adds a derived column fills it
for rows written before it."""

from __future__ import annotations

from pathlib import Path

import pytest

from nodmix.errors import StateUnavailableError
from nodmix.sessions.manager import SessionManager
from nodmix.state.postgres.backend import PostgresState
from nodmix.state.postgres.migrations import latest_version, migrate, migrations, schema_version
from tests.sessions.sessions_builders import assistant, user
from tests.state.conftest import pg_settings


@pytest.fixture
def state(postgres_url: str, isolated_state: Path) -> PostgresState:
    opened = PostgresState.open(pg_settings(postgres_url), isolated_state, role="test")
    yield opened  # type: ignore[misc]
    opened.close()


def test_a_fresh_database_is_migrated_once_to_the_newest_version(state: PostgresState) -> None:
    assert state.migrated == [version for version, _, _ in migrations()]
    assert schema_version(state.db) == latest_version()
    assert migrate(state.db) == []


def test_a_database_of_a_newer_nodmix_is_refused(state: PostgresState) -> None:
    with state.db.connection() as conn:
        conn.execute(
            "INSERT INTO nodmix_schema_version (version, name) VALUES (%s, 'future')",
            (latest_version() + 1,),
        )
    with pytest.raises(StateUnavailableError, match="newer than this Nodmix knows"):
        migrate(state.db)


def test_message_flags_are_filled_for_entries_written_before_their_column(
    state: PostgresState, isolated_state: Path
) -> None:
    manager = SessionManager(isolated_state, backend=state.sessions())
    session = manager.open("work")
    session.append_message(user("one"))
    session.append_message(assistant("nested"), parent_tool_call_id="call-1")
    session.append_message(assistant("two"))
    manager.close()
    with state.db.connection() as conn:  # the database as it was before migration 0003
        conn.execute("ALTER TABLE nodmix_transcript_entries DROP COLUMN message")
        conn.execute("DELETE FROM nodmix_schema_version WHERE version = 3")
        conn.execute(  # a damaged line kept as read stays readable and uncounted
            "INSERT INTO nodmix_transcript_entries (transcript_id, seq, body)"
            " SELECT transcript_id, max(seq) + 1, '\\x7b6e6f74'::bytea"
            " FROM nodmix_transcript_entries GROUP BY transcript_id"
        )
    assert 3 in migrate(state.db)
    with state.db.connection() as conn:
        flags = [
            r[0]
            for r in conn.execute(
                "SELECT message FROM nodmix_transcript_entries ORDER BY transcript_id, seq"
            )
        ]
    assert flags == [True, False, True, False]
    rows = {
        r.key: r.message_count
        for r in SessionManager(isolated_state, backend=state.sessions()).list_sessions()
    }
    assert rows == {"agent:main:work": 2}
