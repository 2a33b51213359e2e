"""Turns of one session across processes: the session's lock file.

Two `SessionManager`s on one state directory stand in for two processes here: `flock` locks
belong to an open file description, so two managers (each opening the lock file itself)
exclude each other exactly as two processes do. The subprocess tests in
`tests/sessions/test_cross_process_turns.py` run the real thing.
"""

from __future__ import annotations

import os
from pathlib import Path

import anyio
import pytest

from nodmix.config.paths import sessions_dir
from nodmix.errors import SessionError
from nodmix.sessions.manager import SessionManager
from nodmix.sessions.turn_lock import hold_file_lock, lock_path, waiting_notice
from tests.sessions.sessions_builders import user

pytestmark = pytest.mark.anyio


def _manager(state: Path) -> SessionManager:
    return SessionManager(state, durable=False)


async def test_a_second_process_waits_for_the_turn_and_is_told_who_holds_it(
    isolated_state: Path,
) -> None:
    first, second = _manager(isolated_state), _manager(isolated_state)
    waits: list[tuple[str, int | None]] = []
    order: list[str] = []
    inside = anyio.Event()
    release = anyio.Event()

    async def turn_one() -> None:
        async with first.hold_turn("work", timeout=10):
            order.append("one starts")
            inside.set()
            await release.wait()
            order.append("one ends")

    async def turn_two() -> None:
        await inside.wait()
        async with second.hold_turn("work", timeout=10, on_wait=lambda k, p: waits.append((k, p))):
            order.append("two starts")

    async def release_when_two_waits() -> None:
        while not waits:
            await anyio.sleep(0.005)
        release.set()

    with anyio.fail_after(10):
        async with anyio.create_task_group() as group:
            group.start_soon(turn_one)
            group.start_soon(turn_two)
            group.start_soon(release_when_two_waits)
    assert order == ["one starts", "one ends", "two starts"]
    assert waits == [("agent:main:work", os.getpid())]


async def test_other_sessions_do_not_wait(isolated_state: Path) -> None:
    first, second = _manager(isolated_state), _manager(isolated_state)
    waits: list[object] = []
    with anyio.fail_after(10):
        async with (
            first.hold_turn("work", timeout=10),
            second.hold_turn("other", timeout=10, on_wait=lambda *a: waits.append(a)),
        ):
            pass
    assert waits == []


async def test_a_turn_held_elsewhere_too_long_fails_with_one_line_naming_the_pid(
    isolated_state: Path,
) -> None:
    first, second = _manager(isolated_state), _manager(isolated_state)
    async with first.hold_turn("work", timeout=10):
        with pytest.raises(SessionError) as info:
            async with second.hold_turn("work", timeout=0.1):
                pass
    message = str(info.value)
    assert "agent:main:work is busy" in message and f"(pid {os.getpid()})" in message
    assert "\n" not in message


async def test_under_the_turn_lock_a_cached_session_continues_from_the_last_entry_on_disk(
    isolated_state: Path,
) -> None:
    gateway, cli = _manager(isolated_state), _manager(isolated_state)
    async with gateway.hold_turn("work", timeout=10):
        cached = gateway.open("work")
        cached.append_message(user("from the gateway"))
    async with cli.hold_turn("work", timeout=10):
        written = cli.open("work").append_message(user("from a cli"))
    async with gateway.hold_turn("work", timeout=10):
        again = gateway.open("work")
        assert again is cached
        assert again.transcript.leaf_id == written.id  # read in before the turn starts
        last = again.append_message(user("gateway again"))
    assert last.parent_id == written.id
    entries = again.entries
    assert [e.parent_id for e in entries[1:]] == [e.id for e in entries[:-1]]


async def test_lock_files_live_under_the_sessions_dir_and_go_with_archived_sessions(
    isolated_state: Path,
) -> None:
    manager = _manager(isolated_state)
    for name in ("old", "busy"):
        async with manager.hold_turn(name, timeout=10):
            manager.open(name)
    directory = sessions_dir(isolated_state, "main")
    old, busy = lock_path(directory, "agent:main:old"), lock_path(directory, "agent:main:busy")
    assert old.parent == directory / "locks" and old.exists() and busy.exists()
    elsewhere = _manager(isolated_state)  # another process holds `busy`
    async with elsewhere.hold_turn("busy", timeout=10):
        archived = manager.archive("main", ["agent:main:old", "agent:main:busy"])
    assert set(archived) == {"agent:main:old", "agent:main:busy"}
    assert not old.exists()
    assert busy.exists()  # never removed under a running turn


async def test_a_lock_file_removed_while_waiting_does_not_let_two_turns_in(
    isolated_state: Path,
) -> None:
    path = lock_path(sessions_dir(isolated_state, "main"), "agent:main:work")
    inside: list[str] = []
    held = anyio.Event()
    release = anyio.Event()

    async def holder() -> None:
        async with hold_file_lock(path, "agent:main:work", timeout=10):
            inside.append("holder")
            held.set()
            await release.wait()
            path.unlink()  # what archiving does, under the lock
            inside.remove("holder")

    async def waiter(name: str) -> None:
        await held.wait()
        async with hold_file_lock(path, "agent:main:work", timeout=10, on_wait=lambda *a: None):
            inside.append(name)
            assert inside == [name]
            await anyio.sleep(0)
            inside.remove(name)

    async def release_soon() -> None:
        await held.wait()
        release.set()

    with anyio.fail_after(10):
        async with anyio.create_task_group() as group:
            group.start_soon(holder)
            group.start_soon(waiter, "a")
            group.start_soon(waiter, "b")
            group.start_soon(release_soon)
    assert inside == []


def test_the_waiting_notice_is_one_line_with_the_session_and_pid() -> None:
    notice = waiting_notice("agent:main:work", 4242)
    assert notice.text == "waiting for another turn on session agent:main:work (pid 4242)…"
    assert waiting_notice("agent:main:work", None).text.endswith("agent:main:work…")
