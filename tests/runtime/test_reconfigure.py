"""Live configuration changes applied to a running runtime keep what they do not change."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from nodmix.config.loader import load_config
from nodmix.runtime import Runtime, TurnOutcome
from nodmix.runtime.reconfigure import apply_config
from nodmix.testing.model_server import ScriptedModelServer
from tests.gateway.support import NO_RETRY, write_config
from tests.security.support import exec_policy, shell_model

pytestmark = pytest.mark.anyio


@pytest.fixture
def server(isolated_state: Path) -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer(shell_model) as running:
        yield running


async def test_exec_policy_still_refuses_commands_after_plugins_are_reloaded(
    server: ScriptedModelServer, isolated_state: Path
) -> None:
    policy = exec_policy(security="deny", ask="off")
    write_config(isolated_state, server.base_url, policy)
    env = dict(os.environ)
    marker = isolated_state / "marker"
    async with Runtime.open(load_config(env=env), env=env, retry=NO_RETRY) as runtime:
        # `nodmix plugins enable notes` while the gateway runs: the plugins section changes.
        write_config(
            isolated_state, server.base_url, policy + ", plugins: { entries: { notes: {} } }"
        )
        applied = await apply_config(runtime, load_config(env=env), ["plugins"])
        assert applied == ["plugins"]
        outcome = await runtime.submit(f"run touch {marker}", session_key="work")
    assert isinstance(outcome, TurnOutcome)
    assert "tools.exec.security: deny" in outcome.result.reply
    assert not marker.exists()


async def test_a_reload_reaches_the_next_turn_agent_instructions_and_core_tool_settings(
    server: ScriptedModelServer, isolated_state: Path
) -> None:
    def write(instructions: str, timeout: int) -> None:
        write_config(
            isolated_state,
            server.base_url,
            f"tools: {{ exec: {{ timeoutSeconds: {timeout} }} }}",
            agents=f"list: [{{ id: 'main', instructions: '{instructions}' }}]",
        )

    def exec_timeout_text(index: int) -> str:
        request = server.requests[index].request
        assert request is not None
        spec = next(t for t in request.tools if t.name == "exec")
        return str(spec.parameters["properties"]["timeout"]["description"])

    write("Answer in English.", 30)
    env = dict(os.environ)
    async with Runtime.open(load_config(env=env), env=env, retry=NO_RETRY) as runtime:
        await runtime.submit("hello", session_key="work")
        await runtime.submit("hello again", session_key="work")  # served from the caches
        write("Answer in French.", 45)
        applied = await apply_config(runtime, load_config(env=env), ["agents", "tools"])
        await runtime.submit("and now?", session_key="work")
    systems = [r.request.system if r.request else "" for r in server.requests]
    assert applied == ["agents", "tools"]
    assert ["English" in s for s in systems] == [True, True, False]
    assert "French" in systems[2]
    assert "(default 30)" in exec_timeout_text(1)
    assert "(default 45)" in exec_timeout_text(2)
