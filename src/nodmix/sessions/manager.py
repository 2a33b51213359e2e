"""Open, create, reset and list sessions: the session store plus transcripts, per agent.

Concurrency model:

- Within a process, one turn at a time per session: the runtime wraps each turn in
  `async with manager.turn_lock(key)`. Transcript appends are then single-writer and need no
  lock of their own.
- Across processes (the gateway and a CLI), the session store is locked per change (see
  `store.py`), and `open()` re-checks the store on every call, so a session reset by another
  process is picked up on its next turn instead of writing on into the old transcript.

File work here is synchronous: an append is one small `os.write` (microseconds) and a store
update holds its lock for about a millisecond, cheaper than a hop to a worker thread.
"""

from __future__ import annotations

import logging
import uuid
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterable
from pathlib import Path

import anyio
import msgspec

from nodmix.config.paths import DEFAULT_AGENT_ID, default_workspace, sessions_dir
from nodmix.errors import SessionError
from nodmix.messages import now_ms
from nodmix.sessions.entries import MessageEntry
from nodmix.sessions.keys import (
    SessionKey,
    is_agent_id,
    parse_session_key,
    resolve_session_key,
    validate_agent_id,
)
from nodmix.sessions.session import Session, SessionSummary
from nodmix.sessions.store import (
    STORE_FILE_NAME,
    SessionEntry,
    SessionStore,
    StoreData,
    new_session_entry,
)
from nodmix.sessions.transcript import (
    Transcript,
    count_messages,
    transcript_file_name,
)

logger = logging.getLogger(__name__)

DEFAULT_MAX_CACHED = 1024


class SessionManager:
    """Sessions of every agent under one state directory, with a cache of open transcripts.

    The cache keeps at most `max_cached` sessions; the least recently opened is dropped (and
    its append descriptor closed) beyond that. A caller still holding a dropped `Session` can
    keep using it: the next `open()` loads a second `Transcript` on the same file, and each
    append first reads in lines the other one wrote, so the chain stays linear.
    """

    def __init__(
        self,
        state_dir: Path,
        *,
        default_agent_id: str = DEFAULT_AGENT_ID,
        workspace: Path | None = None,
        read_only: bool = False,
        durable: bool = True,
        max_cached: int = DEFAULT_MAX_CACHED,
    ) -> None:
        """Manage the sessions under `state_dir`.

        Args:
            state_dir: The Nodmix state directory (`nodmix.config.paths.state_dir()`).
            default_agent_id: Agent of bare session names such as `work`.
            workspace: Default `cwd` recorded in new transcript headers.
            read_only: Never create, repair or append (for CLI readers next to a gateway).
            durable: Fsync session-store updates.
            max_cached: How many open sessions to keep in memory.
        """
        self.state_dir = state_dir
        self.default_agent_id = validate_agent_id(default_agent_id)
        self.workspace = workspace or default_workspace(state_dir)
        self.read_only = read_only
        self.durable = durable
        self.max_cached = max(1, max_cached)
        self._stores: dict[str, SessionStore] = {}
        self._cache: OrderedDict[str, Session] = OrderedDict()
        self._pending: dict[int, Session] = {}
        """Sessions whose usage counters wait to be written (by `id`)."""
        self._locks: weakref.WeakValueDictionary[str, anyio.Lock] = weakref.WeakValueDictionary()

    # ---- lookup -------------------------------------------------------------------------------

    def resolve_key(self, session_key: str | SessionKey) -> SessionKey:
        """Parse a key; a bare name means a session of the default agent.

        Raises:
            SessionError: the key is malformed.
        """
        return resolve_session_key(session_key, default_agent_id=self.default_agent_id)

    def store(self, agent_id: str) -> SessionStore:
        """The session store of one agent."""
        store = self._stores.get(agent_id)
        if store is None:
            validate_agent_id(agent_id)
            store = SessionStore.for_agent(self.state_dir, agent_id, durable=self.durable)
            self._stores[agent_id] = store
        return store

    def agent_ids(self) -> list[str]:
        """Agents that have a session store, sorted (stray directories are skipped)."""
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

    def turn_lock(self, session_key: str | SessionKey) -> anyio.Lock:
        """The lock that serialises turns of one session in this process.

        Use `async with manager.turn_lock(key): ...` around a whole turn. Locks are kept only
        while someone holds or waits on them.
        """
        key = str(self.resolve_key(session_key))
        lock = self._locks.get(key)
        if lock is None:
            lock = anyio.Lock()
            self._locks[key] = lock
        return lock

    # ---- opening ------------------------------------------------------------------------------

    def open(
        self, session_key: str | SessionKey, *, create: bool = True, workspace: Path | None = None
    ) -> Session:
        """The session for `session_key`, creating its store entry and transcript if needed.

        Raises:
            SessionError: the key is malformed, or the session does not exist and `create` is
                false (or the manager is read-only).
            TranscriptError: the transcript cannot be read.
        """
        key = self.resolve_key(session_key)
        store = self.store(key.agent_id)
        entry = store.get(str(key))
        cached = self._cache.get(str(key))
        if (
            cached is not None
            and entry is not None
            and cached.session_id == entry.session_id
            and cached.transcript.path.name == entry.session_file
        ):
            cached.entry = entry
            self._cache.move_to_end(str(key))
            return cached
        if entry is None:
            if not create or self.read_only:
                raise SessionError(f"no session {key}")
            session = self._create(key, store, workspace)
        else:
            session = self._load(key, store, entry, create=create, workspace=workspace)
        self._remember(session)
        return session

    def reset(self, session_key: str | SessionKey, *, workspace: Path | None = None) -> Session:
        """Start a new transcript (and session id) under the key; the old file is kept.

        Token counters and the compaction count start at zero; label and model are kept.
        """
        key = self.resolve_key(session_key)

        def fresh(old: SessionEntry | None, session_id: str, file_name: str) -> SessionEntry:
            entry = new_session_entry(session_id, file_name)
            if old is not None:
                entry = msgspec.structs.replace(entry, label=old.label, model=old.model)
            return entry

        return self._replace(key, fresh, workspace=workspace, successor=False)

    def rotate(self, session_key: str | SessionKey, *, workspace: Path | None = None) -> Session:
        """Continue the session in a successor transcript (for compaction that truncates).

        The new transcript's header names the old file as `parentSession`; the key keeps its
        counters. The caller writes the summary and kept tail into the new transcript.

        Raises:
            SessionError: the session does not exist.
        """
        key = self.resolve_key(session_key)

        def successor(old: SessionEntry | None, session_id: str, file_name: str) -> SessionEntry:
            if old is None:
                raise SessionError(f"no session {key}")
            return msgspec.structs.replace(
                old, session_id=session_id, session_file=file_name, updated_at=now_ms()
            )

        return self._replace(key, successor, workspace=workspace, successor=True)

    def flush_due(self) -> int:
        """Write the usage counters that have waited long enough, one store write per agent.

        The runtime calls this after each turn. Once any session of an agent is due, every
        pending session of that agent goes in the same write, so a stream of one-shot sessions
        (stateless API clients) costs about one store write a second, not one per request.
        Returns how many sessions were written.
        """
        pending: dict[str, list[Session]] = {}
        due: set[str] = set()
        for key, session in list(self._pending.items()):
            if not session.has_pending:  # it flushed on its own (a store write folds counters in)
                del self._pending[key]
                continue
            pending.setdefault(session.agent_id, []).append(session)
            if session.flush_due():
                due.add(session.agent_id)
        batch = {agent: pending[agent] for agent in due}
        self._write_pending(batch)
        return sum(len(v) for v in batch.values())

    def _write_pending(self, due: dict[str, list[Session]]) -> None:
        for agent_id, sessions in due.items():

            def apply(data: StoreData, sessions: list[Session] = sessions) -> None:
                for session in sessions:
                    session.take_pending(data)

            self.store(agent_id).update(apply, sync=False)
            for session in sessions:
                self._pending.pop(id(session), None)

    def flush_all(self) -> None:
        """Write every pending usage counter of this process (one store write per agent)."""
        due: dict[str, list[Session]] = {}
        for session in list(self._pending.values()):
            if session.has_pending:
                due.setdefault(session.agent_id, []).append(session)
        self._write_pending(due)
        self._pending.clear()

    def close(self) -> None:
        """Write pending usage counters, fold each store's journal into its `sessions.json`,
        close every cached transcript and empty the cache."""
        self.flush_all()
        if not self.read_only:
            for store in self._stores.values():
                try:
                    store.compact()
                except SessionError:  # a corrupt or locked store: its journal stays as it is
                    logger.warning("could not compact %s", store.path, exc_info=True)
        while self._cache:
            _, session = self._cache.popitem(last=False)
            session.transcript.close()

    def archive(self, agent_id: str, keys: Iterable[str]) -> dict[str, Path]:
        """Take sessions out of the agent's list: their store entries go and their cached
        transcripts close. Sessions with a turn running in this process are left alone.

        Returns the archived keys with their transcript files, which the caller hands to
        `move_to_archive` (from any thread: moving many files into a large directory takes
        a while, and nothing else uses these files any more).

        Raises:
            SessionError: the store is corrupt or locked.
        """
        if self.read_only:
            raise SessionError("cannot archive sessions: the session manager is read-only")
        wanted = [k for k in keys if not self.turn_lock(k).locked()]

        def drop(data: StoreData) -> dict[str, SessionEntry]:
            return {k: data.pop(k) for k in wanted if k in data}

        gone = self.store(agent_id).update(drop, sync=False)
        files: dict[str, Path] = {}
        for key, entry in gone.items():
            cached = self._cache.pop(key, None)
            if cached is not None:
                self._pending.pop(id(cached), None)
                cached.transcript.close()
            files[key] = self._transcript_path(parse_session_key(key), entry.session_file)
        return files

    # ---- listing ------------------------------------------------------------------------------

    def list_sessions(
        self,
        agent_id: str | None = None,
        *,
        limit: int | None = None,
        where: Callable[[str], bool] | None = None,
    ) -> list[SessionSummary]:
        """Sessions of one agent, or of every agent, most recently updated first.

        `where(key)` filters, `limit` keeps the first rows. Message counts (which read the
        transcript of a session not open in this process) are only taken for the rows
        returned.

        Raises:
            SessionError: a session store is corrupt.
        """
        self.flush_all()  # counters this process still holds belong in the listing
        agents = [validate_agent_id(agent_id)] if agent_id else self.agent_ids()
        found: list[tuple[str, str, SessionEntry]] = []
        for agent in agents:
            for key, entry in self.store(agent).load().items():
                if where is None or where(key):
                    found.append((agent, key, entry))
        found.sort(key=lambda row: (-row[2].updated_at, row[1]))
        rows: list[SessionSummary] = []
        for agent, key, entry in found if limit is None else found[:limit]:
            path = sessions_dir(self.state_dir, agent) / entry.session_file
            count = self._message_count(key, entry, path)
            rows.append(
                SessionSummary(key=key, agent_id=agent, entry=entry, path=path, message_count=count)
            )
        return rows

    def _message_count(self, key: str, entry: SessionEntry, path: Path) -> int:
        cached = self._cache.get(key)
        if cached is not None and cached.session_id == entry.session_id:
            return sum(
                1
                for e in cached.transcript.entries
                if isinstance(e, MessageEntry) and e.parent_tool_call_id is None
            )
        return count_messages(path)

    # ---- internals ----------------------------------------------------------------------------

    def _transcript_path(self, key: SessionKey, file_name: str) -> Path:
        # sessions.json is user-editable: never let it point a transcript outside the directory.
        if Path(file_name).name != file_name or file_name in ("", ".", ".."):
            raise SessionError(f"session {key} has an invalid sessionFile {file_name!r}")
        return sessions_dir(self.state_dir, key.agent_id) / file_name

    def _create(self, key: SessionKey, store: SessionStore, workspace: Path | None) -> Session:
        cwd = workspace or self.workspace

        def create(data: StoreData) -> tuple[SessionEntry, Transcript | None]:
            existing = data.get(str(key))
            if existing is not None:  # another process created it since we looked
                return existing, None
            session_id = str(uuid.uuid4())
            file_name = transcript_file_name(session_id)
            transcript = Transcript.create(
                self._transcript_path(key, file_name),
                session_id=session_id,
                cwd=cwd,
                session_key=str(key),
            )
            data[str(key)] = new_session_entry(session_id, file_name)
            return data[str(key)], transcript

        # No fsync for a new entry: transcript appends are not fsynced either, and a power cut
        # that loses this entry only means the next open starts a session (the file stays).
        entry, transcript = store.update(create, sync=False)
        if transcript is None:
            return self._load(key, store, entry, create=True, workspace=workspace)
        return Session(session_key=key, entry=entry, transcript=transcript, store=store)

    def _load(
        self,
        key: SessionKey,
        store: SessionStore,
        entry: SessionEntry,
        *,
        create: bool,
        workspace: Path | None,
    ) -> Session:
        path = self._transcript_path(key, entry.session_file)
        if not path.exists():
            if not create or self.read_only:
                raise SessionError(f"session {key}: transcript {path} is missing")
            # The store survived but the file did not (deleted by hand): start it again under
            # the same id rather than failing every turn.
            logger.warning("session %s: transcript %s is missing; starting it afresh", key, path)
            transcript = Transcript.create(
                path,
                session_id=entry.session_id,
                cwd=workspace or self.workspace,
                session_key=str(key),
            )
        else:
            transcript = Transcript.load(path, read_only=self.read_only)
        return Session(session_key=key, entry=entry, transcript=transcript, store=store)

    def _replace(
        self,
        key: SessionKey,
        make_entry: Callable[[SessionEntry | None, str, str], SessionEntry],
        *,
        workspace: Path | None,
        successor: bool,
    ) -> Session:
        if self.read_only:
            raise SessionError(f"cannot change session {key}: the session manager is read-only")
        store = self.store(key.agent_id)
        cwd = workspace or self.workspace

        def swap(data: StoreData) -> tuple[SessionEntry, Transcript]:
            old = data.get(str(key))
            session_id = str(uuid.uuid4())
            file_name = transcript_file_name(session_id)
            entry = make_entry(old, session_id, file_name)  # may refuse before any file exists
            transcript = Transcript.create(
                self._transcript_path(key, file_name),
                session_id=session_id,
                cwd=cwd,
                parent_session=old.session_file if successor and old else None,
                session_key=str(key),
            )
            data[str(key)] = entry
            return entry, transcript

        current = self._cache.get(str(key))
        if current is not None:
            current.flush()  # its counters belong to the session being replaced
        entry, transcript = store.update(swap)
        stale = self._cache.pop(str(key), None)
        if stale is not None:
            stale.transcript.close()
        session = Session(session_key=key, entry=entry, transcript=transcript, store=store)
        self._remember(session)
        return session

    def _track_pending(self, session: Session) -> None:
        self._pending[id(session)] = session

    def _remember(self, session: Session) -> None:
        session.on_pending = self._track_pending
        stale = self._cache.pop(session.key, None)
        if stale is not None and stale is not session:
            stale.flush()
            stale.transcript.close()
        self._cache[session.key] = session
        while len(self._cache) > self.max_cached:
            _, evicted = self._cache.popitem(last=False)
            evicted.flush()
            evicted.transcript.close()
