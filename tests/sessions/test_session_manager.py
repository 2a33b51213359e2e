from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest

from nodmix.errors import SessionError
from nodmix.messages import Usage, user_message
from nodmix.sessions.entries import MessageEntry
from nodmix.sessions.manager import SessionManager
from nodmix.sessions.transcript import Transcript, move_to_archive
from tests.sessions.sessions_builders import assistant, result, user


def _manager(state: Path, **kwargs: object) -> SessionManager:
    return SessionManager(state, durable=False, **kwargs)  # type: ignore[arg-type]


def test_open_creates_the_store_entry_and_a_transcript_with_header(
    isolated_state: Path, tmp_path: Path
) -> None:
    workspace = tmp_path / "ws"
    session = _manager(isolated_state).open("work", workspace=workspace)
    assert (session.key, session.agent_id) == ("agent:main:work", "main")
    path = isolated_state / "agents/main/sessions" / f"{session.session_id}.jsonl"
    assert session.transcript.path == path
    header = json.loads(path.read_text())
    assert header["type"] == "session"
    assert header["version"] == 3
    assert header["id"] == session.session_id
    assert header["cwd"] == str(workspace)
    stored = _manager(isolated_state).store("main").get("agent:main:work")
    assert stored == session.entry
    assert stored is not None
    assert stored.session_file == path.name


def test_default_workspace_is_recorded_when_none_is_given(isolated_state: Path) -> None:
    session = _manager(isolated_state).open("agent:ops:x")
    assert session.transcript.header.cwd == str(isolated_state / "workspace")
    assert session.transcript.path.parent == isolated_state / "agents/ops/sessions"


def test_opening_an_unknown_session_without_create_is_a_session_error(
    isolated_state: Path,
) -> None:
    with pytest.raises(SessionError) as info:
        _manager(isolated_state).open("nope", create=False)
    assert str(info.value) == "no session agent:main:nope"


def test_a_read_only_manager_never_creates_sessions(isolated_state: Path) -> None:
    with pytest.raises(SessionError):
        _manager(isolated_state, read_only=True).open("work")
    assert not (isolated_state / "agents").exists()


def test_open_returns_the_cached_session_and_a_new_manager_reloads_it(
    isolated_state: Path,
) -> None:
    manager = _manager(isolated_state)
    session = manager.open("work")
    session.append_message(user("hi"))
    session.append_message(assistant("hello"))
    assert manager.open("agent:main:work") is session
    reloaded = _manager(isolated_state).open("work", create=False)
    assert reloaded is not session
    assert reloaded.session_id == session.session_id
    assert reloaded.entries == session.entries


def test_reset_starts_a_new_transcript_and_keeps_the_old_file(isolated_state: Path) -> None:
    manager = _manager(isolated_state)
    old = manager.open("work")
    old.append_message(user("old conversation"))
    old.update_usage(Usage(input=100, output=10))
    old.set_label("my label")
    new = manager.reset("work")
    assert new.session_id != old.session_id
    assert new.entries == []
    assert old.transcript.path.exists()
    assert len(Transcript.load(old.transcript.path).entries) == 1
    assert manager.open("work") is new
    assert (new.entry.total_tokens, new.entry.label) == (0, "my label")
    assert new.transcript.header.parent_session is None


def test_a_reset_by_another_process_is_picked_up_on_the_next_open(isolated_state: Path) -> None:
    gateway, cli = _manager(isolated_state), _manager(isolated_state)
    before = gateway.open("work")
    after = cli.reset("work")
    assert gateway.open("work").session_id == after.session_id != before.session_id
    # The stale session's usage no longer lands on the new session.
    assert before.update_usage(Usage(input=5)) == before.entry
    entry = cli.store("main").get("agent:main:work")
    assert entry is not None
    assert entry.input_tokens == 0


def test_rotate_continues_the_session_in_a_successor_transcript(isolated_state: Path) -> None:
    manager = _manager(isolated_state)
    old = manager.open("work")
    old.update_usage(Usage(input=100, output=10))
    successor = manager.rotate("work")
    assert successor.transcript.header.parent_session == old.transcript.path.name
    assert successor.entry.session_file == successor.transcript.path.name
    assert successor.entry.input_tokens == 100
    assert successor.record_compaction(context_tokens=2000).compaction_count == 1
    assert manager.open("work", create=False) is successor
    with pytest.raises(SessionError):
        manager.rotate("never-opened")


def test_update_usage_accumulates_tokens_and_tracks_the_latest_context(
    isolated_state: Path,
) -> None:
    session = _manager(isolated_state).open("work")
    session.update_usage(Usage(input=100, output=20, total_tokens=120), model="openai/gpt-5")
    entry = session.update_usage(Usage(input=150, output=30, cache_read=50))
    assert (entry.input_tokens, entry.output_tokens, entry.total_tokens) == (250, 50, 300)
    assert entry.context_tokens == 230
    assert entry.model == "openai/gpt-5"
    assert entry.last_interaction_at >= entry.created_at
    assert session.update_usage(context_tokens=42).context_tokens == 42
    session.flush()
    assert _manager(isolated_state).store("main").get("agent:main:work") == session.entry


def test_usage_counters_are_coalesced_and_written_on_close(isolated_state: Path) -> None:
    manager = _manager(isolated_state)
    session = manager.open("work")
    for _ in range(6):
        session.update_usage(Usage(input=10, output=1))  # within a second: kept in memory
    stored = _manager(isolated_state).store("main").get("agent:main:work")
    assert stored is not None and stored.input_tokens == 0
    assert session.entry.input_tokens == 60
    manager.close()
    stored = _manager(isolated_state).store("main").get("agent:main:work")
    assert stored is not None and (stored.input_tokens, stored.output_tokens) == (60, 6)


def test_flush_due_writes_every_due_session_in_one_store_update(
    isolated_state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    manager = _manager(isolated_state)
    first, second = manager.open("a"), manager.open("b")
    first.update_usage(Usage(input=3))
    second.update_usage(Usage(input=4))
    store = manager.store("main")
    writes: list[int] = []
    real_update = store.update

    def counting_update(change: Any, *, sync: bool = True) -> Any:
        writes.append(1)
        return real_update(change, sync=sync)

    monkeypatch.setattr(store, "update", counting_update)
    monkeypatch.setattr("nodmix.sessions.session.USAGE_WRITE_INTERVAL", 0.0)
    assert manager.flush_due() == 2
    assert writes == [1]
    fresh = _manager(isolated_state).store("main")
    entries = [fresh.get(k) for k in ("agent:main:a", "agent:main:b")]
    assert [e.input_tokens if e else None for e in entries] == [3, 4]
    assert manager.flush_due() == 0


def test_list_sessions_spans_agents_with_message_counts(isolated_state: Path) -> None:
    manager = _manager(isolated_state)
    main = manager.open("work")
    main.append_message(user("q"))
    main.append_message(assistant("", "c1"))
    main.append_message(assistant("", "n1"), parent_tool_call_id="c1")
    main.append_message(result("c1"))
    main.update_usage(Usage(input=1))
    manager.open("agent:ops:cron:nightly").append_message(user("run"))

    fresh = _manager(isolated_state)  # counts come from the files, not a cache
    rows = {r.key: r for r in fresh.list_sessions()}
    assert set(rows) == {"agent:main:work", "agent:ops:cron:nightly"}
    assert rows["agent:main:work"].message_count == 3
    assert rows["agent:ops:cron:nightly"].message_count == 1
    assert rows["agent:ops:cron:nightly"].agent_id == "ops"
    assert [r.key for r in fresh.list_sessions("ops")] == ["agent:ops:cron:nightly"]
    assert [r.message_count for r in manager.list_sessions("main")] == [3]
    assert fresh.agent_ids() == ["main", "ops"]
    stray = isolated_state / "agents/Not An Agent/sessions"
    stray.mkdir(parents=True)
    (stray / "sessions.json").write_text("{}")
    assert fresh.agent_ids() == ["main", "ops"]


def test_list_sessions_is_most_recently_updated_first(isolated_state: Path) -> None:
    manager = _manager(isolated_state)
    for name in ("a", "b", "c"):
        manager.open(name)
    store = manager.store("main")
    store.update_entry("agent:main:b", lambda e: msgspec.structs.replace(e, updated_at=10**15))
    assert manager.list_sessions("main")[0].key == "agent:main:b"


def _open_files_under(directory: Path) -> list[str]:
    """Paths under `directory` this process holds open (Linux `/proc/self/fd`)."""
    found = []
    for fd in Path("/proc/self/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:  # the descriptor of the listing itself, closed meanwhile
            continue
        if target.startswith(str(directory)):
            found.append(target)
    return found


def test_cache_keeps_the_most_recent_sessions_and_evicted_ones_still_write_linearly(
    isolated_state: Path,
) -> None:
    manager = _manager(isolated_state, max_cached=2)
    a = manager.open("a")
    a.append_message(user("a1"))
    manager.open("b")
    manager.open("c")
    again = manager.open("a")
    assert again is not a
    # The evicted object still works, and both objects keep one linear chain.
    first = a.append_message(user("a2"))
    second = again.append_message(user("a3"))
    assert second.parent_id == first.id
    manager.close()
    entries = Transcript.load(again.transcript.path).entries
    assert [e.parent_id for e in entries[1:]] == [e.id for e in entries[:-1]]


def test_open_transcript_files_stay_bounded_whatever_the_number_of_sessions(
    isolated_state: Path,
) -> None:
    manager = SessionManager(isolated_state, durable=False, max_open_files=4)
    sessions = [manager.open(f"s{i}") for i in range(60)]
    for round_ in range(3):
        for session in sessions:
            session.append_message(user(f"{session.key} {round_}"))
        assert len(_open_files_under(isolated_state / "agents")) <= 4
    # Every chain is intact although descriptors were closed and reopened under the appends.
    for session in sessions:
        entries = Transcript.load(session.transcript.path).entries
        assert [e.parent_id for e in entries[1:]] == [e.id for e in entries[:-1]]
        assert len(entries) == 3
    manager.close()
    assert _open_files_under(isolated_state / "agents") == []


def test_a_deleted_transcript_is_started_again_for_writers_and_an_error_for_readers(
    isolated_state: Path,
) -> None:
    session = _manager(isolated_state).open("work")
    session.transcript.path.unlink()
    with pytest.raises(SessionError) as info:
        _manager(isolated_state, read_only=True).open("work")
    assert "is missing" in str(info.value)
    again = _manager(isolated_state).open("work")
    assert again.session_id == session.session_id
    assert again.transcript.path.exists()


def test_a_session_file_outside_the_sessions_directory_is_refused(isolated_state: Path) -> None:
    manager = _manager(isolated_state)
    manager.open("work")
    manager.store("main").update_entry(
        "agent:main:work", lambda e: msgspec.structs.replace(e, session_file="../../evil.jsonl")
    )
    with pytest.raises(SessionError) as info:
        _manager(isolated_state).open("work")
    assert "invalid sessionFile" in str(info.value)


def test_session_messages_for_model_replays_its_transcript(isolated_state: Path) -> None:
    session = _manager(isolated_state).open("work")
    session.append_message(user("q"))
    session.append_message(assistant("", "c1"))
    replayed = session.messages_for_model()
    assert len(replayed) == 3
    assert all(isinstance(e, MessageEntry) for e in session.entries)


@pytest.mark.anyio
async def test_turn_lock_lets_one_turn_at_a_time_run_per_session(isolated_state: Path) -> None:
    manager = _manager(isolated_state)
    order: list[str] = []
    first_inside = anyio.Event()
    release_first = anyio.Event()

    async def first() -> None:
        async with manager.turn_lock("work"):
            order.append("first start")
            first_inside.set()
            await release_first.wait()
            order.append("first end")

    async def second() -> None:
        await first_inside.wait()
        async with manager.turn_lock("agent:main:work"):
            order.append("second start")

    async def other_session() -> None:
        await first_inside.wait()
        async with manager.turn_lock("other"):
            order.append("other session")
        release_first.set()

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(first)
            tg.start_soon(second)
            tg.start_soon(other_session)
    assert order == ["first start", "other session", "first end", "second start"]


def test_turn_locks_are_shared_per_key_while_in_use(isolated_state: Path) -> None:
    manager = _manager(isolated_state)
    lock = manager.turn_lock("work")
    assert manager.turn_lock("agent:main:work") is lock
    assert manager.turn_lock("other") is not lock


@pytest.mark.anyio
async def test_archive_unlists_sessions_and_skips_a_session_in_a_turn(
    isolated_state: Path,
) -> None:
    manager = SessionManager(isolated_state)
    idle = manager.open("idle")
    idle.append_message(user_message("hello"))
    busy = manager.open("busy")
    async with manager.turn_lock("busy"):
        archived = manager.archive("main", ["agent:main:idle", "agent:main:busy", "agent:main:x"])
    assert archived == {"agent:main:idle": idle.transcript.path}
    assert [s.key for s in manager.list_sessions("main")] == ["agent:main:busy"]
    moved = move_to_archive(idle.transcript.path)
    assert moved == idle.transcript.path.parent / "archive" / idle.transcript.path.name
    assert moved.is_file() and not idle.transcript.path.exists()
    assert "hello" in moved.read_text(encoding="utf-8")
    assert busy.transcript.path.exists()
    # The key is free again: opening it starts a new session, the archived file stays.
    again = manager.open("idle")
    assert again.session_id != idle.session_id and moved.is_file()
    manager.close()


def test_move_to_archive_never_overwrites_an_archived_file(isolated_state: Path) -> None:
    directory = isolated_state / "sessions"
    (directory / "archive").mkdir(parents=True)
    (directory / "archive" / "s.jsonl").write_text("older\n")
    (directory / "s.jsonl").write_text("newer\n")
    moved = move_to_archive(directory / "s.jsonl")
    assert moved == directory / "archive" / "s.1.jsonl" and moved.read_text() == "newer\n"
    assert (directory / "archive" / "s.jsonl").read_text() == "older\n"
    assert move_to_archive(directory / "s.jsonl") is None  # already gone
