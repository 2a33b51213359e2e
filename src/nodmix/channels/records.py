"""Append-only records of a channel: one JSON object a line, compacted when they grow.

State a channel adds to with every message (WhatsApp's handled message ids) is appended, never
rewritten whole: `append` adds one line with a single `write` on a file opened with
`O_APPEND` and syncs it, so a message costs one small write whatever the number of records
kept. Reading stops at the first line that is not a complete JSON object; a process killed
mid-write leaves at most a torn last line, which is skipped (and cut off before the next
append), so no readable record is lost. `compact` replaces the file atomically with the
records the caller still needs (write a temporary file, sync, rename): a crash during a
compaction leaves the old file or the new one, never a mix.

`read(after)` returns the records past a mark and the new mark (a byte offset here; a row id
in the database, `nodmix.state.postgres.channels`), so a reader that keeps what it read takes
in only what was appended since. A mark past the end of the file (the file was compacted)
reads it again from the start.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

from nodmix.assets.files import atomic_write, ensure_private_dir

log = logging.getLogger("nodmix.channels")


class RecordFile:
    """The records of one name in one file (`<state>/channels/<channel>/<name>.jsonl`)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._tail_checked = False

    def read(self, after: int = 0) -> tuple[list[dict[str, Any]], int]:
        """The complete records past byte `after` and the offset after the last of them."""
        try:
            with self.path.open("rb") as handle:
                size = os.fstat(handle.fileno()).st_size
                start = after if 0 <= after <= size else 0
                handle.seek(start)
                data = handle.read()
        except FileNotFoundError:
            return [], 0
        records: list[dict[str, Any]] = []
        end = 0
        for line in data.splitlines(keepends=True):
            if not line.endswith(b"\n"):
                break  # a torn last line (a crash mid-append)
            end += len(line)
            try:
                record = json.loads(line)
            except ValueError:
                log.warning("skipping an unreadable line of %s", self.path)
                continue
            if isinstance(record, dict):
                records.append(record)
        return records, start + end

    def append(self, record: dict[str, Any]) -> None:
        """Add `record` durably (one line, synced)."""
        line = json.dumps(record, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"
        ensure_private_dir(self.path.parent)
        fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            if not self._tail_checked:
                self._cut_torn_tail(fd)
            os.write(fd, line)
            os.fsync(fd)
        finally:
            os.close(fd)

    def _cut_torn_tail(self, fd: int) -> None:
        """Cut a torn last line off (a process killed mid-append), once per process."""
        size = os.fstat(fd).st_size
        if size:
            tail = os.pread(fd, min(size, 1 << 16), max(0, size - (1 << 16)))
            if not tail.endswith(b"\n"):
                cut = tail.rfind(b"\n")
                keep = size - len(tail) + cut + 1 if cut >= 0 else max(0, size - len(tail))
                log.warning("cutting a torn last line off %s", self.path)
                os.ftruncate(fd, keep)
        self._tail_checked = True

    def compact(self, records: list[dict[str, Any]]) -> int:
        """Replace every record with `records` (atomically); the offset after them."""
        body = b"".join(
            json.dumps(r, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"
            for r in records
        )
        ensure_private_dir(self.path.parent)
        atomic_write(self.path, body)
        self._tail_checked = True
        return len(body)
