"""Which process runs a job: a lock file held for the life of the process.

A run is recorded as `running` when it starts and again when it ends; a process killed in
between never writes the end. To tell such a run from one still going, every run records the
token of the process running it, and that process holds an `flock` on
`automation/owners/<token>.lock` while it lives. The kernel drops the lock when the process
dies however it dies (`kill -9` included), so "nobody holds the lock" means "its runs were
interrupted". Tokens carry a random part, so a reused pid is never mistaken for the old one.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import secrets
from pathlib import Path

from nodmix.assets.files import ensure_private_dir

SUFFIX = ".lock"


class ProcessMarks:
    """The owner lock files of one `automation/` directory."""

    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self._token: str | None = None
        self._fd: int | None = None

    @property
    def token(self) -> str:
        """This process's token; its lock file is created and locked on first use."""
        if self._token is None:
            ensure_private_dir(self.dir)
            token = f"{os.getpid()}-{secrets.token_hex(4)}"
            # Locked under a temporary name, then renamed: a `sweep` in another process never
            # sees the file unlocked.
            temp = self.dir / f".{token}.tmp"
            fd = os.open(temp, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
            fcntl.flock(fd, fcntl.LOCK_EX)
            os.rename(temp, self.dir / f"{token}{SUFFIX}")
            self._token, self._fd = token, fd
        return self._token

    def alive(self, token: str | None) -> bool:
        """Whether the process with `token` still runs (None: a run recorded before owners
        were: its process is long gone)."""
        if token is None:
            return False
        if token == self._token:
            return True
        if Path(token).name != token or not token:
            return False
        try:
            fd = os.open(self.dir / f"{token}{SUFFIX}", os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        finally:
            os.close(fd)
        return False

    def sweep(self) -> None:
        """Remove the lock files of processes that are gone."""
        with contextlib.suppress(FileNotFoundError):
            for path in self.dir.iterdir():
                token = path.name.removesuffix(SUFFIX)
                if path.suffix == SUFFIX and not self.alive(token):
                    path.unlink(missing_ok=True)

    def close(self) -> None:
        """Release the lock and remove this process's file (at a clean exit)."""
        if self._fd is not None and self._token is not None:
            (self.dir / f"{self._token}{SUFFIX}").unlink(missing_ok=True)
            os.close(self._fd)
        self._fd = self._token = None
