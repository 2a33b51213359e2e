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
