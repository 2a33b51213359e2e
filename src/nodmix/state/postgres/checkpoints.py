"""Pre-compaction checkpoints in PostgreSQL: one row per checkpoint (its description and the
zstd-compressed transcript, as the file store writes them), pruned to the same bounds."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from nodmix.checkpoints.store import (
    _ID_RE,
    _LEVEL,
    CheckpointError,
    CheckpointInfo,
    FileCheckpointStore,
)

if TYPE_CHECKING:
    import psycopg

    from nodmix.state.postgres.database import Database


class PgCheckpointStore(FileCheckpointStore):
    """`CheckpointStore` on `nodmix_checkpoints` (bounds as `FileCheckpointStore`'s)."""

    def __init__(self, db: Database, state_dir: Path) -> None:
        super().__init__(state_dir)
        self.db = db

    def save(self, info: CheckpointInfo, transcript: bytes) -> CheckpointInfo:
        import zstandard

        if not _ID_RE.match(info.id):
            raise ValueError(f"invalid checkpoint id {info.id!r}")
        body = zstandard.ZstdCompressor(level=_LEVEL).compress(transcript)
        head = msgspec.structs.replace(
            info, transcript_bytes=len(transcript), stored_bytes=len(body)
        )

        def work(conn: psycopg.Connection[Any]) -> None:
            conn.execute(
                "INSERT INTO nodmix_checkpoints (agent_id, id, session_key, created_at, info, body)"
                " VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
                (
                    head.agent_id,
                    head.id,
                    head.session_key,
                    head.created_at,
                    msgspec.json.encode(head),
                    body,
                ),
            )

        self.db.run(work, durable=True)
        self._prune(info.agent_id)
        return head

    def list_checkpoints(
        self, agent_id: str, session_key: str | None = None
    ) -> list[CheckpointInfo]:
        def work(conn: psycopg.Connection[Any]) -> list[bytes]:
            rows = conn.execute(
                "SELECT info FROM nodmix_checkpoints WHERE agent_id = %s"
                " AND (%s::text IS NULL OR session_key = %s) ORDER BY created_at DESC, id DESC",
                (agent_id, session_key, session_key),
            ).fetchall()
            return [bytes(r[0]) for r in rows]

        out = []
        for raw in self.db.run(work):
            try:
                out.append(msgspec.json.decode(raw, type=CheckpointInfo))
            except (msgspec.DecodeError, msgspec.ValidationError):
                continue
        return out

    def read(self, agent_id: str, checkpoint_id: str) -> tuple[CheckpointInfo, bytes]:
        import zstandard

        def work(conn: psycopg.Connection[Any]) -> tuple[bytes, bytes] | None:
            row = conn.execute(
                "SELECT info, body FROM nodmix_checkpoints WHERE agent_id = %s AND id = %s",
                (agent_id, checkpoint_id),
            ).fetchone()
            return (bytes(row[0]), bytes(row[1])) if row else None

        found = self.db.run(work)
        if found is None:
            raise CheckpointError(f"no checkpoint {checkpoint_id!r}")
        try:
            info = msgspec.json.decode(found[0], type=CheckpointInfo)
            body = zstandard.ZstdDecompressor().decompress(
                found[1], max_output_size=max(info.transcript_bytes, 0)
            )
        except (msgspec.DecodeError, msgspec.ValidationError, zstandard.ZstdError) as exc:
            raise CheckpointError(f"checkpoint {checkpoint_id}: damaged ({exc})") from None
        if len(body) != info.transcript_bytes:
            raise CheckpointError(f"checkpoint {checkpoint_id}: damaged (size mismatch)")
        return info, body

    def _delete(self, agent_id: str, checkpoint_id: str) -> None:
        def work(conn: psycopg.Connection[Any]) -> None:
            conn.execute(
                "DELETE FROM nodmix_checkpoints WHERE agent_id = %s AND id = %s",
                (agent_id, checkpoint_id),
            )

        self.db.run(work)
