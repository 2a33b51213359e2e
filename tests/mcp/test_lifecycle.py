"""Server lifecycle: failures stay isolated, crashes restart, timeouts cancel, shutdown reaps."""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

import anyio
import pytest
from mcp_support import (
    child_processes,
    everything_stdio,
    lifecycle_server,
    process_state,
    time_server,
    wait_until,
)

from nodmix.config.schema import MCPServerConfig, MCPToolFilter
from nodmix.mcp import MCPManager

pytestmark = [pytest.mark.anyio, pytest.mark.integration]


async def _pid(manager: MCPManager, server: str = "life") -> int:
    result = await manager.call_tool(server, "pid", {})
    assert result.is_error is False, result.text_content
    return int(result.text_content)


async def _marker_says(path: Path, state: str) -> None:
    await wait_until(
        lambda: path.exists() and path.read_text(encoding="utf-8") == state, f"marker {state!r}"
    )


async def test_missing_command_is_reported_while_other_servers_keep_working() -> None:
    servers = {
        "broken": MCPServerConfig(command="nodmix-no-such-mcp-server"),
        "everything": everything_stdio(),
    }
    async with MCPManager(servers) as manager:
        tools = await manager.list_tools()
        assert {t.origin.owner for t in tools} == {"everything"}
        assert manager.failures == {
            "broken": "MCP server 'broken' failed to start: "
            "command not found on PATH: nodmix-no-such-mcp-server"
        }
        call = await manager.call_tool("broken", "anything", {})
        assert call.is_error is True
        assert call.text_content.startswith("MCP server 'broken' failed to start")
        echo = await manager.call_tool("everything", "echo", {"message": "still here"})
        assert echo.text_content == "Echo: still here"


async def test_server_that_exits_at_start_is_explained_by_its_last_stderr_line() -> None:
    script = "import sys; print('fatal: missing API token', file=sys.stderr); sys.exit(3)"
    servers = {"dies": MCPServerConfig(command=sys.executable, args=["-c", script])}
    async with MCPManager(servers) as manager:
        assert await manager.list_tools() == []
        (status,) = manager.status()
    assert status.state == "failed"
    assert status.error == (
        "failed to start: the server closed the connection (stderr: fatal: missing API token)"
    )
    assert manager.failures["dies"] == f"MCP server 'dies' {status.error}"


async def test_start_that_exceeds_the_timeout_fails_without_blocking_the_run() -> None:
    # Reads stdin and never answers the handshake; it exits as soon as its stdin is closed.
    hang = MCPServerConfig(command=sys.executable, args=["-c", "import sys; sys.stdin.read()"])
    async with MCPManager({"hangs": hang}, start_timeout=0.3) as manager:
        start = anyio.current_time()
        assert await manager.list_tools() == []
        assert anyio.current_time() - start < 2.0
        assert (
            manager.failures["hangs"]
            == "MCP server 'hangs' failed to start: did not start within 0.3 s"
        )


async def test_failed_server_is_not_respawned_before_its_backoff_elapses() -> None:
    servers = {
        "broken": MCPServerConfig(command=sys.executable, args=["-c", "raise SystemExit(1)"])
    }
    async with MCPManager(servers, retry_backoff=20.0) as manager:
        await manager.list_tools()
        await manager.list_tools()
        result = await manager.call_tool("broken", "x", {})
        (status,) = manager.status()
    assert status.starts == 1
    assert result.text_content.endswith("(next attempt in 20 s)")


async def test_killed_server_is_restarted_by_the_next_call() -> None:
    async with MCPManager({"life": lifecycle_server()}) as manager:
        first = await _pid(manager)
        os.kill(first, signal.SIGKILL)
        await wait_until(lambda: manager.status()[0].state == "idle", "the crash to be noticed")
        assert manager.status()[0].error == "connection lost: the server closed the connection"
        second = await _pid(manager)
        assert second != first
        assert manager.status()[0].starts == 2
        assert process_state(first) is None  # reaped, not a zombie


async def test_crash_during_a_call_is_an_error_result_and_the_next_call_reconnects() -> None:
    async with MCPManager({"life": lifecycle_server()}) as manager:
        crashed = await manager.call_tool("life", "crash", {})
        assert crashed.is_error is True
        assert crashed.text_content == (
            "MCP server 'life' connection lost: the server closed the connection "
            "during tools/call 'crash'"
        )
        assert (await _pid(manager)) > 0


async def test_call_timeout_is_an_error_result_and_cancels_the_request_on_the_server(
    tmp_path: Path,
) -> None:
    marker = tmp_path / "marker"
    async with MCPManager({"life": lifecycle_server(timeout_ms=1000)}) as manager:
        await _pid(manager)  # start outside the measured call
        result = await manager.call_tool("life", "wait", {"seconds": 30, "marker": str(marker)})
        assert result.is_error is True
        assert (
            result.text_content == "MCP server 'life' did not answer tools/call 'wait' within 1 s"
        )
        await _marker_says(marker, "cancelled")
        assert (await _pid(manager)) > 0  # the session survives a timed-out call


async def test_cancelling_the_caller_cancels_the_request_on_the_server(tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    async with MCPManager({"life": lifecycle_server()}) as manager:
        async with anyio.create_task_group() as tg:
            tg.start_soon(manager.call_tool, "life", "wait", {"seconds": 30, "marker": str(marker)})
            await _marker_says(marker, "started")
            tg.cancel_scope.cancel()
        await _marker_says(marker, "cancelled")
        assert manager.status()[0].starts == 1


async def test_shutdown_reaps_every_server_process() -> None:
    before = set(child_processes())
    servers = {"time": time_server(), "everything": everything_stdio(), "life": lifecycle_server()}
    async with MCPManager(servers) as manager:
        assert len(await manager.list_tools()) > 3
        spawned = set(child_processes()) - before
        assert len(spawned) == 3
    leftovers = {pid: process_state(pid) for pid in spawned if process_state(pid) is not None}
    assert leftovers == {}


async def test_cancelled_owner_still_reaps_its_servers() -> None:
    before = set(child_processes())
    with anyio.CancelScope() as scope:
        async with MCPManager({"everything": everything_stdio()}) as manager:
            await manager.list_tools()
            scope.cancel()
            await anyio.sleep_forever()
    spawned = set(child_processes()) - before
    assert {pid: process_state(pid) for pid in spawned} == {}


async def test_include_and_exclude_filters_select_tools_by_raw_name() -> None:
    tools_filter = MCPToolFilter(include=["echo", "get-*"], exclude=["get-env", "get-tiny-image"])
    async with MCPManager({"everything": everything_stdio(tools=tools_filter)}) as manager:
        listed = {t.origin.name for t in await manager.list_tools()}
        assert "echo" in listed
        assert {"get-sum", "get-structured-content"} <= listed
        assert not listed & {"get-env", "get-tiny-image", "toggle-simulated-logging"}
        blocked = await manager.call_tool("everything", "get-env", {})
        assert blocked.is_error is True
        assert "excluded by the config" in blocked.text_content
        everything = await manager.server_tools("everything", include_filtered=True)
        assert "get-env" in {t.origin.name for t in everything}


async def test_disabled_server_contributes_no_tools_and_is_never_started() -> None:
    async with MCPManager({"time": time_server(enabled=False)}) as manager:
        assert await manager.list_tools() == []
        result = await manager.call_tool("time", "get_current_time", {"timezone": "UTC"})
        (status,) = manager.status()
    assert result.text_content == "MCP server 'time' is disabled in the config"
    assert (status.state, status.starts) == ("disabled", 0)
    assert manager.failures == {}


async def test_stdio_server_gets_a_minimal_environment_plus_its_own_variables() -> None:
    parent = {
        "PATH": os.environ["PATH"],
        "HOME": "/nonexistent/nodmix-test-home",
        "NODMIX_TEST_API_KEY": "parent-secret",
        "NODMIX_TEST_TOKEN": "resolved-token",
    }
    config = everything_stdio(env={"TOKEN": "${NODMIX_TEST_TOKEN}", "MODE": "test"})
    async with MCPManager({"everything": config}, env=parent) as manager:
        result = await manager.call_tool("everything", "get-env", {})
    env = json.loads(result.text_content)
    assert env["TOKEN"] == "resolved-token"
    assert env["MODE"] == "test"
    assert env["HOME"] == "/nonexistent/nodmix-test-home"
    assert "NODMIX_TEST_API_KEY" not in env
    assert "NODMIX_TEST_TOKEN" not in env


async def test_unset_env_reference_is_a_start_failure_naming_the_key() -> None:
    config = everything_stdio(env={"TOKEN": "${NODMIX_TEST_UNSET}"})
    async with MCPManager({"everything": config}, env={"PATH": os.environ["PATH"]}) as manager:
        assert await manager.list_tools() == []
    assert manager.failures["everything"] == (
        "MCP server 'everything' failed to start: mcp.servers.everything.env.TOKEN: "
        "refers to ${NODMIX_TEST_UNSET}, which is not set in the environment"
    )


async def test_reserved_run_tool_names_push_mcp_tools_to_suffixes() -> None:
    filtered = MCPToolFilter(include=["echo", "get-sum"])
    async with MCPManager({"every": everything_stdio(tools=filtered)}) as manager:
        tools = await manager.list_tools(reserved=["every__echo"])
    assert {t.spec.name: t.origin.name for t in tools} == {
        "every__echo-2": "echo",
        "every__get-sum": "get-sum",
    }


async def test_closed_manager_answers_calls_with_error_results() -> None:
    manager = MCPManager({"time": time_server()})
    async with manager:
        pass
    result = await manager.call_tool("time", "get_current_time", {"timezone": "UTC"})
    assert result.is_error is True
    assert "not open" in result.text_content
