"""`NODMIX_DEBUG_CODE_MODE=1` and `NODMIX_DEBUG_MODEL_PAYLOAD=tools`: the log records the spec
promises, through a real `Runtime` and the scripted OpenAI-compatible model server."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

import pytest

from nodmix.config import load_config
from nodmix.messages import ToolResultMessage
from nodmix.providers.base import ModelRequest
from nodmix.providers.fake import ModelReply
from nodmix.runtime import Runtime
from nodmix.testing.model_server import ScriptedModelServer

CODE = "const p = yield_control('pause'); await p; return ALL_TOOLS.length"


def _respond(request: ModelRequest) -> ModelReply:
    last = request.messages[-1]
    if isinstance(last, ToolResultMessage):
        try:
            details = json.loads(last.text)  # over the wire the model reads the JSON text
        except ValueError:  # code mode is off: that was the shell `exec` tool
            return ModelReply.text("no code mode")
        if details["status"] == "waiting":
            return ModelReply.tool_call("wait", {"runId": details["runId"]})
        return ModelReply.text(f"tools: {details.get('value')}")
    return ModelReply.tool_call("exec", {"code": CODE})


def _config(state: Path, base_url: str, code_mode: Any) -> Path:
    path = state / "nodmix.json"
    path.write_text(
        json.dumps(
            {
                "models": {
                    "providers": {
                        "local": {
                            "api": "openai-completions",
                            "baseUrl": base_url,
                            "apiKey": "sk-test-secret-value",
                            "models": [{"id": "scripted"}],
                        }
                    }
                },
                "agents": {"defaults": {"model": {"primary": "local/scripted"}}},
                "tools": {"codeMode": code_mode},
            }
        ),
        encoding="utf-8",
    )
    return path


async def _turn(isolated_state: Path, env: dict[str, str], code_mode: Any = True) -> str:
    async with ScriptedModelServer(_respond) as server:
        loaded = load_config(_config(isolated_state, server.base_url, code_mode))
        async with Runtime.open(loaded, env={**os.environ, **env}) as runtime:
            outcome = await runtime.run_turn("count the tools")
    return outcome.result.reply


@pytest.mark.anyio
async def test_debug_code_mode_logs_activation_cells_suspensions_and_waits(
    isolated_state: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("NODMIX_DEBUG_CODE_MODE", "1")
    with caplog.at_level(logging.INFO, logger="nodmix.codemode"):
        reply = await _turn(isolated_state, {})
    # Five core tools, memory_search, memory_get, cron and the five session tools, plus
    # skills_list and skill_read.
    assert reply == "tools: 15"
    messages = [r.getMessage() for r in caplog.records if r.name == "nodmix.codemode"]
    assert any(
        m.startswith("code mode active for run run_")
        and "model tools exec,wait; hidden catalog 15 tools" in m
        and "'nodmix': 15" in m
        for m in messages
    ), messages
    assert any(m.startswith("code mode exec call_") and "(javascript," in m for m in messages)
    assert any(" -> waiting cm_" in m for m in messages)
    assert any(m.startswith("code mode run cm_") and "suspended (yield" in m for m in messages)
    assert any(m.startswith("code mode wait cm_") and m.endswith("-> completed") for m in messages)
    assert not any("sk-test-secret-value" in m for m in messages)


@pytest.mark.anyio
async def test_without_the_variable_code_mode_logs_nothing(
    isolated_state: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.delenv("NODMIX_DEBUG_CODE_MODE", raising=False)
    with caplog.at_level(logging.INFO, logger="nodmix.codemode"):
        await _turn(isolated_state, {})
    assert [r for r in caplog.records if r.name == "nodmix.codemode"] == []


@pytest.mark.anyio
async def test_debug_model_payload_tools_logs_exactly_exec_and_wait(
    isolated_state: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="nodmix.providers"):
        await _turn(isolated_state, {"NODMIX_DEBUG_MODEL_PAYLOAD": "tools"})
    lines = [r.getMessage() for r in caplog.records if r.name == "nodmix.providers"]
    payload_lines = [m for m in lines if "payload tools:" in m]
    assert payload_lines and all(m == "local payload tools: exec,wait" for m in payload_lines)
    assert len(payload_lines) == 3  # exec, wait, final answer: one request each


@pytest.mark.anyio
async def test_debug_model_payload_tools_shows_the_full_list_without_code_mode(
    isolated_state: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="nodmix.providers"):
        await _turn(isolated_state, {"NODMIX_DEBUG_MODEL_PAYLOAD": "tools"}, code_mode=False)
    lines = [r.getMessage() for r in caplog.records if "payload tools:" in r.getMessage()]
    assert lines[0] == (
        "local payload tools: exec,read,write,edit,web_fetch,memory_search,memory_get,cron,"
        "sessions_spawn,sessions_send,sessions_list,sessions_history,agents_list"
    )


@pytest.mark.anyio
async def test_debug_model_payload_full_redacted_hides_the_api_key(
    isolated_state: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="nodmix.providers"):
        await _turn(isolated_state, {"NODMIX_DEBUG_MODEL_PAYLOAD": "full-redacted"})
    payloads = [r.getMessage() for r in caplog.records if " payload: " in r.getMessage()]
    assert payloads and all("sk-test-secret-value" not in p for p in payloads)
    first = json.loads(payloads[0].split(" payload: ", 1)[1])
    assert sorted(t["function"]["name"] for t in first["tools"]) == ["exec", "wait"]
