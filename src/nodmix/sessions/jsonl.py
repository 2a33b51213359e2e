"""Encoding and decoding transcript lines.

Loading is the hot path (a 100k-entry transcript must load in well under a second), so the
whole body is decoded by one `msgspec` call; only when that fails does the line-by-line path run,
to name the bad line or to keep entries of unknown types as `OpaqueEntry`.
"""

from __future__ import annotations

import gc
from pathlib import Path
from typing import Any, cast

import msgspec

from nodmix.errors import TranscriptError
from nodmix.sessions.entries import (
    KNOWN_ENTRY_TYPES,
    TRANSCRIPT_VERSION,
    Entry,
    KnownEntry,
    OpaqueEntry,
    SessionHeader,
)

_ENCODER = msgspec.json.Encoder()
_DECODER: msgspec.json.Decoder[KnownEntry] = msgspec.json.Decoder(KnownEntry)
_ANY_DECODER: msgspec.json.Decoder[Any] = msgspec.json.Decoder()
_WHITESPACE = frozenset(b" \t\r\n")


def encode_header(header: SessionHeader) -> bytes:
    """The header line (with its newline)."""
    return _ENCODER.encode(header) + b"\n"


def encode_line(path: Path, entry: Entry) -> bytes:
    """One transcript line (with its newline) for `entry`.

    Raises:
        TranscriptError: the entry holds values JSON cannot represent.
    """
    try:
        if isinstance(entry, OpaqueEntry):
            return _ENCODER.encode(entry.raw) + b"\n"
        return _ENCODER.encode(entry) + b"\n"
    except (TypeError, msgspec.EncodeError) as exc:
        raise TranscriptError(f"{path}: cannot encode {type(entry).__name__}: {exc}") from None


def parse_header(path: Path, data: bytes) -> tuple[SessionHeader, int]:
    """The header on the first line of `data`, and the offset where entries start.

    Raises:
        TranscriptError: the first line is missing, not a header, or not version 3.
    """
    newline = data.find(b"\n")
    if newline < 0:
        raise TranscriptError(
            f"{path}: first line is not a complete session header (empty or truncated file)"
        )
    try:
        raw = _ANY_DECODER.decode(memoryview(data)[:newline])
    except msgspec.DecodeError:
        raise TranscriptError(f"{path}: first line is not a valid session header") from None
    if not isinstance(raw, dict) or raw.get("type") != "session":
        raise TranscriptError(f"{path}: first line is not a valid session header")
    if raw.get("version") != TRANSCRIPT_VERSION:
        raise TranscriptError(
            f"{path}: unsupported session version {raw.get('version')!r}"
            f" (this Nodmix reads version {TRANSCRIPT_VERSION})"
        )
    try:
        header = msgspec.convert(raw, SessionHeader)
    except msgspec.ValidationError as exc:
        raise TranscriptError(f"{path}: invalid session header: {exc}") from None
    return header, newline + 1


def find_complete_end(data: bytes, start: int) -> tuple[int, bool]:
    """Where the complete lines end, and whether the last line only lacks its newline.

    A last line that is not valid JSON is torn (a crash mid-write or blocks zero-filled after a
    power loss); a last line that decodes but has no newline only lost its terminator.
    """
    # Walk back over trailing whitespace by hand: `rstrip` would copy the whole file.
    stop = len(data)
    while stop > start and data[stop - 1] in _WHITESPACE:
        stop -= 1
    if stop <= start:
        return len(data), False
    last_start = max(data.rfind(b"\n", start, stop) + 1, start)
    try:
        _ANY_DECODER.decode(memoryview(data)[last_start:stop])
    except msgspec.DecodeError:
        return last_start, False
    return len(data), not data.endswith(b"\n")


class SkippedLine(msgspec.Struct, frozen=True):
    """A transcript line that could not be read and was left out."""

    line: int
    """1-based line number in the file (the header is line 1)."""
    reason: str


def parse_body(
    path: Path, data: bytes, start: int, end: int, *, skipped: list[SkippedLine] | None = None
) -> list[Entry]:
    """Decode the entry lines in `data[start:end]` (line 2 onwards of the file).

    With a `skipped` list, unreadable lines are recorded there and left out; without one they
    raise.

    Raises:
        TranscriptError: a line is not JSON or not a valid entry (naming the line).
    """
    body = memoryview(data)[start:end]  # no copy of a possibly large file
    # Decoding builds hundreds of thousands of containers, and the cyclic GC would rescan the
    # growing heap over and over (2/3 of the time for a 100k-entry file). Nothing decoded here
    # can form a cycle, so pause it for the duration.
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        # Fast path: one C call for the whole file. It fails on an unknown entry type or a bad
        # line; the slow path below then finds the line and handles unknown types.
        # Every KnownEntry is an Entry; the cast only widens the list's type without a copy.
        return cast("list[Entry]", _DECODER.decode_lines(body))
    except (msgspec.DecodeError, msgspec.ValidationError):
        return parse_lines(path, data, start, end, first_line=2, skipped=skipped)
    finally:
        if gc_was_enabled:
            gc.enable()


def parse_lines(
    path: Path,
    data: bytes,
    start: int,
    end: int,
    first_line: int,
    *,
    skipped: list[SkippedLine] | None = None,
) -> list[Entry]:
    """Decode `data[start:end]` line by line; `first_line` numbers the first one for errors.

    With a `skipped` list, an unreadable line is recorded there instead of raising.

    Raises:
        TranscriptError: a line is not JSON or not a valid entry.
    """
    entries: list[Entry] = []
    for number, line in enumerate(data[start:end].split(b"\n"), start=first_line):
        if not line.strip():
            continue
        try:
            try:
                entries.append(_DECODER.decode(line))
            except msgspec.ValidationError as exc:
                entries.append(_opaque_or_raise(path, number, line, exc))
            except msgspec.DecodeError:
                raise TranscriptError(f"{path}: line {number} is not valid JSON") from None
        except TranscriptError as exc:
            if skipped is None:
                raise
            reason = str(exc).removeprefix(f"{path}: line {number} ").removeprefix("is ")
            skipped.append(SkippedLine(line=number, reason=reason))
    return entries


def _opaque_or_raise(
    path: Path, number: int, line: bytes, error: msgspec.ValidationError
) -> OpaqueEntry:
    raw = _ANY_DECODER.decode(line)
    kind = raw.get("type") if isinstance(raw, dict) else None
    if not isinstance(raw, dict) or not isinstance(kind, str) or kind in KNOWN_ENTRY_TYPES:
        raise TranscriptError(f"{path}: line {number} is not a valid entry: {error}")
    entry_id, parent_id, timestamp = raw.get("id"), raw.get("parentId"), raw.get("timestamp")
    if not isinstance(entry_id, str) or not entry_id:
        raise TranscriptError(f"{path}: line {number} is missing its entry id")
    if parent_id is not None and not isinstance(parent_id, str):
        raise TranscriptError(f"{path}: line {number} has an invalid parentId")
    if not isinstance(timestamp, str):
        raise TranscriptError(f"{path}: line {number} is missing its timestamp")
    return OpaqueEntry(type=kind, id=entry_id, parent_id=parent_id, timestamp=timestamp, raw=raw)


def count_messages(path: Path) -> int:
    """Count the top-level message entries of a transcript file without building them.

    Nested code-mode projections are not counted; unreadable lines are skipped (this feeds
    listings, which must not fail on one bad file).
    """
    try:
        data = path.read_bytes()
    except OSError:
        return 0
    start = data.find(b"\n") + 1
    end = data.rfind(b"\n") + 1
    if start <= 0 or end <= start:
        return 0
    return count_message_lines(memoryview(data)[start:end])


def count_message_lines(body: bytes | memoryview) -> int:
    """Top-level message entries among complete entry lines (no header)."""
    try:
        kinds = _KIND_DECODER.decode_lines(body)
    except (msgspec.DecodeError, msgspec.ValidationError):
        kinds = []
        for line in bytes(body).split(b"\n"):
            try:
                if line.strip():
                    kinds.append(_KIND_DECODER.decode(line))
            except (msgspec.DecodeError, msgspec.ValidationError):
                continue
    return sum(1 for k in kinds if k.type == "message" and k.parent_tool_call_id is None)


class _Kind(msgspec.Struct, rename="camel"):
    # Decoding only these two fields lets msgspec skip message bodies without building them.
    type: str = ""
    parent_tool_call_id: str | None = None


_KIND_DECODER = msgspec.json.Decoder(_Kind)
