"""Subagents attacked: a subagent that spawns at every level, a thousand spawns in one reply and
in one program, a child that never answers, and a requester stopped in the middle of a
fan-out. Everything stays bounded and nothing is left open or lost."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from nodmix.messages import ToolResultMessage
from nodmix.providers.base import ModelRequest
from nodmix.providers.fake import ModelReply, ReplyToolCall
from nodmix.sessions import CustomMessageEntry
from nodmix.subagents import planning
from nodmix.testing.model_server import ScriptedModelServer
from nodmix.testing.scripts.subagents import respond as script
from tests.subagents.support import (
    HeldChildren,
    open_runtime,
    poll,
    records,
    wait_ended,
    write_config,
)

pytestmark = [pytest.mark.anyio, pytest.mark.integration]


def spawner(fan: int) -> object:
    """A model that answers every task by spawning `fan` subagents and waiting for them, as
    long as it is offered `sessions_spawn`."""

    def respond(request: ModelRequest) -> ModelReply:
        if isinstance(request.messages[-1], ToolResultMessage):
            return ModelReply.text("spawned and done")
        if not any(tool.name == "sessions_spawn" for tool in request.tools):
            return ModelReply.text("leaf")
        calls = tuple(
            ReplyToolCall("sessions_spawn", {"task": f"again {i}", "wait": True})
            for i in range(fan)
        )
        return ModelReply(tool_calls=calls)

    return respond


async def test_a_recursive_spawner_stops_at_max_depth(isolated_state: Path) -> None:
    async with ScriptedModelServer(spawner(4)) as server:  # type: ignore[arg-type]
        write_config(isolated_state, server.base_url, {"maxDepth": 3})
        async with open_runtime(isolated_state) as runtime:
            outcome = await runtime.run_turn("go")
            runs = await wait_ended(isolated_state, 4 + 16 + 64)
            assert runtime.subagents.open_runs() == []
    assert outcome.result.reply == "spawned and done"
    assert {r.status for r in runs} == {"completed"}
    assert max(r.depth for r in runs) == 3
    assert sorted({r.reply for r in runs if r.depth == 3}) == ["leaf"]


async def test_past_the_open_runs_cap_spawns_are_refused_and_the_rest_finish(
    isolated_state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(planning, "MAX_OPEN_RUNS", 10)
    async with ScriptedModelServer(spawner(6)) as server:  # type: ignore[arg-type]
        write_config(isolated_state, server.base_url, {"maxDepth": 4})
        async with open_runtime(isolated_state) as runtime:
            await runtime.run_turn("go")
            await poll(lambda: not any(r.is_open for r in records(isolated_state)), what="ends")
            assert runtime.subagents.open_runs() == []
            texts = [
                m.text
                for request in server.requests
                if request.request is not None
                for m in request.request.messages
                if isinstance(m, ToolResultMessage)
            ]
    refused = {t for t in texts if "already open" in t}
    assert refused == {"10 subagent runs are already open in this process; wait for some to finish"}
    assert {r.status for r in records(isolated_state)} == {"completed"}


async def test_a_thousand_spawns_in_one_reply_start_only_the_turns_share(
    isolated_state: Path,
) -> None:
    calls = tuple(
        ReplyToolCall("sessions_spawn", {"task": f"t{i}", "wait": True}) for i in range(1000)
    )

    def respond(request: ModelRequest) -> ModelReply:
        if isinstance(request.messages[-1], ToolResultMessage):
            refused = sum(
                "maxChildrenPerTurn 32 reached" in m.text
                for m in request.messages
                if isinstance(m, ToolResultMessage)
            )
            return ModelReply.text(f"{refused} refused")
        text = request.messages[-1].text if request.messages else ""
        return ModelReply(tool_calls=calls) if text == "go" else ModelReply.text("done")

    async with ScriptedModelServer(respond) as server:
        write_config(isolated_state, server.base_url)
        async with open_runtime(isolated_state) as runtime:
            outcome = await runtime.run_turn("go")
            runs = await wait_ended(isolated_state, 32)
            assert runtime.subagents.open_runs() == []
    assert outcome.result.reply == "968 refused"
    assert {r.status for r in runs} == {"completed"}


async def test_a_program_asking_for_250_subagents_gets_32_and_one_line_for_each_other(
    isolated_state: Path,
) -> None:
    program = """const all = await Promise.allSettled(
  Array.from({ length: 250 }, (_, i) => tools.sessions_spawn({ task: `t${i}`, wait: true })),
);
const counts = {};
for (const r of all) {
  const key = r.status === "fulfilled" ? r.value.details.status : r.reason.message;
  counts[key] = (counts[key] || 0) + 1;
}
return counts;"""

    async def respond(request: ModelRequest) -> ModelReply:
        last = request.messages[-1]
        if isinstance(last, ToolResultMessage):
            data = json.loads(last.text)
            if data["status"] == "waiting":
                return ModelReply.tool_call("wait", {"runId": data["runId"]})
            return ModelReply.text(json.dumps(data.get("value")))
        if last.text == "go":
            return ModelReply.tool_call("exec", {"code": program})
        return await script(request)  # type: ignore[return-value]

    async with ScriptedModelServer(respond) as server:
        write_config(isolated_state, server.base_url, tools={"codeMode": {"enabled": True}})
        async with open_runtime(isolated_state) as runtime:
            outcome = await runtime.run_turn("go")
            await wait_ended(isolated_state, 32)
    refusal = (
        "maxChildrenPerTurn 32 reached: this turn has spawned 32 subagents "
        "(agents.defaults.subagents.maxChildrenPerTurn)"
    )
    assert json.loads(outcome.result.reply) == {"completed": 32, refusal: 218}


async def test_a_child_that_never_answers_is_announced_as_timed_out(isolated_state: Path) -> None:
    async with ScriptedModelServer(script) as server:
        write_config(isolated_state, server.base_url, {"timeoutSeconds": 1})
        async with open_runtime(isolated_state) as runtime:
            await runtime.run_turn("spawn: hang")
            (run,) = await wait_ended(isolated_state, 1)
            await runtime.subagents.settle()
            main = runtime.sessions.open("agent:main:main", create=False)
            (posted,) = [e for e in main.entries if isinstance(e, CustomMessageEntry)]
    assert run.status == "timeout" and run.error == "no answer within 1 s"
    assert "timeout: no answer within 1 s" in str(posted.content)


async def test_stopping_a_code_mode_fan_out_midway_leaves_nothing_open(
    isolated_state: Path,
) -> None:
    model = HeldChildren()
    async with ScriptedModelServer(model) as server:
        write_config(isolated_state, server.base_url, tools={"codeMode": {"enabled": True}})
        async with open_runtime(isolated_state) as runtime:
            scope = anyio.CancelScope()

            async def ask() -> None:
                with scope:
                    await runtime.run_turn("fanout 20 held")

            async with anyio.create_task_group() as group:
                group.start_soon(ask)
                await poll(lambda: model.in_flight == 8, what="eight children working")
                scope.cancel()
            await poll(lambda: runtime.subagents.open_runs() == [], what="no open run")
            await poll(
                lambda: all(not r.is_open for r in records(isolated_state)),
                what="every record closed",
            )
            model.release()
    statuses = [r.status for r in records(isolated_state)]
    assert statuses and set(statuses) == {"cancelled"}
    assert len(statuses) <= 16  # code mode's queue never started the rest
