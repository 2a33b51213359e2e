"""`MemoryIndex`: keeps one agent's index in step with its files and searches it.

Re-indexing is incremental: a file whose mtime and size are unchanged is skipped without being
read; one whose content hash is unchanged only gets its new mtime; only changed files are
re-chunked, and only chunks whose content hash has no cached vector are embedded.

Freshness: `refresh()` before each search re-indexes exactly the files that changed. Where
inotify works (`watch.py`), the changes are the watch's queued events plus the files named by
`mark_changed` (Nodmix's own `write`/`edit`), so an outside edit is seen by the next search at
the cost of re-indexing that one file; a full mtime scan (`SourceRoots.stamps`) runs first,
whenever the watch asks for one (a folder came or went, a lost queue) and every
`VERIFY_SECONDS` as a safety net. Without a watch, every search scans when there are at most
`SCAN_EVERY_SEARCH_FILES` files, and a larger memory at most every `RESCAN_SECONDS`. A scan
compares against an in-memory map of what the index recorded, reloaded only when another
process changed the index.

Timestamps are coarse (a few milliseconds on Linux, two seconds on FAT), so two edits within
one tick can leave the same mtime and size. A file read less than `RACY_NS` after its mtime is
recorded with mtime 0: the next scan or event reads it again (a hash compare, no re-chunking)
until its stamp can be trusted.

Not thread-safe: callers serialise access (`service.MemoryService` does).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, Final

from nodmix.memory.chunking import Chunk, chunk_markdown, content_hash
from nodmix.memory.embeddings import Embedder, EmbeddingError
from nodmix.memory.ranking import (
    fts_expression,
    keyword_scores,
    merge,
    query_words,
    query_words_all,
    stems,
)
from nodmix.memory.results import SearchHit, SyncReport, snippet
from nodmix.memory.settings import MemorySettings
from nodmix.memory.sources import SourceFile, SourceRoots, read_text
from nodmix.memory.store import FileRecord, MemoryStore
from nodmix.memory.watch import FolderWatch, open_watch

if TYPE_CHECKING:
    from nodmix.memory.embeddings import Vectors

SCAN_EVERY_SEARCH_FILES: Final = 2_000
"""Without a watch, up to this many files every search checks every file's mtime."""
RESCAN_SECONDS: Final = 1.0
VERIFY_SECONDS: Final = 300.0
"""With a watch, a full scan at least this often anyway (edits inotify does not report, such
as another machine's on a network file system)."""
RACY_NS: Final = 2_000_000_000
"""A file whose mtime is this close to when it was read may change again unseen by its stamp."""
WRITE_BATCH_FILES: Final = 500
"""Files written per transaction when many change at once."""
EMBEDDING_SLACK: Final = 1_000
"""Cached vectors no chunk uses that are kept; past this many, they are all dropped."""
CANDIDATES_PER_RESULT: Final = 4


class MemoryIndex:
    """One agent's memory index (see the module docstring)."""

    def __init__(
        self,
        store: MemoryStore,
        roots: SourceRoots,
        settings: MemorySettings,
        embedder: Embedder | None = None,
        *,
        scan_every_search_files: int = SCAN_EVERY_SEARCH_FILES,
        rescan_seconds: float = RESCAN_SECONDS,
        watch: bool = True,
    ) -> None:
        self.scan_every_search_files = scan_every_search_files
        self.embedding_slack = EMBEDDING_SLACK
        self.rescan_seconds = rescan_seconds
        self.verify_seconds = VERIFY_SECONDS
        self.store = store
        self.roots = roots
        self.settings = settings
        self.embedder = embedder
        self._changed: set[str] = set()
        self._last_scan = float("-inf")
        self._files_seen: int | None = None
        self._stamps: tuple[int, dict[str, tuple[int, int]]] | None = None
        self._vectors: tuple[int, list[int], Vectors] | None = None
        self._watch: FolderWatch | None = None
        self.use_watch = watch
        """Try inotify (`watch.py`) at the next full scan; off for good once it fails."""
        self.watching = False
        """The last full scan watched every folder: events alone keep the index fresh."""
        self.embedding_error: str | None = None
        """The last embeddings failure (search falls back to keywords), `None` once it works."""

    def close(self) -> None:
        """Close the database, the watch and the embeddings client."""
        self.store.close()
        self._stop_watching()
        if self.embedder is not None:
            self.embedder.close()

    def _stop_watching(self) -> None:
        if self._watch is not None:
            self._watch.close()
            self._watch = None
        self.use_watch = self.watching = False

    # ---- indexing ------------------------------------------------------------------------

    def mark_changed(self, paths: Iterable[str]) -> None:
        """Index paths (relative, as `memory_get` takes them) known to have changed."""
        self._changed.update(paths)

    def refresh(self) -> SyncReport | None:
        """Bring the index up to date cheaply before a search (see the module docstring)."""
        now = time.monotonic()
        if self.watching and self._watch is not None:
            changed, rescan = self._watch.drain()
            if rescan:  # a folder came, went or moved: watch every folder afresh
                self.watching = False
            elif now - self._last_scan < self.verify_seconds:
                changed |= self._changed
                return self.sync_paths(sorted(changed)) if changed else None
            return self.sync()
        cheap = self._files_seen is not None and self._files_seen <= self.scan_every_search_files
        if cheap or now - self._last_scan >= self.rescan_seconds:
            return self.sync()
        if self._changed:
            return self.sync_paths(sorted(self._changed))
        return None

    def sync(self, *, force: bool = False) -> SyncReport:
        """Re-index every memory file (all of them with `force`)."""
        started = time.perf_counter()
        if force:
            self.store.clear()
        self._changed.clear()
        if self._watch is None and self.use_watch:
            self._watch = open_watch()
            self.use_watch = self._watch is not None
        if self._watch is not None:  # folders are watched before each is listed
            _, rescan = self._watch.drain()  # (changed files: this scan sees them anyway)
            if rescan or not self.watching:
                self._watch.forget()  # an intact watch keeps its folders: none came or went
        stamps = self._known_stamps()
        current = self.roots.stamps(self._watch)
        if self._watch is not None and self._watch.exhausted:
            self._stop_watching()
        self.watching = self._watch is not None and not self._watch.broken
        self._files_seen = len(current)
        same = current == stamps  # compared in C: the usual answer of a periodic scan
        changed = [
            self.roots.file(path, stamp)
            for path, stamp in ([] if same else current.items())
            if stamps.get(path) != stamp
        ]
        report = SyncReport(scanned=len(current))
        done = self._index_files(changed, report)
        gone = [] if same else [path for path in stamps if path not in current]
        if gone:
            self.store.remove_files(gone)
            report.removed = len(gone)
        report.embedded = self._embed_missing()
        if report.indexed or report.removed:
            self.store.prune_embeddings(self.embedding_slack)
        report.seconds = time.perf_counter() - started
        self._last_scan = time.monotonic()
        if force:
            self._stamps = None
        else:
            self._keep_stamps(stamps, done, gone)
        return report

    def _known_stamps(self) -> dict[str, tuple[int, int]]:
        """The index's `(mtime, size)` per file, cached while no chunk changes (the index
        generation stays the same; another process indexing bumps it)."""
        generation = self.store.generation()
        if self._stamps is None or self._stamps[0] != generation:
            self._stamps = (generation, self.store.stamps())
        return self._stamps[1]

    def _keep_stamps(
        self, stamps: dict[str, tuple[int, int]], done: dict[str, tuple[int, int]], gone: list[str]
    ) -> None:
        """What this process wrote is known: keep the cache in step with the index."""
        stamps.update(done)
        for path in gone:
            stamps.pop(path, None)
        self._stamps = (self.store.generation(), stamps)

    def sync_paths(self, paths: Sequence[str]) -> SyncReport:
        """Re-index only the named paths (added, changed or deleted)."""
        started = time.perf_counter()
        report = SyncReport()
        gone: list[str] = []
        changed: list[SourceFile] = []
        for path in paths:
            self._changed.discard(path)
            file = self.roots.locate(path)
            known = self.store.file(path)
            if file is None:
                if known is not None:
                    gone.append(path)
                continue
            report.scanned += 1
            if known is None and self.store.counts()["files"] >= self.roots.max_files:
                continue  # full: a new note waits for a scan, which keeps the cap too
            if known is None or (known.mtime_ns, known.size) != (file.mtime_ns, file.size):
                changed.append(file)
        done = self._index_files(changed, report)
        if gone:
            self.store.remove_files(gone)
            report.removed = len(gone)
        report.embedded = self._embed_missing()
        if self._stamps is not None and (done or gone):
            self._keep_stamps(self._stamps[1], done, gone)
        report.seconds = time.perf_counter() - started
        return report

    def _index_files(
        self, files: Sequence[SourceFile], report: SyncReport
    ) -> dict[str, tuple[int, int]]:
        """Read, hash and chunk files whose mtime or size changed; write them in batches.
        Returns the `(mtime, size)` now recorded for each file read."""
        done: dict[str, tuple[int, int]] = {}
        if not files:
            return done
        known = self.store.files() if len(files) > 64 else None
        touched: list[FileRecord] = []
        batch: list[tuple[FileRecord, Sequence[Chunk]]] = []
        for file in files:
            read_ns = time.time_ns()
            try:
                text = read_text(file)
            except OSError:
                continue
            racy = abs(read_ns - file.mtime_ns) <= RACY_NS  # see the module docstring
            record = FileRecord(
                path=file.path,
                source=file.source,
                mtime_ns=0 if racy else file.mtime_ns,
                size=file.size,
                hash=content_hash(text),
            )
            done[file.path] = (record.mtime_ns, record.size)
            before = known.get(file.path) if known is not None else self.store.file(file.path)
            if before is not None and before.hash == record.hash:
                touched.append(record)
                continue
            chunks = chunk_markdown(
                text,
                max_chars=self.settings.chunk_chars,
                overlap_chars=self.settings.overlap_chars,
            )
            batch.append((record, chunks))
            report.indexed += 1
            if len(batch) >= WRITE_BATCH_FILES:
                self.store.replace_files(batch)
                batch = []
        if batch:
            self.store.replace_files(batch)
        if touched:
            self.store.touch(touched)
        return done

    def _embed_missing(self) -> int:
        if self.embedder is None:
            return 0
        missing = self.store.missing_embeddings(self.embedder.model)
        if not missing:
            return 0
        try:
            vectors = self.embedder.embed([text for _, text in missing])
        except EmbeddingError as exc:  # keyword search still works; retried next sync
            self.embedding_error = str(exc)
            return 0
        self.embedding_error = None
        self.store.put_embeddings(
            self.embedder.model,
            [(h, vectors[i].tobytes()) for i, (h, _) in enumerate(missing)],
        )
        return len(missing)

    # ---- search --------------------------------------------------------------------------

    def search(
        self, query: str, *, max_results: int | None = None, min_score: float | None = None
    ) -> list[SearchHit]:
        """Ranked hits for a query (refreshes the index first)."""
        self.refresh()
        return self.query(query, max_results=max_results, min_score=min_score)

    def query(
        self, query: str, *, max_results: int | None = None, min_score: float | None = None
    ) -> list[SearchHit]:
        """Ranked hits from the index as it is (no refresh)."""
        limit = max(1, max_results or self.settings.max_results)
        floor = self.settings.min_score if min_score is None else min_score
        words = query_words(query)
        candidates = limit * CANDIDATES_PER_RESULT
        vector = self._vector_scores(query, candidates) if query.strip() else {}
        text = self._keyword_scores(words, candidates, also=list(vector)) if words else {}
        scores = merge(text, vector, vector_weight=self.settings.vector_weight)
        ranked = sorted(
            ((s, i) for i, s in scores.items() if s >= floor), key=lambda p: (-p[0], p[1])
        )[:limit]
        chunks = self.store.chunks([i for _, i in ranked])
        hits: list[SearchHit] = []
        for score, chunk_id in ranked:
            chunk = chunks.get(chunk_id)
            if chunk is None:
                continue
            hits.append(
                SearchHit(
                    path=chunk.path,
                    start_line=chunk.start_line,
                    end_line=chunk.end_line,
                    score=score,
                    snippet=snippet(chunk.text),
                    source="sessions" if chunk.path.startswith("sessions/") else "memory",
                )
            )
        return hits

    def _keyword_scores(self, words: list[str], limit: int, *, also: list[int]) -> dict[int, float]:
        """Keyword scores of the best `limit` keyword hits and of the chunks `also` (the
        vector candidates, so a chunk both sides find is not scored by one side only)."""
        expression = fts_expression(words)
        hits = self.store.keyword(expression, limit)
        seen = {chunk_id for chunk_id, _ in hits}
        hits += self.store.keyword_among(expression, [i for i in also if i not in seen])
        texts = self.store.chunk_texts([chunk_id for chunk_id, _ in hits])
        wanted = stems(words)
        coverage = {
            chunk_id: len(wanted & stems(query_words_all(text))) / len(wanted)
            for chunk_id, text in texts.items()
        }
        return keyword_scores(hits, coverage)

    def _vector_scores(self, query: str, limit: int) -> dict[int, float]:
        if self.embedder is None:
            return {}
        ids, matrix = self._vector_matrix()
        if not ids:
            return {}
        try:
            q = self.embedder.embed([query])[0]
        except EmbeddingError as exc:
            self.embedding_error = str(exc)
            return {}
        if q.shape[0] != matrix.shape[1]:
            return {}
        import numpy as np

        sims = matrix @ q
        top = np.argpartition(-sims, min(limit, len(ids) - 1))[:limit]
        return {ids[i]: float(max(0.0, min(1.0, sims[i]))) for i in top}

    def _vector_matrix(self) -> tuple[list[int], Vectors]:
        assert self.embedder is not None
        generation = self.store.generation()
        if self._vectors is not None and self._vectors[0] == generation:
            return self._vectors[1], self._vectors[2]
        import numpy as np

        rows = self.store.chunk_vectors(self.embedder.model)
        ids = [chunk_id for chunk_id, _ in rows]
        matrix = (
            np.stack([np.frombuffer(blob, dtype=np.float32) for _, blob in rows])
            if rows
            else np.zeros((0, 0), dtype=np.float32)
        )
        self._vectors = (generation, ids, matrix)
        return ids, matrix

    # ---- reading and status --------------------------------------------------------------

    def read(self, path: str, start: int = 1, lines: int | None = None) -> tuple[str, int, int]:
        """Lines of a memory file: `(text, first line, last line)`.

        Raises:
            FileNotFoundError: the path is not a memory file or does not exist.
        """
        file = self.roots.locate(path)
        if file is None:
            raise FileNotFoundError(path)
        all_lines = read_text(file).splitlines()
        first = max(1, start)
        end = len(all_lines) if lines is None else min(len(all_lines), first - 1 + max(1, lines))
        return "\n".join(all_lines[first - 1 : end]), first, end

    def status(self) -> dict[str, Any]:
        """Counts and settings for `nodmix memory status`."""
        return {
            "database": str(self.store.path),
            "workspace": str(self.roots.workspace),
            "mode": self.settings.mode,
            "sessions": self.settings.sessions,
            "embeddingModel": self.embedder.model if self.embedder else None,
            "embeddingError": self.embedding_error,
            **self.store.counts(),
        }
