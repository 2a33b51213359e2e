from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import pytest

from nodmix.errors import TranscriptError
from nodmix.invocation import nodmix_command
from nodmix.messages import ToolResultMessage
from nodmix.sessions.entries import MessageEntry, SessionInfoEntry
from nodmix.sessions.transcript import Transcript, count_messages
from tests.sessions.sessions_builders import assistant, result, user


def _conversation(path: Path) -> Transcript:
    transcript = Transcript.create(path, session_id="s1", cwd="/work")
    transcript.append_message(user("hi"))
    transcript.append_message(assistant("looking", "c1"))
    transcript.append_message(result("c1", "found"))
    transcript.append_message(assistant("done"))
    return transcript


def test_appended_entries_reload_identically(tmp_path: Path) -> None:
    path = tmp_path / "s1.jsonl"
    written = _conversation(path)
    written.sync()
    loaded = Transcript.load(path)
    assert loaded.header == written.header
    assert loaded.entries == written.entries
    assert loaded.leaf_id == written.leaf_id


def test_each_append_is_one_complete_line_chained_to_the_previous_entry(tmp_path: Path) -> None:
    path = tmp_path / "s1.jsonl"
    transcript = _conversation(path)
    data = path.read_bytes()
    lines = data.splitlines()
    assert data.endswith(b"\n")
    assert len(lines) == 5
    parsed = [json.loads(line) for line in lines]
    assert parsed[0]["type"] == "session"
    assert [p["parentId"] for p in parsed[1:]] == [None, *(e.id for e in transcript.entries[:-1])]
    assert len({p["id"] for p in parsed[1:]}) == 4
    assert transcript.size_bytes == len(data)


def test_torn_last_line_is_truncated_and_nothing_before_it_is_lost(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "s1.jsonl"
    written = _conversation(path)
    intact = path.read_bytes()
    # Simulate a crash halfway through an append: half a line, no newline.
    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    os.write(fd, b'{"type":"message","id":"torn","parentId":"x","timestamp":"2026-01-0')
    os.close(fd)

    with caplog.at_level(logging.WARNING, logger="nodmix.sessions.transcript"):
        loaded = Transcript.load(path)

    assert loaded.entries == written.entries
    assert path.read_bytes() == intact
    assert "repaired a torn last line" in caplog.text
    loaded.append_message(user("after the crash"))
    reloaded = Transcript.load(path)
    assert len(reloaded.entries) == 5
    assert reloaded.entries[-1].parent_id == written.entries[-1].id


def test_zero_filled_tail_after_power_loss_is_repaired(tmp_path: Path) -> None:
    path = tmp_path / "s1.jsonl"
    written = _conversation(path)
    with path.open("ab") as fh:
        fh.write(b"\x00" * 300)
    assert Transcript.load(path).entries == written.entries
    assert path.read_bytes().endswith(b"}\n")


def test_terminated_but_invalid_last_line_is_treated_as_torn(tmp_path: Path) -> None:
    path = tmp_path / "s1.jsonl"
    written = _conversation(path)
    with path.open("ab") as fh:
        fh.write(b'{"type":"mess\n')
    assert Transcript.load(path).entries == written.entries


def test_last_entry_missing_only_its_newline_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "s1.jsonl"
    written = _conversation(path)
    path.write_bytes(path.read_bytes().rstrip(b"\n"))
    loaded = Transcript.load(path)
    assert loaded.entries == written.entries
    loaded.append_message(user("next"))
    assert len(Transcript.load(path).entries) == 5


def test_read_only_load_ignores_a_torn_tail_without_touching_the_file(tmp_path: Path) -> None:
    path = tmp_path / "s1.jsonl"
    written = _conversation(path)
    with path.open("ab") as fh:
        fh.write(b'{"type":"mes')
    before = path.read_bytes()
    loaded = Transcript.load(path, read_only=True)
    assert loaded.entries == written.entries
    assert path.read_bytes() == before
    with pytest.raises(TranscriptError) as info:
        loaded.append_message(user("no"))
    assert "read-only" in str(info.value)


def test_invalid_middle_line_is_skipped_and_recorded_and_the_file_left_alone(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "s1.jsonl"
    _conversation(path)
    lines = path.read_bytes().splitlines(keepends=True)
    lines[2] = b'{"type":"message", broken\n'
    path.write_bytes(b"".join(lines))
    with caplog.at_level(logging.WARNING):
        loaded = Transcript.load(path)
        Transcript.load(path)  # a second load does not log the same line again
    assert [(s.line, s.reason) for s in loaded.skipped] == [(3, "not valid JSON")]
    assert len(loaded.entries) == 3
    warnings = [r.getMessage() for r in caplog.records if "skipped unreadable" in r.getMessage()]
    assert warnings == [
        f"{path}: skipped unreadable line 3 (not valid JSON);"
        f" `{nodmix_command()} sessions repair {path.stem}` rewrites the file"
    ]
    assert path.read_bytes() == b"".join(lines)  # nothing was dropped or rewritten
    loaded.append_message(user("still usable"))
    assert Transcript.load(path).entries[-1].parent_id == loaded.entries[-2].id


def test_middle_line_that_is_not_a_valid_entry_is_skipped(tmp_path: Path) -> None:
    path = tmp_path / "s1.jsonl"
    _conversation(path)
    lines = path.read_bytes().splitlines(keepends=True)
    entry = json.loads(lines[1])
    del entry["id"]
    lines[1] = json.dumps(entry).encode() + b"\n"
    path.write_bytes(b"".join(lines))
    (skipped,) = Transcript.load(path).skipped
    assert skipped.line == 2 and skipped.reason.startswith("not a valid entry")
    assert "id" in skipped.reason


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"parentId": None, "timestamp": "t"}, "missing its entry id"),
        ({"id": "x", "parentId": 5, "timestamp": "t"}, "has an invalid parentId"),
        ({"id": "x", "parentId": None}, "missing its timestamp"),
    ],
)
def test_unknown_entry_without_base_fields_is_skipped(
    tmp_path: Path, fields: dict[str, object], problem: str
) -> None:
    path = tmp_path / "s1.jsonl"
    transcript = _conversation(path)
    lines = path.read_bytes().splitlines(keepends=True)
    lines.insert(1, json.dumps({"type": "future", **fields}).encode() + b"\n")
    path.write_bytes(b"".join(lines))
    loaded = Transcript.load(path)
    assert [(s.line, s.reason) for s in loaded.skipped] == [(2, problem)]
    assert [e.id for e in loaded.entries] == [e.id for e in transcript.entries]


def test_unsupported_version_is_rejected(tmp_path: Path) -> None:
    path = tmp_path / "s1.jsonl"
    path.write_text('{"type":"session","version":2,"id":"s","timestamp":"t","cwd":"/"}\n')
    with pytest.raises(TranscriptError) as info:
        Transcript.load(path)
    assert "unsupported session version 2" in str(info.value)
    assert str(path) in str(info.value)


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (b"", "not a complete session header"),
        (b'{"type":"session","vers', "not a complete session header"),
        (b'{"type":"message","id":"x"}\n', "first line is not a valid session header"),
        (b"not json\n", "first line is not a valid session header"),
        (b'{"type":"session","version":3,"id":"s"}\n', "invalid session header"),
    ],
)
def test_missing_or_bad_header_is_rejected(tmp_path: Path, content: bytes, problem: str) -> None:
    path = tmp_path / "s1.jsonl"
    path.write_bytes(content)
    with pytest.raises(TranscriptError) as info:
        Transcript.load(path)
    assert problem in str(info.value)


def test_missing_file_is_a_transcript_error(tmp_path: Path) -> None:
    with pytest.raises(TranscriptError) as info:
        Transcript.load(tmp_path / "nope.jsonl")
    assert "not found" in str(info.value)


def test_create_never_overwrites_an_existing_transcript(tmp_path: Path) -> None:
    path = tmp_path / "sessions" / "s1.jsonl"
    _conversation(path)
    before = path.read_bytes()
    with pytest.raises(TranscriptError):
        Transcript.create(path, session_id="s1", cwd="/other")
    assert path.read_bytes() == before
    assert [p.name for p in path.parent.iterdir()] == ["s1.jsonl"]  # no temp file left behind


def test_refresh_reads_only_complete_lines_appended_by_another_writer(tmp_path: Path) -> None:
    path = tmp_path / "s1.jsonl"
    writer = _conversation(path)
    reader = Transcript.load(path, read_only=True)
    assert reader.refresh() == []
    entry = writer.append_session_info("title")
    with path.open("ab") as fh:
        fh.write(b'{"type":"sess')  # another append still in progress
    assert reader.refresh() == [entry]
    assert reader.refresh() == []
    assert reader.entries == writer.entries


def test_two_writers_on_one_file_keep_a_single_parent_chain(tmp_path: Path) -> None:
    path = tmp_path / "s1.jsonl"
    first = _conversation(path)
    second = Transcript.load(path)
    a = first.append_message(user("from first"))
    b = second.append_message(user("from second"))
    c = first.append_message(user("first again"))
    assert b.parent_id == a.id
    assert c.parent_id == b.id
    entries = Transcript.load(path).entries
    assert [e.parent_id for e in entries[1:]] == [e.id for e in entries[:-1]]


def test_append_after_close_reopens_the_file(tmp_path: Path) -> None:
    path = tmp_path / "s1.jsonl"
    transcript = _conversation(path)
    transcript.close()
    transcript.append_message(user("again"))
    assert len(Transcript.load(path).entries) == 5


def test_unencodable_entry_is_a_transcript_error_and_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "s1.jsonl"
    transcript = _conversation(path)
    before = path.read_bytes()
    bad = ToolResultMessage(
        tool_call_id="c9", tool_name="t", content=(), is_error=False, details={1j: "complex"}
    )
    with pytest.raises(TranscriptError):
        transcript.append_message(bad)
    assert path.read_bytes() == before


def test_count_messages_skips_nested_code_mode_projections(tmp_path: Path) -> None:
    path = tmp_path / "s1.jsonl"
    transcript = _conversation(path)
    transcript.append_message(assistant("", "n1"), parent_tool_call_id="c1")
    transcript.append_session_info("t")
    assert count_messages(path) == 4
    assert sum(isinstance(e, MessageEntry) for e in transcript.entries) == 5
    assert isinstance(transcript.entries[-1], SessionInfoEntry)


def test_a_failed_append_leaves_no_partial_line_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "s1.jsonl"
    transcript = _conversation(path)
    before = path.read_bytes()
    real_write = os.write
    calls: list[int] = []

    def disk_fills_up(fd: int, data: bytes) -> int:
        calls.append(len(data))
        if len(calls) == 1:
            return real_write(fd, data[: len(data) // 2])  # a short write...
        raise OSError(28, "No space left on device")  # ...then the disk is full

    monkeypatch.setattr(os, "write", disk_fills_up)
    with pytest.raises(TranscriptError) as info:
        transcript.append_message(user("lost"))
    monkeypatch.undo()
    assert "No space left" in str(info.value)
    assert path.read_bytes() == before
    transcript.append_message(user("kept"))
    assert len(Transcript.load(path).entries) == 5


def test_appending_after_another_writer_left_a_partial_line_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "s1.jsonl"
    transcript = _conversation(path)
    with path.open("ab") as fh:
        fh.write(b'{"type":"mess')
    with pytest.raises(TranscriptError) as info:
        transcript.append_message(user("would glue onto the partial line"))
    assert "incomplete line" in str(info.value)
    assert path.read_bytes().endswith(b'{"type":"mess')
    assert len(Transcript.load(path).entries) == 4  # reopening repairs it


def test_count_messages_skips_unreadable_lines_instead_of_failing(tmp_path: Path) -> None:
    path = tmp_path / "s1.jsonl"
    _conversation(path)
    with path.open("ab") as fh:
        fh.write(b"not json\n")
        fh.write(b'{"type":"message","id":"x","parentId":null,"timestamp":"t"}\n')
    assert count_messages(path) == 5
    assert count_messages(tmp_path / "missing.jsonl") == 0
