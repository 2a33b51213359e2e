"""The session store: `agents/<agentId>/sessions/sessions.json`, session key -> `SessionEntry`.

The gateway and a CLI process may both change the store, so every change is a read-modify-write
under an exclusive `fcntl.flock` on the sibling `sessions.json.lock`, and the new content
replaces the file atomically (temporary file, fsync, `os.replace`). Readers take no lock: they
always see either the old or the new file, never half of one.

A store file that does not parse is an error naming the file. It is moved aside only by the
explicit `SessionStore.quarantine()` (`nodmix sessions repair-store`), never silently.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import msgspec

from nodmix.config.paths import sessions_dir
from nodmix.errors import SessionError
from nodmix.messages import now_ms
from nodmix.sessions.entries import new_entry_id

STORE_FILE_NAME = "sessions.json"
LOCK_TIMEOUT_S = 10.0
_LOCK_POLL_S = 0.002

T = TypeVar("T")


class SessionEntry(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """What the store knows about one session key."""

    session_id: str
    session_file: str
    """Transcript file name inside the sessions directory (`<sessionId>.jsonl`)."""
    created_at: int
    """Epoch milliseconds; the same unit as message timestamps."""
    updated_at: int
    last_interaction_at: int
    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0
    context_tokens: int = 0
    """Context size of the latest model request."""
    compaction_count: int = 0
    model: str | None = None
    """`provider/model` used last (or pinned for this session)."""
    label: str | None = None


StoreData = dict[str, SessionEntry]

_ENCODER = msgspec.json.Encoder(order="sorted")
_DECODER = msgspec.json.Decoder(StoreData)


def new_session_entry(
    session_id: str, session_file: str, *, now: int | None = None
) -> SessionEntry:
    """A fresh store entry for a new transcript."""
    stamp = now_ms() if now is None else now
    return SessionEntry(
        session_id=session_id,
        session_file=session_file,
        created_at=stamp,
        updated_at=stamp,
        last_interaction_at=stamp,
    )


class SessionStore:
    """One agent's `sessions.json`.

    Reads are cached and revalidated with one `stat` (an update replaces the file, so its
    inode changes), which keeps `get` cheap for a gateway that opens sessions all day.
    """

    def __init__(self, path: Path, *, durable: bool = True) -> None:
        """Use the store file at `path`; `durable=False` skips fsync (tests, benchmarks)."""
        self.path = path
        self.durable = durable
        self._cache: StoreData = {}
        self._signature: tuple[int, int, int] | None = None

    @classmethod
    def for_agent(cls, state_dir: Path, agent_id: str, *, durable: bool = True) -> SessionStore:
        """The store of `agent_id` under the state directory."""
        return cls(sessions_dir(state_dir, agent_id) / STORE_FILE_NAME, durable=durable)

    @property
    def lock_path(self) -> Path:
        """The sibling lock file."""
        return self.path.with_name(self.path.name + ".lock")

    def load(self) -> StoreData:
        """All entries (a fresh dict; changing it changes nothing on disk).

        Raises:
            SessionError: the store file exists but is not a valid session store.
        """
        return dict(self._read())

    def get(self, session_key: str) -> SessionEntry | None:
        """The entry for `session_key`, if any.

        Raises:
            SessionError: the store file is corrupt.
        """
        return self._read().get(session_key)

    def update(self, change: Callable[[StoreData], T], *, sync: bool = True) -> T:
        """Apply `change` to the current entries under the store lock and save the result.

        `change` mutates the dict it receives; its return value is passed through. Keep it
        short: other processes wait for the lock meanwhile. `sync=False` skips the fsync for
        bookkeeping that is cheap to lose on a power cut (usage counters); the replace stays
        atomic, so the file is never torn either way.

        Raises:
            SessionError: the store is corrupt or the lock could not be taken in time.
        """
        with self._locked():
            data = dict(self._read())
            result = change(data)
            self._write(data, sync=sync)
            return result

    def update_entry(
        self, session_key: str, change: Callable[[SessionEntry], SessionEntry]
    ) -> SessionEntry | None:
        """Replace one entry with `change(entry)`; `None` if the key has no entry."""

        def apply(data: StoreData) -> SessionEntry | None:
            entry = data.get(session_key)
            if entry is None:
                return None
            data[session_key] = change(entry)
            return data[session_key]

        return self.update(apply)

    def quarantine(self) -> Path | None:
        """Move a corrupt store aside as `sessions.json.corrupt-<ts>`; return the new path.

        Does nothing (returns `None`) when the store is missing or valid. Transcripts are
        untouched, so the conversations themselves are not lost.
        """
        with self._locked():
            try:
                self._read()
            except SessionError:
                stamp = time.strftime("%Y%m%dT%H%M%S")
                target = self.path.with_name(f"{self.path.name}.corrupt-{stamp}")
                os.replace(self.path, target)
                self._signature = None
                return target
            return None

    # ---- internals ----------------------------------------------------------------------------

    def _read(self) -> StoreData:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            self._cache, self._signature = {}, None
            return self._cache
        signature = (st.st_ino, st.st_mtime_ns, st.st_size)
        if signature == self._signature:
            return self._cache
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:  # replaced between stat and open: read the new one
            return self._read()
        try:
            parsed = _DECODER.decode(data) if data.strip() else {}
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise SessionError(
                f"{self.path}: session store is corrupt ({exc}); run"
                f" `nodmix sessions repair-store --agent {self.path.parent.parent.name}`"
                " to move it aside (transcripts are kept)"
            ) from None
        self._cache, self._signature = parsed, signature
        return parsed

    def _write(self, data: StoreData, *, sync: bool = True) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        payload = _ENCODER.encode(data)
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.{new_entry_id()}.tmp")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            try:
                os.write(fd, payload)
                if self.durable and sync:
                    os.fsync(fd)  # else a power loss could replace the store with an empty file
            finally:
                os.close(fd)
            os.replace(tmp, self.path)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        # We hold the lock, so what we just wrote is current: no need to read it back.
        st = os.stat(self.path)
        self._cache, self._signature = dict(data), (st.st_ino, st.st_mtime_ns, st.st_size)

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            _acquire(fd, self.lock_path)
            yield
        finally:
            os.close(fd)  # closing the descriptor releases the lock


def _acquire(fd: int, path: Path) -> None:
    # Poll with a deadline instead of blocking: a stopped process holding the lock must not
    # hang the gateway forever.
    deadline = time.monotonic() + LOCK_TIMEOUT_S
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() >= deadline:
                raise SessionError(
                    f"{path}: timed out after {LOCK_TIMEOUT_S:.0f}s waiting for the session"
                    " store lock (another nodmix process holds it)"
                ) from None
            time.sleep(_LOCK_POLL_S)


def store_to_builtins(data: StoreData) -> dict[str, Any]:
    """The store as JSON-ready builtins (camelCase), as written to disk."""
    result: dict[str, Any] = msgspec.to_builtins(data)
    return result
