"""Rebuild an agent's session index (`sessions.json`) from the transcripts on disk.

Every transcript header names its session key (older transcripts may not: their key is taken
from whatever the damaged index still holds, or from the compaction chain they belong to). Per
key, the current transcript is the newest one that no other transcript continues; the older ones
were replaced by `/new`. Counters come from the current transcript's compaction chain: message
usage (a response copied into a successor counts once), compactions, the latest model and
title, first and last timestamps.

`repair_store` is `nodmix sessions repair-store`: move a corrupt store aside, salvage every
complete entry of the damaged file, and add an entry for each key found in the transcripts that
the store does not have. Entries already in the (repaired) store are never overwritten.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import msgspec

from nodmix.errors import SessionError
from nodmix.sessions.keys import parse_session_key
from nodmix.sessions.scan import TranscriptFacts, UsageMark, scan, transcript_files
from nodmix.sessions.store import STORE_FILE_NAME, SessionStore
from nodmix.sessions.store_entry import SessionEntry, StoreData

RECOVERED_PREFIX = "recovered-"
"""Name prefix of keys given to transcripts whose key could not be found."""

_ENTRY_START = re.compile(r'"(agent:[^"\\]+)"\s*:\s*\{')


class RebuildReport(msgspec.Struct, kw_only=True):
    """What `repair_store` did."""

    store: Path
    quarantined: Path | None = None
    """Where a corrupt store file went."""
    kept: int = 0
    """Entries the store still had (a valid file, or the journal of a corrupt one)."""
    rebuilt: list[str] = msgspec.field(default_factory=list)
    """Keys added from the transcripts."""
    salvaged: int = 0
    """Of those, how many also had their entry salvaged from the damaged file."""
    guessed: list[str] = msgspec.field(default_factory=list)
    """Keys made up (`recovered-...`) for transcripts that do not record theirs."""
    unreadable: list[Path] = msgspec.field(default_factory=list)
    """`*.jsonl` files without a valid header."""


def salvage_entries(raw: str) -> StoreData:
    """Every complete, valid entry in the text of a damaged `sessions.json`."""
    decoder = json.JSONDecoder()
    found: StoreData = {}
    for match in _ENTRY_START.finditer(raw):
        try:
            value, _ = decoder.raw_decode(raw, match.end() - 1)
            found[match.group(1)] = msgspec.convert(value, SessionEntry)
        except (ValueError, msgspec.ValidationError):
            continue
    return found


def salvage_dir(folder: Path) -> StoreData:
    """Entries salvaged from the store files moved aside in `folder` (newer ones win)."""
    found: StoreData = {}
    for path in sorted(folder.glob(f"{STORE_FILE_NAME}.corrupt-*")):
        try:
            found.update(salvage_entries(path.read_text(encoding="utf-8", errors="replace")))
        except OSError:
            continue
    return found


def _own_key(facts: TranscriptFacts, agent_id: str) -> str | None:
    key = facts.header.session_key
    if key is None:
        return None
    try:
        parsed = parse_session_key(key)
    except SessionError:
        return None
    return key if parsed.agent_id == agent_id else None


def _assign_keys(
    files: dict[str, TranscriptFacts], agent_id: str, known: dict[str, str], *, guess: bool
) -> tuple[dict[str, str], list[str]]:
    """File name -> key: the header's, else a store's, else the compaction chain's."""
    keys: dict[str, str] = {}
    for name, facts in files.items():
        key = _own_key(facts, agent_id) or known.get(name)
        if key is not None:
            keys[name] = key
    changed = True
    while changed:  # a chain shares one key: spread it both ways until nothing changes
        changed = False
        for name, facts in files.items():
            parent = facts.header.parent_session
            if parent not in files:
                continue
            assert parent is not None
            if name in keys and parent not in keys:
                keys[parent], changed = keys[name], True
            elif parent in keys and name not in keys:
                keys[name], changed = keys[parent], True
    guessed: list[str] = []
    if guess:
        parents = {f.header.parent_session for f in files.values()}
        for name, facts in files.items():
            if name not in keys and name not in parents:
                key = f"agent:{agent_id}:{RECOVERED_PREFIX}{facts.header.id[:8]}"
                guessed.append(key)
                keys[name] = key
                for chained in _chain(files, name)[1:]:
                    keys.setdefault(chained.path.name, key)
    return keys, guessed


def _chain(files: dict[str, TranscriptFacts], name: str) -> list[TranscriptFacts]:
    """`name` and the transcripts it continues, newest first."""
    chain = [files[name]]
    seen = {name}
    parent = files[name].header.parent_session
    while parent is not None and parent in files and parent not in seen:
        seen.add(parent)
        chain.append(files[parent])
        parent = files[parent].header.parent_session
    return chain


def entry_from_chain(chain: list[TranscriptFacts], earlier: SessionEntry | None) -> SessionEntry:
    """The store entry for a session whose transcripts are `chain` (current first).

    `earlier` is what a damaged store said about the same transcript: it keeps the label and
    model, and its counters win where they are higher.
    """
    current = chain[0]
    marks: set[UsageMark] = set()
    for facts in chain:
        marks.update(facts.usage)
    entry = SessionEntry(
        session_id=current.header.id,
        session_file=current.path.name,
        created_at=min(f.created_at for f in chain),
        updated_at=current.last_at,
        last_interaction_at=current.last_at,
        input_tokens=sum(m[3] for m in marks),
        output_tokens=sum(m[4] for m in marks),
        total_tokens=sum(m[5] for m in marks),
        context_tokens=current.context_tokens,
        compaction_count=sum(f.compactions for f in chain),
        model=next((f.model for f in chain if f.model), None),
        label=next((f.title for f in chain if f.title), None),
    )
    if earlier is None or earlier.session_file != entry.session_file:
        return entry
    return msgspec.structs.replace(
        entry,
        created_at=min(entry.created_at, earlier.created_at),
        updated_at=max(entry.updated_at, earlier.updated_at),
        last_interaction_at=max(entry.last_interaction_at, earlier.last_interaction_at),
        input_tokens=max(entry.input_tokens, earlier.input_tokens),
        output_tokens=max(entry.output_tokens, earlier.output_tokens),
        total_tokens=max(entry.total_tokens, earlier.total_tokens),
        compaction_count=max(entry.compaction_count, earlier.compaction_count),
        model=earlier.model or entry.model,
        label=earlier.label or entry.label,
    )


def rebuild_entries(
    folder: Path, agent_id: str, salvaged: StoreData, present: StoreData, *, guess: bool
) -> tuple[StoreData, list[str], list[Path]]:
    """Entries for the keys found in `folder`'s transcripts that `present` lacks.

    Returns the entries, the made-up keys among them, and the files without a valid header.
    `guess` gives transcripts with no known key a `recovered-<id>` key (only when the index
    was lost: otherwise such a file is simply an older session replaced by `/new`).
    """
    files: dict[str, TranscriptFacts] = {}
    unreadable: list[Path] = []
    for path in transcript_files(folder):
        facts = scan(path)
        if facts is None:
            unreadable.append(path)
        else:
            files[path.name] = facts
    known = {e.session_file: k for k, e in salvaged.items()}
    known.update({e.session_file: k for k, e in present.items()})
    keys, guessed = _assign_keys(files, agent_id, known, guess=guess)
    continued = {f.header.parent_session for f in files.values()}
    newest: dict[str, TranscriptFacts] = {}
    for name, key in keys.items():
        facts = files[name]
        if key in present or name in continued:
            continue
        best = newest.get(key)
        rank = (facts.created_at, facts.last_at, name)
        if best is None or rank > (best.created_at, best.last_at, best.path.name):
            newest[key] = facts
    rebuilt = {
        key: entry_from_chain(_chain(files, facts.path.name), salvaged.get(key))
        for key, facts in sorted(newest.items())
    }
    return rebuilt, [k for k in guessed if k in rebuilt], unreadable


def repair_store(store: SessionStore, agent_id: str) -> RebuildReport:
    """Make the store readable again and index every session its transcripts hold.

    Raises:
        SessionError: the store lock could not be taken.
    """
    report = RebuildReport(store=store.path)
    report.quarantined = store.quarantine()
    folder = store.path.parent
    salvaged = salvage_dir(folder)
    index_lost = report.quarantined is not None or any(folder.glob(f"{STORE_FILE_NAME}.corrupt-*"))
    present = store.load()
    report.kept = len(present)
    rebuilt, report.guessed, report.unreadable = rebuild_entries(
        folder, agent_id, salvaged, present, guess=index_lost
    )

    def add(data: StoreData) -> list[str]:
        added = [key for key in rebuilt if key not in data]
        for key in added:
            data[key] = rebuilt[key]
        return added

    report.rebuilt = store.update(add) if rebuilt else []
    report.salvaged = sum(1 for k in report.rebuilt if k in salvaged)
    return report
