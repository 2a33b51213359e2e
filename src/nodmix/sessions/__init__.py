"""Sessions: session keys, the per-agent session store and append-only JSONL transcripts.

`SessionManager` is the entry point: `open(key)` gives a `Session` whose `transcript` is appended
to during a turn, and whose `messages_for_model()` is what the provider sees.
"""

from nodmix.sessions.entries import (
    CompactionEntry,
    CustomEntry,
    CustomMessageEntry,
    Entry,
    MessageEntry,
    ModelChangeEntry,
    OpaqueEntry,
    SessionHeader,
    SessionInfoEntry,
)
from nodmix.sessions.export import export_trajectory
from nodmix.sessions.keys import (
    DEFAULT_SESSION_KEY,
    SessionKey,
    format_session_key,
    parse_session_key,
    resolve_session_key,
)
from nodmix.sessions.manager import SessionManager
from nodmix.sessions.replay import (
    compaction_summary_message,
    context_entries,
    messages_for_model,
    repair_tool_pairing,
)
from nodmix.sessions.session import Session, SessionSummary
from nodmix.sessions.store import SessionEntry, SessionStore
from nodmix.sessions.transcript import Transcript

__all__ = [
    "DEFAULT_SESSION_KEY",
    "CompactionEntry",
    "CustomEntry",
    "CustomMessageEntry",
    "Entry",
    "MessageEntry",
    "ModelChangeEntry",
    "OpaqueEntry",
    "Session",
    "SessionEntry",
    "SessionHeader",
    "SessionInfoEntry",
    "SessionKey",
    "SessionManager",
    "SessionStore",
    "SessionSummary",
    "Transcript",
    "compaction_summary_message",
    "context_entries",
    "export_trajectory",
    "format_session_key",
    "messages_for_model",
    "parse_session_key",
    "repair_tool_pairing",
    "resolve_session_key",
]
