"""Transcript files on disk: where they live, moving them aside, replacing one atomically.

A session directory holds the live transcripts (`<sessionId>.jsonl`), `archive/` (one-shot
sessions the gateway put away) and `trash/` (sessions removed with `nodmix sessions delete`).
Files are moved, never overwritten: a name already taken gets a numbered name instead.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

from nodmix.errors import TranscriptError
from nodmix.invocation import nodmix_command
from nodmix.sessions.entries import new_entry_id
from nodmix.sessions.jsonl import SkippedLine

logger = logging.getLogger(__name__)

ARCHIVE_DIR = "archive"
TRASH_DIR = "trash"


def private_dirs(path: Path) -> None:
    """Create `path` and its missing parents, each readable by the user only (0700).

    `Path.mkdir(mode=..., parents=True)` gives the parents the umask's mode instead.
    """
    missing: list[Path] = []
    while not path.exists() and path != path.parent:
        missing.append(path)
        path = path.parent
    for folder in reversed(missing):
        folder.mkdir(mode=0o700, exist_ok=True)


def sync_directory(folder: Path) -> None:
    """`fsync` a directory, so the names created in it survive a power cut."""
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def move_into(source: Path, target_dir: Path) -> Path | None:
    """Move a transcript file into `target_dir`; the new path, or None if it is gone."""
    target_dir.mkdir(mode=0o700, exist_ok=True)
    target = target_dir / source.name
    for n in range(1, 1000):
        try:
            os.link(source, target)  # unlike rename, never replaces a file already there
            break
        except FileExistsError:
            target = target_dir / f"{source.stem}.{n}{source.suffix}"
        except FileNotFoundError:
            return None
    else:  # pragma: no cover - a thousand moved files with one name
        raise TranscriptError(f"{source}: no free name in {target_dir}")
    source.unlink()
    return target


def move_to_archive(source: Path) -> Path | None:
    """Move a transcript file into the `archive/` folder next to it.

    Returns the new path, or None when the file is gone already. A name taken in the archive
    is never overwritten: the file then keeps a numbered name.
    """
    return move_into(source, source.parent / ARCHIVE_DIR)


def replace_keeping_backup(path: Path, payload: bytes) -> Path:
    """Replace `path` with `payload` atomically; the original stays as `<name>.bak-<stamp>`.

    The backup is a hard link to the original, made before the swap, so at every moment the
    file name holds either the whole old or the whole new content.
    """
    stamp = time.strftime("%Y%m%dT%H%M%S")
    backup = path.with_name(f"{path.name}.bak-{stamp}")
    for n in range(1, 1000):
        try:
            os.link(path, backup)
            break
        except FileExistsError:
            backup = path.with_name(f"{path.name}.bak-{stamp}.{n}")
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{new_entry_id()}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            view = memoryview(payload)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return backup


def report_torn_tail(
    path: Path, data: bytes, end: int, needs_newline: bool, *, read_only: bool
) -> None:
    """Log (and unless `read_only`, repair) a last line a crash left incomplete."""
    if read_only:
        logger.warning("%s: ignoring an incomplete last line (%d bytes)", path, len(data) - end)
        return
    try:
        if needs_newline:
            with path.open("ab") as fh:
                fh.write(b"\n")
            logger.warning("%s: added the missing newline after the last entry", path)
        else:
            os.truncate(path, end)
            logger.warning(
                "%s: repaired a torn last line: dropped %d bytes after byte %d",
                path,
                len(data) - end,
                end,
            )
    except OSError as exc:
        raise TranscriptError(f"{path}: cannot repair torn last line: {exc}") from None


_WARNED: set[tuple[str, int]] = set()
_WARNED_MAX = 4096


def report_skipped(path: Path, skipped: list[SkippedLine]) -> None:
    """Log each skipped line once per process (a gateway reopens sessions all day)."""
    for item in skipped:
        marker = (str(path), item.line)
        if marker in _WARNED:
            continue
        if len(_WARNED) >= _WARNED_MAX:
            _WARNED.clear()
        _WARNED.add(marker)
        logger.warning(
            "%s: skipped unreadable line %d (%s); `%s sessions repair %s` rewrites the file",
            path,
            item.line,
            item.reason,
            nodmix_command(),
            path.stem,
        )
