"""One turn at a time per session, within a process and across processes.

Two locks guard a turn:

- an `anyio.Lock` per session key inside the process (so concurrent requests of one gateway
  queue in order and only one of them touches the lock file), then
- an exclusive `fcntl.flock` on the session's lock file under
  `agents/<agentId>/sessions/locks/`, held for the whole turn, so the gateway and any number of
  `nodmix agent --local` processes on the same session key take turns instead of interleaving
  their entries.

The lock file is named by a hash of the session key and stays empty; a process that has to
wait looks the holder's pid up in `/proc/locks` to say whom it waits for ("waiting for another
turn on session X (pid N)").
Waiting polls with a growing interval under a deadline: a stopped process holding the lock must
not hang anyone forever, and polling keeps the wait cancellable.

Lock files of archived sessions are removed (`remove_lock_file`). Removal happens only while
holding the lock, and an acquirer checks after locking that the file it locked is still the one
at the path, so removing a lock file can never let two turns in at once.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import time
import weakref
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import anyio

from nodmix.errors import SessionError
from nodmix.events import Notice
from nodmix.sessions.files import private_dirs

LOCKS_DIR = "locks"
"""Sub-directory of an agent's sessions directory holding the turn lock files."""

_FIRST_POLL_S = 0.005
_MAX_POLL_S = 0.1
_FLAGS = os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0)

Waiting = Callable[[str, int | None], None]
"""Told once, when a turn has to wait for another process: the session key and its pid."""


def waiting_notice(session_key: str, pid: int | None) -> Notice:
    """What a turn that waits for another process tells the user."""
    who = f" (pid {pid})" if pid else ""
    return Notice(level="info", text=f"waiting for another turn on session {session_key}{who}…")


def lock_file_name(session_key: str) -> str:
    """The lock file name of a session key (keys may hold characters no file name can)."""
    return hashlib.blake2b(session_key.encode("utf-8"), digest_size=16).hexdigest() + ".lock"


def lock_path(sessions_dir: Path, session_key: str) -> Path:
    """Where the lock file of `session_key` lives, under the agent's sessions directory."""
    return sessions_dir / LOCKS_DIR / lock_file_name(session_key)


class TurnLocks:
    """The in-process turn locks of a session manager (kept only while in use)."""

    def __init__(self) -> None:
        self._locks: weakref.WeakValueDictionary[str, anyio.Lock] = weakref.WeakValueDictionary()

    def get(self, key: str) -> anyio.Lock:
        """The in-process lock of a full session key."""
        lock = self._locks.get(key)
        if lock is None:
            lock = anyio.Lock()
            self._locks[key] = lock
        return lock


@contextlib.asynccontextmanager
async def hold_file_lock(
    path: Path, session_key: str, *, timeout: float, on_wait: Waiting | None = None
) -> AsyncIterator[None]:
    """Hold the session's lock file for the duration of the block.

    Raises:
        SessionError: another process kept the session busy for `timeout` seconds.
        OSError: the lock file cannot be created (a full disk, no descriptors left).
    """
    fd = await _acquire(path, session_key, timeout=timeout, on_wait=on_wait)
    try:
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


async def _acquire(path: Path, session_key: str, *, timeout: float, on_wait: Waiting | None) -> int:
    deadline = time.monotonic() + timeout
    poll = _FIRST_POLL_S
    told = False
    while True:
        fd = _open(path)
        try:
            if _try_lock(fd):
                if _still_linked(fd, path):
                    return fd
                os.close(fd)  # removed by an archiver while we waited: lock the new file
                continue
            holder = _holder(fd)
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)
        now = time.monotonic()
        if now >= deadline:
            who = f" (pid {holder})" if holder else ""
            raise SessionError(
                f"session {session_key} is busy: another turn{who} held it for {timeout:g}s"
            )
        if not told and on_wait is not None:
            on_wait(session_key, holder)
            told = True
        await anyio.sleep(min(poll, deadline - now))
        poll = min(poll * 2, _MAX_POLL_S)


def remove_lock_file(path: Path) -> bool:
    """Delete a session's lock file unless a turn holds it; True if it is gone."""
    try:
        fd = os.open(path, os.O_RDWR | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        return True
    try:
        if not _try_lock(fd):
            return False
        if _still_linked(fd, path):
            path.unlink(missing_ok=True)
        return True
    finally:
        os.close(fd)


def _open(path: Path) -> int:
    try:
        return os.open(path, _FLAGS, 0o600)
    except FileNotFoundError:  # the first lock of this agent: its directories are private
        private_dirs(path.parent)
        return os.open(path, _FLAGS, 0o600)


def _try_lock(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def _still_linked(fd: int, path: Path) -> bool:
    try:
        return os.stat(path).st_ino == os.fstat(fd).st_ino
    except FileNotFoundError:
        return False


def _holder(fd: int) -> int | None:
    """The pid holding the flock on `fd`'s file, from Linux's `/proc/locks` (None elsewhere).

    Only a waiter asks, so a turn that gets its lock at once writes and reads nothing: writing
    the pid into a new lock file would cost a block allocation on every fresh session.
    """
    try:
        st = os.fstat(fd)
        wanted = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
        with open("/proc/locks", encoding="ascii", errors="replace") as locks:
            for line in locks:
                fields = line.split()
                # "1: FLOCK  ADVISORY  WRITE 1234 fd:01:5678 0 EOF" (waiters carry a "->")
                if len(fields) >= 6 and fields[1] == "FLOCK" and fields[5] == wanted:
                    return int(fields[4])
    except (OSError, ValueError):
        pass
    return None
