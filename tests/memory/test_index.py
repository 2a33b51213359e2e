"""The memory index: keyword search, incremental re-index, freshness and reading lines."""

from __future__ import annotations

import json
import os
from pathlib import Path

import msgspec
import pytest

from nodmix.memory.chunking import chunk_markdown
from tests.memory.support import NOTES, make_index, write_notes


@pytest.fixture
def workspace(isolated_state: Path) -> Path:
    ws = isolated_state / "workspace"
    write_notes(ws)
    return ws


def test_a_reworded_question_finds_the_note_and_its_lines_first(
    isolated_state: Path, workspace: Path
) -> None:
    index = make_index(isolated_state, workspace)
    hits = index.search("when is my appointment at the dentist's?")
    assert hits[0].path == "memory/2026-11-18.md"
    assert (hits[0].start_line, hits[0].end_line) == (1, 5)
    assert "Dr. Reyes" in hits[0].snippet
    assert 0 < hits[0].score <= 1
    # Stemming: "replaced" and "brakes" match "replacing" and "brake".
    assert index.search("were the brakes replaced?")[0].path == "memory/2026-11-19.md"
    index.close()


def test_a_second_sync_reads_nothing_and_one_edit_reindexes_one_file(
    isolated_state: Path, workspace: Path
) -> None:
    index = make_index(isolated_state, workspace)
    first = index.sync()
    assert (first.scanned, first.indexed) == (4, 4)
    assert index.sync().indexed == 0
    note = workspace / "memory/2026-11-19.md"
    note.write_text(NOTES["memory/2026-11-19.md"] + "Booked the garage for Monday.\n")
    report = index.sync()
    assert (report.indexed, report.removed) == (1, 0)
    assert index.query("garage monday")[0].path == "memory/2026-11-19.md"
    index.close()


def test_a_touched_file_with_the_same_content_is_not_rechunked(
    isolated_state: Path, workspace: Path
) -> None:
    index = make_index(isolated_state, workspace)
    index.sync()
    note = workspace / "MEMORY.md"
    stat = note.stat()
    os.utime(note, ns=(stat.st_atime_ns, stat.st_mtime_ns + 5_000_000_000))
    assert index.sync().indexed == 0
    assert index.store.files()["MEMORY.md"].mtime_ns == stat.st_mtime_ns + 5_000_000_000
    index.close()


def test_editing_a_note_is_reflected_in_the_next_search(
    isolated_state: Path, workspace: Path
) -> None:
    index = make_index(isolated_state, workspace)
    assert index.search("lisbon")[0].path == "memory/2026-11-20.md"
    (workspace / "memory/2026-11-20.md").write_text("# 2026-11-20\n\nTrip to Porto instead.\n")
    assert index.search("lisbon") == []
    assert index.search("porto")[0].path == "memory/2026-11-20.md"
    (workspace / "memory/2026-11-20.md").unlink()
    assert index.search("porto") == []
    assert "memory/2026-11-20.md" not in index.store.files()
    index.close()


def test_a_large_index_skips_the_scan_but_reindexes_files_marked_changed(
    isolated_state: Path, workspace: Path
) -> None:
    # As if there were too many files to scan on every search, and no inotify.
    index = make_index(
        isolated_state, workspace, scan_every_search_files=2, rescan_seconds=3600.0, use_watch=False
    )
    index.sync()
    note = workspace / "memory/2026-11-20.md"
    note.write_text("# 2026-11-20\n\nTrip to Porto instead.\n")
    assert index.search("porto") == []  # an outside edit waits for the next scan
    index.mark_changed(["memory/2026-11-20.md"])
    assert index.search("porto")[0].path == "memory/2026-11-20.md"
    new = workspace / "memory/projects/garden.md"
    new.parent.mkdir()
    new.write_text("Plant the garlic in October.\n")
    index.mark_changed(["memory/projects/garden.md", "notes/elsewhere.md"])
    assert index.search("garlic")[0].path == "memory/projects/garden.md"
    index.close()


def test_only_memory_files_are_indexed(isolated_state: Path, workspace: Path) -> None:
    (workspace / "todo.md").write_text("lisbon lisbon lisbon\n")
    (workspace / "memory" / "image.txt").write_text("lisbon\n")
    index = make_index(isolated_state, workspace)
    assert {h.path for h in index.search("lisbon")} == {"memory/2026-11-20.md"}
    index.close()


def test_force_reindexes_everything(isolated_state: Path, workspace: Path) -> None:
    index = make_index(isolated_state, workspace)
    index.sync()
    assert index.sync(force=True).indexed == 4
    assert index.status()["files"] == 4
    index.close()


def test_read_returns_the_asked_lines_and_refuses_paths_outside_memory(
    isolated_state: Path, workspace: Path
) -> None:
    (workspace / "secret.md").write_text("not memory\n")
    index = make_index(isolated_state, workspace)
    text, first, last = index.read("memory/2026-11-18.md", 3, 2)
    assert (first, last) == (3, 4)
    assert text == "## Dentist\nBooked a dentist appointment for Thursday at 3pm with Dr. Reyes."
    for bad in ("secret.md", "../state/nodmix.json", "/etc/passwd", "memory/../secret.md"):
        with pytest.raises(FileNotFoundError):
            index.read(bad)
    index.close()


def test_an_empty_or_stop_word_query_returns_nothing_rather_than_failing(
    isolated_state: Path, workspace: Path
) -> None:
    index = make_index(isolated_state, workspace)
    assert index.search("   ") == []
    assert index.search('"*) OR NEAR(') == []
    # Only stop words: searched as they are rather than not at all.
    assert index.search("with")[0].path == "memory/2026-11-18.md"
    index.close()


def test_the_index_is_private_and_survives_reopening(isolated_state: Path, workspace: Path) -> None:
    index = make_index(isolated_state, workspace)
    index.sync()
    path = index.store.path
    index.close()
    assert path.stat().st_mode & 0o777 == 0o600
    again = make_index(isolated_state, workspace)
    assert again.sync().indexed == 0
    assert again.query("lentils")[0].path == "memory/2026-11-18.md"
    again.close()


def test_chunk_ranges_in_the_index_match_the_chunker(isolated_state: Path, workspace: Path) -> None:
    index = make_index(isolated_state, workspace)
    index.sync()
    rows = index.store.db.execute(
        "SELECT start_line, end_line FROM chunks WHERE path = 'memory/2026-11-18.md' ORDER BY id"
    ).fetchall()
    expected = chunk_markdown(NOTES["memory/2026-11-18.md"])
    assert rows == [(c.start_line, c.end_line) for c in expected]
    index.close()


def test_past_sessions_are_searchable_when_enabled(isolated_state: Path, workspace: Path) -> None:
    sessions = isolated_state / "agents" / "main" / "sessions"
    sessions.mkdir(parents=True)
    lines = [
        {"type": "session", "version": 3, "id": "s1"},
        {
            "type": "message",
            "message": {
                "role": "user",
                "content": [{"type": "text", "text": "My locker code at the gym is 4417."}],
            },
        },
        {
            "type": "message",
            "message": {"role": "assistant", "content": [{"type": "text", "text": "Noted."}]},
        },
    ]
    (sessions / "s1.jsonl").write_text("\n".join(json.dumps(x) for x in lines) + "\n{torn")
    without = make_index(isolated_state / "a", workspace)
    assert without.search("locker code") == []
    without.close()
    index = make_index(isolated_state, workspace, sessions=True)
    hit = index.search("gym locker")[0]
    assert (hit.path, hit.source, hit.start_line) == ("sessions/s1.jsonl", "sessions", 1)
    assert index.read("sessions/s1.jsonl")[0].startswith("User: My locker code")
    index.close()


def test_links_fifos_and_a_linked_memory_folder_are_never_read(
    isolated_state: Path, workspace: Path, tmp_path: Path
) -> None:
    """A sandboxed command can leave these in the workspace; the indexer runs on the host."""
    secret = tmp_path / "secret.md"
    secret.write_text("launch code swordfish\n", encoding="utf-8")
    (workspace / "memory" / "stolen.md").symlink_to(secret)
    os.mkfifo(workspace / "memory" / "blocker.md")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "note.md").write_text("swordfish again\n", encoding="utf-8")
    (workspace / "MEMORY.md").unlink(missing_ok=True)
    (workspace / "MEMORY.md").symlink_to(secret)
    index = make_index(isolated_state, workspace)
    assert index.search("swordfish") == []
    paths = {hit.path for hit in index.search("dentist brakes")}
    assert "memory/stolen.md" not in paths and "memory/blocker.md" not in paths
    with pytest.raises(FileNotFoundError):
        index.read("memory/stolen.md")
    index.close()
    linked = isolated_state / "linked-ws"
    linked.mkdir()
    (linked / "memory").symlink_to(elsewhere)
    other = make_index(isolated_state, linked)
    assert other.search("swordfish") == []
    other.close()


def test_a_flood_of_notes_is_indexed_only_up_to_the_file_cap(
    isolated_state: Path, workspace: Path
) -> None:
    flood = workspace / "memory" / "flood"
    flood.mkdir()
    for i in range(60):
        (flood / f"n{i:03}.md").write_text(f"note {i} about zebras\n")
    index = make_index(isolated_state, workspace)
    index.roots = msgspec.structs.replace(index.roots, max_files=20)
    report = index.sync()
    assert report.scanned <= 21  # MEMORY.md and at most 20 entries of memory/
    assert index.status()["files"] == report.scanned
    extra = flood / "late.md"
    extra.write_text("late zebras\n")
    index.mark_changed(["memory/flood/late.md"])
    index.search("zebras")
    assert index.status()["files"] == report.scanned  # a marked file does not pass the cap
    index.close()
