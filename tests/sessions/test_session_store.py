from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import msgspec
import pytest

from nodmix.errors import SessionError
from nodmix.sessions import store as store_module
from nodmix.sessions.store import SessionEntry, SessionStore, StoreData, new_session_entry


def _store(state: Path) -> SessionStore:
    return SessionStore.for_agent(state, "main")


def _add(key: str, session_id: str) -> Callable[[StoreData], None]:
    def change(data: StoreData) -> None:
        data[key] = new_session_entry(session_id, f"{session_id}.jsonl", now=1000)

    return change


def test_store_lives_in_the_agent_sessions_directory(isolated_state: Path) -> None:
    store = _store(isolated_state)
    assert store.path == isolated_state / "agents/main/sessions/sessions.json"
    assert store.lock_path.name == "sessions.json.lock"


def test_updates_are_saved_as_camel_case_json_and_read_by_a_fresh_store(
    isolated_state: Path,
) -> None:
    store = _store(isolated_state)
    assert store.load() == {}
    store.update(_add("agent:main:main", "s1"))
    assert msgspec.json.decode(store.path.read_bytes()) == {
        "agent:main:main": {
            "sessionId": "s1",
            "sessionFile": "s1.jsonl",
            "createdAt": 1000,
            "updatedAt": 1000,
            "lastInteractionAt": 1000,
            "inputTokens": 0,
            "outputTokens": 0,
            "totalTokens": 0,
            "contextTokens": 0,
            "compactionCount": 0,
            "model": None,
            "label": None,
            "spawnedBy": None,
        }
    }
    entry = _store(isolated_state).get("agent:main:main")
    assert entry == new_session_entry("s1", "s1.jsonl", now=1000)
    assert not list(store.path.parent.glob(".*.tmp"))


def test_update_entry_changes_one_entry_and_reports_missing_keys(isolated_state: Path) -> None:
    store = _store(isolated_state)
    store.update(_add("agent:main:a", "s1"))
    updated = store.update_entry(
        "agent:main:a", lambda e: msgspec.structs.replace(e, label="work", input_tokens=7)
    )
    assert updated is not None
    assert (updated.label, updated.input_tokens) == ("work", 7)
    assert store.update_entry("agent:main:nope", lambda e: e) is None
    assert _store(isolated_state).get("agent:main:a") == updated


def test_a_store_sees_changes_written_by_another_store_object(isolated_state: Path) -> None:
    reader, writer = _store(isolated_state), _store(isolated_state)
    assert reader.get("agent:main:a") is None
    writer.update(_add("agent:main:a", "s1"))
    entry = reader.get("agent:main:a")
    assert entry is not None
    assert entry.session_id == "s1"


def test_loaded_dict_is_a_copy(isolated_state: Path) -> None:
    store = _store(isolated_state)
    store.update(_add("agent:main:a", "s1"))
    data = store.load()
    data.clear()
    assert store.get("agent:main:a") is not None


def test_failed_change_leaves_the_store_as_it_was(isolated_state: Path) -> None:
    store = _store(isolated_state)
    store.update(_add("agent:main:a", "s1"))
    before = store.path.read_bytes()

    def fail(data: StoreData) -> None:
        data.clear()
        raise SessionError("refused")

    with pytest.raises(SessionError):
        store.update(fail)
    assert store.path.read_bytes() == before


def test_corrupt_store_is_an_error_naming_the_file_and_is_left_in_place(
    isolated_state: Path,
) -> None:
    store = _store(isolated_state)
    store.path.parent.mkdir(parents=True)
    store.path.write_text('{"agent:main:main": {"sessionId": ')
    with pytest.raises(SessionError) as info:
        store.get("agent:main:main")
    assert str(store.path) in str(info.value)
    assert "repair-store" in str(info.value)
    with pytest.raises(SessionError):
        store.update(_add("agent:main:x", "s2"))
    assert store.path.read_text() == '{"agent:main:main": {"sessionId": '


def test_quarantine_moves_a_corrupt_store_aside_so_a_new_one_can_start(
    isolated_state: Path,
) -> None:
    store = _store(isolated_state)
    store.path.parent.mkdir(parents=True)
    store.path.write_text("[1, 2")
    moved = store.quarantine()
    assert moved is not None
    assert moved.name.startswith("sessions.json.corrupt-")
    assert moved.read_text() == "[1, 2"
    assert store.load() == {}
    store.update(_add("agent:main:a", "s1"))
    assert store.get("agent:main:a") is not None


def test_quarantine_leaves_a_valid_or_missing_store_alone(isolated_state: Path) -> None:
    store = _store(isolated_state)
    assert store.quarantine() is None
    store.update(_add("agent:main:a", "s1"))
    assert store.quarantine() is None
    assert store.get("agent:main:a") is not None


def test_waiting_too_long_for_the_lock_is_a_session_error(
    isolated_state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(store_module, "LOCK_TIMEOUT_S", 0.05)
    store = _store(isolated_state)
    store.path.parent.mkdir(parents=True)
    holder = os.open(store.lock_path, os.O_RDWR | os.O_CREAT)
    fcntl.flock(holder, fcntl.LOCK_EX)  # another open file description: conflicts like a process
    try:
        with pytest.raises(SessionError) as info:
            store.update(_add("agent:main:a", "s1"))
        assert "timed out" in str(info.value)
    finally:
        os.close(holder)
    store.update(_add("agent:main:a", "s1"))


_WORKER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    import msgspec
    from nodmix.sessions.store import SessionStore, new_session_entry

    store = SessionStore(Path(sys.argv[1]), durable=False)
    worker, rounds = sys.argv[2], int(sys.argv[3])
    sys.stdin.readline()  # start together, so the two processes really contend

    def bump(data):
        shared = data.get("agent:main:shared") or new_session_entry("s", "s.jsonl")
        data["agent:main:shared"] = msgspec.structs.replace(
            shared, input_tokens=shared.input_tokens + 1
        )
        data[f"agent:main:{worker}-{i}"] = new_session_entry(f"{worker}-{i}", "f.jsonl")

    for i in range(rounds):
        store.update(bump)
    print("done", flush=True)
    """
)


@pytest.mark.integration
def test_two_processes_doing_read_modify_writes_lose_no_updates(isolated_state: Path) -> None:
    path = isolated_state / "agents/main/sessions/sessions.json"
    rounds = 150
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _WORKER, str(path), name, str(rounds)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for name in ("a", "b")
    ]
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    for proc in procs:
        out, _ = proc.communicate(timeout=60)
        assert proc.returncode == 0
        assert out.strip() == "done"
    data = SessionStore(path).load()
    shared = data["agent:main:shared"]
    assert isinstance(shared, SessionEntry)
    assert shared.input_tokens == 2 * rounds
    assert len(data) == 1 + 2 * rounds
