"""Channel delivery, pairing, the exec allowlist, subagent runs and the gateway's own token on
files and on a real PostgreSQL: what one process writes another one reads, and the duplicates
and claims the gateway relies on behave the same."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from nodmix.channels.delivery import open_delivery_log
from nodmix.channels.pairing import PairingError, open_pairing_store
from nodmix.channels.types import InboundMessage
from nodmix.channels.whatsapp import window
from nodmix.channels.whatsapp.window import FileWhatsAppStore
from nodmix.gateway.token import open_token_store
from nodmix.security.allowlist import open_allowlist
from nodmix.state.backend import StateBackend
from nodmix.subagents.records import SubagentRun
from nodmix.subagents.store import open_subagent_store

Opener = Callable[[], StateBackend]


def _msg(message_id: str, text: str = "hi") -> InboundMessage:
    return InboundMessage(
        channel="telegram",
        chat_type="dm",
        chat_id="42",
        message_id=message_id,
        sender_id="42",
        text=text,
    )


def test_a_message_is_accepted_once_and_pending_until_answered(
    open_backend: Opener, isolated_state: Path
) -> None:
    open_backend()
    log = open_delivery_log(isolated_state, "telegram")
    assert log.position() == {}
    log.save_position({"offset": 7})
    assert log.accept(_msg("1", "one"))
    assert not log.accept(_msg("1", "one"))
    assert log.accept(_msg("2", "two"))
    other = open_delivery_log(isolated_state, "telegram")
    assert other.position() == {"offset": 7}
    assert [m.text for m in other.pending()] == ["one", "two"]
    other.done(_msg("1"))
    again = open_delivery_log(isolated_state, "telegram")
    assert [m.text for m in again.pending()] == ["two"]
    assert again.seen(_msg("1")) and again.seen(_msg("2")) and not again.seen(_msg("3"))
    assert not again.accept(_msg("1"))


def test_pairing_requests_and_approvals_are_shared(
    open_backend: Opener, isolated_state: Path
) -> None:
    open_backend()
    store = open_pairing_store(isolated_state)
    request, created = store.request("telegram", "77", sender_name="Ann")
    assert request is not None and created
    again, created = open_pairing_store(isolated_state).request("telegram", "77")
    assert again is not None and again.code == request.code and not created
    approved = open_pairing_store(isolated_state).approve("telegram", request.code.lower())
    assert approved.sender_id == "77"
    assert store.is_approved("telegram", "77")
    assert open_pairing_store(isolated_state).channels() == ["telegram"]
    with pytest.raises(PairingError):
        store.approve("telegram", "NOPE2345")
    store.revoke("telegram", "77")
    assert not open_pairing_store(isolated_state).is_approved("telegram", "77")


def test_pairing_rate_limits_hold_across_stores(open_backend: Opener, isolated_state: Path) -> None:
    """The log of codes handed out survives the store: a sender whose code newer requests
    displaced waits out the cooldown rather than getting a new code from another replica."""
    open_backend()
    first, created = open_pairing_store(isolated_state).request("telegram", "77")
    assert first is not None and created
    store = open_pairing_store(isolated_state)
    assert [i.sender_id for i in store.load("telegram").issued] == ["77"]
    for sender in range(10):  # ten newer requests displace the first one
        assert store.request("telegram", f"s{sender}")[1]
    assert all(
        p.sender_id != "77" for p in open_pairing_store(isolated_state).load("telegram").pending
    )
    again, created = open_pairing_store(isolated_state).request("telegram", "77")
    assert again is None and not created, "a new code inside the sender's cooldown"
    assert not open_pairing_store(isolated_state).may_request("telegram", "77")


def test_whatsapp_windows_and_handled_ids_reach_every_replica(
    open_backend: Opener, isolated_state: Path
) -> None:
    backend = open_backend()
    first = FileWhatsAppStore(open_delivery_log(isolated_state, "whatsapp"))
    first.opened("491700", time.time())
    first.remember("wamid.1", time.time())
    second = FileWhatsAppStore(open_delivery_log(isolated_state, "whatsapp"))
    assert second.handled("wamid.1") and second.last_inbound("491700") is not None
    second.opened("491711", time.time())
    second.remember("wamid.2", time.time())
    if backend.kind == "postgres":  # a replica whose store was opened before the other wrote
        assert first.handled("wamid.2") and first.last_inbound("491711") is not None
        first.remember("wamid.3", time.time())  # keeps what the other replica recorded
    third = FileWhatsAppStore(open_delivery_log(isolated_state, "whatsapp"))
    assert third.handled("wamid.1") and third.handled("wamid.2")
    assert third.last_inbound("491700") is not None and third.last_inbound("491711") is not None


def test_the_gateway_token_made_once_is_the_one_every_store_finds(
    open_backend: Opener, isolated_state: Path
) -> None:
    open_backend()
    assert open_token_store(isolated_state).load() is None
    made = open_token_store(isolated_state).load_or_create()
    assert len(made) == 43
    assert open_token_store(isolated_state).load_or_create() == made
    assert open_token_store(isolated_state).load() == made


def test_the_exec_allowlist_is_shared_and_refreshed(
    open_backend: Opener, isolated_state: Path
) -> None:
    open_backend()
    gate_view = open_allowlist(isolated_state)
    assert gate_view.patterns == ()
    added = open_allowlist(isolated_state).add("git status")
    assert gate_view.refresh()
    assert [p.text for p in gate_view.patterns] == ["git status"]
    assert not gate_view.refresh()
    assert open_allowlist(isolated_state).revoke(added.id) == [added]
    assert gate_view.refresh() and gate_view.patterns == ()


def _run(run_id: str) -> SubagentRun:
    return SubagentRun(
        run_id=run_id,
        child_key="agent:main:subagent:x",
        parent_key="agent:main:main",
        parent_run_id="run_1",
        depth=1,
        task="look",
        timeout_seconds=30,
        wait=False,
    )


def test_subagent_runs_and_claims(open_backend: Opener, isolated_state: Path) -> None:
    first = open_backend()
    mine = open_subagent_store(isolated_state)
    mine.save(_run("sub_a1"))
    mine.save(_run("sub_b2"))
    second = open_backend()  # another process
    theirs = open_subagent_store(isolated_state)
    assert [r.run_id for r in theirs.all()] == ["sub_a1", "sub_b2"]
    assert theirs.get("sub_a1") == mine.get("sub_a1")
    if first.kind == "postgres":  # the second process's store is the one bound last
        from nodmix.state.postgres.backend import PostgresState

        assert isinstance(first, PostgresState) and isinstance(second, PostgresState)
        mine = first.provide("subagents.runs")
    claim = mine.claim("sub_a1")
    assert claim is not None and mine.claim("sub_a1") is None
    assert theirs.claim("sub_a1") is None
    claim.release()
    other = theirs.claim("sub_a1")
    assert other is not None
    other.release()
    theirs.remove("sub_b2")
    assert [r.run_id for r in mine.all()] == ["sub_a1"]


def test_checkpoints_are_taken_listed_read_and_pruned(
    open_backend: Opener, isolated_state: Path
) -> None:
    from nodmix.checkpoints import open_checkpoint_store, take_checkpoint
    from nodmix.sessions.manager import SessionManager
    from tests.sessions.sessions_builders import assistant, user

    backend = open_backend()
    manager = SessionManager(isolated_state, backend=backend.sessions())
    session = manager.open("work")
    session.append_message(user("hello"))
    session.append_message(assistant("hi"))
    store = open_checkpoint_store(isolated_state)
    taken = [take_checkpoint(store, session, trigger="compaction") for _ in range(7)]
    assert all(info is not None for info in taken)
    listed = open_checkpoint_store(isolated_state).list_checkpoints("main", "agent:main:work")
    assert len(listed) == 5  # the newest five per session are kept
    info, data = open_checkpoint_store(isolated_state).read("main", listed[0].id)
    assert info.messages == 2 and b'"hello"' in data and data.startswith(b'{"type":"session"')


def test_continuation_pointers_are_seen_by_another_process(
    open_backend: Opener, isolated_state: Path
) -> None:
    from nodmix.gateway.session_pointers import RESPONSES_FILE, open_session_pointers

    open_backend()
    open_session_pointers(isolated_state, RESPONSES_FILE).remember("resp_1", "agent:main:x")
    other = open_session_pointers(isolated_state, RESPONSES_FILE)
    assert other.session_of("resp_1") == "agent:main:x"
    assert other.session_of("resp_2") is None


def test_whatsapp_handled_ids_are_appended_and_compacted_keeping_every_replicas(
    open_backend: Opener, isolated_state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(window, "MAX_HANDLED", 5)
    monkeypatch.setattr(window, "COMPACT_AT", 10)
    backend = open_backend()
    now = time.time()

    def store() -> FileWhatsAppStore:
        return FileWhatsAppStore(open_delivery_log(isolated_state, "whatsapp"), clock=lambda: now)

    replicas = [store(), store()] if backend.kind == "postgres" else [store()]
    log = open_delivery_log(isolated_state, "whatsapp")
    for n in range(60):
        replicas[n % len(replicas)].remember(f"wamid.{n}", now - 100 + n)
        assert len(log.records("handled")[0]) <= 2 * 10 + 2  # bounded, whoever compacts
    assert "handled" not in log.position()  # the position is not where the ids go
    fresh = store()
    assert all(fresh.handled(f"wamid.{n}") for n in range(55, 60))  # kept by id
    assert fresh.handled("wamid.0", now - 100)  # compacted away: below the floor
    assert not fresh.handled("wamid.new", now)
    if backend.kind == "postgres":  # each replica sees the ids the other handled
        assert replicas[0].handled("wamid.59") and replicas[1].handled("wamid.58")
