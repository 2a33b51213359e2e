"""Code mode fans out: one `exec` program spawns 20 subagents with `Promise.all` and `wait:
true` through `tools.sessions_spawn`, within the existing limits (code mode's
`maxPendingToolCalls`, then `maxConcurrent` subagent slots), and combines their replies."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from nodmix.testing.model_server import ScriptedModelServer
from tests.subagents.support import (
    HeldChildren,
    open_runtime,
    poll,
    records,
    wait_ended,
    write_config,
)

pytestmark = [pytest.mark.anyio, pytest.mark.integration]


async def test_one_program_fans_out_to_twenty_subagents_eight_at_a_time(
    isolated_state: Path,
) -> None:
    model = HeldChildren()
    async with ScriptedModelServer(model) as server:
        write_config(isolated_state, server.base_url, tools={"codeMode": {"enabled": True}})
        async with open_runtime(isolated_state) as runtime, anyio.create_task_group() as group:
            replies: list[str] = []

            async def ask() -> None:
                outcome = await runtime.run_turn("fanout 20 held")
                replies.append(outcome.result.reply)

            group.start_soon(ask)

            def eight_running() -> bool:
                running = [r for r in runtime.subagents.open_runs() if r.status == "running"]
                return model.in_flight == 8 and len(running) == 8

            await poll(eight_running, what="eight subagents working, the rest waiting")
            model.release()
            await poll(lambda: bool(replies), what="the program's answer", timeout=60)
            await wait_ended(isolated_state, 20)
    assert json.loads(replies[0]) == [
        f"held topic {i}=completed:done: held topic {i}" for i in range(20)
    ]
    assert model.peak == 8
    tools = model.tool_names["fanout 20 held"]
    assert tools == ["exec", "wait"]  # the session tools are in the hidden catalog
    assert {r.parent_key for r in records(isolated_state)} == {"agent:main:main"}
