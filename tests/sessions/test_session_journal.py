"""The session store's change journal: cheap appends, crash-safe replay, compaction."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import msgspec
import pytest

from nodmix.sessions import SessionManager
from nodmix.sessions import store as store_module
from nodmix.sessions.store import SessionStore, StoreData, new_session_entry


def _store(state: Path) -> SessionStore:
    return SessionStore.for_agent(state, "main")


def _add(key: str, session_id: str) -> Callable[[StoreData], None]:
    def change(data: StoreData) -> None:
        data[key] = new_session_entry(session_id, f"{session_id}.jsonl", now=1000)

    return change


def _remove(key: str) -> Callable[[StoreData], None]:
    def change(data: StoreData) -> None:
        del data[key]

    return change


def test_changes_after_the_first_are_appended_without_rewriting_the_store_file(
    isolated_state: Path,
) -> None:
    store = _store(isolated_state)
    store.update(_add("agent:main:a", "s1"))  # a new store starts with the full file
    first = os.stat(store.path)
    for n in range(20):
        store.update(_add(f"agent:main:b{n}", f"t{n}"))
    after = os.stat(store.path)
    assert (after.st_ino, after.st_size) == (first.st_ino, first.st_size)
    lines = store.journal_path.read_bytes().splitlines()
    assert len(lines) == 20
    assert msgspec.json.decode(lines[0])["key"] == "agent:main:b0"
    assert len(_store(isolated_state).load()) == 21


def test_a_fresh_reader_replays_additions_changes_and_removals_in_order(
    isolated_state: Path,
) -> None:
    writer = _store(isolated_state)
    writer.update(_add("agent:main:a", "s1"))
    writer.update(_add("agent:main:b", "s2"))
    writer.update_entry("agent:main:a", lambda e: msgspec.structs.replace(e, label="work"))
    writer.update(_remove("agent:main:b"))
    data = _store(isolated_state).load()
    assert list(data) == ["agent:main:a"]
    assert data["agent:main:a"].label == "work"


def test_a_torn_last_line_is_ignored_by_readers_and_cut_off_by_the_next_writer(
    isolated_state: Path,
) -> None:
    store = _store(isolated_state)
    store.update(_add("agent:main:a", "s1"))
    store.update(_add("agent:main:b", "s2"))
    with store.journal_path.open("ab") as f:  # a writer died in the middle of an append
        f.write(b'{"key": "agent:main:c", "entry": {"sessi')
    assert sorted(_store(isolated_state).load()) == ["agent:main:a", "agent:main:b"]
    _store(isolated_state).update(_add("agent:main:d", "s4"))
    assert sorted(_store(isolated_state).load()) == ["agent:main:a", "agent:main:b", "agent:main:d"]
    assert all(msgspec.json.decode(line) for line in store.journal_path.read_bytes().splitlines())


def test_compact_folds_the_journal_into_the_store_file(isolated_state: Path) -> None:
    store = _store(isolated_state)
    store.update(_add("agent:main:a", "s1"))
    store.update(_add("agent:main:b", "s2"))
    assert store.compact() is True
    assert not store.journal_path.exists()
    assert sorted(msgspec.json.decode(store.path.read_bytes())) == ["agent:main:a", "agent:main:b"]
    assert store.compact() is False  # nothing left to fold in
    assert sorted(_store(isolated_state).load()) == ["agent:main:a", "agent:main:b"]


def test_a_journal_left_over_from_a_crash_during_compaction_replays_harmlessly(
    isolated_state: Path,
) -> None:
    store = _store(isolated_state)
    store.update(_add("agent:main:a", "s1"))
    store.update(_add("agent:main:b", "s2"))
    store.update(_remove("agent:main:a"))
    leftover = store.journal_path.read_bytes()
    store.compact()
    store.journal_path.write_bytes(leftover)  # the crash came before the journal was removed
    assert list(_store(isolated_state).load()) == ["agent:main:b"]


def test_the_journal_is_compacted_once_it_outgrows_its_budget(
    isolated_state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(store_module, "JOURNAL_COMPACT_BYTES", 2048)
    store = _store(isolated_state)
    for n in range(40):
        store.update(_add(f"agent:main:k{n}", f"s{n}"))
        journal = store.journal_path.stat().st_size if store.journal_path.exists() else 0
        # At most one change past the budget (the store file's size, once that is larger).
        assert journal < max(2048, store.path.stat().st_size) + 300
    assert len(msgspec.json.decode(store.path.read_bytes())) > 1  # the file was rewritten
    assert len(_store(isolated_state).load()) == 40


def test_closing_the_manager_leaves_a_complete_store_file(isolated_state: Path) -> None:
    manager = SessionManager(isolated_state)
    for name in ("one", "two", "three"):
        manager.open(name)
    store = manager.store("main")
    assert store.journal_path.exists()
    manager.close()
    assert not store.journal_path.exists()
    assert sorted(msgspec.json.decode(store.path.read_bytes())) == [
        "agent:main:one",
        "agent:main:three",
        "agent:main:two",
    ]
