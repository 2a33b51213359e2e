"""Append-only JSONL transcripts: one `<sessionId>.jsonl` file per session.

Writing: each append is one `os.write` of a complete line on an `O_APPEND` descriptor. Nothing
is ever rewritten, and appends are not fsynced (a turn appends several entries and an fsync
each would cost milliseconds); callers that need durability call `Transcript.sync()`.

Crash safety: a process killed or a machine losing power mid-append can leave a torn last line
(no newline, or bytes that are not JSON). Loading for writing truncates the file back to the last
complete line and logs it; nothing before that line is lost. Any other unreadable line is left
out of `entries` and recorded in `skipped` (logged once per process), so one damaged line does
not take the whole session down; the file keeps it until `nodmix sessions repair` rewrites it.
A transcript replaced on disk (by that repair) is reloaded before the next append.

Concurrency: one writer per session. The runtime serialises turns per session, within a
process and across processes (see `SessionManager.hold_turn`), so a `Transcript` is not locked
internally. As a safety net, an append first checks the file size and reads in any complete lines
another writer added, so the `parentId` chain stays linear even if two `Transcript` objects point
at one file.

Open files: a transcript holds no descriptor between appends. It borrows one from a
`DescriptorPool` (the session manager's, shared by all its transcripts and bounded), so the
number of open files does not grow with the number of sessions.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, TypedDict

from nodmix.errors import TranscriptError
from nodmix.messages import Message, UserBlock
from nodmix.sessions.descriptors import DescriptorPool
from nodmix.sessions.entries import (
    CompactionEntry,
    CustomEntry,
    CustomMessageEntry,
    Entry,
    MessageEntry,
    ModelChangeEntry,
    SessionHeader,
    SessionInfoEntry,
    iso_now,
    new_entry_id,
)
from nodmix.sessions.files import ARCHIVE_DIR, move_to_archive, private_dirs, sync_directory
from nodmix.sessions.jsonl import SkippedLine, count_messages, encode_header, encode_line
from nodmix.sessions.transcript_reader import TranscriptReader

__all__ = [
    "ARCHIVE_DIR",
    "SkippedLine",
    "Transcript",
    "count_messages",
    "move_to_archive",
    "transcript_file_name",
]

logger = logging.getLogger(__name__)


class _Link(TypedDict):
    id: str
    parent_id: str | None
    timestamp: str


def transcript_file_name(session_id: str) -> str:
    """The transcript file name of a session id."""
    return f"{session_id}.jsonl"


class Transcript(TranscriptReader):
    """The entries of one session, loaded from and appended to its JSONL file."""

    __slots__ = ()

    # ---- opening ------------------------------------------------------------------------------

    @classmethod
    def create(
        cls,
        path: Path,
        *,
        session_id: str,
        cwd: str | Path,
        parent_session: str | None = None,
        session_key: str | None = None,
        descriptors: DescriptorPool | None = None,
        entries: Sequence[Entry] = (),
        durable: bool = False,
    ) -> Transcript:
        """Create a new transcript holding its header and `entries` (mode 0600: it is private).

        The file appears atomically with all of it (written to a temporary name, then
        hard-linked into place), so no reader ever sees a headerless or half-seeded transcript.
        `durable` fsyncs the file before it appears and its directory after: a compaction's
        successor is complete on disk before the session index may point at it.

        Raises:
            TranscriptError: the file already exists or cannot be written.
        """
        header = SessionHeader(
            id=session_id,
            timestamp=iso_now(),
            cwd=str(cwd),
            parent_session=parent_session,
            session_key=session_key,
        )
        payload = encode_header(header) + b"".join(encode_line(path, e) for e in entries)
        private_dirs(path.parent)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{new_entry_id()}.tmp")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
            try:
                view = memoryview(payload)
                while view:
                    view = view[os.write(fd, view) :]
                if durable:
                    os.fsync(fd)
            finally:
                os.close(fd)
            os.link(tmp, path)  # unlike rename, never replaces an existing transcript
            if durable:
                sync_directory(path.parent)
        except FileExistsError:
            raise TranscriptError(f"{path}: transcript already exists") from None
        except OSError as exc:
            raise TranscriptError(f"{path}: cannot create transcript: {exc}") from None
        finally:
            tmp.unlink(missing_ok=True)
        return cls(
            path,
            header,
            list(entries),
            size=len(payload),
            lines=1 + len(entries),
            read_only=False,
            descriptors=descriptors,
        )

    # ---- appending ----------------------------------------------------------------------------

    def append(self, entry: Entry) -> Entry:
        """Write a fully built entry as one line (ids and parent are the caller's business).

        Raises:
            TranscriptError: the transcript is read-only or the write failed.
        """
        line = encode_line(self.path, entry)
        self._write_line(line)
        self._entries.append(entry)
        return entry

    def append_message(
        self, message: Message, *, parent_tool_call_id: str | None = None
    ) -> MessageEntry:
        """Append a message; `parent_tool_call_id` marks a call made inside a code-mode program."""
        entry = MessageEntry(
            **self._link(), message=message, parent_tool_call_id=parent_tool_call_id
        )
        self.append(entry)
        return entry

    def append_compaction(
        self,
        *,
        summary: str,
        first_kept_entry_id: str,
        tokens_before: int,
        details: Any = None,
        from_hook: bool | None = None,
    ) -> CompactionEntry:
        """Append a compaction: from now on the model sees `summary` plus the kept tail."""
        entry = CompactionEntry(
            **self._link(),
            summary=summary,
            first_kept_entry_id=first_kept_entry_id,
            tokens_before=tokens_before,
            details=details,
            from_hook=from_hook,
        )
        self.append(entry)
        return entry

    def append_custom(self, custom_type: str, data: Any = None) -> CustomEntry:
        """Append plugin state that the model never sees."""
        entry = CustomEntry(**self._link(), custom_type=custom_type, data=data)
        self.append(entry)
        return entry

    def append_custom_message(
        self,
        custom_type: str,
        content: str | tuple[UserBlock, ...],
        *,
        display: bool = True,
        details: Any = None,
    ) -> CustomMessageEntry:
        """Append a plugin message that the model sees as user text."""
        entry = CustomMessageEntry(
            **self._link(),
            custom_type=custom_type,
            content=content,
            display=display,
            details=details,
        )
        self.append(entry)
        return entry

    def append_model_change(self, provider: str, model_id: str) -> ModelChangeEntry:
        """Record that the session switched to `provider`/`model_id`."""
        entry = ModelChangeEntry(**self._link(), provider=provider, model_id=model_id)
        self.append(entry)
        return entry

    def append_session_info(self, name: str) -> SessionInfoEntry:
        """Record a session title."""
        entry = SessionInfoEntry(**self._link(), name=name)
        self.append(entry)
        return entry

    def complete_bytes(self) -> bytes:
        """The transcript as this object last read it: header and complete lines."""
        with self.path.open("rb") as handle:
            return handle.read(self._size)

    def sync(self) -> None:
        """Flush appended entries to stable storage (`fsync`)."""
        if not self.read_only:
            self._descriptors().sync(self._token, self.path)

    def close(self) -> None:
        """Give back the append descriptor; a later append borrows one again."""
        if self._pool is not None:
            self._pool.close(self._token)

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # interpreter shutdown or a closed fd: nothing useful to do
            pass

    def _link(self) -> _Link:
        """A new entry's id, parent and timestamp, chained to the current last entry."""
        # Another writer (a second Transcript on this file) may have appended: pick its lines up
        # before choosing our parentId. One fstat costs about a microsecond.
        with self._descriptor() as fd:
            if os.fstat(fd).st_size != self._size:
                self.refresh()
        return {"id": new_entry_id(), "parent_id": self.leaf_id, "timestamp": iso_now()}

    @contextlib.contextmanager
    def _descriptor(self) -> Iterator[int]:
        if self.read_only:
            raise TranscriptError(f"{self.path}: transcript was opened read-only")
        pool = self._descriptors()
        with pool.lease(self._token, self.path) as fd:
            if not self._replaced(fd):
                yield fd
                return
        # `nodmix sessions repair` swapped in a rewritten file: adopt it instead of appending
        # to the backup our descriptor points at (one stat per append).
        self.close()
        fresh = Transcript.load(self.path)
        self.header, self._entries, self.skipped = fresh.header, fresh._entries, fresh.skipped
        self._size, self._lines = fresh._size, None
        logger.warning("%s: the file was replaced on disk; reloaded it", self.path)
        with pool.lease(self._token, self.path) as fd:
            yield fd

    def _replaced(self, fd: int) -> bool:
        try:
            current = os.stat(self.path).st_ino
        except FileNotFoundError:
            return False  # moved away (archived or deleted): keep writing where we were
        return os.fstat(fd).st_ino != current

    def _descriptors(self) -> DescriptorPool:
        if self._pool is None:  # a transcript used on its own: a private pool of one
            self._pool = DescriptorPool(1)
            self._token = self._pool.token()
        return self._pool

    def _write_line(self, line: bytes) -> None:
        with self._descriptor() as fd:
            self._write_at_end(fd, line)
        self._size += len(line)
        if self._lines is not None:
            self._lines += 1

    def _write_at_end(self, fd: int, line: bytes) -> None:
        size = os.fstat(fd).st_size
        if size != self._size:
            self.refresh()
            if os.fstat(fd).st_size != self._size:
                raise TranscriptError(
                    f"{self.path}: ends with an incomplete line from another writer;"
                    " reopen the session to repair it"
                )
        try:
            written = os.write(fd, line)
            while written < len(line):  # short writes happen only near ENOSPC or on signals
                written += os.write(fd, line[written:])
        except OSError as exc:
            # Never leave half a line behind: the next append would glue onto it and turn a
            # torn tail into an unreadable middle line.
            try:
                os.ftruncate(fd, self._size)
            except OSError:
                pass
            raise TranscriptError(f"{self.path}: append failed: {exc}") from None
