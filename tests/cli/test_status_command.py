"""`nodmix status` as an operator runs it: a stopped gateway, a running one, a dead model."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nodmix.testing.model_server import ScriptedModelServer
from nodmix.testing.scripts.tool_then_answer import respond as tool_then_answer
from tests.gateway.support import GatewayProcess, run_nodmix, write_config

pytestmark = pytest.mark.integration


@pytest.fixture
def model_server() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer(tool_then_answer) as server:
        yield server


def _status(state: Path, *args: str) -> dict[str, Any]:
    done = run_nodmix(state, "status", "--json", *args)
    assert done.returncode == 0, done.stderr
    report: dict[str, Any] = json.loads(done.stdout)
    return report


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def test_status_json_reflects_a_stopped_then_running_then_stopped_gateway(
    isolated_state: Path, model_server: ScriptedModelServer
) -> None:
    extra = (
        "mcp: { servers: { clock: { command: 'mcp-server-time', enabled: false } } }, "
        f"gateway: {{ port: {_free_port()} }}"
    )
    write_config(isolated_state, model_server.base_url, extra)
    before = _status(isolated_state)
    with GatewayProcess(isolated_state) as gateway:
        during = _status(isolated_state)
        done = run_nodmix(isolated_state, "agent", "-m", "hello", "--url", gateway.url)
        assert done.returncode == 0, done.stderr
        after_turn = _status(isolated_state, "--no-probe")
        code, _ = gateway.stop()
    after = _status(isolated_state, "--no-probe")

    assert before["gateway"]["running"] is False
    assert before["gateway"]["url"].startswith("http://127.0.0.1:")
    assert during["gateway"]["running"] is True
    assert during["gateway"]["url"] == gateway.url  # found on its port-0 address
    assert during["gateway"]["version"] == during["version"]
    assert isinstance(during["gateway"]["pid"], int)
    assert code == 0 and after["gateway"]["running"] is False
    assert not (isolated_state / "gateway.json").exists()

    [agent] = during["agents"]
    assert agent["id"] == "main" and agent["models"] == ["local/scripted"]
    [probe] = agent["probes"]
    assert probe["answers"] is True and probe["latencyMs"] >= 0
    assert "probes" not in after_turn["agents"][0]
    assert before["sessions"] == {"main": 0} and after_turn["sessions"] == {"main": 1}
    assert during["channels"] == []
    assert during["mcpServers"] == [
        {"name": "clock", "enabled": False, "transport": "stdio", "target": "mcp-server-time"}
    ]
    assert during["codeMode"]["runtime"] == "quickjs-wasi"
    assert during["codeMode"]["enabledFor"] == []
    assert during["lastErrors"] == []


def test_a_model_that_does_not_answer_is_reported_with_the_reason_and_last_errors_shown(
    isolated_state: Path,
) -> None:
    # A port nothing listens on: a gateway someone runs on the default port is not this one.
    write_config(
        isolated_state,
        f"http://127.0.0.1:{_free_port()}/v1",
        extra=f"gateway: {{ port: {_free_port()} }},",
    )
    failed = run_nodmix(isolated_state, "agent", "--local", "-m", "hello")
    report = _status(isolated_state, "--timeout", "5")
    text = run_nodmix(isolated_state, "status", "--no-probe")

    assert failed.returncode != 0
    [probe] = report["agents"][0]["probes"]
    assert probe["answers"] is False and probe["detail"]
    [error] = report["lastErrors"]
    assert error["logger"] == "nodmix.turns" and error["msg"].startswith("turn failed")
    assert text.returncode == 0
    assert "gateway:   not running" in text.stdout
    assert "local/scripted: not probed" in text.stdout
    assert "turn failed" in text.stdout
