"""Raw reads and writes of the database side of `nodmix state migrate`: whole transcripts,
run records, channel rows and parked runs, copied as the bytes the file backend holds.

Every write is idempotent (a key already there is left alone; a transcript gets only the
lines it lacks), so a migration cut short by a crash or a kill is simply run again.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from nodmix.sessions.jsonl import count_message_lines, parse_header

if TYPE_CHECKING:
    from pathlib import Path

    import psycopg

    from nodmix.state.postgres.database import Database


def put_transcript(
    db: Database, agent_id: str, path: Path, header: bytes, lines: Sequence[bytes], status: str
) -> int:
    """Store a transcript file's lines (those not stored yet); how many were added."""
    parsed, _ = parse_header(path, header)

    def work(conn: psycopg.Connection[Any]) -> int:
        row = conn.execute(
            "INSERT INTO nodmix_transcripts"
            " (agent_id, file_name, session_id, session_key, header, status)"
            " VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (agent_id, file_name)"
            " DO UPDATE SET status = EXCLUDED.status RETURNING id",
            (agent_id, path.name, parsed.id, parsed.session_key, header, status),
        ).fetchone()
        assert row is not None
        tid = int(row[0])
        have_row = conn.execute(
            "SELECT coalesce(max(seq), 0) FROM nodmix_transcript_entries WHERE transcript_id = %s",
            (tid,),
        ).fetchone()
        have = int(have_row[0]) if have_row else 0
        missing = list(enumerate(lines[have:], start=have + 1))
        if missing:
            with conn.cursor() as cur:
                cur.executemany(
                    "INSERT INTO nodmix_transcript_entries (transcript_id, seq, body, message)"
                    " VALUES (%s, %s, %s, %s)",
                    [(tid, seq, line, count_message_lines(line) == 1) for seq, line in missing],
                )
        return len(missing)

    return db.run(work, durable=True)


def transcripts(db: Database) -> Iterator[tuple[str, str, str, bytes, list[bytes]]]:
    """`(agent, file name, status, header, lines)` of every stored transcript."""

    def ids(conn: psycopg.Connection[Any]) -> list[tuple[int, str, str, str, bytes]]:
        rows = conn.execute(
            "SELECT id, agent_id, file_name, status, header FROM nodmix_transcripts ORDER BY id"
        ).fetchall()
        return [(int(r[0]), str(r[1]), str(r[2]), str(r[3]), bytes(r[4])) for r in rows]

    for tid, agent, name, status, header in db.run(ids):

        def body(conn: psycopg.Connection[Any], tid: int = tid) -> list[bytes]:
            rows = conn.execute(
                "SELECT body FROM nodmix_transcript_entries WHERE transcript_id = %s ORDER BY seq",
                (tid,),
            ).fetchall()
            return [bytes(r[0]) for r in rows]

        yield agent, name, status, header, db.run(body)


def stored_lines(db: Database, agent_id: str, file_name: str) -> tuple[bytes, list[bytes]] | None:
    """The header and lines of one stored transcript."""

    def work(conn: psycopg.Connection[Any]) -> tuple[bytes, list[bytes]] | None:
        row = conn.execute(
            "SELECT id, header FROM nodmix_transcripts WHERE agent_id = %s AND file_name = %s",
            (agent_id, file_name),
        ).fetchone()
        if row is None:
            return None
        rows = conn.execute(
            "SELECT body FROM nodmix_transcript_entries WHERE transcript_id = %s ORDER BY seq",
            (row[0],),
        ).fetchall()
        return bytes(row[1]), [bytes(r[0]) for r in rows]

    return db.run(work)


def put_cron_run(
    db: Database,
    job_id: str,
    run_id: str,
    started: float,
    status: str,
    owner: str | None,
    record: bytes,
    slot: float | None,
    trigger: str,
) -> bool:
    """Store a run record unless the run is there; True when added."""

    def work(conn: psycopg.Connection[Any]) -> bool:
        added = conn.execute(
            "INSERT INTO nodmix_cron_runs (job_id, run_id, started_at, status, owner, record)"
            " VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING RETURNING 1",
            (job_id, run_id, started, status, owner, record),
        ).fetchone()
        if slot is not None and trigger in ("schedule", "missed"):
            conn.execute(
                "INSERT INTO nodmix_cron_slots (job_id, slot_ms, run_id) VALUES (%s, %s, %s)"
                " ON CONFLICT DO NOTHING",
                (job_id, round(slot * 1000), run_id),
            )
        return added is not None

    return db.run(work, durable=True)


def cron_runs(db: Database) -> list[bytes]:
    """Every stored run record, oldest first."""

    def work(conn: psycopg.Connection[Any]) -> list[bytes]:
        rows = conn.execute("SELECT record FROM nodmix_cron_runs ORDER BY started_at").fetchall()
        return [bytes(r[0]) for r in rows]

    return db.run(work)


def put_answered(db: Database, channel: str, keys: Sequence[str]) -> None:
    """Remember answered message keys."""

    def work(conn: psycopg.Connection[Any]) -> None:
        with conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO nodmix_channel_answered (channel, key) VALUES (%s, %s)"
                " ON CONFLICT DO NOTHING",
                [(channel, key) for key in keys],
            )

    db.run(work)


def answered(db: Database, channel: str) -> list[str]:
    """Answered keys of a channel, oldest first."""

    def work(conn: psycopg.Connection[Any]) -> list[str]:
        rows = conn.execute(
            "SELECT key FROM nodmix_channel_answered WHERE channel = %s ORDER BY answered_at",
            (channel,),
        ).fetchall()
        return [str(r[0]) for r in rows]

    return db.run(work)


def delivery_channels(db: Database) -> list[str]:
    """Channels with delivery rows or a saved position."""

    def work(conn: psycopg.Connection[Any]) -> list[str]:
        rows = conn.execute(
            "SELECT channel FROM nodmix_channel_answered UNION SELECT channel FROM"
            " nodmix_channel_pending UNION SELECT channel FROM nodmix_channel_records"
            " UNION SELECT name FROM nodmix_documents"
            " WHERE namespace = 'channel.position' ORDER BY 1"
        ).fetchall()
        return [str(r[0]) for r in rows]

    return db.run(work)


def put_parked_run(
    db: Database,
    run_id: str,
    agent_id: str,
    session_key: str,
    created: float,
    expires: float,
    data: bytes,
) -> bool:
    """Store a parked code-mode run unless it is there."""

    def work(conn: psycopg.Connection[Any]) -> bool:
        return (
            conn.execute(
                "INSERT INTO nodmix_codemode_runs (id, agent_id, session_key, created_at,"
                " expires_at, data) VALUES (%s, %s, %s, %s, %s, %s)"
                " ON CONFLICT DO NOTHING RETURNING 1",
                (run_id, agent_id, session_key, created, expires, data),
            ).fetchone()
            is not None
        )

    return db.run(work, durable=True)


def parked_runs(db: Database) -> list[tuple[str, bytes]]:
    """`(run id, bytes)` of every parked run not being resumed."""

    def work(conn: psycopg.Connection[Any]) -> list[tuple[str, bytes]]:
        rows = conn.execute(
            "SELECT id, data FROM nodmix_codemode_runs WHERE consumed_by IS NULL"
        ).fetchall()
        return [(str(r[0]), bytes(r[1])) for r in rows]

    return db.run(work)
