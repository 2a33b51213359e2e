"""What the session store keeps per session key (`SessionEntry`)."""

from __future__ import annotations

import msgspec

from nodmix.messages import now_ms


class SessionEntry(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """What the store knows about one session key."""

    session_id: str
    session_file: str
    """Transcript file name inside the sessions directory (`<sessionId>.jsonl`)."""
    created_at: int
    """Epoch milliseconds; the same unit as message timestamps."""
    updated_at: int
    last_interaction_at: int
    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0
    context_tokens: int = 0
    """Context size of the latest model request."""
    compaction_count: int = 0
    model: str | None = None
    """`provider/model` used last (or pinned for this session)."""
    label: str | None = None
    spawned_by: str | None = None
    """For a subagent's session: the key of the session whose turn spawned it."""


StoreData = dict[str, SessionEntry]


def new_session_entry(
    session_id: str, session_file: str, *, now: int | None = None
) -> SessionEntry:
    """A fresh store entry for a new transcript."""
    stamp = now_ms() if now is None else now
    return SessionEntry(
        session_id=session_id,
        session_file=session_file,
        created_at=stamp,
        updated_at=stamp,
        last_interaction_at=stamp,
    )
