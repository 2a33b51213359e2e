"""The memory index on disk: one SQLite file per agent under `<state>/memory/`.

Tables: `files` (path, mtime, size, content hash), `chunks` (line ranges and text),
`chunks_fts` (FTS5 over title and text, Porter-stemmed, rowid = chunk id) and `embeddings`
(vectors keyed by model and chunk content hash, so an unchanged chunk is never embedded twice,
even after its file is re-indexed or renamed). Each file is replaced in one transaction, so a
crash mid-index leaves the previous state of that file, never half of it.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Final

import msgspec

from nodmix.memory.chunking import Chunk

SCHEMA_VERSION: Final = 1
BUSY_TIMEOUT_MS: Final = 5_000

_SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS files (
    path TEXT PRIMARY KEY, source TEXT NOT NULL, mtime_ns INTEGER NOT NULL,
    size INTEGER NOT NULL, hash TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS chunks (
    id INTEGER PRIMARY KEY, path TEXT NOT NULL, start_line INTEGER NOT NULL,
    end_line INTEGER NOT NULL, hash TEXT NOT NULL, title TEXT NOT NULL, text TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS chunks_path ON chunks (path);
CREATE INDEX IF NOT EXISTS chunks_hash ON chunks (hash);
CREATE VIRTUAL TABLE IF NOT EXISTS chunks_fts USING fts5 (
    title, text, tokenize = 'porter unicode61 remove_diacritics 2'
);
CREATE TABLE IF NOT EXISTS embeddings (
    model TEXT NOT NULL, hash TEXT NOT NULL, vector BLOB NOT NULL, PRIMARY KEY (model, hash)
);
"""


class FileRecord(msgspec.Struct, frozen=True, kw_only=True):
    """What the index knows about one indexed file."""

    path: str
    source: str
    mtime_ns: int
    size: int
    hash: str


class StoredChunk(msgspec.Struct, frozen=True, kw_only=True):
    """A chunk as stored."""

    id: int
    path: str
    start_line: int
    end_line: int
    hash: str
    title: str
    text: str


class MemoryStore:
    """Thin typed access to the index database (one connection, used from one thread)."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.path = path
        self.db = sqlite3.connect(path, timeout=BUSY_TIMEOUT_MS / 1000, check_same_thread=False)
        self.db.execute("PRAGMA journal_mode = WAL")
        self.db.execute("PRAGMA synchronous = NORMAL")
        with self.db:
            self.db.executescript(_SCHEMA)
            self.db.execute(
                "INSERT OR IGNORE INTO meta VALUES ('schema', ?)", (str(SCHEMA_VERSION),)
            )
        path.chmod(0o600)

    def close(self) -> None:
        """Close the connection."""
        self.db.close()

    # ---- files and chunks ----------------------------------------------------------------

    def files(self) -> dict[str, FileRecord]:
        """Every indexed file by path."""
        rows = self.db.execute("SELECT path, source, mtime_ns, size, hash FROM files")
        return {
            r[0]: FileRecord(path=r[0], source=r[1], mtime_ns=r[2], size=r[3], hash=r[4])
            for r in rows
        }

    def stamps(self) -> dict[str, tuple[int, int]]:
        """`(mtime_ns, size)` of every indexed file by path (cheap: the per-scan check)."""
        rows = self.db.execute("SELECT path, mtime_ns, size FROM files")
        return {r[0]: (r[1], r[2]) for r in rows}

    def file(self, path: str) -> FileRecord | None:
        """One indexed file, or `None`."""
        r = self.db.execute(
            "SELECT path, source, mtime_ns, size, hash FROM files WHERE path = ?", (path,)
        ).fetchone()
        if r is None:
            return None
        return FileRecord(path=r[0], source=r[1], mtime_ns=r[2], size=r[3], hash=r[4])

    def touch(self, records: Sequence[FileRecord]) -> None:
        """Record new mtimes/sizes for files whose content did not change."""
        with self.db:
            self.db.executemany(
                "UPDATE files SET mtime_ns = ?, size = ? WHERE path = ?",
                [(r.mtime_ns, r.size, r.path) for r in records],
            )

    def replace_files(self, files: Sequence[tuple[FileRecord, Sequence[Chunk]]]) -> None:
        """Replace files' chunks, all in one transaction (a crash keeps each file whole)."""
        with self.db:
            for record, chunks in files:
                self._replace(record, chunks)
            self._bump()

    def _replace(self, record: FileRecord, chunks: Sequence[Chunk]) -> None:
        self._delete_chunks(record.path)
        self.db.execute(
            "INSERT OR REPLACE INTO files VALUES (?, ?, ?, ?, ?)",
            (record.path, record.source, record.mtime_ns, record.size, record.hash),
        )
        for chunk in chunks:
            cursor = self.db.execute(
                "INSERT INTO chunks (path, start_line, end_line, hash, title, text) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (
                    record.path,
                    chunk.start_line,
                    chunk.end_line,
                    chunk.hash,
                    chunk.title,
                    chunk.text,
                ),
            )
            self.db.execute(
                "INSERT INTO chunks_fts (rowid, title, text) VALUES (?, ?, ?)",
                (cursor.lastrowid, chunk.title, chunk.text),
            )

    def remove_files(self, paths: Iterable[str]) -> None:
        """Forget files that are gone."""
        with self.db:
            for path in paths:
                self._delete_chunks(path)
                self.db.execute("DELETE FROM files WHERE path = ?", (path,))
            self._bump()

    def clear(self) -> None:
        """Drop every file and chunk (cached embeddings stay: they are keyed by content)."""
        with self.db:
            self.db.execute("DELETE FROM chunks_fts")
            self.db.execute("DELETE FROM chunks")
            self.db.execute("DELETE FROM files")
            self._bump()

    def _delete_chunks(self, path: str) -> None:
        self.db.execute(
            "DELETE FROM chunks_fts WHERE rowid IN (SELECT id FROM chunks WHERE path = ?)",
            (path,),
        )
        self.db.execute("DELETE FROM chunks WHERE path = ?", (path,))

    def _bump(self) -> None:
        self.db.execute(
            "INSERT INTO meta VALUES ('generation', '1') ON CONFLICT (key) "
            "DO UPDATE SET value = CAST(value AS INTEGER) + 1"
        )

    def generation(self) -> int:
        """A counter that changes whenever chunks change (vector caches key on it)."""
        row = self.db.execute("SELECT value FROM meta WHERE key = 'generation'").fetchone()
        return int(row[0]) if row else 0

    def chunks(self, ids: Sequence[int]) -> dict[int, StoredChunk]:
        """Chunks by id."""
        if not ids:
            return {}
        marks = ",".join("?" * len(ids))
        rows = self.db.execute(
            "SELECT id, path, start_line, end_line, hash, title, text FROM chunks "
            f"WHERE id IN ({marks})",
            tuple(ids),
        )
        return {
            r[0]: StoredChunk(
                id=r[0], path=r[1], start_line=r[2], end_line=r[3], hash=r[4], title=r[5], text=r[6]
            )
            for r in rows
        }

    def keyword(self, match: str, limit: int) -> list[tuple[int, float]]:
        """`(chunk id, bm25)` for an FTS5 MATCH expression, best first (bm25 is negative)."""
        rows = self.db.execute(
            "SELECT rowid, bm25(chunks_fts, 2.0, 1.0) AS rank FROM chunks_fts "
            "WHERE chunks_fts MATCH ? ORDER BY rank LIMIT ?",
            (match, limit),
        )
        return [(int(r[0]), float(r[1])) for r in rows]

    def keyword_among(self, match: str, ids: Sequence[int]) -> list[tuple[int, float]]:
        """`(chunk id, bm25)` of those of the chunks `ids` that match an FTS5 expression."""
        if not ids:
            return []
        marks = ",".join("?" * len(ids))
        rows = self.db.execute(
            "SELECT rowid, bm25(chunks_fts, 2.0, 1.0) FROM chunks_fts "
            f"WHERE chunks_fts MATCH ? AND rowid IN ({marks})",
            (match, *ids),
        )
        return [(int(r[0]), float(r[1])) for r in rows]

    def chunk_texts(self, ids: Sequence[int]) -> dict[int, str]:
        """Title and text of chunks by id."""
        if not ids:
            return {}
        marks = ",".join("?" * len(ids))
        rows = self.db.execute(
            f"SELECT id, title || char(10) || text FROM chunks WHERE id IN ({marks})", tuple(ids)
        )
        return {int(r[0]): str(r[1]) for r in rows}

    # ---- embeddings ----------------------------------------------------------------------

    def missing_embeddings(self, model: str) -> list[tuple[str, str]]:
        """`(hash, text)` of chunks that have no cached vector for `model`."""
        rows = self.db.execute(
            "SELECT c.hash, MIN(CASE WHEN c.title = '' THEN c.text "
            "ELSE c.title || char(10) || c.text END) FROM chunks c "
            "LEFT JOIN embeddings e ON e.model = ? AND e.hash = c.hash "
            "WHERE e.hash IS NULL GROUP BY c.hash",
            (model,),
        )
        return [(r[0], r[1]) for r in rows]

    def put_embeddings(self, model: str, vectors: Sequence[tuple[str, bytes]]) -> None:
        """Cache vectors (float32 bytes) by content hash."""
        with self.db:
            self.db.executemany(
                "INSERT OR REPLACE INTO embeddings VALUES (?, ?, ?)",
                [(model, h, v) for h, v in vectors],
            )

    def prune_embeddings(self, slack: int) -> int:
        """Drop cached vectors no chunk uses once there are more than `slack` of them (the
        cache stays bounded; a few spare vectors let a moved or restored note skip
        re-embedding). Returns how many were dropped."""
        unused = "NOT EXISTS (SELECT 1 FROM chunks c WHERE c.hash = embeddings.hash)"
        count = self.db.execute(f"SELECT COUNT(*) FROM embeddings WHERE {unused}").fetchone()[0]
        if count <= slack:
            return 0
        with self.db:
            self.db.execute(f"DELETE FROM embeddings WHERE {unused}")
        return int(count)

    def chunk_vectors(self, model: str) -> list[tuple[int, bytes]]:
        """`(chunk id, vector bytes)` of every chunk that has a vector for `model`."""
        rows = self.db.execute(
            "SELECT c.id, e.vector FROM chunks c JOIN embeddings e "
            "ON e.model = ? AND e.hash = c.hash",
            (model,),
        )
        return [(int(r[0]), bytes(r[1])) for r in rows]

    def counts(self) -> dict[str, int]:
        """Files, chunks and cached vectors."""
        one = self.db.execute
        return {
            "files": one("SELECT COUNT(*) FROM files").fetchone()[0],
            "chunks": one("SELECT COUNT(*) FROM chunks").fetchone()[0],
            "embeddings": one("SELECT COUNT(*) FROM embeddings").fetchone()[0],
        }
