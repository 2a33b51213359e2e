"""The session store: `agents/<agentId>/sessions/sessions.json`, session key -> `SessionEntry`.

The store is `sessions.json` plus its change journal `sessions.json.journal` (see
`journal.py`): the current entries are the file's, with the journal's lines applied in order.

- The gateway and a CLI process may both change the store, so every change is a
  read-modify-write under an exclusive `fcntl.flock` on the sibling `sessions.json.lock`. A
  change appends the changed keys to the journal; the first change of a new store, and every
  `compact()` (when the journal has grown, and when a manager closes), writes the whole
  `sessions.json` atomically (temporary file, fsync, `os.replace`) and removes the journal.
- Readers take no lock. They read the journal before `sessions.json`, so a compaction
  happening meanwhile can only make them replay changes the file already holds.

A store file that does not parse is an error naming the file (and for the journal, the line).
It is moved aside only by the explicit `SessionStore.quarantine()` (`nodmix sessions
repair-store`, which then rebuilds the index from the transcripts: `rebuild.py`), never
silently.
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
from nodmix.invocation import nodmix_command
from nodmix.sessions import journal
from nodmix.sessions.entries import new_entry_id
from nodmix.sessions.files import private_dirs
from nodmix.sessions.journal import JournalState
from nodmix.sessions.store_entry import SessionEntry, StoreData, new_session_entry

__all__ = [
    "STORE_FILE_NAME",
    "SessionEntry",
    "SessionStore",
    "StoreData",
    "new_session_entry",
    "store_to_builtins",
]

STORE_FILE_NAME = "sessions.json"
LOCK_TIMEOUT_S = 10.0
_LOCK_POLL_S = 0.002

T = TypeVar("T")


_ENCODER = msgspec.json.Encoder(order="sorted")
_DECODER = msgspec.json.Decoder(StoreData)
#: Fold the journal into `sessions.json` once it holds this many bytes (or more than the
#: store file itself), so a reader never replays much.
JOURNAL_COMPACT_BYTES = 256 << 10


def entry_change(
    session_key: str, change: Callable[[SessionEntry], SessionEntry]
) -> Callable[[StoreData], SessionEntry | None]:
    """An `update` change that replaces one entry with `change(entry)` (returned), or does
    nothing and returns `None` when the key has no entry."""

    def apply(data: StoreData) -> SessionEntry | None:
        entry = data.get(session_key)
        if entry is None:
            return None
        data[session_key] = change(entry)
        return data[session_key]

    return apply


class _Changes(dict[str, SessionEntry]):
    """The dict an `update` change function mutates; remembers which keys it touched."""

    def __init__(self, data: StoreData) -> None:
        super().__init__(data)
        self.touched: set[str] = set()

    def __setitem__(self, key: str, value: SessionEntry) -> None:
        self.touched.add(key)
        super().__setitem__(key, value)

    def __delitem__(self, key: str) -> None:
        self.touched.add(key)
        super().__delitem__(key)

    def pop(self, key: str, *default: Any) -> Any:
        self.touched.add(key)
        return super().pop(key, *default)

    def setdefault(self, key: str, default: Any = None) -> Any:
        self.touched.add(key)
        return super().setdefault(key, default)

    def update(self, *args: Any, **kwargs: Any) -> None:
        other = dict(*args, **kwargs)
        self.touched.update(other)
        super().update(other)

    def popitem(self) -> tuple[str, SessionEntry]:
        item = super().popitem()
        self.touched.add(item[0])
        return item

    def clear(self) -> None:
        self.touched.update(self)
        super().clear()


class SessionStore:
    """One agent's `sessions.json` and its journal.

    Reads are cached and revalidated with two `stat`s; when only the journal grew, just the
    new lines are read, which keeps `get` cheap for a gateway that opens sessions all day.
    """

    def __init__(self, path: Path, *, durable: bool = True) -> None:
        """Use the store file at `path`; `durable=False` skips fsync (tests, benchmarks)."""
        self.path = path
        self.durable = durable
        self._cache: StoreData = {}
        self._signature: tuple[tuple[int, int, int] | None, tuple[int, int] | None] = (None, None)
        self._journal: JournalState | None = None

    @classmethod
    def for_agent(cls, state_dir: Path, agent_id: str, *, durable: bool = True) -> SessionStore:
        """The store of `agent_id` under the state directory."""
        return cls(sessions_dir(state_dir, agent_id) / STORE_FILE_NAME, durable=durable)

    @property
    def lock_path(self) -> Path:
        """The sibling lock file."""
        return self.path.with_name(self.path.name + ".lock")

    @property
    def journal_path(self) -> Path:
        """The sibling change journal."""
        return self.path.with_name(self.path.name + ".journal")

    def load(self) -> StoreData:
        """All entries (a fresh dict; changing it changes nothing on disk).

        Raises:
            SessionError: the store file or its journal is not valid.
        """
        return dict(self._read())

    def get(self, session_key: str) -> SessionEntry | None:
        """The entry for `session_key`, if any.

        Raises:
            SessionError: the store file or its journal is not valid.
        """
        return self._read().get(session_key)

    def update(self, change: Callable[[StoreData], T], *, sync: bool = True) -> T:
        """Apply `change` to the current entries under the store lock and save the result.

        `change` mutates the dict it receives; its return value is passed through. Keep it
        short: other processes wait for the lock meanwhile. `sync=False` skips the fsync for
        bookkeeping that is cheap to lose on a power cut (usage counters); a change is never
        torn either way.

        Raises:
            SessionError: the store is corrupt or the lock could not be taken in time.
        """
        with self._locked():
            data = _Changes(self._read())
            result = change(data)
            if data.touched:
                self._save(data, sync=sync)
            return result

    def update_entry(
        self, session_key: str, change: Callable[[SessionEntry], SessionEntry]
    ) -> SessionEntry | None:
        """Replace one entry with `change(entry)`; `None` if the key has no entry."""
        return self.update(entry_change(session_key, change))

    def compact(self) -> bool:
        """Fold the journal into `sessions.json` (under the lock); False if there was none."""
        with self._locked():
            data = self._read()
            if self._journal is None:
                return False
            self._write(data)
            return True

    def quarantine(self) -> Path | None:
        """Move a corrupt store file or journal aside as `<name>.corrupt-<ts>`; return where
        the first one went.

        Does nothing (returns `None`) when the store is missing or valid. Transcripts are
        untouched, so the conversations themselves are not lost.
        """
        with self._locked():
            try:
                self._read()
                return None
            except SessionError:
                pass
            stamp = time.strftime("%Y%m%dT%H%M%S")
            moved: list[Path] = []
            for path, valid in ((self.path, self._base_valid), (self.journal_path, self._log_ok)):
                if path.exists() and not valid():
                    target = path.with_name(f"{path.name}.corrupt-{stamp}")
                    os.replace(path, target)
                    moved.append(target)
            self._cache, self._signature, self._journal = {}, (None, None), None
            return moved[0] if moved else None

    # ---- internals ----------------------------------------------------------------------------

    def _stat(self) -> tuple[tuple[int, int, int] | None, tuple[int, int] | None]:
        try:
            st = os.stat(self.path)
            base: tuple[int, int, int] | None = (st.st_ino, st.st_mtime_ns, st.st_size)
        except FileNotFoundError:
            base = None
        try:
            jst = os.stat(self.journal_path)
            log: tuple[int, int] | None = (jst.st_ino, jst.st_size)
        except FileNotFoundError:
            log = None
        return base, log

    def _read(self) -> StoreData:
        signature = self._stat()
        if signature == self._signature:
            return self._cache
        base, log = signature
        if base is not None and base == self._signature[0] and log is not None:
            # Only the journal changed: apply its new lines (all of them if it is a new file).
            data = dict(self._cache)
            self._journal = journal.replay(self.journal_path, data, self._journal)
        else:
            found = journal.read(self.journal_path, None)  # before the file: see the docstring
            data = self._read_base()
            if found is not None:
                journal.apply(self.journal_path, found[0], data)
            self._journal = found[1] if found is not None else None
        self._cache, self._signature = data, signature
        return data

    def _read_base(self) -> StoreData:
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return {}
        try:
            return _DECODER.decode(raw) if raw.strip() else {}
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise SessionError(
                f"{self.path}: session store is corrupt ({exc}); run"
                f" `{nodmix_command()} sessions repair-store"
                f" --agent {self.path.parent.parent.name}`"
                " to rebuild it from the transcripts"
            ) from None

    def _base_valid(self) -> bool:
        try:
            self._read_base()
            return True
        except SessionError:
            return False

    def _log_ok(self) -> bool:
        try:
            journal.replay(self.journal_path, {}, None)
            return True
        except SessionError:
            return False

    def _save(self, data: _Changes, *, sync: bool) -> None:
        # We hold the lock and `_read` just ran, so `data` is current and `_journal` says where
        # the journal's complete lines end.
        base = self._signature[0]
        if base is None or self._journal_bytes() > max(JOURNAL_COMPACT_BYTES, base[2]):
            self._write(dict(data), sync=sync)
            return
        changes = {key: data.get(key) for key in sorted(data.touched)}
        self._journal = journal.append(
            self.journal_path, journal.encode(changes), self._journal, sync=self.durable and sync
        )
        self._cache = dict(data)
        self._signature = (base, (self._journal.inode, self._journal.offset))

    def _journal_bytes(self) -> int:
        return self._journal.offset if self._journal is not None else 0

    def _write(self, data: StoreData, *, sync: bool = True) -> None:
        """Write the whole store file and drop the journal (under the lock)."""
        private_dirs(self.path.parent)
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
        # The file now holds every change: the journal may go (a crash before this line leaves
        # a journal that replays harmlessly over the new file).
        self.journal_path.unlink(missing_ok=True)
        st = os.stat(self.path)
        self._cache = dict(data)
        self._signature = ((st.st_ino, st.st_mtime_ns, st.st_size), None)
        self._journal = None

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        private_dirs(self.path.parent)
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
