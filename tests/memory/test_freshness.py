"""An edit made outside Nodmix is in the next search: by inotify events, or by the mtime scan
where there is no watch; including folders that come and go and edits that keep the stamp."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from nodmix.memory import watch as watch_module
from nodmix.memory.index import MemoryIndex
from nodmix.memory.watch import open_watch
from tests.memory.support import make_index, write_notes

HAVE_INOTIFY = (probe := open_watch()) is not None
if probe is not None:
    probe.close()


@pytest.fixture(params=["watch", "scan"])
def index(request: pytest.FixtureRequest, isolated_state: Path) -> MemoryIndex:
    workspace = isolated_state / "workspace"
    write_notes(workspace)
    if request.param == "watch":
        if not HAVE_INOTIFY:
            pytest.skip("no inotify here")
        # As if the memory were too large to scan on every search: only events keep it fresh.
        made = make_index(
            isolated_state, workspace, scan_every_search_files=0, rescan_seconds=3600.0
        )
    else:
        made = make_index(isolated_state, workspace, use_watch=False)
    made.sync()
    assert made.watching == (request.param == "watch")
    return made


def _paths(index: MemoryIndex, query: str) -> list[str]:
    return [hit.path for hit in index.search(query)]


def test_added_edited_and_deleted_notes_are_in_the_next_search(index: MemoryIndex) -> None:
    notes = index.roots.workspace / "memory"
    (notes / "2026-11-21.md").write_text("Plant the garlic in October.\n")
    assert _paths(index, "garlic") == ["memory/2026-11-21.md"]
    (notes / "2026-11-21.md").write_text("Plant the onions in October.\n")
    assert _paths(index, "garlic") == []
    assert _paths(index, "onions") == ["memory/2026-11-21.md"]
    (notes / "2026-11-21.md").unlink()
    assert _paths(index, "onions") == []
    (index.roots.workspace / "MEMORY.md").write_text("Prefers mint tea.\n")
    assert _paths(index, "mint") == ["MEMORY.md"]
    index.close()


def test_a_renamed_note_is_found_under_its_new_name_only(index: MemoryIndex) -> None:
    notes = index.roots.workspace / "memory"
    (notes / "2026-11-20.md").rename(notes / "trip.md")
    assert _paths(index, "lisbon") == ["memory/trip.md"]
    assert "memory/2026-11-20.md" not in index.store.files()
    index.close()


def test_folders_of_notes_that_come_move_and_go_are_followed(index: MemoryIndex) -> None:
    notes = index.roots.workspace / "memory"
    garden = notes / "projects" / "garden"
    garden.mkdir(parents=True)
    (garden / "plan.md").write_text("Plant the garlic in October.\n")
    assert _paths(index, "garlic") == ["memory/projects/garden/plan.md"]
    # A note written into the new folder after the search is seen too (it is watched now).
    (garden / "later.md").write_text("Mulch the raspberries.\n")
    assert _paths(index, "raspberries") == ["memory/projects/garden/later.md"]
    (notes / "projects").rename(notes / "archive")
    assert set(_paths(index, "garlic raspberries")) == {
        "memory/archive/garden/plan.md",
        "memory/archive/garden/later.md",
    }
    (notes / "archive" / "garden" / "plan.md").write_text("Plant the shallots.\n")
    assert _paths(index, "shallots") == ["memory/archive/garden/plan.md"]
    for note in (notes / "archive" / "garden").iterdir():
        note.unlink()
    (notes / "archive" / "garden").rmdir()
    assert _paths(index, "shallots raspberries") == []
    # The same folder made again is a new folder: what is written into it is seen too.
    (notes / "archive" / "garden").mkdir()
    assert _paths(index, "shallots") == []
    (notes / "archive" / "garden" / "again.md").write_text("Plant the shallots.\n")
    assert _paths(index, "shallots") == ["memory/archive/garden/again.md"]
    index.close()


def test_a_second_edit_within_one_timestamp_tick_and_the_same_size_is_seen(
    index: MemoryIndex,
) -> None:
    """Coarse timestamps: the second write leaves mtime and size as the first left them."""
    note = index.roots.workspace / "memory" / "2026-11-21.md"
    note.write_text("Plant the garlic.\n")
    assert _paths(index, "garlic") == ["memory/2026-11-21.md"]
    first = note.stat()
    note.write_text("Plant the tomato.\n")  # same length
    os.utime(note, ns=(first.st_atime_ns, first.st_mtime_ns))
    assert (note.stat().st_mtime_ns, note.stat().st_size) == (first.st_mtime_ns, first.st_size)
    assert _paths(index, "tomato") == ["memory/2026-11-21.md"]
    assert _paths(index, "garlic") == []
    index.close()


def test_an_old_unchanged_note_keeps_its_stamp_and_is_not_read_again(
    index: MemoryIndex,
) -> None:
    note = index.roots.workspace / "memory" / "2026-11-19.md"
    hour_ago = note.stat().st_mtime_ns - 3_600_000_000_000
    os.utime(note, ns=(hour_ago, hour_ago))
    index.sync()
    assert index.store.files()["memory/2026-11-19.md"].mtime_ns == hour_ago
    assert index.sync().indexed == 0
    # Recently written notes are read again (to compare hashes) but not re-chunked.
    assert index.sync().indexed == 0
    index.close()


@pytest.mark.skipif(not HAVE_INOTIFY, reason="no inotify here")
def test_a_memory_folder_made_after_the_first_scan_is_watched_from_then_on(
    isolated_state: Path,
) -> None:
    workspace = isolated_state / "workspace"
    workspace.mkdir()
    index = make_index(isolated_state, workspace, scan_every_search_files=0, rescan_seconds=3600.0)
    assert index.search("garlic") == []
    assert index.watching
    (workspace / "memory").mkdir()
    (workspace / "memory" / "a.md").write_text("Plant the garlic.\n")
    assert _paths(index, "garlic") == ["memory/a.md"]
    (workspace / "memory" / "b.md").write_text("Plant the onion.\n")
    assert _paths(index, "onion") == ["memory/b.md"]
    index.close()


@pytest.mark.skipif(not HAVE_INOTIFY, reason="no inotify here")
def test_when_the_watch_loses_events_the_next_search_scans_everything(
    isolated_state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    workspace = isolated_state / "workspace"
    write_notes(workspace)
    index = make_index(isolated_state, workspace, scan_every_search_files=0, rescan_seconds=3600.0)
    index.sync()
    monkeypatch.setattr(watch_module, "MAX_EVENT_BYTES", 1)  # any event overflows
    (workspace / "memory" / "2026-11-20.md").write_text("Trip to Porto instead.\n")
    report = index.refresh()
    assert report is not None and (report.scanned, report.indexed) == (4, 1)
    monkeypatch.undo()
    assert _paths(index, "porto") == ["memory/2026-11-20.md"]
    (workspace / "MEMORY.md").write_text("Prefers mint tea.\n")
    report = index.refresh()
    assert report is not None and (report.scanned, report.indexed) == (1, 1)  # events again
    index.close()


@pytest.mark.skipif(not HAVE_INOTIFY, reason="no inotify here")
def test_a_folder_that_cannot_be_watched_yet_means_scanning_until_it_can(
    isolated_state: Path,
) -> None:
    workspace = isolated_state / "workspace"
    write_notes(workspace)
    index = make_index(isolated_state, workspace, sessions=True)
    index.sync()
    assert not index.watching  # no transcripts folder yet: it cannot be watched
    assert index.roots.sessions_dir is not None
    index.roots.sessions_dir.mkdir(parents=True)
    (workspace / "memory" / "2026-11-20.md").write_text("Trip to Porto instead.\n")
    assert _paths(index, "porto") == ["memory/2026-11-20.md"]  # found by the scan
    assert index.watching
    index.close()
