"""Every transcript of an agent in PostgreSQL, live or put away: what `nodmix sessions list
--all`, lookups by session id and `nodmix sessions delete` use.

A transcript's row keeps its status (`live`, `archived` when the gateway put its session away,
`deleted` when it went to the trash); nothing is removed, so every transcript stays readable
by its session id, as the file backend's `archive/` and `trash/` folders keep theirs.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nodmix.config.paths import sessions_dir
from nodmix.errors import TranscriptError
from nodmix.sessions.backend import StoredTranscript
from nodmix.sessions.files import ARCHIVE_DIR, TRASH_DIR
from nodmix.sessions.jsonl import parse_header

if TYPE_CHECKING:
    import psycopg

    from nodmix.state.postgres.database import Database

_FOLDERS = {"live": "", "archived": ARCHIVE_DIR, "deleted": TRASH_DIR}


class PgCatalogue:
    """The listing part of `PgSessions` (`SessionBackend.transcripts`, `messages_in`, `trash`)."""

    db: Database
    state_dir: Path

    def transcripts(self, agent_id: str, *, prefix: str = "") -> list[StoredTranscript]:
        """Rows of the agent's transcripts: live ones, then archived, then deleted, by name."""

        def read(conn: psycopg.Connection[Any]) -> list[tuple[Any, ...]]:
            return conn.execute(
                "SELECT file_name, status, header,"
                " (extract(epoch FROM updated_at) * 1000)::bigint"
                " FROM nodmix_transcripts WHERE agent_id = %s AND starts_with(file_name, %s)"
                " ORDER BY CASE status WHEN 'live' THEN 0 WHEN 'archived' THEN 1 ELSE 2 END,"
                " file_name",
                (agent_id, prefix),
            ).fetchall()

        folder = sessions_dir(self.state_dir, agent_id)
        found = []
        for name, status, header, modified in self.db.run(read):
            sub = _FOLDERS.get(str(status), TRASH_DIR)
            path = (folder / sub if sub else folder) / str(name)
            try:
                parsed = parse_header(path, bytes(header))[0]
            except TranscriptError:
                parsed = None
            found.append(
                StoredTranscript(path=path, folder=sub, header=parsed, modified_ms=int(modified))
            )
        return found

    def messages_in(self, agent_id: str, path: Path) -> int:
        """Counted from the entries' message flags."""

        def read(conn: psycopg.Connection[Any]) -> int:
            row = conn.execute(
                "SELECT count(*) FROM nodmix_transcript_entries e JOIN nodmix_transcripts t"
                " ON t.id = e.transcript_id WHERE t.agent_id = %s AND t.file_name = %s"
                " AND e.message",
                (agent_id, path.name),
            ).fetchone()
            return int(row[0]) if row else 0

        return self.db.query(read)

    def trash(self, agent_id: str, paths: Sequence[Path]) -> list[Path]:
        """Marked deleted (kept, readable by id); their names under `trash/`."""
        names = [p.name for p in paths]

        def work(conn: psycopg.Connection[Any]) -> list[str]:
            rows = conn.execute(
                "UPDATE nodmix_transcripts SET status = 'deleted', updated_at = now()"
                " WHERE agent_id = %s AND file_name = ANY(%s) AND status <> 'deleted'"
                " RETURNING file_name",
                (agent_id, names),
            ).fetchall()
            return [str(r[0]) for r in rows]

        moved = set(self.db.run(work, durable=True))
        trash = sessions_dir(self.state_dir, agent_id) / TRASH_DIR
        return [trash / name for name in names if name in moved]
