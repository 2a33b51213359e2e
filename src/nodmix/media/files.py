"""Media files in the agent's workspace: saved into `inbox/`, read back for requests.

The workspace is shared with sandboxed commands, which can leave `inbox` (or a saved photo)
as a symlink to any file of the host. Files are written and read through descriptors that
never follow a symlink (`nodmix.tools.confined`): a planted link makes the save or the read
fail; it never sends a host file to a model.
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path, PurePath
from typing import BinaryIO

import msgspec

from nodmix.errors import WorkspaceEscapeError
from nodmix.tools.confined import copy_into, open_folder, open_regular, open_resolved

INBOX = "inbox"
MAX_FILE_BYTES = 64 << 20
"""The largest file an image is read from for a model (a channel's attachment cap is lower)."""

_SAFE = re.compile(r"[^A-Za-z0-9._-]+")


class InboundFile(msgspec.Struct, frozen=True):
    """A file that came with a message, already saved in the workspace."""

    path: str
    """Relative to the workspace (`inbox/...`)."""
    kind: str = "document"
    """What the platform called it: `photo`, `voice`, `audio`, `document`, `image`, ..."""
    name: str | None = None
    """The name it came with."""
    mime_type: str | None = None
    """The type the sender declared (a hint only: the content decides)."""


def safe_name(name: str, *, limit: int = 80) -> str:
    """`name` with anything but letters, digits, `.`, `_`, `-` replaced (at most `limit`)."""
    return _SAFE.sub("_", name)[:limit].strip(".") or "file"


def inbox_name(name: str, tag: str) -> str:
    """A fresh file name in `inbox/`: `<unix time>-<tag>-<name>`."""
    return f"{int(time.time())}-{safe_name(tag, limit=40)}-{safe_name(name)}"


def save_copy(workspace: Path, source: Path, name: str) -> str:
    """Copy `source` (a private staging file) to `inbox/<name>` in the workspace; the
    workspace-relative path.

    Raises:
        WorkspaceEscapeError: `inbox` (or a folder above it) is a symlink.
        FileExistsError: the name is taken.
        OSError: the copy failed.
    """
    workspace.mkdir(parents=True, exist_ok=True)
    final = safe_name(name, limit=160)
    with open_folder(workspace, PurePath(INBOX), create=True) as inbox:
        copy_into(source, inbox, final)
    return f"{INBOX}/{final}"


def save_bytes(workspace: Path, data: bytes, name: str, folder: str = INBOX) -> str:
    """Write `data` to a new file `<folder>/<name>` in the workspace (`inbox/` by default);
    the relative path.

    Raises:
        WorkspaceEscapeError: the folder (or one above it) is a symlink.
        FileExistsError: the name is taken.
        OSError: the write failed.
    """
    workspace.mkdir(parents=True, exist_ok=True)
    final = safe_name(name, limit=160)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    with open_folder(workspace, PurePath(folder), create=True) as inbox:
        fd = os.open(final, flags, 0o644, dir_fd=inbox)
        try:
            with os.fdopen(fd, "wb", closefd=False) as out:
                out.write(data)
        except BaseException:
            os.unlink(final, dir_fd=inbox)
            raise
        finally:
            os.close(fd)
    return f"{PurePath(folder).as_posix()}/{final}"


def save_unique(
    workspace: Path, data: bytes, prefix: str, suffix: str, created: list[str] | None = None
) -> str:
    """Save `data` as `inbox/<prefix>-<content hash><suffix>`, or reuse the file already
    saved under that name (a client that sends its whole history again each time stores
    each image once); the relative path. A file this call wrote (not one it reused) is
    appended to `created`, so a refused request can remove what it added (`remove_saved`).

    Raises:
        WorkspaceEscapeError: `inbox` (or a folder above it) is a symlink.
        OSError: the write failed.
    """
    import hashlib  # not on the start-up path: only uploads and API images are hashed

    digest = hashlib.sha256(data).hexdigest()[:24]
    ending = f".{safe_name(suffix.lstrip('.'), limit=12)}" if suffix.strip(".") else ""
    name = f"{safe_name(prefix, limit=40)}-{digest}{ending}"
    try:
        path = save_bytes(workspace, data, name)
    except FileExistsError:
        try:
            existing: bytes | None = read_media(workspace, f"{INBOX}/{name}", len(data))[0]
        except OSError:
            existing = None
        if existing == data:
            return f"{INBOX}/{name}"
        path = save_bytes(workspace, data, inbox_name(name, "dup"))  # keep both
    if created is not None:
        created.append(path)
    return path


def remove_saved(workspace: Path, path: str) -> None:
    """Delete `path` (workspace-relative, as `save_bytes` answered it) without following a
    symlink on the way; a file already gone is fine.

    Raises:
        WorkspaceEscapeError: a folder on the way is a symlink.
        OSError: it cannot be deleted.
    """
    rel = PurePath(path)
    with open_folder(workspace, rel.parent) as folder:
        try:
            os.unlink(rel.name, dir_fd=folder)
        except FileNotFoundError:
            pass


def inbox_path(workspace: Path, text: str) -> str:
    """A client-given path checked to name a file directly in `inbox/` (no folders, no `..`).

    Raises:
        ValueError: it names anything else.
    """
    rel = PurePath(text)
    if rel.is_absolute() or len(rel.parts) != 2 or rel.parts[0] != INBOX or ".." in rel.parts:
        raise ValueError(f"{text!r} is not a file in {INBOX}/")
    if safe_name(rel.parts[1], limit=160) != rel.parts[1]:
        raise ValueError(f"{text!r} is not a file name Nodmix saves")
    return rel.as_posix()


def open_media(workspace: Path, path: str) -> BinaryIO:
    """A media file opened for reading: `path` relative to the workspace (no symlink
    followed), or absolute (a file the `read` tool opened outside the workspace).

    Raises:
        WorkspaceEscapeError: a symlink on the way, or `..` in a relative path.
        OSError: missing, not a regular file, or unreadable.
    """
    given = Path(path)
    if given.is_absolute():
        fd = open_resolved(given)
    else:
        rel = PurePath(path)
        if ".." in rel.parts:
            raise WorkspaceEscapeError(f"{path} is not a path inside the workspace")
        fd = open_regular(workspace, rel)
    return os.fdopen(fd, "rb")


def read_capped(handle: BinaryIO, path: str, max_bytes: int = MAX_FILE_BYTES) -> bytes:
    """The rest of an open media file, at most `max_bytes`.

    Raises:
        OSError: unreadable, or larger than `max_bytes`.
    """
    if os.fstat(handle.fileno()).st_size > max_bytes:
        raise OSError(f"{path} is larger than {max_bytes // (1 << 20)} MB")
    data = handle.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise OSError(f"{path} is larger than {max_bytes // (1 << 20)} MB")
    return data


def read_media(
    workspace: Path, path: str, max_bytes: int = MAX_FILE_BYTES
) -> tuple[bytes, os.stat_result]:
    """The bytes and `stat` of a media file (see `open_media`).

    Raises:
        WorkspaceEscapeError: a symlink on the way, or `..` in a relative path.
        OSError: missing, not a regular file, unreadable, or larger than `max_bytes`.
    """
    with open_media(workspace, path) as handle:
        return read_capped(handle, path, max_bytes), os.fstat(handle.fileno())
