"""Which files are memory, and how each is read as text.

Workspace files are `MEMORY.md` and every `memory/**/*.md`; their index path is the path
relative to the workspace (`memory/2026-11-20.md`). Session transcripts (with
`memory.sessions`) are `sessions/<file>.jsonl` relative to the agent's state dir, read as the
user and assistant text of the conversation, one line per message line.
"""

from __future__ import annotations

import errno
import itertools
import json
import operator
import os
import stat
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Final

import msgspec

from nodmix.errors import WorkspaceEscapeError
from nodmix.tools import confined

if TYPE_CHECKING:  # the watch loads with the index, not with the memory tools at start-up
    from nodmix.memory.watch import FolderWatch

MEMORY_FILE: Final = "MEMORY.md"
MEMORY_DIR: Final = "memory"
SESSIONS_PREFIX: Final = "sessions/"
MAX_FILE_BYTES: Final = 8 * 1024 * 1024
"""Larger files (notes or transcripts) are skipped: this bounds what one re-index reads."""
MAX_FILES: Final = 50_000
"""Notes and transcripts indexed at most (each kind; the newest transcripts win). Together
with `MAX_FILE_BYTES` this bounds the index and the work of one scan, whatever a session
writes into `memory/`."""
_FOLDER_FLAGS: Final = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class SourceFile(msgspec.Struct, frozen=True, kw_only=True):
    """A file the index covers."""

    path: str
    """Index path: relative to the workspace, or `sessions/...` for transcripts."""
    source: str
    """`memory` or `sessions`."""
    absolute: str
    root: str
    """The folder `path` is relative to (the workspace, or the sessions folder for
    transcripts): the file is opened from there without following symlinks."""
    mtime_ns: int
    size: int


class SourceRoots(msgspec.Struct, frozen=True, kw_only=True):
    """Where one agent's memory lives."""

    workspace: Path
    sessions_dir: Path | None = None
    """The agent's transcripts, when sessions are indexed."""
    max_files: int = MAX_FILES

    def stamps(self, watch: FolderWatch | None = None) -> dict[str, tuple[int, int]]:
        """`(mtime_ns, size)` of every memory file that exists now, by index path (symlinked
        directories are not followed). The hot loop of a full scan: one `fstatat` per file,
        relative to its open folder. With `watch`, each folder is watched before it is listed,
        so a change the listing misses is an event (a folder that cannot be watched, such as
        a sessions folder not made yet, leaves the watch `broken` until the next scan)."""
        from nodmix.memory.watch import Folder

        out: dict[str, tuple[int, int]] = {}
        workspace = str(self.workspace)
        if watch is not None:
            watch.add(workspace, Folder("", ".md", top=True))
        top = _stat_file(self.workspace, PurePosixPath(MEMORY_FILE), MEMORY_FILE, "memory")
        if top is not None:
            out[MEMORY_FILE] = (top.mtime_ns, top.size)
        # A `memory` folder that is a symlink could point anywhere: it holds no notes.
        stack = [(os.path.join(workspace, MEMORY_DIR), MEMORY_DIR + "/")]
        budget = self.max_files
        regular = stat.S_ISREG
        by_name = operator.attrgetter("name")
        while stack and budget > 0:
            directory, prefix = stack.pop()
            try:
                fd = os.open(directory, _FOLDER_FLAGS)
            except OSError:  # gone, or a symlink: the top watch sees `memory` come later
                continue
            try:
                if watch is not None:
                    watch.add(directory, Folder(prefix, ".md"))
                with os.scandir(fd) as listing:
                    entries = sorted(itertools.islice(listing, budget), key=by_name)
                for entry in entries:
                    budget -= 1  # every entry looked at counts: a huge folder cannot stall a scan
                    name = entry.name
                    if entry.is_dir(follow_symlinks=False):
                        stack.append((directory + os.sep + name, prefix + name + "/"))
                    elif name.endswith(".md"):
                        try:
                            st = entry.stat(follow_symlinks=False)  # a link is not a note
                        except OSError:
                            continue
                        if regular(st.st_mode) and st.st_size <= MAX_FILE_BYTES:
                            out[prefix + name] = (st.st_mtime_ns, st.st_size)
            except OSError:
                continue
            finally:
                os.close(fd)
        if self.sessions_dir is not None:
            if watch is not None:
                watch.add(str(self.sessions_dir), Folder(SESSIONS_PREFIX, ".jsonl"))
            transcripts = _transcript_stamps(self.sessions_dir)
            newest = sorted(transcripts.items(), key=lambda item: item[1][0], reverse=True)
            out.update(newest[: self.max_files])
        return out

    def file(self, path: str, stamp: tuple[int, int]) -> SourceFile:
        """The source file of an index path `stamps()` returned."""
        if path.startswith(SESSIONS_PREFIX) and self.sessions_dir is not None:
            root = str(self.sessions_dir)
            absolute = os.path.join(root, path[len(SESSIONS_PREFIX) :])
            source = "sessions"
        else:
            root = str(self.workspace)
            absolute = os.path.join(root, path)
            source = "memory"
        return SourceFile(
            path=path,
            source=source,
            absolute=absolute,
            root=root,
            mtime_ns=stamp[0],
            size=stamp[1],
        )

    def locate(self, path: str) -> SourceFile | None:
        """The source file behind an index path, or `None` if it is not memory (or gone)."""
        pure = PurePosixPath(path.replace("\\", "/"))
        if pure.is_absolute() or ".." in pure.parts or not pure.parts:
            return None
        text = pure.as_posix()
        if text.startswith(SESSIONS_PREFIX):
            if self.sessions_dir is None or len(pure.parts) != 2 or pure.suffix != ".jsonl":
                return None
            return _stat_file(self.sessions_dir, PurePosixPath(pure.parts[1]), text, "sessions")
        if text != MEMORY_FILE and not (pure.parts[0] == MEMORY_DIR and pure.suffix == ".md"):
            return None
        return _stat_file(self.workspace, pure, text, "memory")


def _transcript_stamps(directory: Path) -> dict[str, tuple[int, int]]:
    out: dict[str, tuple[int, int]] = {}
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return out
    for entry in entries:
        if entry.name.endswith(".jsonl") and entry.is_file(follow_symlinks=False):
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if st.st_size <= MAX_FILE_BYTES:
                out[SESSIONS_PREFIX + entry.name] = (st.st_mtime_ns, st.st_size)
    return out


def _stat_file(root: Path, rel: PurePosixPath, path: str, source: str) -> SourceFile | None:
    """The regular file `root/rel`, reached without following a symlink (a link, FIFO or
    device is not memory: it could point at a secret or block the indexer)."""
    try:
        fd = confined.open_regular(root, rel)
    except (OSError, WorkspaceEscapeError):
        return None
    try:
        st = os.fstat(fd)
    finally:
        os.close(fd)
    if st.st_size > MAX_FILE_BYTES:
        return None
    return SourceFile(
        path=path,
        source=source,
        absolute=str(root / rel),
        root=str(root),
        mtime_ns=st.st_mtime_ns,
        size=st.st_size,
    )


def read_text(file: SourceFile) -> str:
    """A source file's text (transcripts rendered as conversation lines), read without
    following symlinks and at most `MAX_FILE_BYTES`.

    Raises:
        OSError: the file is gone, or is no longer a regular file inside its folder.
    """
    rel = PurePosixPath(os.path.relpath(file.absolute, file.root))
    try:
        data = confined.read_head(Path(file.root), rel, MAX_FILE_BYTES)
    except WorkspaceEscapeError as exc:
        raise OSError(errno.ELOOP, str(exc)) from None
    if file.source == "sessions":
        return render_transcript(data)
    return data.decode("utf-8", errors="replace")


def render_transcript(data: bytes) -> str:
    """User and assistant text of a JSONL transcript, as `User: ...` / `Assistant: ...` lines."""
    out: list[str] = []
    for raw in data.splitlines():
        try:
            entry = json.loads(raw)
        except ValueError:
            continue
        if not isinstance(entry, dict) or entry.get("type") != "message":
            continue
        message = entry.get("message")
        if not isinstance(message, dict) or entry.get("parentToolCallId"):
            continue
        role = message.get("role")
        if role not in ("user", "assistant"):
            continue
        content = message.get("content")
        blocks = content if isinstance(content, list) else []
        text = "\n".join(
            b["text"]
            for b in blocks
            if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)
        ).strip()
        if text:
            label = "User" if role == "user" else "Assistant"
            out.append(f"{label}: {text}")
            out.append("")
    return "\n".join(out)
