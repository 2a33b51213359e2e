"""`sessions_spawn` on a real runtime against the scripted model behind a real HTTP socket:
parallel subagents with `wait`, subagents nobody waits for and their announcement, usage
counted to the requester, and the records and session index a spawn leaves."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from nodmix.messages import UserMessage, user_message
from nodmix.sessions import CustomMessageEntry
from nodmix.subagents.planning import SpawnRequest
from nodmix.testing.model_server import ScriptedModelServer
from nodmix.testing.scripts.subagents import respond
from tests.subagents.support import (
    HeldChildren,
    open_runtime,
    own_tokens,
    poll,
    records,
    tool_ctx,
    wait_ended,
    write_config,
)

pytestmark = [pytest.mark.anyio, pytest.mark.integration]


async def test_two_subagents_with_wait_run_side_by_side_and_their_replies_come_back(
    isolated_state: Path,
) -> None:
    model = HeldChildren()
    async with ScriptedModelServer(model) as server:
        write_config(isolated_state, server.base_url)
        async with open_runtime(isolated_state) as runtime, anyio.create_task_group() as group:
            done: list[str] = []

            async def ask() -> None:
                outcome = await runtime.run_turn("spawn wait: held alpha | held beta")
                done.append(outcome.result.reply)

            group.start_soon(ask)
            await poll(lambda: model.in_flight == 2, what="both children to be working at once")
            model.release()
            await poll(lambda: bool(done), what="the requester's reply")
            parent = runtime.sessions.open("agent:main:main", create=False)
            rows = runtime.sessions.list_sessions("main")  # writes pending counters first
            children = [r for r in rows if r.entry.spawned_by]
            (parent_row,) = [r for r in rows if r.key == "agent:main:main"]
    assert done == ["held alpha: done: held alpha\nheld beta: done: held beta"]
    assert model.peak == 2
    assert sorted(str(r.entry.label) for r in children) == ["held alpha", "held beta"]
    assert all(r.key.startswith("agent:main:subagent:") for r in children)
    assert {r.entry.spawned_by for r in children} == {"agent:main:main"}
    child_tokens = sum(r.entry.total_tokens for r in children)
    assert child_tokens > 0
    own = own_tokens(parent.messages_for_model())
    assert parent_row.entry.total_tokens == own + child_tokens  # counted to the parent too
    await wait_ended(isolated_state, 2)
    assert {r.status for r in records(isolated_state)} == {"completed"}


async def test_waited_runs_are_recorded_as_ended_once_the_runtime_has_closed(
    isolated_state: Path,
) -> None:
    # A waited run's last state is written in the background; closing the runtime right
    # after the reply must still leave it recorded as completed, not as running (which the
    # next start would report as lost).
    async with ScriptedModelServer(respond) as server:
        write_config(isolated_state, server.base_url)
        async with open_runtime(isolated_state) as runtime:
            outcome = await runtime.run_turn("spawn wait: alpha | beta | gamma")
    assert outcome.result.reply == "alpha: done: alpha\nbeta: done: beta\ngamma: done: gamma"
    assert [run.status for run in records(isolated_state)] == ["completed"] * 3


async def test_a_subagent_nobody_waits_for_is_announced_into_the_session_and_seen_next_turn(
    isolated_state: Path,
) -> None:
    model = HeldChildren()
    async with ScriptedModelServer(model) as server:
        write_config(isolated_state, server.base_url)
        async with open_runtime(isolated_state) as runtime:
            accepted = await runtime.run_turn("spawn: held report on ferries")
            assert "accepted as sub_" in accepted.result.reply
            (run,) = records(isolated_state)  # written before the spawn answered
            assert run.status in ("queued", "running") and not run.wait
            model.release()
            await runtime.subagents.settle()
            parent = runtime.sessions.open("agent:main:main", create=False)
            posted = [e for e in parent.entries if isinstance(e, CustomMessageEntry)]
            await runtime.run_turn("what came back?")
    (entry,) = posted
    assert entry.custom_type == "subagent_result" and entry.display
    assert entry.details["runId"] == run.run_id and entry.details["status"] == "completed"
    assert "done: held report on ferries" in str(entry.content)
    last = server.requests[-1].request
    assert last is not None
    users = [m.text for m in last.messages if isinstance(m, UserMessage)]
    assert any("finished the task you gave it" in text for text in users)
    assert users[-1] == "what came back?"
    (final,) = records(isolated_state)
    assert final.status == "completed" and final.announced
    assert final.reply == "done: held report on ferries"


async def test_the_announcement_waits_for_a_turn_running_in_the_requester_session(
    isolated_state: Path,
) -> None:
    async with ScriptedModelServer(respond) as server:
        write_config(isolated_state, server.base_url)
        async with open_runtime(isolated_state) as runtime:
            async with runtime.sessions.hold_turn("agent:main:main", timeout=5):
                session = runtime.sessions.open("agent:main:main")
                session.append_message(user_message("a turn is running here"))
                await runtime.subagents.spawn(
                    SpawnRequest(task="quick task"), tool_ctx("agent:main:main")
                )
                await poll(
                    lambda: records(isolated_state)[0].status == "completed",
                    what="the child to finish",
                )
                before = len(session.entries)
                assert not any(isinstance(e, CustomMessageEntry) for e in session.entries)
            await runtime.subagents.settle()
            after = runtime.sessions.open("agent:main:main", create=False)
            assert len(after.entries) == before + 1  # appended once the lock was free


async def test_cancelling_the_requester_cancels_the_children_it_waits_for(
    isolated_state: Path,
) -> None:
    model = HeldChildren()
    async with ScriptedModelServer(model) as server:
        write_config(isolated_state, server.base_url)
        async with open_runtime(isolated_state) as runtime:
            scope = anyio.CancelScope()

            async def ask() -> None:
                with scope:
                    await runtime.run_turn("spawn wait: held one | held two")

            async with anyio.create_task_group() as group:
                group.start_soon(ask)
                await poll(lambda: model.in_flight == 2, what="both children working")
                scope.cancel()
            await poll(
                lambda: [r.status for r in records(isolated_state)] == ["cancelled"] * 2,
                what="the two records",
            )
            assert runtime.subagents.open_runs() == []
            parent = runtime.sessions.open("agent:main:main", create=False)
            results = [m for m in parent.messages_for_model() if m.role == "toolResult"]
    assert {r.status for r in records(isolated_state)} == {"cancelled"}
    assert {r.error for r in records(isolated_state)} == {"its requester's turn was stopped"}
    assert len(results) == 2 and all(r.is_error for r in results)


async def test_a_requester_past_its_turn_timeout_takes_its_waiting_children_with_it(
    isolated_state: Path,
) -> None:
    model = HeldChildren()
    async with ScriptedModelServer(model) as server:
        write_config(
            isolated_state,
            server.base_url,
            {"timeoutSeconds": 60},  # the child's own limit is not what ends it
            agents=[{"id": "main", "timeoutSeconds": 1}],
        )
        async with open_runtime(isolated_state) as runtime:
            with pytest.raises(Exception, match="did not finish within 1 s"):
                await runtime.run_turn("spawn wait: held forever")
            (run,) = await wait_ended(isolated_state, 1)
            model.release()
    assert run.status == "cancelled"
