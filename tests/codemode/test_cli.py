"""The issue's "done when", through the real CLI: `nodmix agent --local` in a subprocess with
`tools.codeMode: true` (timeoutMs 1000) and the scripted OpenAI-compatible model server."""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nodmix.messages import ToolResultMessage
from nodmix.providers.base import ModelRequest
from nodmix.providers.fake import ModelReply
from nodmix.testing.model_server import ScriptedModelServer
from tests.support.cli import run_nodmix

READ_PROGRAM = """
const hits = await tools.search('read file');
const entry = await tools.describe(hits[0].id);
const result = await tools.call(entry.id, { path: 'notes.txt' });
return result.text;
"""
SHELL_PROGRAM = """
const r = await tools.call('nodmix:core:exec', { command: 'sleep 2; echo hi' });
text('after restore');
return r.text;
"""


class Script:
    """Runs one exec program per turn, follows `waiting` with `wait`, answers with the value."""

    def __init__(self) -> None:
        self.programs: deque[str] = deque()
        self.results: list[dict[str, Any]] = []

    def __call__(self, request: ModelRequest) -> ModelReply:
        last = request.messages[-1]
        if isinstance(last, ToolResultMessage):
            data = json.loads(last.text)
            self.results.append(data)
            if data["status"] == "waiting":
                return ModelReply.tool_call("wait", {"runId": data["runId"]})
            return ModelReply.text(f"value: {data.get('value')}")
        return ModelReply.tool_call("exec", {"code": self.programs.popleft()})


@pytest.fixture
def served() -> Iterator[tuple[ScriptedModelServer, Script]]:
    script = Script()
    with ScriptedModelServer(script) as server:
        yield server, script


def _configure(state: Path, base_url: str) -> None:
    (state / "nodmix.json").write_text(
        json.dumps(
            {
                "models": {
                    "providers": {
                        "local": {
                            "api": "openai-completions",
                            "baseUrl": base_url,
                            "apiKey": "test",
                            "models": [{"id": "scripted"}],
                        }
                    }
                },
                "agents": {"defaults": {"model": {"primary": "local/scripted"}}},
                "tools": {"codeMode": {"enabled": True, "timeoutMs": 1000}},
            }
        ),
        encoding="utf-8",
    )
    workspace = state / "workspace"
    workspace.mkdir(exist_ok=True)
    (workspace / "notes.txt").write_text("The ferry leaves at 9:40.\n", encoding="utf-8")


def test_agent_cli_reads_a_file_and_resumes_a_slow_shell_call_with_code_mode(
    isolated_state: Path, served: tuple[ScriptedModelServer, Script]
) -> None:
    server, script = served
    _configure(isolated_state, server.base_url)

    script.programs.append(READ_PROGRAM)
    read = run_nodmix(isolated_state, "agent", "--local", "-m", "read my notes", "--json")
    assert read.returncode == 0, read.stderr
    assert json.loads(read.stdout)["reply"].startswith("value: The ferry leaves at 9:40.")
    for recorded in server.requests:
        assert sorted(t["function"]["name"] for t in recorded.body["tools"]) == ["exec", "wait"]

    script.results.clear()
    script.programs.append(SHELL_PROGRAM)
    shell = run_nodmix(isolated_state, "agent", "--local", "-m", "run the slow one", "--json")
    assert shell.returncode == 0, shell.stderr
    first, *rest = script.results
    assert first["status"] == "waiting" and first["reason"] == "pending_tools"
    assert first["pendingToolCalls"][0]["toolId"] == "nodmix:core:exec"
    final = rest[-1]
    assert final["status"] == "completed"
    assert final["value"].startswith("hi\n")
    assert final["output"] == [{"type": "text", "text": "after restore"}]
    out = json.loads(shell.stdout)
    assert [c["name"] for c in out["toolCalls"]] == ["exec"] + ["wait"] * len(rest)
    # The second turn replayed the first turn's exec call and its result, nothing nested.
    replayed = server.requests[-1].body["messages"]
    calls = [c["function"]["name"] for m in replayed for c in m.get("tool_calls") or []]
    assert calls == ["exec", "exec"] + ["wait"] * len(rest)
    assert json.loads(replayed[3]["content"])["status"] == "completed"

    exported = run_nodmix(
        isolated_state, "sessions", "export-trajectory", "--session-key", "agent:main:main"
    )
    assert exported.returncode == 0, exported.stderr
    doc = json.loads(exported.stdout)
    calls = [c for item in doc["items"] if item["kind"] == "assistant" for c in item["toolCalls"]]
    read_exec, shell_exec = (c for c in calls if c["name"] == "exec")
    assert [n["name"] for n in read_exec["nested"]] == ["read"]
    assert all(not c["nested"] for c in calls if c["name"] == "wait")
    assert [n["arguments"] for n in shell_exec["nested"]] == [{"command": "sleep 2; echo hi"}]


def test_agent_cli_fails_closed_when_the_runtime_is_missing(
    isolated_state: Path, tmp_path: Path, served: tuple[ScriptedModelServer, Script]
) -> None:
    server, script = served
    _configure(isolated_state, server.base_url)
    script.programs.append("return 1")
    empty = tmp_path / "no-runtime"
    empty.mkdir()
    done = run_nodmix(
        isolated_state,
        "agent",
        "--local",
        "-m",
        "hi",
        # First use fetches the runtime; from an unreachable registry that fails closed.
        env={"NODMIX_CACHE_DIR": str(empty), "NODMIX_NPM_REGISTRY": "http://127.0.0.1:9"},
    )
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 2, done.stderr
    assert "fetching its sandbox runtime" in lines[0]
    assert "nodmix sandbox install" in lines[1], done.stderr
    assert "Traceback" not in done.stderr
    assert server.requests == []  # no model request with a broad tool surface went out
