"""Rewrite a damaged transcript: `nodmix sessions repair`.

Reading already skips unreadable lines (`Transcript.skipped`); repair makes that permanent.
Every readable entry is kept in file order; an entry whose parent was on a lost line points to
the entry kept before it, so the `parentId` chain is whole again. The new file replaces the old
one atomically and the original stays next to it as `<name>.bak-<stamp>`. A process that has
the session open notices the swap on its next append and reloads (see `Transcript`).
"""

from __future__ import annotations

from pathlib import Path

import msgspec

from nodmix.errors import TranscriptError
from nodmix.sessions.entries import Entry, OpaqueEntry
from nodmix.sessions.files import replace_keeping_backup
from nodmix.sessions.jsonl import (
    SkippedLine,
    encode_header,
    encode_line,
    find_complete_end,
    parse_body,
    parse_header,
)


class RepairResult(msgspec.Struct, frozen=True, kw_only=True):
    """What `repair_transcript` did."""

    path: Path
    kept: int
    """Entries in the rewritten file."""
    dropped: tuple[SkippedLine, ...]
    """Lines left out (a torn last line included)."""
    relinked: int
    """Entries whose `parentId` now points at the entry kept before them."""
    backup: Path | None
    """The original file; None when there was nothing to repair (the file is untouched)."""


def relink(entries: list[Entry]) -> tuple[list[Entry], int]:
    """Point each entry whose parent is not an earlier entry at the entry before it."""
    seen: set[str] = set()
    out: list[Entry] = []
    changed = 0
    for entry in entries:
        previous = out[-1].id if out else None
        if entry.parent_id is not None and entry.parent_id not in seen:
            if isinstance(entry, OpaqueEntry):
                raw = {**entry.raw, "parentId": previous}
                entry = msgspec.structs.replace(entry, parent_id=previous, raw=raw)
            else:
                entry = msgspec.structs.replace(entry, parent_id=previous)
            changed += 1
        seen.add(entry.id)
        out.append(entry)
    return out, changed


def repair_transcript(path: Path) -> RepairResult:
    """Rewrite `path` keeping every readable entry (see the module docs).

    Raises:
        TranscriptError: the file cannot be read or has no valid header (nothing to keep).
    """
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise TranscriptError(f"{path}: cannot read transcript: {exc.strerror}") from None
    header, start = parse_header(path, data)
    end, _ = find_complete_end(data, start)
    dropped: list[SkippedLine] = []
    entries = parse_body(path, data, start, end, skipped=dropped)
    if end < len(data):
        dropped.append(SkippedLine(line=data.count(b"\n", 0, end) + 1, reason="torn last line"))
    entries, relinked = relink(entries)
    if not dropped and not relinked:
        return RepairResult(path=path, kept=len(entries), dropped=(), relinked=0, backup=None)
    payload = encode_header(header) + b"".join(encode_line(path, e) for e in entries)
    backup = replace_keeping_backup(path, payload)
    return RepairResult(
        path=path, kept=len(entries), dropped=tuple(dropped), relinked=relinked, backup=backup
    )
