"""Reading and writing one run file: refusing anything but a small regular file, and replacing
a file atomically (temp file, fsync, rename) so a crash leaves the old file or none."""

from __future__ import annotations

import errno
import os
import stat
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Final

from nodmix.codemode.run_records import RunFileError

TEMP_SUFFIX: Final = ".tmp"


def read_run_file(path: Path, limit: int) -> bytes:
    """The bytes of a run file: a regular file (not a link) of at most `limit` bytes.

    Anything else found under a run's name (a pipe, a link to a device, a huge file) is
    refused before it is read, so it can neither block the reader nor fill its memory.

    Raises:
        RunFileError: Not a regular file, or larger than `limit`.
        OSError: It cannot be opened or read.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # a symbolic link
            raise RunFileError("not a regular file") from None
        raise
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise RunFileError("not a regular file")
        if info.st_size > limit:
            raise RunFileError(f"larger than the store's byte cap ({limit} bytes)")
    except BaseException:
        os.close(fd)
        raise
    with os.fdopen(fd, "rb") as file:
        data = file.read(limit + 1)
    if len(data) > limit:
        raise RunFileError(f"larger than the store's byte cap ({limit} bytes)")
    return data


def write_atomically(
    path: Path, data: bytes, *, lock: threading.Lock, commit: Callable[[], bool]
) -> bool:
    """Write `data` to `path` (0600) through a temp file, fsync and rename.

    A crash at any point leaves the old file or none, never a torn one. The directory is not
    fsynced: after a power loss the newest rename may be lost, which leaves the old state
    (the same as a crash just before the write).

    `commit()` runs with `lock` held just before the rename, which happens (under the same
    lock) only if it returns True. Returns whether the file was committed.
    """
    temp = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}{TEMP_SUFFIX}")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        with lock:
            committed = commit()
            if committed:
                os.replace(temp, path)
        if not committed:
            temp.unlink(missing_ok=True)
            return False
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    return True
