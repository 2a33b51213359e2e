"""What a transcript file says about its session, read without trusting the session store.

`read_header` reads only the first line (cheap enough for listing every file); `scan` reads the
whole file, skipping unreadable lines, and condenses it into `TranscriptFacts`: the counters the
store keeps (messages, token usage, compactions, model, title, timestamps). Both return None
for a file that is not a transcript, so one stray file never stops a listing or a rebuild.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import msgspec

from nodmix.errors import TranscriptError
from nodmix.messages import AssistantMessage
from nodmix.sessions.entries import (
    CompactionEntry,
    MessageEntry,
    ModelChangeEntry,
    SessionHeader,
    SessionInfoEntry,
    iso_to_ms,
)
from nodmix.sessions.jsonl import SkippedLine, find_complete_end, parse_body, parse_header

HEADER_READ_LIMIT = 64 << 10
"""Bytes read to find the header line (headers are a few hundred bytes)."""

UsageMark = tuple[int, str, str, int, int, int]
"""One model response's usage, with what identifies it when a compaction successor copies it:
(message timestamp, provider, model, input, output, total)."""


class TranscriptFacts(msgspec.Struct, frozen=True, kw_only=True):
    """The store-relevant facts of one transcript file."""

    path: Path
    header: SessionHeader
    created_at: int
    """Epoch ms of the header."""
    last_at: int
    """Epoch ms of the last readable entry (the header's when there is none)."""
    messages: int
    """Top-level messages (nested code-mode calls not counted)."""
    compactions: int
    usage: tuple[UsageMark, ...]
    context_tokens: int
    """Context size of the latest model response."""
    model: str | None
    """`provider/model` of the latest model response or model switch."""
    title: str | None
    """The latest `session_info` title."""
    skipped: tuple[SkippedLine, ...]


def _ms(timestamp: str, default: int = 0) -> int:
    try:
        return iso_to_ms(timestamp)
    except ValueError:
        return default


def read_header(path: Path) -> SessionHeader | None:
    """The header of a transcript file, or None when it has none (or cannot be read)."""
    try:
        with path.open("rb") as fh:
            first = fh.readline(HEADER_READ_LIMIT)
        return parse_header(path, first)[0]
    except (OSError, TranscriptError):
        return None


def scan(path: Path) -> TranscriptFacts | None:
    """Read a whole transcript tolerantly; None when it has no valid header."""
    try:
        data = path.read_bytes()
        header, start = parse_header(path, data)
    except (OSError, TranscriptError):
        return None
    end, _ = find_complete_end(data, start)
    skipped: list[SkippedLine] = []
    entries = parse_body(path, data, start, end, skipped=skipped)
    created = _ms(header.timestamp)
    last_at, messages, compactions, context = created, 0, 0, 0
    usage: list[UsageMark] = []
    model: str | None = None
    title: str | None = None
    for entry in entries:
        last_at = max(last_at, _ms(entry.timestamp, last_at))
        if isinstance(entry, MessageEntry) and entry.parent_tool_call_id is None:
            messages += 1
            message = entry.message
            if isinstance(message, AssistantMessage) and message.provider:
                u = message.usage
                total = u.total_tokens or u.input + u.output
                usage.append(
                    (message.timestamp, message.provider, message.model, u.input, u.output, total)
                )
                context = u.context_tokens or context
                model = f"{message.provider}/{message.model}"
        elif isinstance(entry, CompactionEntry):
            compactions += 1
        elif isinstance(entry, ModelChangeEntry):
            model = f"{entry.provider}/{entry.model_id}"
        elif isinstance(entry, SessionInfoEntry):
            title = entry.name
    return TranscriptFacts(
        path=path,
        header=header,
        created_at=created,
        last_at=last_at,
        messages=messages,
        compactions=compactions,
        usage=tuple(usage),
        context_tokens=context,
        model=model,
        title=title,
        skipped=tuple(skipped),
    )


def transcript_files(folder: Path) -> list[Path]:
    """The `*.jsonl` files directly in `folder`, by name (none if it does not exist)."""
    with contextlib.suppress(FileNotFoundError, NotADirectoryError):
        return sorted(p for p in folder.iterdir() if p.suffix == ".jsonl" and p.is_file())
    return []
