"""Reading and atomically writing workspace text files (shared by `read`, `write` and `edit`).

Paths arrive resolved and checked (`resolve_path`). The workspace is shared with sandboxed
commands, which could swap a folder for a symlink after that check; so every open walks the
resolved path with `O_NOFOLLOW` (`nodmix.tools.confined`) and a swapped path is refused rather
than followed out of the workspace.

Everything here is blocking file I/O; the tools run it in a worker thread (`read` reads small
files on the event loop, where that is cheaper than the hop).
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path
from typing import BinaryIO

import msgspec

from nodmix.errors import ToolError, WorkspaceEscapeError
from nodmix.tools.confined import NotRegularFileError, open_resolved, resolved_folder

_SNIFF_BYTES = 8192
_CHUNK_BYTES = 1 << 20


class LineWindow(msgspec.Struct, frozen=True, kw_only=True):
    """A run of lines read from a file."""

    text: str
    first_line: int
    last_line: int
    """Last line included (equal to `first_line - 1` when no line fitted)."""
    total_lines: int
    cut_long_line: bool = False
    """The first line alone was over the byte cap and was cut."""


def ensure_text(data: bytes, shown: str) -> None:
    """Refuse data that looks binary (it contains NUL bytes)."""
    if b"\0" in data:
        raise ToolError(
            f"{shown} looks like a binary file; only text files can be read or edited. "
            "Use `exec` with a tool such as `file`, `xxd` or `strings` to inspect it."
        )


def open_existing(path: Path, shown: str) -> int:
    """Check `path` is an existing regular file and return its size in bytes."""
    try:
        info = path.stat()
    except FileNotFoundError:
        where = f" (looked for {path})" if str(path) != shown else ""
        raise ToolError(f"File not found: {shown}{where}") from None
    except OSError as exc:
        raise ToolError(f"Cannot access {shown}: {exc.strerror}") from exc
    if stat.S_ISDIR(info.st_mode):
        raise ToolError(f"{shown} is a directory; use `exec` with `ls` to list it.")
    if not stat.S_ISREG(info.st_mode):
        raise ToolError(f"{shown} is not a regular file.")
    return info.st_size


def _open(path: Path) -> BinaryIO:
    try:
        return os.fdopen(open_resolved(path), "rb")
    except NotRegularFileError:
        raise ToolError(f"{path} is not a regular file.") from None


def _count_lines(path: Path, size: int) -> int:
    newlines = 0
    last = b""
    with _open(path) as f:
        while chunk := f.read(_CHUNK_BYTES):
            newlines += chunk.count(b"\n")
            last = chunk[-1:]
    # A final line without a trailing newline still counts as a line.
    return newlines + (1 if size and last != b"\n" else 0)


def _line_start(path: Path, line: int) -> int | None:
    """Byte offset where 1-based `line` starts, or None when the file has fewer lines."""
    if line == 1:
        return 0
    wanted = line - 1  # newlines to pass
    seen = 0
    base = 0
    with _open(path) as f:
        while chunk := f.read(_CHUNK_BYTES):
            count = chunk.count(b"\n")
            if seen + count < wanted:
                seen += count
                base += len(chunk)
                continue
            index = -1
            while seen < wanted:
                index = chunk.index(b"\n", index + 1)
                seen += 1
            return base + index + 1
    return None


def read_lines(path: Path, shown: str, *, offset: int, limit: int, max_bytes: int) -> LineWindow:
    """Read up to `limit` lines from 1-based line `offset`, within `max_bytes`.

    Memory stays bounded by `max_bytes` however large the file or its lines are.

    Raises:
        ToolError: Missing, binary or non-regular file, or `offset` past the end.
    """
    size = open_existing(path, shown)
    with _open(path) as f:
        ensure_text(f.read(_SNIFF_BYTES), shown)
    total = _count_lines(path, size)
    start = _line_start(path, offset)
    if start is None or start >= size:
        if size == 0 and offset == 1:
            return LineWindow(text="", first_line=1, last_line=0, total_lines=0)
        raise ToolError(f"offset {offset} is past the end of {shown} ({total} lines).")
    with _open(path) as f:
        f.seek(start)
        data = f.read(max_bytes + 1)
    ensure_text(data, shown)
    over = len(data) > max_bytes
    lines = data.split(b"\n")
    if over or (lines and lines[-1] == b""):
        # The last piece is either cut by the byte cap or the empty tail after a final newline.
        lines.pop()
    cut_long_line = False
    if not lines:
        lines = [data[:max_bytes]]
        cut_long_line = True
    lines = lines[:limit]
    text = b"\n".join(lines).decode("utf-8", errors="replace")
    last = offset + len(lines) - 1
    return LineWindow(
        text=text,
        first_line=offset,
        last_line=last,
        total_lines=total,
        cut_long_line=cut_long_line,
    )


def read_text(path: Path, shown: str) -> str:
    """The whole file as UTF-8 text (for editing, so undecodable bytes are an error).

    Raises:
        ToolError: Missing, binary or non-UTF-8 file.
    """
    open_existing(path, shown)
    with _open(path) as f:
        data = f.read()
    ensure_text(data, shown)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ToolError(
            f"{shown} is not valid UTF-8 (byte {exc.start}); "
            "it is left untouched rather than risk corrupting it."
        ) from None


def _rewrite(folder: int, name: str, data: bytes) -> None:
    fd = os.open(name, os.O_WRONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=folder)
    with os.fdopen(fd, "wb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise NotRegularFileError(f"{name} is not a regular file")
        f.write(data)
        f.truncate()
        f.flush()
        os.fsync(fd)


def write_atomic(path: Path, data: bytes, shown: str, *, in_place: bool = False) -> None:
    """Write `data` to `path` via a temporary file and a rename, creating parent directories.

    Readers never see a half-written file. An existing file keeps its permission bits; a new
    one gets the usual `0o666 & ~umask`.

    With `in_place`, an existing regular file is rewritten through its own inode instead (not
    atomic for readers): a file a running sandbox holds read-only by a bind mount stays held,
    where replacing it by a rename would lift that mount
    (`nodmix.security.workspace_guard.keep_inode`).

    Raises:
        ToolError: The path is a directory or cannot be written.
    """
    name = path.name
    tmp = f".{name[:200]}.{os.urandom(6).hex()}.tmp"
    try:
        with resolved_folder(path.parent, create=True) as folder:
            try:
                info = os.stat(name, dir_fd=folder, follow_symlinks=False)
            except FileNotFoundError:
                info = None
            if info is not None and stat.S_ISDIR(info.st_mode):
                raise ToolError(f"{shown} is a directory; give a file path.")
            if in_place and info is not None and stat.S_ISREG(info.st_mode):
                _rewrite(folder, name, data)
                return
            # Created honouring the umask (mkstemp would force 0o600); never through a link.
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
            fd = os.open(tmp, flags, 0o666, dir_fd=folder)
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(data)
                    f.flush()
                    if info is not None and stat.S_ISREG(info.st_mode):
                        os.fchmod(fd, stat.S_IMODE(info.st_mode))
                    os.fsync(fd)
                os.replace(tmp, name, src_dir_fd=folder, dst_dir_fd=folder)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp, dir_fd=folder)
                raise
    except WorkspaceEscapeError as exc:
        raise ToolError(f"Cannot write {shown}: {exc}") from None
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise ToolError(f"Cannot write {shown}: {reason}") from exc
