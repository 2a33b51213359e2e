"""`MemoryService`: one `MemoryIndex` per agent for a running Nodmix.

Indexes open lazily (`<state>/memory/<agentId>.sqlite`) and are used from worker threads, one
call at a time per agent. Writes made through Nodmix's own `write`/`edit` tools (the model's,
code mode's, the pre-compaction memory flush's) are seen by an `after_tool_call` hook, so the
next search re-indexes exactly those files.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import anyio

from nodmix.config import paths as config_paths
from nodmix.hooks import AfterToolCallInfo
from nodmix.memory.settings import MemorySettings

if TYPE_CHECKING:  # numpy and SQLite load with the first index, not at start-up
    from nodmix.memory.embeddings import Embedder
    from nodmix.memory.index import MemoryIndex
    from nodmix.memory.results import SearchHit, SyncReport

WRITING_TOOLS = frozenset({"write", "edit"})


def index_path(state_dir: Path, agent_id: str) -> Path:
    """Where an agent's memory index lives."""
    return state_dir / "memory" / f"{agent_id}.sqlite"


def open_index(
    settings: MemorySettings,
    *,
    state_dir: Path,
    agent_id: str,
    workspace: Path,
    embedder: Embedder | None = None,
) -> MemoryIndex:
    """Open (or create) an agent's index; the embedder comes from settings unless given."""
    from nodmix.extras import hint, installed, part
    from nodmix.memory.embeddings import HttpEmbedder
    from nodmix.memory.index import MemoryIndex
    from nodmix.memory.sources import SourceRoots
    from nodmix.memory.store import MemoryStore

    refused = None
    if embedder is None and settings.embeddings is not None:
        if installed(part("embeddings")):
            embedder = HttpEmbedder(settings.embeddings)
        else:  # keyword search still works; the search result says why vectors are off
            refused = hint(part("embeddings"))
    roots = SourceRoots(
        workspace=workspace,
        sessions_dir=(
            config_paths.sessions_dir(state_dir, agent_id) if settings.sessions else None
        ),
    )
    index = MemoryIndex(MemoryStore(index_path(state_dir, agent_id)), roots, settings, embedder)
    index.embedding_error = refused
    return index


class MemoryService:
    """The memory indexes of a running Nodmix."""

    def __init__(
        self,
        settings: MemorySettings,
        *,
        state_dir: Path,
        workspace_for: Callable[[str], Path],
    ) -> None:
        self.settings = settings
        self.state_dir = state_dir
        self._workspace_for = workspace_for
        self._indexes: dict[str, tuple[threading.Lock, MemoryIndex]] = {}
        self._guard = threading.Lock()

    def _entry(self, agent_id: str) -> tuple[threading.Lock, MemoryIndex]:
        with self._guard:
            entry = self._indexes.get(agent_id)
            if entry is None:
                index = open_index(
                    self.settings,
                    state_dir=self.state_dir,
                    agent_id=agent_id,
                    workspace=self._workspace_for(agent_id),
                )
                entry = (threading.Lock(), index)
                self._indexes[agent_id] = entry
            return entry

    async def search(
        self, agent_id: str, query: str, *, max_results: int | None, min_score: float | None
    ) -> tuple[list[SearchHit], MemoryIndex]:
        """Search an agent's memory (after bringing its index up to date)."""

        def run() -> tuple[list[SearchHit], MemoryIndex]:
            lock, index = self._entry(agent_id)
            with lock:
                return index.search(query, max_results=max_results, min_score=min_score), index

        return await anyio.to_thread.run_sync(run)

    async def read(
        self, agent_id: str, path: str, start: int, lines: int | None
    ) -> tuple[str, int, int]:
        """Lines of one memory file of an agent."""

        def run() -> tuple[str, int, int]:
            lock, index = self._entry(agent_id)
            with lock:
                return index.read(path, start, lines)

        return await anyio.to_thread.run_sync(run)

    async def sync(self, agent_id: str, *, force: bool = False) -> SyncReport:
        """Re-index an agent's memory now."""

        def run() -> SyncReport:
            lock, index = self._entry(agent_id)
            with lock:
                return index.sync(force=force)

        return await anyio.to_thread.run_sync(run)

    async def after_tool_call(self, info: AfterToolCallInfo) -> None:
        """Hook: note memory files written by `write`/`edit` so the next search sees them."""
        if info.call.tool_name not in WRITING_TOOLS or info.is_error or info.blocked:
            return
        path = info.call.params.get("path")
        if not isinstance(path, str):
            return
        with self._guard:
            entry = self._indexes.get(info.call.agent_id)
        if entry is None:
            return  # not opened yet: its first search scans everything anyway
        workspace = entry[1].roots.workspace
        target = Path(path) if os.path.isabs(path) else workspace / path
        try:
            relative = os.path.relpath(os.path.normpath(target), os.path.normpath(workspace))
        except ValueError:
            return
        entry[1].mark_changed([Path(relative).as_posix()])

    def close(self) -> None:
        """Close every index."""
        with self._guard:
            entries, self._indexes = list(self._indexes.values()), {}
        for lock, index in entries:
            with lock:
                index.close()
