"""Successor transcripts that lost their seed, and putting it back.

A compaction with `truncateAfterCompaction` continues a session in a successor file that starts
with the kept tail and the summary (its "seed") and names the old file as `parentSession`.
Nodmix writes the seed before the session index switches to the file, but a successor made by
an earlier version could be left holding only its header (or part of the tail) when the
process died right after the switch: the next turns then ran without the summary and recent
turns, although the parent file, ending with that compaction, still has all of it.

`missing_seed` spots such a file (a successor with no compaction entry at all: every seeded
one has one), and `restore_seed` rewrites it with the seed rebuilt from the parent's last
compaction, followed by whatever was appended since (copies of parent entries a partial seed
left are dropped, so nothing appears twice). The rewrite is atomic and keeps the original as
`<name>.bak-<stamp>`. Opening a session for writing does this by itself; `nodmix sessions
repair` does it on request.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import msgspec

from nodmix.errors import TranscriptError
from nodmix.sessions.entries import (
    CompactionEntry,
    CustomEntry,
    Entry,
    ModelChangeEntry,
    OpaqueEntry,
    SessionInfoEntry,
    iso_now,
    new_entry_id,
)
from nodmix.sessions.files import replace_keeping_backup
from nodmix.sessions.jsonl import encode_header, encode_line
from nodmix.sessions.repair import relink
from nodmix.sessions.replay import context_entries
from nodmix.sessions.transcript_reader import TranscriptReader

log = logging.getLogger(__name__)

_STATE = (CustomEntry, ModelChangeEntry, SessionInfoEntry, OpaqueEntry)
"""Entries a successor carries over from before the kept tail (plugin state, titles, models)."""


class SeedRestore(msgspec.Struct, frozen=True, kw_only=True):
    """What `restore_seed` did."""

    path: Path
    parent: Path
    seeded: int
    """Entries of the rebuilt seed (kept tail and state, plus the summary)."""
    kept_after: int
    """Entries appended to the successor after the crash, kept after the seed."""
    backup: Path


RESTORED_TYPE = "nodmix.checkpoint-restored"
"""Custom entry opening a transcript that `nodmix sessions restore` made from a checkpoint: it
continues its parent without a compaction, and is not a successor that lost its seed."""


def missing_seed(reader: TranscriptReader) -> bool:
    """A successor transcript without the compaction that should open it."""
    if not reader.header.parent_session:
        return False
    return not any(
        isinstance(e, CompactionEntry)
        or (isinstance(e, CustomEntry) and e.custom_type == RESTORED_TYPE)
        for e in reader.entries
    )


def restore_seed(path: Path) -> SeedRestore | None:
    """Rewrite the successor at `path` with the seed rebuilt from its parent.

    Returns None when there is nothing to restore: the file has its seed, or the parent is gone
    or has no compaction to rebuild it from.

    Raises:
        TranscriptError: the successor cannot be read or rewritten.
    """
    successor = TranscriptReader.load(path, read_only=True)
    if not missing_seed(successor):
        return None
    parent_path = path.parent / str(successor.header.parent_session)
    try:
        parent = TranscriptReader.load(parent_path, read_only=True)
    except TranscriptError as exc:
        log.warning("%s: cannot restore its summary: %s", path, exc)
        return None
    seed = _seed(parent.entries)
    if seed is None:
        return None
    copies = {_content(e) for e in seed}
    rest = [e for e in successor.entries if _content(e) not in copies]
    if rest and (rest[0].parent_id is None or rest[0].parent_id not in {e.id for e in rest}):
        rest[0] = _with_parent(rest[0], seed[-1].id)
    entries, _ = relink([*seed, *rest])
    payload = encode_header(successor.header) + b"".join(encode_line(path, e) for e in entries)
    try:
        backup = replace_keeping_backup(path, payload)
    except OSError as exc:
        raise TranscriptError(f"{path}: cannot restore its summary: {exc}") from None
    log.warning(
        "%s: restored the summary and %d kept entries from %s (it held only what came after)",
        path,
        len(seed) - 1,
        parent_path.name,
    )
    return SeedRestore(
        path=path, parent=parent_path, seeded=len(seed), kept_after=len(rest), backup=backup
    )


def _seed(parent: Sequence[Entry]) -> list[Entry] | None:
    """Kept tail, earlier state and summary of the parent's last compaction, as a new chain."""
    compaction, kept = context_entries(parent)
    if compaction is None:
        return None
    kept_ids = {e.id for e in kept}
    first = next((i for i, e in enumerate(parent) if e.id in kept_ids), len(parent))
    state = [e for e in parent[:first] if isinstance(e, _STATE)]
    seed: list[Entry] = []
    previous: str | None = None
    for entry in [*state, *kept]:
        copy = _with_parent(entry, previous, fresh=True)
        seed.append(copy)
        previous = copy.id
    entry_id = new_entry_id()
    first_kept = seed[len(state)].id if kept else entry_id
    details: Any = compaction.details
    if isinstance(details, dict):
        details = {**details, "continuesFrom": compaction.id, "restored": True}
    seed.append(
        CompactionEntry(
            id=entry_id,
            parent_id=previous,
            timestamp=iso_now(),
            summary=compaction.summary,
            first_kept_entry_id=first_kept,
            tokens_before=compaction.tokens_before,
            details=details,
            from_hook=compaction.from_hook,
        )
    )
    return seed


def _with_parent(entry: Entry, parent_id: str | None, *, fresh: bool = False) -> Entry:
    """`entry` chained to `parent_id` (with a new id when `fresh`), content unchanged."""
    entry_id = new_entry_id() if fresh else entry.id
    if isinstance(entry, OpaqueEntry):
        raw = {**entry.raw, "id": entry_id, "parentId": parent_id}
        return msgspec.structs.replace(entry, id=entry_id, parent_id=parent_id, raw=raw)
    return msgspec.structs.replace(entry, id=entry_id, parent_id=parent_id)


def _content(entry: Entry) -> bytes:
    """An entry without its id and parent: copies of one entry compare equal."""
    if isinstance(entry, OpaqueEntry):
        raw = {k: v for k, v in entry.raw.items() if k not in ("id", "parentId")}
        return msgspec.json.encode(raw)
    return msgspec.json.encode(msgspec.structs.replace(entry, id="", parent_id=None))
