"""The gateway's session pointers (stored Responses API responses, client tool calls handed
out) as documents, so a client continuing on another replica finds its session."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from nodmix.gateway.session_pointers import DEFAULT_CAP, SessionPointers
from nodmix.state.postgres import documents

if TYPE_CHECKING:
    import psycopg

    from nodmix.state.postgres.database import Database

PRUNE_EVERY = 500


class PgSessionPointers(SessionPointers):
    """One document per id under `gateway.<file>`; the newest `cap` are kept."""

    def __init__(self, db: Database, state_dir: Path, file_name: str) -> None:
        super().__init__(state_dir / "gateway", file_name, cap=DEFAULT_CAP)
        self.db = db
        self.namespace = f"gateway.{file_name.removesuffix('.jsonl')}"
        self._remembered = 0

    def session_of(self, item_id: str) -> str | None:
        found = documents.read(self.db, self.namespace, item_id)
        return found[0].decode() if found else None

    def remember(self, item_id: str, session_key: str) -> None:
        try:
            documents.write(self.db, self.namespace, item_id, session_key.encode(), durable=False)
            self._remembered += 1
            if self._remembered % PRUNE_EVERY == 0:
                self.db.run(self._prune)
        except Exception as exc:  # a lost pointer only loses the continuation, never a turn
            from nodmix.gateway.session_pointers import log

            log.warning("could not record %s: %s", item_id, exc)

    def _prune(self, conn: psycopg.Connection[Any]) -> None:
        conn.execute(
            "DELETE FROM nodmix_documents WHERE namespace = %s AND name IN ("
            " SELECT name FROM nodmix_documents WHERE namespace = %s"
            " ORDER BY updated_at DESC OFFSET %s)",
            (self.namespace, self.namespace, self._cap),
        )
