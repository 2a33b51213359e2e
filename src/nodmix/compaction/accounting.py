"""How big is the context? Provider-reported usage first, estimates only for what came after.

The last response's usage counts exactly what the provider saw (prompt plus answer), with the
provider's own tokenizer. Everything appended since (tool results, the next user message) is
estimated at four characters per token. Usage recorded before the latest compaction describes a
context that no longer exists, so it is never used.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from nodmix.context.tokens import chars_to_tokens, message_chars
from nodmix.messages import AssistantMessage
from nodmix.sessions.entries import (
    CompactionEntry,
    CustomEntry,
    CustomMessageEntry,
    Entry,
    MessageEntry,
)

FLUSH_ENTRY_TYPE: Final = "nodmix.memory-flush"
"""`custom` entry recording a memory flush (see `nodmix.compaction.memory_flush`)."""


def reported_context_tokens(entries: Sequence[Entry]) -> int | None:
    """Context size from the newest usage report plus an estimate of later messages.

    Returns `None` when no response since the latest compaction reported usage.
    """
    trailing = 0
    for index in range(len(entries) - 1, -1, -1):
        entry = entries[index]
        kind = type(entry)
        if kind is MessageEntry:
            assert isinstance(entry, MessageEntry)
            if entry.parent_tool_call_id is not None:
                continue
            message = entry.message
            if type(message) is AssistantMessage:
                reported = message.usage.context_tokens
                if reported > 0:
                    return reported + chars_to_tokens(trailing)
            trailing += message_chars(message)
        elif kind is CustomMessageEntry:
            assert isinstance(entry, CustomMessageEntry)
            content = entry.content
            trailing += len(content) if isinstance(content, str) else 0
        elif kind is CompactionEntry:
            return None
    return None


def flushed_since_compaction(entries: Sequence[Entry]) -> bool:
    """Whether a memory flush is recorded after the latest compaction."""
    for index in range(len(entries) - 1, -1, -1):
        entry = entries[index]
        if isinstance(entry, CompactionEntry):
            return False
        if isinstance(entry, CustomEntry) and entry.custom_type == FLUSH_ENTRY_TYPE:
            return True
    return False
