"""Open, create, reset and list sessions: the session store plus transcripts, per agent.

Concurrency model:

- One turn at a time per session, within a process and across processes: the runtime wraps
  each turn in `async with manager.hold_turn(key, ...)` (an in-process lock, then the session's
  lock file; see `turn_lock.py`). Transcript appends are then single-writer and need no lock of
  their own.
- The session store is locked per change (see `store.py`), and `open()` re-checks the store and
  reads in transcript lines other processes appended, so under the turn lock a session is always
  current: a session reset elsewhere is picked up instead of writing on into the old
  transcript, and the `parentId` chain continues from the last entry on disk.

Open files: transcripts borrow append descriptors from one bounded `DescriptorPool`, so the
number of open files does not grow with the number of cached sessions.

File work here is synchronous: an append is one small `os.write` (microseconds) and a store
update holds its lock for about a millisecond, cheaper than a hop to a worker thread.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import threading
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from pathlib import Path

import anyio
import msgspec

from nodmix.config.paths import DEFAULT_AGENT_ID, default_workspace
from nodmix.crashpoints import crash_point
from nodmix.errors import SessionError
from nodmix.messages import now_ms
from nodmix.sessions.backend import EntryMaker, FileSessions, SessionBackend
from nodmix.sessions.descriptors import DescriptorPool
from nodmix.sessions.entries import Entry
from nodmix.sessions.index import SessionIndex
from nodmix.sessions.keys import (
    SessionKey,
    parse_session_key,
    resolve_session_key,
    validate_agent_id,
)
from nodmix.sessions.listing import list_sessions
from nodmix.sessions.pending import PendingUsage
from nodmix.sessions.session import Session, SessionSummary
from nodmix.sessions.store_entry import SessionEntry, StoreData, new_session_entry
from nodmix.sessions.turn_lock import TurnLocks, Waiting
from nodmix.stores import provided

logger = logging.getLogger(__name__)

DEFAULT_MAX_CACHED = 1024
OPENING_THREADS = 8
"""Sessions opened from worker threads at once (`open_async`); more wait their turn."""


class SessionManager:
    """Sessions of every agent under one state directory, with a cache of open transcripts.

    The cache keeps at most `max_cached` sessions; the least recently opened is dropped beyond
    that. Append descriptors are pooled separately (at most `max_open_files` open). A caller
    still holding a dropped `Session` can keep using it: the next `open()` loads a second
    `Transcript` on the same file, and each append first reads in lines the other one wrote,
    so the chain stays linear.
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
        max_open_files: int | None = None,
        backend: SessionBackend | None = None,
    ) -> None:
        """Manage the sessions under `state_dir`.

        Args:
            state_dir: The Nodmix state directory (`nodmix.config.paths.state_dir()`).
            default_agent_id: Agent of bare session names such as `work`.
            workspace: Default `cwd` recorded in new transcript headers.
            read_only: Never create, repair or append (for CLI readers next to a gateway).
            durable: Fsync session-store updates.
            max_cached: How many open sessions to keep in memory.
            max_open_files: How many transcript append descriptors to keep open.
            backend: Where sessions are stored (files under `state_dir` by default).
        """
        self.state_dir = state_dir
        self.default_agent_id = validate_agent_id(default_agent_id)
        self.workspace = workspace or default_workspace(state_dir)
        self.read_only = read_only
        self.durable = durable
        self.max_cached = max(1, max_cached)
        if backend is None:  # the backend bound to this state dir (a CLI command), else files
            backend = provided(state_dir, "sessions") or FileSessions(state_dir)
        self.backend: SessionBackend = backend
        self._stores: dict[str, SessionIndex] = {}
        self._cache: OrderedDict[str, Session] = OrderedDict()
        # Guards the two maps above: with a database backend `open` runs in worker threads
        # (`open_async`) beside the loop's own calls. Never held across a round trip.
        self._guard = threading.RLock()
        self._opening: anyio.CapacityLimiter | None = None
        self._pending = PendingUsage(self.store)
        self._locks = TurnLocks()
        self.descriptors = (
            DescriptorPool() if max_open_files is None else DescriptorPool(max_open_files)
        )
        """The append descriptors of every transcript this manager opens."""
        self._files = self.backend.opening(
            workspace=self.workspace, read_only=read_only, descriptors=self.descriptors
        )

    # ---- lookup -------------------------------------------------------------------------------

    def resolve_key(self, session_key: str | SessionKey) -> SessionKey:
        """Parse a key; a bare name means a session of the default agent.

        Raises:
            SessionError: the key is malformed.
        """
        return resolve_session_key(session_key, default_agent_id=self.default_agent_id)

    def store(self, agent_id: str) -> SessionIndex:
        """The session store of one agent."""
        with self._guard:
            store = self._stores.get(agent_id)
            if store is None:
                validate_agent_id(agent_id)
                store = self.backend.index(agent_id, durable=self.durable)
                self._stores[agent_id] = store
            return store

    def agent_ids(self) -> list[str]:
        """Agents that have a session store, sorted (stray directories are skipped)."""
        return self.backend.agent_ids()

    def turn_lock(self, session_key: str | SessionKey) -> anyio.Lock:
        """The lock that serialises turns of one session in this process.

        `hold_turn` takes it (and the cross-process lock); `locked()` tells whether a turn of
        this process runs. Locks are kept only while someone holds or waits on them.
        """
        return self._locks.get(str(self.resolve_key(session_key)))

    @contextlib.asynccontextmanager
    async def hold_turn(
        self,
        session_key: str | SessionKey,
        *,
        timeout: float,
        on_wait: Waiting | None = None,
    ) -> AsyncIterator[None]:
        """Run a turn on the session with no other turn, of this or another process, running.

        Takes the in-process lock, then the session's lock file (waiting at most `timeout`
        seconds for other processes; `on_wait(key, pid)` is told once if it has to). Open the
        session inside the block: `open()` then reads what other processes wrote meanwhile.

        Raises:
            SessionError: the key is malformed, or another process held the session too long.
        """
        key = self.resolve_key(session_key)
        async with (
            self._locks.get(str(key)),
            self.backend.hold(key, timeout=timeout, on_wait=on_wait),
        ):
            yield

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
        with self._guard:
            cached = self._cache.get(str(key))
        if (
            cached is not None
            and entry is not None
            and cached.session_id == entry.session_id
            and cached.transcript.path.name == entry.session_file
        ):
            cached.entry = entry
            if not self.read_only:
                cached.transcript.catch_up()  # another process's turn may have appended
            with self._guard:
                if self._cache.get(str(key)) is cached:
                    self._cache.move_to_end(str(key))
            return cached
        if entry is None:
            if not create or self.read_only:
                raise SessionError(f"no session {key}")
            session = self._files.create(key, store, workspace)
        else:
            session = self._files.load(key, store, entry, create=create, workspace=workspace)
        self._remember(session)
        return session

    async def open_async(
        self, session_key: str | SessionKey, *, create: bool = True, workspace: Path | None = None
    ) -> Session:
        """`open` for code on the event loop. With a backend whose reads are round trips (a
        database) it runs in a worker thread, at most `OPENING_THREADS` at once, so a database
        that answers slowly delays the turns waiting for it and nothing else.
        """
        if not self.backend.round_trips:
            return self.open(session_key, create=create, workspace=workspace)
        if self._opening is None:
            self._opening = anyio.CapacityLimiter(OPENING_THREADS)
        work = functools.partial(self.open, session_key, create=create, workspace=workspace)
        return await anyio.to_thread.run_sync(work, limiter=self._opening)

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

    def rotate(
        self,
        session_key: str | SessionKey,
        *,
        workspace: Path | None = None,
        seed: Sequence[Entry] = (),
    ) -> Session:
        """Continue the session in a successor transcript (for compaction that truncates).

        The new transcript's header names the old file as `parentSession`; the key keeps its
        counters. It is created holding `seed` (the compaction's kept tail and summary), on
        disk in full before the index switches to it, so a crash never leaves the key on a
        transcript without its context.

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

        session = self._replace(key, successor, workspace=workspace, successor=True, seed=seed)
        crash_point("sessions.successor-switched")
        return session

    def flush_due(self) -> int:
        """Write the usage counters that have waited long enough, one store write per agent.

        The runtime calls this after each turn. Once any session of an agent is due, every
        pending session of that agent goes in the same write, so a stream of one-shot sessions
        (stateless API clients) costs about one store write a second, not one per request.
        Returns how many sessions were written.
        """
        return self._pending.flush_due()

    @property
    def usage_waiting(self) -> bool:
        """Whether usage counters of this process wait to be written (`flush_due` later)."""
        return self._pending.waiting

    def flush_all(self) -> None:
        """Write every pending usage counter of this process (one store write per agent)."""
        self._pending.flush_all()

    def close(self) -> None:
        """Write pending usage counters, fold each store's journal into its `sessions.json`,
        close every cached transcript and empty the cache."""
        self.flush_all()
        if not self.read_only:
            for store in self._stores.values():
                try:
                    store.compact()
                except SessionError:  # a corrupt or locked store: its journal stays as it is
                    # Whoever used the store has reported the error; the details are for --verbose.
                    logger.debug("could not compact %s", store.path, exc_info=True)
        while self._cache:
            _, session = self._cache.popitem(last=False)
            session.transcript.close()
        self.descriptors.close_all()

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
                self._pending.forget(cached)
                cached.transcript.close()
            files[key] = self._transcript_path(parse_session_key(key), entry.session_file)
        self.backend.archived(agent_id, gone)  # lock files go (unless another process holds one)
        return files

    # ---- listing ------------------------------------------------------------------------------

    def list_sessions(
        self,
        agent_id: str | None = None,
        *,
        limit: int | None = None,
        where: Callable[[str], bool] | None = None,
    ) -> list[SessionSummary]:
        """Sessions of one agent, or of every agent, most recently updated first
        (`listing.list_sessions`).

        Raises:
            SessionError: a session store is corrupt.
        """
        self.flush_all()  # counters this process still holds belong in the listing
        agents = [validate_agent_id(agent_id)] if agent_id else self.agent_ids()
        return list_sessions(self, agents, limit=limit, where=where)

    def cached(self, key: str) -> Session | None:
        """The open session of `key` in this process, if any."""
        with self._guard:
            return self._cache.get(key)

    # ---- internals ----------------------------------------------------------------------------

    def _transcript_path(self, key: SessionKey, file_name: str) -> Path:
        return self._files.path(key, file_name)

    def _replace(
        self,
        key: SessionKey,
        make_entry: EntryMaker,
        *,
        workspace: Path | None,
        successor: bool,
        seed: Sequence[Entry] = (),
    ) -> Session:
        if self.read_only:
            raise SessionError(f"cannot change session {key}: the session manager is read-only")
        current = self._cache.get(str(key))
        if current is not None:
            current.flush()  # its counters belong to the session being replaced
        store = self.store(key.agent_id)
        session = self._files.swap(
            key, store, make_entry, workspace=workspace, successor=successor, seed=seed
        )
        stale = self._cache.pop(str(key), None)
        if stale is not None:
            stale.transcript.close()
        self._remember(session)
        return session

    def _remember(self, session: Session) -> None:
        session.on_pending = self._pending.track
        session.write_inline = not self.backend.round_trips
        dropped: list[Session] = []
        with self._guard:
            stale = self._cache.pop(session.key, None)
            if stale is not None and stale is not session:
                dropped.append(stale)
            self._cache[session.key] = session
            while len(self._cache) > self.max_cached:
                dropped.append(self._cache.popitem(last=False)[1])
        for old in dropped:  # (a write: outside the guard)
            old.flush()
            old.transcript.close()
