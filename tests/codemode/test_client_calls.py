"""Calls of deferred client tools from a program: held, never run here, suspended at once with
reason `client_tool`, settled by the app's result (which a file store writes to disk) and
delivered by `wait` — including after a restart once the result was recorded."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from nodmix.codemode import CodeModeEngine
from nodmix.codemode.run_files import FileRunStore
from nodmix.codemode.run_records import decode
from nodmix.sessions import SessionManager
from nodmix.tools.base import ToolOrigin, ToolResult, ToolSpec
from nodmix.tools.deferred import NOT_HERE, DeferredTool

from .support import Harness, build_harness, code_mode, text_tool, wait_until

WEATHER = DeferredTool(
    spec=ToolSpec(
        name="get_weather",
        description="The weather in a city.",
        parameters={"type": "object", "properties": {"city": {"type": "string"}}},
    ),
    origin=ToolOrigin(source="client", owner="app", name="get_weather"),
)
PROGRAM = """
const local = await tools.quick({});
const w = await tools.call('client:app:get_weather', { city: 'Paris' });
return { local: local.text, weather: w.text };
"""


async def _harness(
    engine: CodeModeEngine, sessions: SessionManager, ws: Path, **kw: Any
) -> Harness:
    return await build_harness(
        engine,
        sessions,
        ws,
        extra_tools=[WEATHER, text_tool("quick", "fast")],
        code_mode_config=code_mode(timeout_ms=600_000),
        **kw,
    )


@pytest.mark.anyio
async def test_a_client_call_suspends_at_once_and_wait_delivers_the_apps_result(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    h = await _harness(engine, sessions, workspace)
    # The step budget is 10 minutes: returning inside the test deadline shows the engine did
    # not wait for a result that only a later request can bring.
    with anyio.fail_after(60):
        parked = await h.exec(PROGRAM)
    assert parked["status"] == "waiting" and parked["reason"] == "client_tool"
    assert parked["pendingToolCalls"] == [
        {"id": "2", "toolId": "client:app:get_weather", "toolName": "get_weather"}
    ]
    (held,) = engine.client_calls.for_turn(h.run_id)
    assert held.name == "get_weather" and held.arguments == {"city": "Paris"}
    assert engine.client_calls.for_turn("another_turn") == []
    # Waiting before the app answered returns at once, still waiting for the client.
    with anyio.fail_after(60):
        again = await h.wait(parked["runId"])
    assert again["status"] == "waiting" and again["reason"] == "client_tool"

    assert not engine.client_calls.settle("agent:main:other", held.id, ToolResult.text("x"))
    assert engine.client_calls.settle(h.session.key, held.id, ToolResult.text("Sunny"))
    assert not engine.client_calls.settle(h.session.key, held.id, ToolResult.text("twice"))
    done = await h.wait(again["runId"])
    assert done["status"] == "completed", done
    assert done["value"] == {"local": "fast", "weather": "Sunny"}
    assert engine.client_calls.pending(h.session.key) == []
    started = [e.tool_name for e in h.started() if e.parent_call_id]
    assert started == ["quick"]  # the client tool never ran in the gateway


@pytest.mark.anyio
async def test_the_apps_result_is_written_with_the_run_and_survives_a_restart(
    sessions: SessionManager, workspace: Path, tmp_path: Path
) -> None:
    runs = tmp_path / "runs"
    before = CodeModeEngine(FileRunStore(runs))
    async with before.running():
        h = await _harness(before, sessions, workspace)
        parked = await h.exec(PROGRAM)
        (held,) = before.client_calls.pending(h.session.key)
        assert before.client_calls.settle(h.session.key, held.id, ToolResult.text("Rain"))
        path = runs / f"{parked['runId']}.run"

        def settled_on_disk() -> bool:
            if not path.exists():
                return False
            record, _ = decode(path.read_bytes())
            return [c.result.text_content for c in record.calls if c.result] == ["Rain"]

        await wait_until(settled_on_disk, "the client's result to be written")

    after = CodeModeEngine(FileRunStore(runs))
    async with after.running():
        h2 = await _harness(after, sessions, workspace, run_id="run_after")
        done = await h2.wait(parked["runId"])
    assert done["value"] == {"local": "fast", "weather": "Rain"}


@pytest.mark.anyio
async def test_a_deferred_tool_invoked_directly_refuses_to_pretend() -> None:
    result = await WEATHER.call({"city": "Paris"}, None)  # type: ignore[arg-type]
    assert result.is_error and result.text_content == NOT_HERE
