"""Reading and writing one run file: refusing anything but a small regular file, replacing a
file atomically (temp file, fsync, rename) so a crash leaves the old file or none, and moving
a file that cannot be read aside (`damaged/`, the newest `DAMAGED_KEEP` kept)."""

from __future__ import annotations

import errno
import logging
import os
import stat
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Final

from nodmix.codemode.run_records import RunFileError

log = logging.getLogger("nodmix.codemode")

TEMP_SUFFIX: Final = ".tmp"
RUN_SUFFIX: Final = ".run"


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


DAMAGED_FOLDER: Final = "damaged"
DAMAGED_KEEP: Final = 32
"""Damaged run files kept aside; the oldest beyond this are deleted (they cannot be resumed)."""


def move_aside(path: Path) -> Path:
    """Move a run file that cannot be read to `damaged/<time ns>-<name>` beside it (0700);
    the new path. Beyond `DAMAGED_KEEP` files there, the oldest are deleted.

    Raises:
        OSError: it could not be moved.
    """
    folder = path.parent / DAMAGED_FOLDER
    folder.mkdir(mode=0o700, exist_ok=True)
    stamp = time.time_ns()
    target = folder / f"{stamp:020d}-{path.name}"
    while target.exists() or target.is_symlink():
        stamp += 1
        target = folder / f"{stamp:020d}-{path.name}"
    os.replace(path, target)
    kept = sorted(folder.iterdir(), reverse=True)  # newest first: the names start with the time
    for old in kept[DAMAGED_KEEP:]:
        try:
            old.unlink()
        except OSError:
            pass  # a planted folder stays; the next move tries again
    return target


def set_aside(path: Path, problem: Exception) -> None:
    """Move a run file that cannot be read out of the store's way, saying so once."""
    reason = problem.strerror if isinstance(problem, OSError) and problem.strerror else problem
    run_id = path.name.removesuffix(RUN_SUFFIX)
    try:
        kept = move_aside(path)
    except OSError as exc:
        log.warning(
            "code-mode run file %s cannot be read (%s) and could not be moved aside (%s): "
            "run %s cannot be resumed; remove the file by hand",
            path,
            reason,
            exc.strerror or exc,
            run_id,
        )
        return
    log.warning(
        "code-mode run file %s cannot be read (%s): run %s cannot be resumed (a wait for it "
        "says it was lost; run the program again). The file was moved to %s: keep it to "
        "look into, or delete it.",
        path,
        reason,
        run_id,
        kept,
    )
