"""Reading a session's JSONL transcript: loading it (repairing a torn last line, skipping
unreadable ones) and reading in lines appended since. `Transcript` (in `transcript.py`)
adds creating and appending; see that module for the file format's rules.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Self

from nodmix.errors import TranscriptError
from nodmix.sessions.descriptors import DescriptorPool
from nodmix.sessions.entries import Entry, SessionHeader
from nodmix.sessions.files import report_skipped, report_torn_tail
from nodmix.sessions.jsonl import (
    SkippedLine,
    find_complete_end,
    parse_body,
    parse_header,
    parse_lines,
)


class TranscriptReader:
    """The entries of one session as read from its JSONL file (see `Transcript`)."""

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
    def load(
        cls, path: Path, *, read_only: bool = False, descriptors: DescriptorPool | None = None
    ) -> Self:
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
