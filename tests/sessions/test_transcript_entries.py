from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import pytest

from nodmix.messages import ImageBlock, TextBlock, ThinkingBlock, Usage
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
    entry_to_builtins,
    iso_now,
    iso_to_ms,
    new_entry_id,
)
from nodmix.sessions.transcript import Transcript
from tests.sessions.sessions_builders import TS, assistant, result, user

BASE: dict[str, Any] = {"id": "abc123", "parent_id": "p0", "timestamp": TS}

ENTRIES: list[Entry] = [
    MessageEntry(**BASE, message=user("hello")),
    MessageEntry(
        **BASE,
        message=msgspec.structs.replace(
            assistant("checking", "call_1"),
            content=(
                ThinkingBlock(thinking="hmm", thinking_signature="sig"),
                TextBlock(text="checking"),
                *assistant("", "call_1").content,
            ),
            usage=Usage(input=10, output=5, total_tokens=15),
            provider="openai",
            model="gpt-5",
        ),
    ),
    MessageEntry(**BASE, message=result("call_1", "done"), parent_tool_call_id="exec_1"),
    CompactionEntry(
        **BASE,
        summary="## Goal\nship it",
        first_kept_entry_id="m7",
        tokens_before=183000,
        details={"readFiles": ["a.ts"], "modifiedFiles": []},
        from_hook=False,
    ),
    CustomEntry(**BASE, custom_type="ext", data={"cursor": 3}),
    CustomMessageEntry(**BASE, custom_type="reminder", content="be brief", display=False),
    CustomMessageEntry(
        **BASE,
        custom_type="pic",
        content=(TextBlock(text="see"), ImageBlock(data="aGk=", mime_type="image/png")),
        details={"k": 1},
    ),
    ModelChangeEntry(**BASE, provider="openai", model_id="gpt-5.2"),
    SessionInfoEntry(**BASE, name="release planning"),
]


@pytest.mark.parametrize("entry", ENTRIES, ids=lambda e: type(e).__name__)
def test_every_entry_type_round_trips_through_a_transcript_file(
    entry: Entry, tmp_path: Path
) -> None:
    path = tmp_path / "s.jsonl"
    Transcript.create(path, session_id="s", cwd="/w").append(entry)
    assert Transcript.load(path).entries == [entry]


def test_entry_lines_are_type_tagged_camel_case_json() -> None:
    line = msgspec.json.encode(ENTRIES[2])
    assert json.loads(line) == {
        "type": "message",
        "id": "abc123",
        "parentId": "p0",
        "timestamp": TS,
        "parentToolCallId": "exec_1",
        "message": {
            "role": "toolResult",
            "toolCallId": "call_1",
            "toolName": "tool_call_1",
            "content": [{"type": "text", "text": "done"}],
            "isError": False,
            "details": None,
            "timestamp": 3,
        },
    }


def test_first_entry_has_an_explicit_null_parent_id() -> None:
    entry = SessionInfoEntry(id="x", parent_id=None, timestamp=TS, name="t")
    assert json.loads(msgspec.json.encode(entry))["parentId"] is None


def test_header_line_matches_the_version_3_format() -> None:
    header = SessionHeader(
        id="s1", timestamp=TS, cwd="/w", parent_session="old.jsonl", session_key="agent:main:w"
    )
    assert entry_to_builtins(header) == {
        "type": "session",
        "version": 3,
        "id": "s1",
        "timestamp": TS,
        "cwd": "/w",
        "parentSession": "old.jsonl",
        "sessionKey": "agent:main:w",
    }


def test_unknown_entry_types_load_as_opaque_entries_and_are_written_back_verbatim(
    tmp_path: Path,
) -> None:
    path = tmp_path / "s.jsonl"
    transcript = Transcript.create(path, session_id="s", cwd="/w")
    before = transcript.append_session_info("before")
    future = {
        "type": "thinking_level_change",
        "id": "f1",
        "parentId": transcript.leaf_id,
        "timestamp": TS,
        "thinkingLevel": "high",
    }
    with path.open("ab") as fh:
        fh.write(json.dumps(future).encode() + b"\n")
    loaded = Transcript.load(path)
    opaque = loaded.entries[1]
    assert isinstance(opaque, OpaqueEntry)
    assert (opaque.type, opaque.id, opaque.parent_id) == ("thinking_level_change", "f1", before.id)
    assert entry_to_builtins(opaque) == future

    copy = Transcript.create(tmp_path / "copy.jsonl", session_id="c", cwd="/w")
    copy.append(opaque)
    assert json.loads((tmp_path / "copy.jsonl").read_text().splitlines()[1]) == future
    # Entries appended after an unknown one chain onto it.
    assert loaded.append_session_info("after").parent_id == "f1"


def test_entry_ids_are_16_hex_digits_and_do_not_collide() -> None:
    ids = {new_entry_id() for _ in range(200_000)}
    assert len(ids) == 200_000
    sample = next(iter(ids))
    assert len(sample) == 16
    int(sample, 16)


def test_iso_timestamps_convert_to_epoch_milliseconds() -> None:
    assert iso_to_ms("1970-01-01T00:00:01.500Z") == 1500
    assert iso_to_ms("1970-01-01T00:00:01") == 1000
    now = iso_now()
    assert now.endswith("Z")
    assert len(now) == len("2026-01-02T03:04:05.678Z")
    assert abs(iso_to_ms(now) - iso_to_ms(iso_now())) < 5000
