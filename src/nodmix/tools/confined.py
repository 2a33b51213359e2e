"""Opening workspace folders and files without following symlinks, race-free.

`resolve_path` checks a path once; a process that shares the workspace (a sandboxed command
of another session) can swap a folder for a symlink between that check and the open. These
helpers walk a path one component at a time from a descriptor of the workspace itself, with
`O_NOFOLLOW` on every step, so what they open lies inside the workspace whatever happens to the
path meanwhile. A symlink on the way is refused, never followed.
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path, PurePath

from nodmix.errors import WorkspaceEscapeError

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _refuse(root: Path, rel: PurePath, part: str) -> WorkspaceEscapeError:
    return WorkspaceEscapeError(
        f"{rel} in the workspace {root}: {part!r} is a symlink or not a folder; it is not "
        "followed (move it away to use this path)"
    )


@contextmanager
def open_folder(root: Path, rel: PurePath, *, create: bool = False) -> Iterator[int]:
    """A descriptor of the folder `root/rel`, reached without following any symlink below
    `root` (missing folders are made when `create`); closed when the block ends.

    Raises:
        WorkspaceEscapeError: a component is a symlink or not a folder, or `rel` has `..`
            or is absolute.
        OSError: a folder is missing (and `create` is false) or cannot be made.
    """
    if rel.is_absolute() or ".." in rel.parts:
        raise WorkspaceEscapeError(f"{rel} is not a path inside the workspace {root}")
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for part in rel.parts:
            if create:
                try:
                    os.mkdir(part, 0o777, dir_fd=fd)
                except FileExistsError:
                    pass
            try:
                child = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise _refuse(root, rel, part) from None
                raise
            os.close(fd)
            fd = child
        yield fd
    finally:
        os.close(fd)


def copy_into(source: Path, folder_fd: int, name: str) -> None:
    """Copy `source` to a new file `name` in the folder `folder_fd` (never over an existing
    file or through a symlink).

    Raises:
        FileExistsError: something named `name` is already there.
        OSError: the copy failed.
    """
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    out = os.open(name, flags, 0o644, dir_fd=folder_fd)
    try:
        with source.open("rb") as src, os.fdopen(out, "wb", closefd=False) as dst:
            shutil.copyfileobj(src, dst)
    except BaseException:
        os.close(out)
        os.unlink(name, dir_fd=folder_fd)
        raise
    os.close(out)


class NotRegularFileError(OSError):
    """The path is a FIFO, device, socket or folder, not a regular file."""


def open_regular(root: Path, rel: PurePath, *, flags: int = os.O_RDONLY) -> int:
    """A descriptor of the regular file `root/rel`, reached without following any symlink
    below `root`. A FIFO or device is refused without blocking on it.

    Raises:
        WorkspaceEscapeError: a component (the file included) is a symlink.
        NotRegularFileError: the file is not a regular file.
        OSError: the file is missing or cannot be opened.
    """
    with open_folder(root, rel.parent) as folder:
        mode = flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
        try:
            fd = os.open(rel.name, mode, dir_fd=folder)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise _refuse(root, rel, rel.name) from None
            raise
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise NotRegularFileError(errno.EINVAL, f"{rel} is not a regular file")
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_head(root: Path, rel: PurePath, max_bytes: int) -> bytes:
    """At most `max_bytes` of the regular file `root/rel` (see `open_regular`)."""
    with os.fdopen(open_regular(root, rel), "rb") as f:
        return f.read(max_bytes)


def _split(path: Path) -> tuple[Path, PurePath]:
    if not path.is_absolute():
        raise WorkspaceEscapeError(f"{path} is not an absolute path")
    return Path(path.anchor), PurePath(*path.parts[1:])


def open_resolved(path: Path, *, flags: int = os.O_RDONLY) -> int:
    """`open_regular` for an already resolved absolute path: every component, from `/` on, is
    opened without following symlinks, so the file opened is the one the path named when it
    was resolved and checked, even if a folder on the way was swapped for a link since."""
    root, rel = _split(path)
    return open_regular(root, rel, flags=flags)


@contextmanager
def resolved_folder(path: Path, *, create: bool = False) -> Iterator[int]:
    """`open_folder` for an already resolved absolute folder path (see `open_resolved`)."""
    root, rel = _split(path)
    with open_folder(root, rel, create=create) as fd:
        yield fd
