"""`nodmix agent --local` end to end: a real subprocess, a real model server over a socket."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from nodmix.providers.fake import ModelReply
from nodmix.testing.model_server import ScriptedModelServer
from nodmix.testing.scripts.tool_then_answer import respond as tool_then_answer


@pytest.fixture
def model_server() -> Iterator[ScriptedModelServer]:
    server = ScriptedModelServer(tool_then_answer)
    with server:
        yield server


def _configure(state: Path, base_url: str, extra: str = "") -> None:
    provider = (
        f"local: {{ api: 'openai-completions', baseUrl: '{base_url}', apiKey: 'test', "
        "models: [{ id: 'scripted', contextWindow: 32000, maxTokens: 2048 }] }"
    )
    (state / "nodmix.json").write_text(
        f"{{ models: {{ providers: {{ {provider} }} }}, "
        f"agents: {{ defaults: {{ model: {{ primary: 'local/scripted' }} }} }}, {extra} }}",
        encoding="utf-8",
    )


def _nodmix(state: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "NODMIX_STATE_DIR": str(state),
        "NODMIX_CONFIG_PATH": str(state / "nodmix.json"),
    }
    return subprocess.run(
        [sys.executable, "-m", "nodmix", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )


def test_read_notes_round_trip_and_second_turn_sends_history(
    isolated_state: Path, model_server: ScriptedModelServer
) -> None:
    _configure(isolated_state, model_server.base_url)
    workspace = isolated_state / "workspace"
    workspace.mkdir()
    (workspace / "notes.txt").write_text("The ferry leaves at 9:40.", encoding="utf-8")

    first = _nodmix(isolated_state, "agent", "--local", "-m", "read notes.txt", "--json")
    assert first.returncode == 0, first.stderr
    out = json.loads(first.stdout)
    assert out["reply"] == "The ferry leaves at 9:40."
    assert out["sessionKey"] == "agent:main:main" and out["stopReason"] == "stop"
    assert [c["name"] for c in out["toolCalls"]] == ["read"]
    assert out["usage"]["input"] > 0

    transcript = isolated_state / "agents" / "main" / "sessions" / f"{out['sessionId']}.jsonl"
    lines = [json.loads(line) for line in transcript.read_text(encoding="utf-8").splitlines()]
    assert lines[0]["type"] == "session" and lines[0]["version"] == 3
    roles = [line["message"]["role"] for line in lines[1:]]
    assert roles == ["user", "assistant", "toolResult", "assistant"]
    assert lines[2]["message"]["content"][0]["type"] == "toolCall"

    model_server.respond = lambda request: ModelReply.text("second answer")
    second = _nodmix(isolated_state, "agent", "--local", "-m", "thanks", "--json")
    assert second.returncode == 0, second.stderr
    assert json.loads(second.stdout)["sessionId"] == out["sessionId"]
    sent = model_server.requests[-1].body["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool", "assistant", "user"]
    assert "9:40" in json.dumps(sent)


def test_missing_api_key_is_one_readable_line(isolated_state: Path) -> None:
    (isolated_state / "nodmix.json").write_text(
        '{agents: {defaults: {model: {primary: "openai/gpt-4.1-mini"}}}}', encoding="utf-8"
    )
    done = _nodmix(isolated_state, "agent", "--local", "-m", "hi")
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "OPENAI_API_KEY" in lines[0]
    assert "Traceback" not in done.stderr


def test_unknown_model_and_bad_config_are_one_line_errors(
    isolated_state: Path, model_server: ScriptedModelServer
) -> None:
    _configure(isolated_state, model_server.base_url)
    done = _nodmix(isolated_state, "agent", "--local", "-m", "hi", "--model", "nope/x")
    assert done.returncode == 1 and "nope" in done.stderr and "Traceback" not in done.stderr
    (isolated_state / "nodmix.json").write_text("{agents: {defualts: {}}}", encoding="utf-8")
    done = _nodmix(isolated_state, "agent", "--local", "-m", "hi")
    assert done.returncode == 1
    assert "agents.defualts" in done.stderr and "nodmix.json" in done.stderr


def test_a_corrupt_session_store_is_one_line_with_the_repair_command(
    isolated_state: Path, model_server: ScriptedModelServer
) -> None:
    _configure(isolated_state, model_server.base_url)
    assert _nodmix(isolated_state, "agent", "--local", "-m", "hi").returncode == 0
    store = isolated_state / "agents/main/sessions/sessions.json"
    store.write_text("garbage{", encoding="utf-8")
    done = _nodmix(isolated_state, "agent", "--local", "-m", "hi again")
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and str(store) in lines[0] and "repair-store" in lines[0]


def test_an_unreachable_model_server_is_one_line_naming_how_to_pick_another_model(
    isolated_state: Path,
) -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{probe.getsockname()[1]}/v1"
    _configure(isolated_state, url)
    done = _nodmix(isolated_state, "agent", "--local", "-m", "hi")
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "connection refused" in lines[0], done.stderr
    assert "config set agents.defaults.model.primary <provider/model>`)" in lines[0]


def test_verbose_flag_shows_the_traceback(isolated_state: Path) -> None:
    (isolated_state / "nodmix.json").write_text("{tools: {deny: 3}}", encoding="utf-8")
    done = _nodmix(isolated_state, "agent", "--local", "-m", "hi", "--verbose")
    assert done.returncode == 1 and "Traceback" in done.stderr


def test_no_tools_sends_no_tools_even_with_code_mode_on(
    isolated_state: Path, model_server: ScriptedModelServer
) -> None:
    _configure(isolated_state, model_server.base_url, "tools: { codeMode: true }")
    model_server.respond = lambda request: ModelReply.text("a plain answer")
    done = _nodmix(isolated_state, "agent", "--local", "--no-tools", "-m", "hi", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["reply"] == "a plain answer"
    body = model_server.requests[-1].body
    assert "tools" not in body or body["tools"] == []
    # Without the flag, the same config gives the model exactly exec and wait.
    again = _nodmix(isolated_state, "agent", "--local", "-m", "hi", "--json")
    assert again.returncode == 0, again.stderr
    names = [t["function"]["name"] for t in model_server.requests[-1].body["tools"]]
    assert names == ["exec", "wait"]
