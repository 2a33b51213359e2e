"""Successor transcripts: continue a compacted session in a new, small JSONL file.

With `truncateAfterCompaction`, the active transcript stops growing forever. The compaction is
recorded in the old file first (so it ends on the checkpoint it was cut at), then the session
moves to a new file whose header names the old one as `parentSession`:

```
<new>.jsonl:  header(parentSession=<old>.jsonl)  kept tail (copied)  compaction(summary)
```

The compaction entry comes after the copied tail and names the tail's first entry as
`firstKeptEntryId`, so the replay shows the summary and then the tail, and the copied
messages' old usage reports (of the uncompacted context) are never taken for the current size.

The successor is built in memory and `SessionManager.rotate` creates it whole (header, tail and
summary, fsynced) before the session store switches to it, in one locked update: a crash
leaves the key on the old file (which already ends with the compaction, so it continues in
place) or on the complete successor, never on a file holding only its header. The live
`Session` object adopts the new transcript in place, so everything holding it (the running
turn, code-mode recorders) writes to the active file.

Retry storms: chat channels resend a message when they time out waiting, which leaves the same
long user message several times in a row. Copies of a user message identical to the previous
one, at least `DUPLICATE_MIN_CHARS` long and within `DUPLICATE_WINDOW_MS`, are not carried into
the successor (they stay in the old file), with their answers when they got one, so the
successor's user and assistant messages still alternate (`drop_retry_duplicates`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

import msgspec

from nodmix.messages import AssistantMessage, Message, UserMessage
from nodmix.sessions.entries import (
    CompactionEntry,
    Entry,
    MessageEntry,
    OpaqueEntry,
    iso_now,
    new_entry_id,
)
from nodmix.sessions.manager import SessionManager
from nodmix.sessions.session import Session

DUPLICATE_WINDOW_MS: Final = 60_000
DUPLICATE_MIN_CHARS: Final = 24


def drop_retry_duplicates(entries: Sequence[Entry]) -> list[Entry]:
    """`entries` without user messages that repeat the previous one inside the retry window,
    never breaking the user/assistant alternation:

    - a copy that came while the kept user message had no kept answer yet is dropped alone
      (the answer that follows then answers the kept one);
    - a copy that came after the kept message was answered is dropped with its whole turn (its
      answer and tool calls), so the kept message keeps its own answer;
    - a copy that starts the last turn is kept with its turn (the running turn may be
      compacting mid-way; its prompt must stay).

    Entries other than messages (plugin state, model changes...) are always kept.
    """
    tops = [i for i, e in enumerate(entries) if _top_message(e) is not None]
    users = [i for i in tops if isinstance(_top_message(entries[i]), UserMessage)]
    last_user = users[-1] if users else -1
    dropped: set[int] = set()
    last_text: str | None = None
    last_ms = 0
    answered = False  # the last kept user message has a kept answer
    for index in tops:
        message = _top_message(entries[index])
        if not isinstance(message, UserMessage):
            if index not in dropped and isinstance(message, AssistantMessage):
                answered = True
            continue
        text = message.text
        duplicate = (
            text == last_text
            and len(text) >= DUPLICATE_MIN_CHARS
            and 0 <= message.timestamp - last_ms <= DUPLICATE_WINDOW_MS
        )
        last_text, last_ms = text, message.timestamp
        if not duplicate or (answered and index == last_user):
            answered = False  # kept: a new turn starts
        elif not answered:
            dropped.add(index)
        else:
            end = next((i for i in users if i > index), len(entries))
            dropped.update(i for i in range(index, end) if isinstance(entries[i], MessageEntry))
    return [e for i, e in enumerate(entries) if i not in dropped]


def _top_message(entry: Entry) -> Message | None:
    """The message of a top-level message entry (not a code-mode nested projection)."""
    if isinstance(entry, MessageEntry) and entry.parent_tool_call_id is None:
        return entry.message
    return None


def _relinked(entry: Entry, parent_id: str | None) -> Entry:
    """A copy of `entry` with a fresh id chained to `parent_id` (content unchanged)."""
    fresh: dict[str, Any] = {"id": new_entry_id(), "parent_id": parent_id, "timestamp": iso_now()}
    if isinstance(entry, OpaqueEntry):
        raw = {**entry.raw, "id": fresh["id"], "parentId": parent_id}
        return OpaqueEntry(
            type=entry.type, id=fresh["id"], parent_id=parent_id, timestamp=entry.timestamp, raw=raw
        )
    # Keep the original timestamp: the copy is the same message, not a new one.
    fresh["timestamp"] = entry.timestamp
    return msgspec.structs.replace(entry, **fresh)


def continue_in_successor(
    sessions: SessionManager,
    session: Session,
    *,
    kept: Sequence[Entry],
    summary: str,
    tokens_before: int,
    details: Any,
    from_hook: bool | None,
) -> CompactionEntry:
    """Start the successor transcript, seed it, and point `session` at it.

    Returns:
        The compaction entry written to the successor.
    """
    cwd = Path(session.transcript.header.cwd)
    seed: list[Entry] = []
    parent: str | None = None
    first_kept: str | None = None
    for entry in drop_retry_duplicates([e for e in kept if not isinstance(e, CompactionEntry)]):
        copy = _relinked(entry, parent)
        seed.append(copy)
        parent = copy.id
        first_kept = first_kept or copy.id
    entry_id = new_entry_id()
    compaction = CompactionEntry(
        id=entry_id,
        parent_id=parent,
        timestamp=iso_now(),
        summary=summary,
        # With no tail, the compaction names itself: nothing before it is replayed.
        first_kept_entry_id=first_kept or entry_id,
        tokens_before=tokens_before,
        details=details,
        from_hook=from_hook,
    )
    seed.append(compaction)
    # The successor is written whole (and fsynced) before the index switches to it.
    successor = sessions.rotate(session.key, workspace=cwd, seed=seed)
    # Adopt in place: the running turn and its tools hold this object, not the manager's.
    session.transcript = successor.transcript
    session.entry = successor.entry
    return compaction
