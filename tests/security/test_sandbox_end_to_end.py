"""The sandbox as a user meets it: `nodmix agent` with a scripted model, and `/tools/invoke`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from nodmix.messages import ToolResultMessage
from nodmix.providers.base import ModelRequest
from nodmix.providers.fake import ModelReply
from nodmix.testing.model_server import ScriptedModelServer
from tests.gateway.support import asgi_client


def _configure(state: Path, base_url: str, extra: str = "") -> None:
    """The scripted model, and `sandbox.mode: non-main` for every agent."""
    provider = (
        f"local: {{ api: 'openai-completions', baseUrl: '{base_url}', "
        "apiKey: 'sk-test-secret-key', models: [{ id: 'scripted' }] }"
    )
    (state / "nodmix.json").write_text(
        f"{{ models: {{ providers: {{ {provider} }} }}, agents: {{ defaults: {{ "
        "model: { primary: 'local/scripted' }, sandbox: { mode: 'non-main' } } }, "
        f"{extra} }}",
        encoding="utf-8",
    )


def _probe(state: Path) -> str:
    return f"cat {state}/nodmix.json; echo > {state}/planted; id -u; echo WS=$(pwd)"


def _exec_then_echo(command: str) -> Callable[[ModelRequest], ModelReply]:
    """A model that runs `command` once, then answers with the tool result it got."""

    def respond(request: ModelRequest) -> ModelReply:
        last = request.messages[-1]
        if isinstance(last, ToolResultMessage):
            return ModelReply.text("\n".join(b.text for b in last.content if hasattr(b, "text")))
        return ModelReply.tool_call("exec", {"command": command})

    return respond


def _code_mode_exec_then_echo(command: str) -> Callable[[ModelRequest], ModelReply]:
    """A code-mode model: one program whose nested `exec` runs `command`, then the result."""
    program = (
        f"const r = await tools.call('nodmix:core:exec', {{ command: {json.dumps(command)} }});"
        " return r.text;"
    )

    def respond(request: ModelRequest) -> ModelReply:
        last = request.messages[-1]
        if isinstance(last, ToolResultMessage):
            return ModelReply.text("\n".join(b.text for b in last.content if hasattr(b, "text")))
        return ModelReply.tool_call("exec", {"code": program})

    return respond


def _agent(state: Path, *args: str) -> dict[str, Any]:
    env = {
        **os.environ,
        "NODMIX_STATE_DIR": str(state),
        "NODMIX_CONFIG_PATH": str(state / "nodmix.json"),
    }
    done = subprocess.run(
        [sys.executable, "-m", "nodmix", "agent", "--local", "--json", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    out: dict[str, Any] = json.loads(done.stdout)
    return out


def test_a_non_main_session_runs_exec_in_the_sandbox_and_main_does_not(
    isolated_state: Path,
) -> None:
    with ScriptedModelServer(_exec_then_echo(_probe(isolated_state))) as server:
        _configure(isolated_state, server.base_url)
        work = _agent(isolated_state, "--session-key", "work", "-m", "look around")
        assert work["sessionKey"] == "agent:main:work"
        assert "sk-test-secret-key" not in work["reply"]
        assert "No such file or directory" in work["reply"]
        assert not (isolated_state / "planted").exists()
        assert f"WS={isolated_state / 'workspace'}" in work["reply"]

        main = _agent(isolated_state, "-m", "look around")
        assert main["sessionKey"] == "agent:main:main"
        assert "sk-test-secret-key" in main["reply"]
        assert (isolated_state / "planted").exists()


def test_a_code_mode_program_in_a_non_main_session_runs_its_nested_exec_sandboxed(
    isolated_state: Path,
) -> None:
    with ScriptedModelServer(_code_mode_exec_then_echo(_probe(isolated_state))) as server:
        _configure(isolated_state, server.base_url, "tools: { codeMode: true }")
        work = _agent(isolated_state, "--session-key", "work", "-m", "look around")
    assert [c["name"] for c in work["toolCalls"]] == ["exec"]
    assert "No such file or directory" in work["reply"]
    assert "sk-test-secret-key" not in work["reply"]
    assert not (isolated_state / "planted").exists()


@pytest.mark.anyio
async def test_tools_invoke_applies_the_sandbox_of_the_named_session(
    isolated_state: Path,
) -> None:
    _configure(isolated_state, "http://127.0.0.1:9/v1")  # no model call is made
    probe = {"tool": "exec", "args": {"command": _probe(isolated_state)}}
    async with asgi_client() as client:
        sandboxed = await client.post("/tools/invoke", json={**probe, "sessionKey": "api"})
    body = sandboxed.json()
    assert body["result"]["details"]["sandboxed"] is True
    assert "sk-test-secret-key" not in body["result"]["text"]
    assert not (isolated_state / "planted").exists()
