"""Activation and the model-facing surface: exactly `exec` and `wait` when code mode is active,
the unchanged tool list when it is not, the fail-closed payload guard, and fail-closed runtime
checks. Model traffic goes over a real socket to the scripted OpenAI-compatible server."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from nodmix.codemode import VISIBLE_TOOL_NAMES, CodeModeEngine
from nodmix.config.schema import AgentToolsConfig, CodeModeConfig, ToolsConfig
from nodmix.errors import ProviderRequestError, RuntimeUnavailableError
from nodmix.loop import RunTools
from nodmix.messages import ToolResultMessage, user_message
from nodmix.providers.base import ModelRequest, ModelSpec
from nodmix.providers.fake import FunctionProvider, ModelReply
from nodmix.providers.openai.provider import OpenAIProvider
from nodmix.sessions import SessionManager
from nodmix.testing.model_server import ScriptedModelServer
from nodmix.tools import Tool, core_tools

from .support import build_harness, code_mode, run_model_turn, text_tool

CORE_NAMES = ["exec", "read", "write", "edit", "web_fetch"]


def _body_tool_names(body: dict[str, Any]) -> list[str]:
    return [t["function"]["name"] for t in body.get("tools", [])]


def _answer_after_tool(request: ModelRequest) -> ModelReply:
    last = request.messages[-1]
    if isinstance(last, ToolResultMessage):
        return ModelReply.text("done")
    return ModelReply.tool_call("exec", {"code": "return ALL_TOOLS.length"})


@pytest.mark.anyio
@pytest.mark.parametrize(
    "setting", [None, False, CodeModeConfig(), CodeModeConfig(enabled=False, timeout_ms=500)]
)
async def test_disabled_code_mode_leaves_the_tool_list_unchanged(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path, setting: Any
) -> None:
    extra = [text_tool("lookup"), text_tool("pick_file", owner="app", source="client")]
    harness = await build_harness(
        engine, sessions, workspace, code_mode_config=setting, extra_tools=extra
    )
    assert harness.visible_names == [*CORE_NAMES, "lookup", "pick_file"]
    assert harness.tools.expected_tool_names is None and not harness.tools.code_mode


@pytest.mark.anyio
async def test_enabled_code_mode_shows_only_exec_and_wait_and_hides_the_shell_exec(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    harness = await build_harness(
        engine, sessions, workspace, extra_tools=[text_tool("lookup")], code_mode_config=True
    )
    assert harness.visible_names == ["exec", "wait"]
    assert harness.tools.expected_tool_names == VISIBLE_TOOL_NAMES == {"exec", "wait"}
    assert harness.tools.code_mode
    assert harness.exec_tool.origin.id == "nodmix:codemode:exec"  # not the shell tool
    ids = await harness.value("return ALL_TOOLS.map(t => t.id)")
    assert "nodmix:core:exec" in ids and "nodmix:core:lookup" in ids


@pytest.mark.anyio
async def test_exec_and_wait_schemas_are_flat_with_both_languages_and_name_the_enabled_one(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    harness = await build_harness(
        engine, sessions, workspace, code_mode_config=code_mode(languages=["javascript"])
    )
    params = harness.exec_tool.spec.parameters
    assert set(params["properties"]) == {"code", "command", "language"}
    assert params["properties"]["language"] == {
        "type": "string",
        "enum": ["javascript", "typescript"],
        "description": params["properties"]["language"]["description"],
    }
    assert 'Only language "javascript" is enabled.' in harness.exec_tool.spec.description
    assert "required" not in params
    assert "oneOf" not in str(params) and "anyOf" not in str(params)
    assert 'Only language "javascript"' in harness.exec_tool.spec.description
    wait = harness.wait_tool.spec.parameters
    assert wait["required"] == ["runId"] and wait["properties"]["runId"]["type"] == "string"


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("tools_config", "agent_tools", "disable_tools"),
    [
        (ToolsConfig(allow=[]), None, False),
        (ToolsConfig(), AgentToolsConfig(allow=[]), False),
        (ToolsConfig(deny=["*"]), None, False),
        (ToolsConfig(), None, True),
    ],
    ids=["global-empty-allow", "agent-empty-allow", "everything-denied", "disableTools"],
)
async def test_runs_without_tools_never_activate_code_mode(
    engine: CodeModeEngine,
    sessions: SessionManager,
    workspace: Path,
    tools_config: ToolsConfig,
    agent_tools: AgentToolsConfig | None,
    disable_tools: bool,
) -> None:
    harness = await build_harness(
        engine,
        sessions,
        workspace,
        code_mode_config=True,
        tools_config=tools_config,
        agent_tools=agent_tools,
        disable_tools=disable_tools,
    )
    assert harness.visible_names == []
    assert harness.tools.expected_tool_names is None and not harness.tools.code_mode
    # The turn goes out with no tools at all and no payload enforcement.
    provider = FunctionProvider(lambda request: ModelReply.text("plain answer"))
    result = await run_model_turn(harness, provider)
    assert result.reply == "plain answer"
    (request,) = provider.requests
    assert request.tools == [] and request.expected_tool_names is None
    assert "exec" not in request.system.split("Tools:")[-1][:40]


@pytest.mark.anyio
async def test_raw_model_requests_without_a_code_mode_surface_are_not_enforced() -> None:
    async with ScriptedModelServer(lambda request: ModelReply.text("raw")) as server:
        provider = OpenAIProvider(name="local", base_url=server.base_url, api_key="k")
        request = ModelRequest(
            model=ModelSpec(provider="local", id="scripted"),
            system="s",
            messages=[user_message("hi")],
            tools=[t.spec for t in core_tools()],
        )
        events = [e async for e in provider.stream(request)]
        await provider.aclose()
    assert events and len(server.requests) == 1
    assert _body_tool_names(server.requests[0].body) == CORE_NAMES


@pytest.mark.anyio
async def test_model_over_a_real_socket_sees_exactly_exec_and_wait(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    harness = await build_harness(
        engine,
        sessions,
        workspace,
        extra_tools=[text_tool("lookup"), text_tool("pick_file", owner="app", source="client")],
    )
    async with ScriptedModelServer(_answer_after_tool) as server:
        provider = OpenAIProvider(name="local", base_url=server.base_url, api_key="k")
        result = await run_model_turn(harness, provider)
        await provider.aclose()
    assert result.reply == "done"
    assert len(server.requests) == 2
    for recorded in server.requests:
        assert sorted(_body_tool_names(recorded.body)) == ["exec", "wait"]
    system = server.requests[0].body["messages"][0]["content"]
    assert "`exec`" in system and "lookup" not in system and "pick_file" not in system


@pytest.mark.anyio
async def test_disabled_code_mode_sends_every_tool_over_the_socket(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    harness = await build_harness(
        engine, sessions, workspace, code_mode_config=False, extra_tools=[text_tool("lookup")]
    )
    async with ScriptedModelServer(lambda request: ModelReply.text("hi")) as server:
        provider = OpenAIProvider(name="local", base_url=server.base_url, api_key="k")
        await run_model_turn(harness, provider)
        await provider.aclose()
    assert _body_tool_names(server.requests[0].body) == [*CORE_NAMES, "lookup"]


@pytest.mark.anyio
@pytest.mark.parametrize(
    "leak",
    [["read"], ["exec"], []],
    ids=["extra-tool-slipped-through", "duplicate-exec", "wait-missing"],
)
async def test_payload_without_exactly_exec_and_wait_fails_closed_before_sending(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path, leak: list[str]
) -> None:
    harness = await build_harness(engine, sessions, workspace)
    exec_tool, wait_tool = harness.exec_tool, harness.wait_tool
    extra = [t for t in core_tools() if t.spec.name in leak]
    visible: tuple[Tool, ...] = (
        (exec_tool, *extra) if leak == [] else (exec_tool, wait_tool, *extra)
    )
    harness.tools = RunTools(
        visible=visible, expected_tool_names=VISIBLE_TOOL_NAMES, code_mode=True
    )
    async with ScriptedModelServer(lambda request: ModelReply.text("never")) as server:
        provider = OpenAIProvider(name="local", base_url=server.base_url, api_key="k")
        with pytest.raises(ProviderRequestError, match="code mode payload tool surface"):
            await run_model_turn(harness, provider)
        await provider.aclose()
        assert server.requests == []  # nothing left the process
    fake = FunctionProvider(lambda request: ModelReply.text("never"))
    with pytest.raises(ProviderRequestError, match="expected exec,wait"):
        await run_model_turn(harness, fake)
    assert fake.requests == []


@pytest.mark.anyio
async def test_enabled_code_mode_with_a_missing_runtime_fails_closed(
    engine: CodeModeEngine,
    sessions: SessionManager,
    workspace: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    empty_cache = tmp_path / "empty-cache"
    empty_cache.mkdir()
    monkeypatch.setenv("NODMIX_CACHE_DIR", str(empty_cache))
    # First use would fetch the runtime; an unreachable registry makes that fail.
    monkeypatch.setenv("NODMIX_NPM_REGISTRY", "http://127.0.0.1:9")
    with pytest.raises(RuntimeUnavailableError, match="nodmix sandbox install"):
        await build_harness(engine, sessions, workspace, code_mode_config=True)
    # Disabled code mode does not need the runtime: the normal tools are built as usual.
    plain = await build_harness(engine, sessions, workspace, code_mode_config=False)
    assert plain.visible_names == CORE_NAMES
