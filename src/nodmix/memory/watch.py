"""`FolderWatch`: which memory files changed since the last look, from Linux inotify.

The kernel queues an event during the write itself, so a search that drains the queue sees
every edit that finished before it, with no thread and no delay. The index adds one watch per
memory folder while its full scan walks them; file events name the changed index paths, and
anything the watch cannot follow exactly (a folder created, moved or deleted, a lost queue, a
watch limit) asks for a full scan instead, which stays the correct fallback. Where inotify is
missing (another system, no instances left) `open_watch` returns `None` and the index scans.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from inotify_simple import INotify

MAX_WATCHES: Final = 4_096
"""Folders watched per index at most; past this the index scans instead (kernel watches are a
per-user resource)."""
MAX_EVENT_BYTES: Final = 1 << 20
"""Queued events read per look at most; a fuller queue counts as lost (a full scan)."""

_IN_MODIFY: Final = 0x2
_IN_ATTRIB: Final = 0x4
_IN_MOVED_FROM: Final = 0x40
_IN_MOVED_TO: Final = 0x80
_IN_CREATE: Final = 0x100
_IN_DELETE: Final = 0x200
_IN_DELETE_SELF: Final = 0x400
_IN_MOVE_SELF: Final = 0x800
_IN_UNMOUNT: Final = 0x2000
_IN_Q_OVERFLOW: Final = 0x4000
_IN_IGNORED: Final = 0x8000
_IN_ONLYDIR: Final = 0x01000000
_IN_DONT_FOLLOW: Final = 0x02000000
_IN_ISDIR: Final = 0x40000000

WATCH_MASK: Final = (
    _IN_MODIFY
    | _IN_ATTRIB
    | _IN_MOVED_FROM
    | _IN_MOVED_TO
    | _IN_CREATE
    | _IN_DELETE
    | _IN_DELETE_SELF
    | _IN_MOVE_SELF
    | _IN_ONLYDIR
    | _IN_DONT_FOLLOW
)
_LOST: Final = _IN_DELETE_SELF | _IN_MOVE_SELF | _IN_UNMOUNT | _IN_Q_OVERFLOW | _IN_IGNORED


class Folder:
    """What a watched folder holds: which names are memory, and their index-path prefix."""

    __slots__ = ("prefix", "suffix", "top")

    def __init__(self, prefix: str, suffix: str, *, top: bool = False) -> None:
        self.prefix = prefix
        """Index path of the folder (`memory/2026/`, `sessions/`, or `` for the workspace)."""
        self.suffix = suffix
        """`.md` or `.jsonl`: other names are not memory."""
        self.top = top
        """The workspace itself: only `MEMORY.md` and the `memory` folder matter there."""


class FolderWatch:
    """One inotify instance watching one agent's memory folders (used from one thread)."""

    def __init__(self, inotify: INotify) -> None:
        self._inotify = inotify
        self._folders: dict[int, Folder] = {}
        self._watched: set[str] = set()
        """Folder paths watched since the last `forget` (a folder that is replaced, moved or
        deleted sends an event that makes the index `forget` and scan)."""
        self.exhausted = False
        """More folders than `MAX_WATCHES`: the index stops using this watch."""
        self.broken = False
        """A folder could not be watched since the last `forget`: changes there would be
        missed, so the index must not trust this watch."""

    def add(self, directory: str, folder: Folder) -> bool:
        """Watch a folder (one already watched is left as it is). False when it cannot be
        watched (limit reached, gone, a symlink): the caller falls back to scanning."""
        if directory in self._watched:
            return True
        if len(self._folders) >= MAX_WATCHES:
            self.broken = self.exhausted = True
            return False
        try:
            wd = self._inotify.add_watch(directory, WATCH_MASK)
        except OSError:
            self.broken = True
            return False
        self._folders[wd] = folder
        self._watched.add(directory)
        return True

    def drain(self) -> tuple[set[str], bool]:
        """Index paths changed since the last drain, and whether a full scan is needed."""
        fd = self._inotify.fileno()
        data = b""
        try:
            while len(data) < MAX_EVENT_BYTES:
                chunk = os.read(fd, 65_536)
                if not chunk:
                    break
                data += chunk
        except BlockingIOError:  # the queue is empty: every finished write has been read
            pass
        if len(data) >= MAX_EVENT_BYTES:
            return set(), True
        from inotify_simple import parse_events

        changed: set[str] = set()
        for event in parse_events(data):
            folder = self._folders.get(event.wd)
            if event.mask & _LOST or folder is None:
                return set(), True
            name = event.name
            if folder.top:
                if name == "memory":
                    return set(), True
                if name == "MEMORY.md":
                    changed.add(name)
            elif event.mask & _IN_ISDIR:
                if folder.suffix == ".md":  # a folder of notes came, went or moved
                    return set(), True
            elif name.endswith(folder.suffix):
                changed.add(folder.prefix + name)
        return changed, False

    def forget(self) -> None:
        """Drop every watch (before a full scan adds them again)."""
        for wd in list(self._folders):
            try:
                self._inotify.rm_watch(wd)
            except OSError:
                pass
        self._folders.clear()
        self._watched.clear()
        self.broken = False
        self.drain()  # the IGNORED events of the removed watches

    def close(self) -> None:
        """Release the inotify instance."""
        self._inotify.close()


def open_watch() -> FolderWatch | None:
    """An inotify watch, or `None` where there is none (the index then scans)."""
    try:
        from inotify_simple import INotify
    except ImportError:
        return None
    try:
        return FolderWatch(INotify(nonblocking=True))
    except (OSError, AttributeError):  # not Linux, or no inotify instances left
        return None
