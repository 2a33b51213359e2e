"""Transcript entries: the lines of a session's JSONL file.

Line 1 is a `SessionHeader`; every later line is an entry with `type`, `id`, `parentId` and an
ISO-8601 `timestamp`. Entries are `msgspec.Struct`s tagged on `type` with camelCase keys, so a
transcript line is exactly `msgspec.json.encode(entry)`.

Each entry's `parentId` is the entry appended before it, so a transcript is one linear chain
(the format allows a tree; Nodmix never branches).

Entry types Nodmix does not know (written by a newer version or another tool) load as
`OpaqueEntry` and are kept verbatim, so an upgrade never makes an old reader lose a session.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from typing import Any, Final, TypeAlias

import msgspec

from nodmix.messages import Message, UserBlock

TRANSCRIPT_VERSION: Final = 3


def new_entry_id() -> str:
    """A random 16-hex-digit entry id.

    64 random bits: among a million entries the chance of any collision is about 3e-8, and ids
    only need to be unique within one transcript.
    """
    return os.urandom(8).hex()


def iso_now() -> str:
    """The current UTC time as ISO-8601 with milliseconds and a `Z` suffix."""
    now = datetime.now(UTC)
    return now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{now.microsecond // 1000:03d}Z"


def iso_to_ms(timestamp: str) -> int:
    """Epoch milliseconds of an ISO-8601 timestamp (naive timestamps are taken as UTC)."""
    parsed = datetime.fromisoformat(timestamp)
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return int(parsed.timestamp() * 1000)


class SessionHeader(
    msgspec.Struct, frozen=True, kw_only=True, tag_field="type", tag="session", rename="camel"
):
    """The first line of every transcript."""

    version: int = TRANSCRIPT_VERSION
    id: str
    """The session id (the transcript file is `<id>.jsonl`)."""
    timestamp: str
    """When the transcript was created (ISO-8601)."""
    cwd: str
    """The agent workspace the session ran in."""
    parent_session: str | None = None
    """File name of the transcript this one continues (compaction successors)."""
    session_key: str | None = None
    """The session key the transcript was started under (absent in older transcripts); lets
    `nodmix sessions repair-store` rebuild a lost `sessions.json` from the transcripts."""


class _Entry(
    msgspec.Struct,
    frozen=True,
    kw_only=True,
    tag_field="type",
    rename="camel",
    omit_defaults=True,
):
    id: str
    """Random id, unique within the transcript."""
    parent_id: str | None
    """The id of the entry before this one; `None` for the first entry."""
    timestamp: str
    """When the entry was appended (ISO-8601)."""


class MessageEntry(_Entry, frozen=True, kw_only=True, tag="message"):
    """A user, assistant or tool-result message."""

    message: Message
    parent_tool_call_id: str | None = None
    """Set for tool calls made from inside a code-mode program: the id of the outer `exec` or
    `wait` call. Such entries record what the program did (history, export) and are never
    replayed to the model, which only saw the outer call's result."""


class CompactionEntry(_Entry, frozen=True, kw_only=True, tag="compaction"):
    """Older history condensed into a summary; what the model sees from here on."""

    summary: str
    first_kept_entry_id: str
    """The first entry that is replayed verbatim after the summary."""
    tokens_before: int
    """Context size when compaction ran."""
    details: Any = None
    """Engine-specific data, for example `{"readFiles": [...], "modifiedFiles": [...]}`."""
    from_hook: bool | None = None
    """True when a plugin hook supplied the summary."""


class CustomEntry(_Entry, frozen=True, kw_only=True, tag="custom"):
    """Plugin state stored in the transcript; never part of the model context."""

    custom_type: str
    data: Any = None


class CustomMessageEntry(_Entry, frozen=True, kw_only=True, tag="custom_message"):
    """A plugin-authored message the model sees as user text."""

    custom_type: str
    content: str | tuple[UserBlock, ...]
    display: bool = True
    """Whether chat surfaces show it to the user."""
    details: Any = None


class ModelChangeEntry(_Entry, frozen=True, kw_only=True, tag="model_change"):
    """The session switched models."""

    provider: str
    model_id: str


class SessionInfoEntry(_Entry, frozen=True, kw_only=True, tag="session_info"):
    """Session metadata, such as a title."""

    name: str


KnownEntry: TypeAlias = (
    MessageEntry
    | CompactionEntry
    | CustomEntry
    | CustomMessageEntry
    | ModelChangeEntry
    | SessionInfoEntry
)
"""Every entry type this version understands (the decoder's tagged union)."""

KNOWN_ENTRY_TYPES: Final = frozenset(
    ("message", "compaction", "custom", "custom_message", "model_change", "session_info")
)


class OpaqueEntry(msgspec.Struct, frozen=True, kw_only=True):
    """An entry of a type this version does not know, kept verbatim."""

    type: str
    id: str
    parent_id: str | None
    timestamp: str
    raw: dict[str, Any]
    """The whole line as decoded; written back unchanged."""


Entry: TypeAlias = KnownEntry | OpaqueEntry


def entry_to_builtins(entry: Entry | SessionHeader) -> dict[str, Any]:
    """The entry as plain JSON values (lists, not tuples), exactly as in the transcript."""
    if isinstance(entry, OpaqueEntry):
        return dict(entry.raw)
    result: dict[str, Any] = msgspec.json.decode(msgspec.json.encode(entry))
    return result
