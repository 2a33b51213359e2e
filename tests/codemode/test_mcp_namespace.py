"""The `MCP` namespace against real MCP servers (mcp-server-time from PyPI and
server-everything from npm, over stdio): virtual `.d.ts` API files, `$api()`, one-object calls
through the shared executor, policy, and suspension through `wait`."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from nodmix.codemode import CodeModeEngine
from nodmix.config.schema import MCPServerConfig, ToolsConfig
from nodmix.hooks import BeforeToolCallResult, ToolCallInfo
from nodmix.mcp import MCPManager
from nodmix.sessions import SessionManager

from .support import Harness, build_harness, code_mode, recording_hook

EVERYTHING_BIN = (
    Path(__file__).resolve().parents[2] / "node_modules" / ".bin" / "mcp-server-everything"
)


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    """Module scope, so the MCP servers start once for this module."""
    return "asyncio"


@pytest.fixture(scope="module")
async def mcp() -> AsyncIterator[MCPManager]:
    if not EVERYTHING_BIN.exists():
        pytest.fail(f"{EVERYTHING_BIN} is missing: run `npm ci` in the repository first")
    servers = {
        "time": MCPServerConfig(command=sys.executable, args=["-m", "mcp_server_time"]),
        "everything": MCPServerConfig(command=str(EVERYTHING_BIN), args=["stdio"]),
    }
    async with MCPManager(servers) as manager:
        yield manager


async def _harness(
    engine: CodeModeEngine,
    sessions: SessionManager,
    workspace: Path,
    mcp: MCPManager,
    **kwargs: Any,
) -> Harness:
    return await build_harness(engine, sessions, workspace, sources=[mcp], mcp=mcp, **kwargs)


@pytest.mark.anyio
async def test_api_files_expose_mcp_declarations_without_a_bridge_tool_call(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path, mcp: MCPManager
) -> None:
    h = await _harness(engine, sessions, workspace, mcp)
    (result,) = await h.run_to_end(
        """
        const listed = await API.list('mcp');
        const all = await API.list();
        const index = await API.read('mcp/index.d.ts');
        const time = await API.read('mcp/time.d.ts');
        return { listed: listed.files, same: JSON.stringify(all) === JSON.stringify(listed),
                 index: index.content, time: time.content, bytes: time.bytes };
        """
    )
    value = result["value"]
    assert [f["path"] for f in value["listed"]] == [
        "mcp/index.d.ts",
        "mcp/everything.d.ts",
        "mcp/time.d.ts",
    ]
    assert all(f["description"] and f["bytes"] > 0 for f in value["listed"])
    assert value["same"] is True
    assert '/// <reference path="./time.d.ts" />' in value["index"]
    assert "readonly time: typeof MCP.time;" in value["index"]
    time_dts = value["time"]
    assert "declare namespace MCP.time {" in time_dts
    assert "function getCurrentTime(" in time_dts and "function convertTime(" in time_dts
    assert "timezone: string;" in time_dts and "Promise<McpToolResult>" in time_dts
    assert value["bytes"] == len(time_dts.encode())
    # Reading declarations is local: no tool ran and nothing was counted as a call.
    assert h.started() == [] and result["telemetry"]["callCount"] == 0


@pytest.mark.anyio
async def test_api_read_rejects_unknown_paths_and_dot_segments(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path, mcp: MCPManager
) -> None:
    h = await _harness(engine, sessions, workspace, mcp)
    value = await h.value(
        """
        const out = [];
        for (const p of ['mcp/../etc/passwd', './mcp/index.d.ts', 'mcp//time.d.ts',
                         'mcp/nope.d.ts', '/mcp/time.d.ts']) {
          try { await API.read(p); out.push('READ'); }
          catch (e) { out.push(e.message.split(':')[0]); }
        }
        return out;
        """
    )
    assert "READ" not in value
    assert value[3] == "Unknown API file"


@pytest.mark.anyio
async def test_mcp_namespace_calls_visible_tools_with_one_object_argument(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path, mcp: MCPManager
) -> None:
    seen: list[ToolCallInfo] = []
    h = await _harness(
        engine, sessions, workspace, mcp, before_hooks=[("audit", recording_hook(seen))]
    )
    (result,) = await h.run_to_end(
        """
        const now = await MCP.time.getCurrentTime({ timezone: 'Europe/Paris' });
        const sum = await MCP.everything.getSum({ a: 2, b: 40 });
        const echo = await namespaces.MCP.everything.echo({ message: 'hi' });
        return { tz: now.structuredContent.timezone, sum: sum.content[0].text,
                 echo: echo.content[0].text, isError: echo.isError ?? false };
        """
    )
    assert result["value"] == {
        "tz": "Europe/Paris",
        "sum": "The sum of 2 and 40 is 42.",
        "echo": "Echo: hi",
        "isError": False,
    }
    nested = [(i.tool_id, i.tool_kind) for i in seen if i.tool_kind == "code_mode_nested"]
    assert nested == [
        ("mcp:time:get_current_time", "code_mode_nested"),
        ("mcp:everything:get-sum", "code_mode_nested"),
        ("mcp:everything:echo", "code_mode_nested"),
    ]
    assert result["telemetry"]["callCount"] == 3


@pytest.mark.anyio
async def test_direct_mcp_catalog_entries_are_absent_from_all_tools_and_tools(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path, mcp: MCPManager
) -> None:
    h = await _harness(engine, sessions, workspace, mcp)
    (result,) = await h.run_to_end(
        """
        const errors = [];
        for (const ref of ['mcp:time:get_current_time', 'time__get_current_time',
                           'get_current_time', 'everything__echo']) {
          try { await tools.describe(ref); errors.push('DESCRIBED'); }
          catch (e) { errors.push(e.message.split('.')[0]); }
          try { await tools.call(ref, { timezone: 'UTC' }); errors.push('CALLED'); }
          catch (e) { errors.push(e.message.split('.')[0]); }
        }
        return {
          sources: [...new Set(ALL_TOOLS.map(t => t.source))],
          search: (await tools.search('time timezone current', { limit: 50 })).map(t => t.id),
          shortcuts: Object.keys(tools).filter(k => k.includes('time') || k.includes('echo')),
          errors,
        };
        """
    )
    value = result["value"]
    assert value["sources"] == ["nodmix"]
    assert not any(i.startswith("mcp:") for i in value["search"])
    assert value["shortcuts"] == []
    assert all(e.startswith("Unknown tool id") for e in value["errors"]), value["errors"]
    # The entries stay in the run catalog (telemetry counts them), just not in the guest views.
    assert result["telemetry"]["sources"]["mcp"] == 15
    assert result["telemetry"]["catalogSize"] == 5 + 15


@pytest.mark.anyio
async def test_api_inline_fallback_returns_headers_and_schemas(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path, mcp: MCPManager
) -> None:
    h = await _harness(engine, sessions, workspace, mcp)
    (result,) = await h.run_to_end(
        """
        const root = await MCP.$api();
        const server = await MCP.time.$api();
        const tool = await MCP.time.$api('getCurrentTime', { schema: true });
        const raw = await MCP.time.$api('get_current_time');
        let unknown; try { await MCP.time.$api('nope'); } catch (e) { unknown = e.message; }
        const own = server.tools.filter(t => t.operation === 'tool').map(t => t.method);
        const groups = server.tools.filter(t => t.operation !== 'tool').map(t => t.operation);
        return { root, server: [server.scope, own, groups.sort()],
                 tool: [tool.scope, tool.header, tool.schemas], raw: raw.scope, unknown };
        """
    )
    value = result["value"]
    assert value["root"]["kind"] == "mcp_api" and value["root"]["scope"] == "root"
    assert {s["identifier"]: s["toolCount"] for s in value["root"]["servers"]} == {
        "everything": 13,
        "time": 2,
    }
    assert value["server"] == [
        "server",
        ["convertTime", "getCurrentTime"],
        ["prompts.get", "prompts.list", "resources.list", "resources.read"],
    ]
    scope, header, schemas = value["tool"]
    assert scope == "tool" and "function getCurrentTime(" in header
    assert "convertTime" not in header
    assert schemas["getCurrentTime"]["required"] == ["timezone"]
    assert value["raw"] == "tool"
    assert "Unknown MCP tool nope" in value["unknown"]
    assert h.started() == []


@pytest.mark.anyio
async def test_mcp_arguments_are_checked_before_the_server_sees_the_call(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path, mcp: MCPManager
) -> None:
    h = await _harness(engine, sessions, workspace, mcp)
    value = await h.value(
        """
        const out = [];
        for (const args of [[{ a: 1 }], [{ a: 1, b: 2 }, { extra: true }], ['1 + 2']]) {
          try { await MCP.everything.getSum(...args); out.push('CALLED'); }
          catch (e) { out.push(e.message); }
        }
        return out;
        """
    )
    assert value == [
        "MCP.everything.getSum is missing required field(s): b",
        "MCP.everything.getSum takes one object argument, got 2 arguments",
        "MCP.everything.getSum takes one object argument like { field: value }",
    ]
    assert h.started() == []


@pytest.mark.anyio
async def test_mcp_tool_errors_resolve_with_is_error_for_the_guest_to_inspect(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path, mcp: MCPManager
) -> None:
    h = await _harness(engine, sessions, workspace, mcp)
    value = await h.value(
        "const r = await MCP.time.getCurrentTime({ timezone: 'Not/AZone' });"
        "return { isError: r.isError, text: r.content[0].text }"
    )
    assert value["isError"] is True and "Not/AZone" in value["text"]


@pytest.mark.anyio
async def test_policy_hides_denied_mcp_servers_and_tools_from_the_namespace(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path, mcp: MCPManager
) -> None:
    h = await _harness(
        engine,
        sessions,
        workspace,
        mcp,
        tools_config=ToolsConfig(deny=["mcp:time", "mcp:everything:echo"]),
    )
    value = await h.value(
        """
        return { time: typeof MCP.time, echo: typeof MCP.everything.echo,
                 sum: typeof MCP.everything.getSum,
                 files: (await API.list('mcp')).files.map(f => f.path),
                 header: (await API.read('mcp/everything.d.ts')).content
                   .includes('function echo(') };
        """
    )
    assert value == {
        "time": "undefined",
        "echo": "undefined",
        "sum": "function",
        "files": ["mcp/index.d.ts", "mcp/everything.d.ts"],
        "header": False,
    }
    description = h.exec_tool.spec.description
    assert (
        "MCP servers (everything)" in description
        and "time" not in description.split("MCP servers")[1][:30]
    )


@pytest.mark.anyio
async def test_exec_description_introduces_mcp_only_when_servers_are_visible(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path, mcp: MCPManager
) -> None:
    with_mcp = await _harness(engine, sessions, workspace, mcp)
    assert "MCP servers (everything, time)" in with_mcp.exec_tool.spec.description
    assert "API.read('mcp/<server>.d.ts')" in with_mcp.exec_tool.spec.description
    denied = await _harness(
        engine, sessions, workspace, mcp, tools_config=ToolsConfig(deny=["group:mcp"])
    )
    assert "MCP" not in denied.exec_tool.spec.description
    assert await denied.value("return typeof MCP") == "undefined"


@pytest.mark.anyio
async def test_mcp_resources_and_prompts_are_reachable_as_nested_groups(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path, mcp: MCPManager
) -> None:
    h = await _harness(engine, sessions, workspace, mcp)
    value = await h.value(
        """
        const listed = await MCP.everything.resources.list();
        const first = listed.resources[0];
        const read = await MCP.everything.resources.read({ uri: first.uri });
        const prompts = await MCP.everything.prompts.list();
        const prompt = await MCP.everything.prompts.get({ name: 'simple-prompt' });
        return { uri: first.uri, contents: read.contents.length,
                 prompts: prompts.prompts.map(p => p.name).includes('simple-prompt'),
                 messages: prompt.messages.length,
                 timeResources: (await MCP.time.resources.list()).resources };
        """
    )
    assert value["uri"].startswith("demo://") and value["contents"] >= 1
    assert value["prompts"] is True and value["messages"] >= 1
    assert value["timeResources"] == []  # mcp-server-time announces resources but has none


@pytest.mark.anyio
async def test_a_blocked_mcp_call_is_a_catchable_error(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path, mcp: MCPManager
) -> None:
    async def no_env(info: ToolCallInfo) -> BeforeToolCallResult | None:
        if info.tool_id == "mcp:everything:get-env":
            return BeforeToolCallResult(block=True, reason="environment is private")
        return None

    h = await _harness(engine, sessions, workspace, mcp, before_hooks=[("policy", no_env)])
    value = await h.value("try { await MCP.everything.getEnv(); } catch (e) { return e.message }")
    assert value == "Tool call blocked by policy: environment is private"


@pytest.mark.anyio
async def test_a_slow_mcp_call_suspends_and_resumes_through_wait(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path, mcp: MCPManager
) -> None:
    h = await _harness(engine, sessions, workspace, mcp, code_mode_config=code_mode(timeout_ms=200))
    results = await h.run_to_end(
        "text('started');"
        "const r = await MCP.everything.triggerLongRunningOperation({ duration: 1, steps: 2 });"
        "text('resumed'); return r.content[0].text"
    )
    assert results[0]["status"] == "waiting"
    assert (
        results[0]["pendingToolCalls"][0]["toolId"]
        == "mcp:everything:trigger-long-running-operation"
    )
    final = results[-1]
    assert final["status"] == "completed" and "Long running operation completed" in final["value"]
    assert final["output"] == [
        {"type": "text", "text": "started"},
        {"type": "text", "text": "resumed"},
    ]
