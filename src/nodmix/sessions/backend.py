"""Where sessions live: the seam between `SessionManager` and its storage.

`SessionManager` keeps the cache of open sessions, the in-process turn locks and the usage
batching; a `SessionBackend` does the storage: each agent's session index, creating and loading
transcripts, the turn lock shared with other processes, and counting messages for listings.

`FileSessions` is the default and what Nodmix always did (`sessions.json` plus journal,
`<sessionId>.jsonl` transcripts, `flock`ed lock files). A database backend
(`nodmix.state.postgres.sessions`) keeps the same guarantees for several replicas: an index
changed under a lock, transcripts appended in order with a linear `parentId` chain, one turn at
a time per session across every process.

A backend's transcripts are `Transcript` objects (a database one overrides how entries are
read and appended), so the loop, compaction and the gateway never know which backend runs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Protocol

import msgspec

from nodmix.config.paths import sessions_dir
from nodmix.sessions.descriptors import DescriptorPool
from nodmix.sessions.entries import Entry, SessionHeader
from nodmix.sessions.files import ARCHIVE_DIR, TRASH_DIR, move_into
from nodmix.sessions.index import SessionIndex
from nodmix.sessions.keys import SessionKey, is_agent_id
from nodmix.sessions.scan import read_header, transcript_files
from nodmix.sessions.session import Session
from nodmix.sessions.store import STORE_FILE_NAME, SessionStore
from nodmix.sessions.store_entry import SessionEntry
from nodmix.sessions.transcript import Transcript, count_messages
from nodmix.sessions.turn_lock import Waiting, hold_file_lock, lock_path, remove_lock_file


class StoredTranscript(msgspec.Struct, frozen=True, kw_only=True):
    """One transcript of an agent as its backend keeps it (listings, lookups by session id)."""

    path: Path
    """Where it is: a file, or for a database where a file of it would be (its name counts)."""
    folder: str
    """`""` for a live transcript, `archive` or `trash` for one put away."""
    header: SessionHeader | None
    """Its first line (None: unreadable)."""
    modified_ms: int
    """When it last changed (files: mtime), in ms since the epoch."""


EntryMaker = Callable[[SessionEntry | None, str, str], SessionEntry]
"""`(old entry, new session id, new file name) -> new entry` for a reset or a successor."""


class SessionOpening(Protocol):
    """Creates and loads the transcripts of sessions (`opening.SessionOpener` on files)."""

    def path(self, key: SessionKey, file_name: str) -> Path:
        """The transcript path (or name) of an index entry's `sessionFile`."""
        ...

    def create(self, key: SessionKey, store: SessionIndex, workspace: Path | None) -> Session:
        """A new session under `key` (or the one another process created meanwhile)."""
        ...

    def load(
        self,
        key: SessionKey,
        store: SessionIndex,
        entry: SessionEntry,
        *,
        create: bool,
        workspace: Path | None,
    ) -> Session:
        """The session of an existing entry, its transcript read in."""
        ...

    def swap(
        self,
        key: SessionKey,
        store: SessionIndex,
        make_entry: EntryMaker,
        *,
        workspace: Path | None,
        successor: bool,
        seed: Sequence[Entry] = (),
    ) -> Session:
        """Point `key` at a new transcript holding `seed`, complete before the index names it."""
        ...


class SessionBackend(Protocol):
    """The storage of every agent's sessions under one state directory."""

    kind: str
    """`files` or the database's name."""
    round_trips: bool
    """Whether reading and writing cost network round trips (a database): code on the event
    loop then opens sessions and writes counters from a worker thread, so a slow database
    delays only the turns that need it (`SessionManager.open_async`)."""

    def index(self, agent_id: str, *, durable: bool) -> SessionIndex:
        """The session index of one agent (`durable=False`: never sync, for tests)."""
        ...

    def agent_ids(self) -> list[str]:
        """Agents that have a session index, sorted."""
        ...

    def opening(
        self, *, workspace: Path, read_only: bool, descriptors: DescriptorPool
    ) -> SessionOpening:
        """What creates and loads transcripts for a manager."""
        ...

    def hold(
        self, key: SessionKey, *, timeout: float, on_wait: Waiting | None
    ) -> AbstractAsyncContextManager[None]:
        """Hold the session's turn lock across processes for the block.

        Raises:
            SessionError: another process held it for `timeout` seconds.
        """
        ...

    def message_count(self, key: SessionKey, entry: SessionEntry, path: Path) -> int:
        """Top-level messages of the entry's transcript (for listings)."""
        ...

    def archived(self, agent_id: str, gone: Mapping[str, SessionEntry]) -> None:
        """Keys whose index entries were just removed: release what belongs to them."""
        ...

    def transcripts(self, agent_id: str, *, prefix: str = "") -> list[StoredTranscript]:
        """Every transcript of the agent (whose name starts with `prefix`): live ones, then
        archived, then trashed, by name."""
        ...

    def messages_in(self, agent_id: str, path: Path) -> int:
        """Top-level messages of any transcript of the agent (for listings)."""
        ...

    def trash(self, agent_id: str, paths: Sequence[Path]) -> list[Path]:
        """Put transcripts in the trash (kept, readable by id); where each one is now."""
        ...

    def read(self, agent_id: str, path: Path) -> Transcript:
        """Any transcript of the agent (current, replaced, archived), read-only.

        Raises:
            TranscriptError: there is none at `path`, or it cannot be read.
        """
        ...


class FileSessions:
    """Sessions as files under the state directory (the default backend)."""

    kind = "files"
    round_trips = False

    def __init__(self, state_dir: Path) -> None:
        self.state_dir = state_dir

    def index(self, agent_id: str, *, durable: bool) -> SessionStore:
        """`agents/<agentId>/sessions/sessions.json` and its journal."""
        return SessionStore.for_agent(self.state_dir, agent_id, durable=durable)

    def agent_ids(self) -> list[str]:
        """Agents with a `sessions.json` (or its journal); stray directories are skipped."""
        root = self.state_dir / "agents"
        if not root.is_dir():
            return []
        return sorted(
            p.name
            for p in root.iterdir()
            if is_agent_id(p.name)
            and any(
                (p / "sessions" / name).is_file()
                for name in (STORE_FILE_NAME, f"{STORE_FILE_NAME}.journal")
            )
        )

    def opening(
        self, *, workspace: Path, read_only: bool, descriptors: DescriptorPool
    ) -> SessionOpening:
        """A `SessionOpener` on the state directory."""
        from nodmix.sessions.opening import SessionOpener

        return SessionOpener(
            self.state_dir, workspace=workspace, read_only=read_only, descriptors=descriptors
        )

    def hold(
        self, key: SessionKey, *, timeout: float, on_wait: Waiting | None
    ) -> AbstractAsyncContextManager[None]:
        """The session's `flock`ed lock file (see `turn_lock.py`)."""
        path = lock_path(sessions_dir(self.state_dir, key.agent_id), str(key))
        return hold_file_lock(path, str(key), timeout=timeout, on_wait=on_wait)

    def message_count(self, key: SessionKey, entry: SessionEntry, path: Path) -> int:
        """Counted from the file without building entries."""
        return count_messages(path)

    def read(self, agent_id: str, path: Path) -> Transcript:
        """The file, read-only."""
        return Transcript.load(path, read_only=True)

    def archived(self, agent_id: str, gone: Mapping[str, SessionEntry]) -> None:
        """Remove the lock files (left alone while another process holds one)."""
        directory = sessions_dir(self.state_dir, agent_id)
        for key in gone:
            remove_lock_file(lock_path(directory, key))

    def transcripts(self, agent_id: str, *, prefix: str = "") -> list[StoredTranscript]:
        """The `*.jsonl` files of the agent's sessions folder and its `archive/`, `trash/`."""
        folder = sessions_dir(self.state_dir, agent_id)
        found: list[StoredTranscript] = []
        for sub in ("", ARCHIVE_DIR, TRASH_DIR):
            for path in transcript_files(folder / sub if sub else folder):
                if not path.name.startswith(prefix):
                    continue
                try:
                    modified = int(path.stat().st_mtime * 1000)
                except FileNotFoundError:  # moved meanwhile
                    continue
                found.append(
                    StoredTranscript(
                        path=path, folder=sub, header=read_header(path), modified_ms=modified
                    )
                )
        return found

    def messages_in(self, agent_id: str, path: Path) -> int:
        """Counted from the file."""
        return count_messages(path)

    def trash(self, agent_id: str, paths: Sequence[Path]) -> list[Path]:
        """Moved into `trash/` (a name taken there gets a suffix)."""
        trash = sessions_dir(self.state_dir, agent_id) / TRASH_DIR
        return [moved for path in paths if (moved := move_into(path, trash)) is not None]
