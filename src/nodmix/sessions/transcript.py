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
from nodmix.sessions.files import (
    ARCHIVE_DIR,
    move_to_archive,
    private_dirs,
    report_skipped,
    report_torn_tail,
)
from nodmix.sessions.jsonl import (
    SkippedLine,
    count_messages,
    encode_header,
    encode_line,
    find_complete_end,
    parse_body,
    parse_header,
    parse_lines,
)

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


class Transcript:
    """The entries of one session, loaded from and appended to its JSONL file."""

    __slots__ = (
        "_entries",
        "_lines",
        "_pool",
        "_size",
        "_token",
        "header",
        "path",
        "read_only",
        "skipped",
    )

    def __init__(
        self,
        path: Path,
        header: SessionHeader,
        entries: list[Entry],
        *,
        size: int,
        lines: int | None,
        read_only: bool,
        skipped: list[SkippedLine] | None = None,
        descriptors: DescriptorPool | None = None,
    ) -> None:
        """Wrap an already-parsed file; use `create` or `load` instead."""
        self.path = path
        self.header = header
        self.read_only = read_only
        self.skipped: list[SkippedLine] = skipped or []
        """Unreadable lines left out of `entries`."""
        self._entries = entries
        self._size = size  # bytes of complete lines consumed; appends happen exactly here
        # Complete lines consumed, header included; only error messages need it, so it is
        # counted lazily (counting a 100 MB file costs ~30 ms of a load).
        self._lines = lines
        self._pool = descriptors
        self._token = descriptors.token() if descriptors is not None else 0

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
    ) -> Transcript:
        """Create a new transcript holding only its header (mode 0600: it is private).

        The file appears atomically with its header (written to a temporary name, then
        hard-linked into place), so no reader ever sees a headerless transcript.

        Raises:
            TranscriptError: the file already exists.
        """
        header = SessionHeader(
            id=session_id,
            timestamp=iso_now(),
            cwd=str(cwd),
            parent_session=parent_session,
            session_key=session_key,
        )
        line = encode_header(header)
        private_dirs(path.parent)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{new_entry_id()}.tmp")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
            try:
                os.write(fd, line)
            finally:
                os.close(fd)
            os.link(tmp, path)  # unlike rename, never replaces an existing transcript
        except FileExistsError:
            raise TranscriptError(f"{path}: transcript already exists") from None
        finally:
            tmp.unlink(missing_ok=True)
        return cls(
            path, header, [], size=len(line), lines=1, read_only=False, descriptors=descriptors
        )

    @classmethod
    def load(
        cls, path: Path, *, read_only: bool = False, descriptors: DescriptorPool | None = None
    ) -> Transcript:
        """Load a transcript, repairing a torn last line and skipping unreadable ones.

        With `read_only=True` (CLI readers, while a gateway may be writing) a torn last line is
        ignored in memory and the file is left untouched; appends are refused.

        Raises:
            TranscriptError: the file is missing or has a bad header.
        """
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise TranscriptError(f"{path}: transcript file not found") from None
        except OSError as exc:
            raise TranscriptError(f"{path}: cannot read transcript: {exc.strerror}") from None
        header, body_start = parse_header(path, data)
        end, needs_newline = find_complete_end(data, body_start)
        skipped: list[SkippedLine] = []
        entries = parse_body(path, data, body_start, end, skipped=skipped)
        report_skipped(path, skipped)
        if end < len(data) or needs_newline:
            report_torn_tail(path, data, end, needs_newline, read_only=read_only)
        if needs_newline:
            end = len(data) + (0 if read_only else 1)
        return cls(
            path,
            header,
            entries,
            size=end,
            lines=None,
            read_only=read_only,
            skipped=skipped,
            descriptors=descriptors,
        )

    # ---- reading ------------------------------------------------------------------------------

    @property
    def session_id(self) -> str:
        """The session id from the header."""
        return self.header.id

    @property
    def entries(self) -> Sequence[Entry]:
        """Every entry after the header, in file order (do not mutate)."""
        return self._entries

    @property
    def leaf_id(self) -> str | None:
        """The id of the last entry (the next entry's `parentId`)."""
        return self._entries[-1].id if self._entries else None

    @property
    def size_bytes(self) -> int:
        """Bytes of complete lines in the file, as far as this object has read."""
        return self._size

    def catch_up(self) -> list[Entry]:
        """`refresh` if the file grew (one `stat` when it did not): another process's turn on
        this session may have appended since this object last read it."""
        try:
            size = os.stat(self.path).st_size
        except OSError as exc:
            raise TranscriptError(f"{self.path}: cannot read transcript: {exc}") from None
        return self.refresh() if size != self._size else []

    def refresh(self) -> list[Entry]:
        """Read complete lines appended to the file since it was loaded; return the new entries.

        A trailing incomplete line is left for a later call (its writer may still be busy).

        Raises:
            TranscriptError: the file shrank.
        """
        try:
            with self.path.open("rb") as fh:
                fh.seek(self._size)
                data = fh.read()
        except OSError as exc:
            raise TranscriptError(f"{self.path}: cannot read transcript: {exc}") from None
        if not data:
            if os.stat(self.path).st_size < self._size:
                raise TranscriptError(f"{self.path}: transcript shrank while open")
            return []
        last_newline = data.rfind(b"\n")
        if last_newline < 0:
            return []
        lines = self._line_count()
        skipped: list[SkippedLine] = []
        new = parse_lines(
            self.path, data, 0, last_newline + 1, first_line=lines + 1, skipped=skipped
        )
        report_skipped(self.path, skipped)
        self.skipped.extend(skipped)
        self._entries.extend(new)
        self._size += last_newline + 1
        self._lines = lines + data.count(b"\n", 0, last_newline + 1)
        return new

    def _line_count(self) -> int:
        if self._lines is None:
            with self.path.open("rb") as fh:
                prefix = fh.read(self._size)
            # A last line that was only missing its newline counts as a line too.
            self._lines = prefix.count(b"\n") + (0 if prefix.endswith(b"\n") else 1)
        return self._lines

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
