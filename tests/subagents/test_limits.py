"""The limits and rules of `sessions_spawn`: `maxConcurrent` slots (more wait their turn),
`maxDepth`, `maxChildrenPerTurn`, `enabled`, a subagent's tool policy and its timeout. Past
a limit the call fails with one line naming it."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from nodmix.origin import TurnOrigin
from nodmix.subagents.planning import SpawnRefused, SpawnRequest
from nodmix.testing.model_server import ScriptedModelServer
from nodmix.testing.scripts.subagents import respond
from tests.subagents.support import (
    HeldChildren,
    open_runtime,
    poll,
    records,
    tool_ctx,
    wait_ended,
    write_config,
)

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

SESSION_TOOLS = {"sessions_spawn", "sessions_send", "sessions_list", "sessions_history"}


async def test_past_max_concurrent_subagents_wait_for_a_slot_and_all_finish(
    isolated_state: Path,
) -> None:
    model = HeldChildren()
    async with ScriptedModelServer(model) as server:
        write_config(isolated_state, server.base_url, {"maxConcurrent": 2})
        async with open_runtime(isolated_state) as runtime, anyio.create_task_group() as group:
            replies: list[str] = []

            async def ask() -> None:
                outcome = await runtime.run_turn("spawn wait: held 1 | held 2 | held 3 | held 4")
                replies.append(outcome.result.reply)

            group.start_soon(ask)

            def two_running_two_queued() -> bool:
                statuses = sorted(r.status for r in runtime.subagents.open_runs())
                return model.in_flight == 2 and statuses == ["queued"] * 2 + ["running"] * 2

            await poll(two_running_two_queued, what="two subagents running and two queued")
            model.release()
            await poll(lambda: bool(replies), what="the requester's reply")
    assert model.peak == 2
    assert replies[0].splitlines() == [f"held {i}: done: held {i}" for i in range(1, 5)]


async def test_a_subagent_cannot_spawn_at_the_default_depth_and_one_level_more_is_allowed(
    isolated_state: Path,
) -> None:
    model = HeldChildren()
    model.release()
    async with ScriptedModelServer(model) as server:
        write_config(isolated_state, server.base_url)
        async with open_runtime(isolated_state) as runtime:
            await runtime.run_turn("spawn wait: summarise the notes")
            await wait_ended(isolated_state, 1)
            (child,) = records(isolated_state)
            with pytest.raises(SpawnRefused, match=r"^maxDepth 1 reached"):
                await runtime.subagents.spawn(SpawnRequest(task="x"), tool_ctx(child.child_key))
        assert "sessions_spawn" in model.tool_names["spawn wait: summarise the notes"]
        assert "sessions_spawn" not in model.tool_names["summarise the notes"]
        assert "sessions_list" in model.tool_names["summarise the notes"]

        write_config(isolated_state, server.base_url, {"maxDepth": 2})
        async with open_runtime(isolated_state) as runtime:
            outcome = await runtime.run_turn("spawn wait: spawn wait: leaf task")
            await wait_ended(isolated_state, 3)
    assert outcome.result.reply == "spawn wait: leaf task: leaf task: done: leaf task"
    depths = {r.task: r.depth for r in records(isolated_state)}
    assert depths["spawn wait: leaf task"] == 1 and depths["leaf task"] == 2
    assert "sessions_spawn" in model.tool_names["spawn wait: leaf task"]
    assert "sessions_spawn" not in model.tool_names["leaf task"]


async def test_past_max_children_per_turn_the_call_fails_with_one_line(
    isolated_state: Path,
) -> None:
    async with ScriptedModelServer(respond) as server:
        write_config(isolated_state, server.base_url, {"maxChildrenPerTurn": 3})
        async with open_runtime(isolated_state) as runtime:
            outcome = await runtime.run_turn("spawn wait: a | b | c | d | e")
            await wait_ended(isolated_state, 3)
    lines = outcome.result.reply.splitlines()
    assert sum(line.endswith(": done: " + line.split(":")[0]) for line in lines) == 3
    refusals = [line for line in lines if "maxChildrenPerTurn" in line]
    assert (
        refusals
        == [
            "maxChildrenPerTurn 3 reached: this turn has spawned 3 subagents "
            "(agents.defaults.subagents.maxChildrenPerTurn)"
        ]
        * 2
    )
    assert len(records(isolated_state)) == 3


async def test_an_agent_with_subagents_off_is_not_offered_the_session_tools(
    isolated_state: Path,
) -> None:
    async with ScriptedModelServer(respond) as server:
        write_config(
            isolated_state,
            server.base_url,
            agents=[{"id": "main"}, {"id": "lone", "subagents": {"enabled": False}}],
        )
        async with open_runtime(isolated_state) as runtime:
            await runtime.run_turn("hello", agent_id="lone")
            await runtime.run_turn("hello")
            with pytest.raises(SpawnRefused, match="subagents are off for agent 'lone'"):
                await runtime.subagents.spawn(SpawnRequest(task="x"), tool_ctx("agent:lone:main"))
    lone, main = ({t.name for t in r.request.tools} for r in server.requests if r.request)
    assert not lone & SESSION_TOOLS
    assert main >= SESSION_TOOLS and "agents_list" in main


async def test_a_subagent_gets_only_the_tools_its_policy_leaves_it(
    isolated_state: Path,
) -> None:
    model = HeldChildren()
    model.release()
    async with ScriptedModelServer(model) as server:
        write_config(
            isolated_state, server.base_url, {"tools": {"deny": ["exec", "write", "edit"]}}
        )
        async with open_runtime(isolated_state) as runtime:
            await runtime.run_turn("spawn wait: denied task")
            await runtime.run_turn("use exec echo hi")
        write_config(isolated_state, server.base_url, {"tools": {"allow": ["read", "memory_get"]}})
        async with open_runtime(isolated_state) as runtime:
            outcome = await runtime.run_turn("spawn wait: use exec echo sneaky")
    parent = set(model.tool_names["spawn wait: denied task"])
    child = set(model.tool_names["denied task"])
    assert {"exec", "write", "edit", "read"} <= parent
    assert not child & {"exec", "write", "edit"} and "read" in child
    assert set(model.tool_names["use exec echo sneaky"]) == {"read", "memory_get"}
    assert outcome.result.reply == "use exec echo sneaky: no tool exec offered"


async def test_a_subagent_past_its_timeout_reports_timeout_and_its_turn_is_stopped(
    isolated_state: Path,
) -> None:
    async with ScriptedModelServer(respond) as server:
        write_config(isolated_state, server.base_url, {"timeoutSeconds": 30})
        async with open_runtime(isolated_state) as runtime:
            outcome = await runtime.run_turn("spawn wait timeout=0.5: hang")
            await wait_ended(isolated_state, 1)
            (run,) = records(isolated_state)
            child = runtime.sessions.open(run.child_key, create=False)
            last = [e.message for e in child.entries if hasattr(e, "message")][-1]
    assert outcome.result.reply == "hang: timeout (no answer within 0.5 s)"
    assert run.status == "timeout" and run.timeout_seconds == 0.5
    assert last.role == "user" and last.text == "hang"  # stopped before any answer


async def test_a_timeout_longer_than_the_configured_one_is_cut_to_it(
    isolated_state: Path,
) -> None:
    async with ScriptedModelServer(respond) as server:
        write_config(isolated_state, server.base_url, {"timeoutSeconds": 1})
        async with open_runtime(isolated_state) as runtime:
            outcome = await runtime.run_turn("spawn wait timeout=3600: hang")
    assert outcome.result.reply == "hang: timeout (no answer within 1 s)"


async def test_unknown_agents_and_other_agents_for_non_owners_are_refused(
    isolated_state: Path,
) -> None:
    async with ScriptedModelServer(respond) as server:
        write_config(
            isolated_state,
            server.base_url,
            agents=[{"id": "main", "subagents": {"allowAgents": ["research"]}}, {"id": "research"}],
        )
        async with open_runtime(isolated_state) as runtime:
            owner = await runtime.run_turn("spawn wait agent=research: find papers")
            unknown = await runtime.run_turn("spawn wait agent=nobody: find papers")
            await wait_ended(isolated_state, 1)
            group = TurnOrigin(channel="telegram", chat_id="-100", chat_type="group")
            key = "agent:main:telegram:group:-100"
            runtime.sessions.open(key)
            with pytest.raises(SpawnRefused, match="spawns subagents of its own agent only"):
                await runtime.subagents.spawn(
                    SpawnRequest(task="x", agent_id="research"), tool_ctx(key, origin=group)
                )
            with pytest.raises(SpawnRefused, match="cannot choose a subagent's model"):
                await runtime.subagents.spawn(
                    SpawnRequest(task="x", model="local/scripted"), tool_ctx(key, origin=group)
                )
    assert owner.result.reply == "find papers: done: find papers"
    assert any(r.child_key.startswith("agent:research:subagent:") for r in records(isolated_state))
    assert unknown.result.reply == "unknown agent 'nobody' (agents: main, research)"
