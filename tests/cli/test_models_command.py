"""`nodmix models list|set|test` against a scripted model server."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from nodmix.testing.model_server import ScriptedModelServer
from nodmix.testing.scripts.echo import respond as echo
from tests.gateway.support import run_nodmix, write_config

pytestmark = pytest.mark.integration


@pytest.fixture
def configured(isolated_state: Path) -> Iterator[Path]:
    with ScriptedModelServer(echo) as server:
        dead = _closed_port()
        write_config(
            isolated_state,
            server.base_url,
            agents="list: [{ id: 'helper', model: 'down/gone' }]",
            providers=(
                f"down: {{ api: 'openai-completions', baseUrl: 'http://127.0.0.1:{dead}/v1', "
                "models: [{ id: 'gone' }, { id: 'spare' }] }"
            ),
        )
        yield isolated_state


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def test_list_shows_configured_models_and_which_agents_use_them(configured: Path) -> None:
    done = run_nodmix(configured, "models", "list", "--json")
    assert done.returncode == 0, done.stderr
    rows = {row["ref"]: row for row in json.loads(done.stdout)}
    assert rows["local/scripted"]["usedBy"] == ["main"]
    assert rows["local/scripted"]["contextWindow"] == 32000
    assert rows["down/gone"]["usedBy"] == ["helper"]
    assert rows["down/spare"]["usedBy"] == []
    assert not any(ref.startswith("openai/") for ref in rows)


def test_test_reports_each_model_and_fails_when_one_does_not_answer(configured: Path) -> None:
    one = run_nodmix(configured, "models", "test", "local/scripted")
    every = run_nodmix(configured, "models", "test", "--json", "--timeout", "5")
    assert one.returncode == 0 and one.stdout.startswith("✓ local/scripted: answered in")
    assert every.returncode == 1
    results = {r["model"]: r for r in json.loads(every.stdout)}
    assert results["local/scripted"]["answers"] is True
    assert results["down/gone"]["answers"] is False and results["down/gone"]["detail"]


def test_set_changes_the_default_or_one_agent_and_refuses_unknown_models(
    configured: Path,
) -> None:
    default = run_nodmix(configured, "models", "set", "down/spare")
    agent = run_nodmix(configured, "models", "set", "local/scripted", "--agent", "helper")
    unknown = run_nodmix(configured, "models", "set", "down/nothing")
    no_agent = run_nodmix(configured, "models", "set", "local/scripted", "--agent", "ghost")
    config = json.loads((configured / "nodmix.json").read_text())
    assert default.returncode == 0 and agent.returncode == 0
    assert config["agents"]["defaults"]["model"]["primary"] == "down/spare"
    assert config["agents"]["list"][0]["model"] == "local/scripted"
    assert unknown.returncode == 1 and "unknown model 'nothing'" in unknown.stderr
    assert no_agent.returncode == 1 and "unknown agent 'ghost'" in no_agent.stderr
    assert "Traceback" not in unknown.stderr + no_agent.stderr
