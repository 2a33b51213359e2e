"""The session guarantees every backend keeps, run against files and a real PostgreSQL: each
`managers()` call is a new process (a replica, for PostgreSQL)."""

from __future__ import annotations

from collections.abc import Callable

import anyio
import pytest

from nodmix.errors import SessionError
from nodmix.messages import Usage, user_message
from nodmix.runtime.usage_flush import UsageFlusher
from nodmix.sessions.entries import CompactionEntry, MessageEntry
from nodmix.sessions.manager import SessionManager
from tests.sessions.sessions_builders import assistant, user

Managers = Callable[..., SessionManager]


def _texts(manager: SessionManager, key: str) -> list[str]:
    session = manager.open(key, create=False)
    return [e.message.text for e in session.entries if isinstance(e, MessageEntry)]


def _linear(manager: SessionManager, key: str) -> bool:
    entries = manager.open(key, create=False).entries
    return all(e.parent_id == (entries[i - 1].id if i else None) for i, e in enumerate(entries))


def test_a_new_session_is_indexed_and_reopened_by_another_process(managers: Managers) -> None:
    first = managers()
    session = first.open("work")
    session.append_message(user("hello"))
    session.append_message(assistant("hi"))
    other = managers()
    again = other.open("work", create=False)
    assert again.session_id == session.session_id
    assert [e.message.text for e in again.entries if isinstance(e, MessageEntry)] == [
        "hello",
        "hi",
    ]
    assert other.store("main").get("agent:main:work") == session.entry
    assert other.agent_ids() == ["main"]


def test_appends_from_two_processes_in_turn_make_one_linear_chain(managers: Managers) -> None:
    a, b = managers(), managers()
    for i in range(6):
        writer = a if i % 2 == 0 else b
        writer.open("work").append_message(user(f"m{i}"))
    assert _texts(a, "work") == [f"m{i}" for i in range(6)]
    assert _texts(managers(), "work") == [f"m{i}" for i in range(6)]
    assert _linear(managers(), "work")


def test_a_stale_writer_is_chained_after_what_it_missed(managers: Managers) -> None:
    a, b = managers(), managers()
    stale = a.open("work")
    stale.append_message(user("one"))
    b.open("work").append_message(user("two"))
    stale.append_message(user("three"))  # without reopening: the store catches it up
    fresh = managers()
    assert _texts(fresh, "work") == ["one", "two", "three"]
    assert _linear(fresh, "work")


def test_reset_starts_a_new_transcript_seen_by_other_processes(managers: Managers) -> None:
    a, b = managers(), managers()
    old = a.open("work")
    old.append_message(user("before"))
    old_id = old.session_id
    fresh = b.reset("work")
    assert fresh.session_id != old_id
    assert a.open("work").session_id == fresh.session_id
    assert _texts(a, "work") == []


def test_rotate_writes_the_seed_before_the_index_names_the_successor(
    managers: Managers,
) -> None:
    manager = managers()
    session = manager.open("work")
    kept = session.append_message(user("kept"))
    summary = CompactionEntry(
        id="c1",
        parent_id=kept.id,
        timestamp=kept.timestamp,
        summary="earlier talk",
        first_kept_entry_id=kept.id,
        tokens_before=10,
    )
    successor = manager.rotate("work", seed=[kept, summary])
    assert successor.transcript.header.parent_session == session.entry.session_file
    reopened = managers().open("work", create=False)
    assert reopened.session_id == successor.session_id
    assert [e.id for e in reopened.entries] == [kept.id, "c1"]


def test_usage_is_batched_and_written_on_close(managers: Managers) -> None:
    manager = managers()
    session = manager.open("work")
    session.update_usage(Usage(input=5, output=2), model="m/x")
    session.update_usage(Usage(input=1, output=1))
    manager.close()
    entry = managers().store("main").get("agent:main:work")
    assert entry is not None
    assert (entry.input_tokens, entry.output_tokens, entry.model) == (6, 3, "m/x")


def test_counters_a_turn_left_waiting_are_written_soon_after_it(managers: Managers) -> None:
    manager = managers()

    async def turn_then_wait() -> None:
        session = await manager.open_async("work")
        async with anyio.create_task_group() as group:
            flusher = UsageFlusher(manager, group)
            session.update_usage(Usage(input=5, output=2), model="m/x")  # not due yet
            flusher.after_turn()
        # (the group ends once the flusher has nothing left waiting)

    anyio.run(turn_then_wait)
    entry = managers().store("main").get("agent:main:work")
    assert entry is not None
    assert (entry.input_tokens, entry.output_tokens, entry.model) == (5, 2, "m/x")
    assert not manager.usage_waiting
    manager.close()


def test_open_async_gives_the_session_open_gives(managers: Managers) -> None:
    manager = managers()
    first = manager.open("work")
    first.append_message(user_message("hello"))
    other = managers()

    async def both() -> None:
        again = await other.open_async("work")
        assert again.session_id == first.session_id
        assert _texts(other, "work") == ["hello"]
        assert await other.open_async("work") is again  # cached, caught up

    anyio.run(both)
    other.close()
    manager.close()


def test_listing_counts_messages_and_spans_agents(managers: Managers) -> None:
    manager = managers()
    manager.open("agent:main:a").append_message(user("x"))
    b = manager.open("agent:ops:b")
    b.append_message(user("y"))
    b.append_message(assistant("z"))
    b.append_message(assistant("inside a code-mode call"), parent_tool_call_id="call-1")
    rows = {r.key: r.message_count for r in managers().list_sessions()}
    assert rows == {"agent:main:a": 1, "agent:ops:b": 2}


def test_archive_unlists_a_session(managers: Managers) -> None:
    manager = managers()
    manager.open("one")
    manager.open("two")
    gone = manager.archive("main", ["agent:main:one"])
    assert set(gone) == {"agent:main:one"}
    assert [r.key for r in managers().list_sessions()] == ["agent:main:two"]


def test_unknown_and_read_only(managers: Managers) -> None:
    with pytest.raises(SessionError):
        managers().open("nope", create=False)
    with pytest.raises(SessionError):
        managers(read_only=True).open("work")


def test_a_label_change_is_a_durable_index_update(managers: Managers) -> None:
    session = managers().open("work")
    session.set_label("Trip")
    entry = managers().store("main").get("agent:main:work")
    assert entry is not None and entry.label == "Trip"


@pytest.mark.anyio
async def test_one_turn_at_a_time_per_session_across_processes(managers: Managers) -> None:
    a, b = managers(), managers()
    order: list[str] = []
    waited: list[str] = []

    async def turn(manager: SessionManager, name: str) -> None:
        async with manager.hold_turn(
            "work", timeout=10, on_wait=lambda key, pid: waited.append(name)
        ):
            session = manager.open("work")
            order.append(f"{name}:in")
            session.append_message(user(f"{name}-1"))
            await anyio.sleep(0.05)
            session.append_message(user(f"{name}-2"))
            order.append(f"{name}:out")

    async with anyio.create_task_group() as group:
        group.start_soon(turn, a, "a")
        await anyio.sleep(0.01)
        group.start_soon(turn, b, "b")
    assert order == ["a:in", "a:out", "b:in", "b:out"]
    assert waited == ["b"]
    assert _texts(managers(), "work") == ["a-1", "a-2", "b-1", "b-2"]
    assert _linear(managers(), "work")


@pytest.mark.anyio
async def test_a_turn_held_elsewhere_too_long_is_a_session_error(managers: Managers) -> None:
    a, b = managers(), managers()
    async with a.hold_turn("work", timeout=5):
        with pytest.raises(SessionError, match="busy"):
            async with b.hold_turn("work", timeout=0.2):
                pass
    async with b.hold_turn("work", timeout=1):
        pass


def test_messages_reach_the_model_from_another_process(managers: Managers) -> None:
    managers().open("work").append_message(user_message("what is 2+2"))
    assert [m.text for m in managers().open("work").messages_for_model()] == ["what is 2+2"]


def test_every_transcript_stays_listed_and_found_by_id_once_replaced_or_deleted(
    managers: Managers,
) -> None:
    from nodmix.sessions.admin import delete_session
    from nodmix.sessions.locate import all_transcripts, locate

    a = managers()
    old = a.open("work")
    old.append_message(user("before"))
    old.append_message(assistant("reply"))
    old_id = old.session_id
    a.reset("work").append_message(user("after"))
    gone = a.open("other")
    gone.append_message(user("bye"))
    gone_id = gone.session_id
    a.close()

    b = managers()
    deleted = delete_session(b, locate(b, "other"))
    assert [p.name for p in deleted] == [f"{gone_id}.jsonl"]
    assert deleted[0].parent.name == "trash"
    rows = {r.session_id: r for r in all_transcripts(b, "main")}
    assert {sid: r.status for sid, r in rows.items()} == {
        b.open("work", create=False).session_id: "current",
        old_id: "replaced",
        gone_id: "deleted",
    }
    assert all(r.modified_ms for r in rows.values())
    replaced = locate(b, old_id[:8])
    assert (replaced.status, replaced.key) == ("replaced", "agent:main:work")
    assert b.backend.messages_in("main", replaced.path) == 2
    trashed = locate(b, gone_id)
    assert trashed.status == "deleted" and trashed.key == "agent:main:other"
    texts = [
        e.message.text
        for e in b.backend.read("main", trashed.path).entries
        if isinstance(e, MessageEntry)
    ]
    assert texts == ["bye"]
    with pytest.raises(SessionError, match="already deleted"):
        delete_session(b, trashed)
