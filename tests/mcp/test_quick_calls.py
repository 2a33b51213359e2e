"""Quick calls: `tools/call` sent from another thread straight to a stdio server's stdin.

Against real servers (our lifecycle server and mcp-server-time on the newest protocol version,
server-everything on an older one, over stdio and over streamable HTTP): the answer is the
session's answer, each reaches the thread that asked, a call handed to the event loop is sent
once, cancellation and a dying server behave as through the session, and what the server sends
besides answers still reaches the session.
"""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pytest
from mcp_support import HTTPServer, everything_stdio, lifecycle_server, time_server, wait_until

import nodmix.mcp.pipes
from nodmix.config.schema import MCPServerConfig, MCPToolFilter
from nodmix.mcp import MCPManager
from nodmix.mcp.quick_calls import SideDoor, answer_result
from nodmix.tools.base import SentCall, ToolResult

pytestmark = pytest.mark.anyio
ANSWER_WAIT_S = 10.0


def _answered(sent: SentCall) -> ToolResult | None:
    """Wait (on this thread) for a sent call's answer, then take its result."""
    ready = threading.Event()
    sent.notify(ready.set)
    assert ready.wait(ANSWER_WAIT_S), "no answer to a quick call"
    return sent.result()


async def _quick(
    manager: MCPManager,
    server: str,
    tool: str,
    args: dict[str, Any],
    *,
    key: tuple[str, ...] = ("s", "r", "c"),
    schema: dict[str, Any] | None = None,
) -> ToolResult | None:
    """Send from a worker thread and wait there for the result, as code mode's worker does."""

    def call() -> ToolResult | None:
        sent = manager.send_tool_quick(server, tool, args, key=key, output_schema=schema)
        assert sent is not None, "the server's session took no quick call"
        return _answered(sent)

    return await anyio.to_thread.run_sync(call)


async def _schema(manager: MCPManager, tool: str) -> dict[str, Any] | None:
    found = next(t for t in await manager.list_tools() if t.origin.name == tool)
    return found.definition.output_schema


async def test_a_call_sent_from_another_thread_gets_the_session_s_answer() -> None:
    async with MCPManager({"life": lifecycle_server(), "time": time_server()}) as manager:
        schema = await _schema(manager, "measure")
        assert schema is not None
        via_session = await manager.call_tool("life", "measure", {"size": 3})
        quick = await _quick(manager, "life", "measure", {"size": 3}, schema=schema)
        assert quick is not None and quick.details == via_session.details
        assert quick.details["structuredContent"] == {"size": 3, "unit": "bytes"}
        session_pid = await manager.call_tool("life", "pid", {})
        quick_pid = await _quick(manager, "life", "pid", {})
        assert quick_pid is not None and quick_pid.text_content == session_pid.text_content
        utc = await _quick(manager, "time", "get_current_time", {"timezone": "UTC"})
        assert utc is not None and utc.details["structuredContent"]["timezone"] == "UTC"
        assert manager.status()[0].starts == 1


async def test_a_quick_request_speaks_the_session_s_protocol_version() -> None:
    async with MCPManager({"life": lifecycle_server()}) as manager:
        via_session = await manager.call_tool("life", "protocol", {})
        assert via_session.text_content == "2026-07-28"
        quick = await _quick(manager, "life", "protocol", {})
        assert quick is not None and quick.text_content == via_session.text_content


async def test_each_answer_reaches_the_thread_that_asked_when_many_send_at_once() -> None:
    async with MCPManager({"life": lifecycle_server()}) as manager:
        schema = await _schema(manager, "measure")
        got: dict[int, list[Any]] = {}

        def worker(n: int) -> None:
            for i in range(10):
                size = n * 100 + i
                sent = manager.send_tool_quick(
                    "life",
                    "measure",
                    {"size": size},
                    key=("s", str(n), str(i)),
                    output_schema=schema,
                )
                assert sent is not None
                result = _answered(sent)
                assert result is not None
                got.setdefault(n, []).append(result.details["structuredContent"]["size"])

        async with anyio.create_task_group() as group:
            for n in range(6):
                group.start_soon(anyio.to_thread.run_sync, worker, n)
        assert got == {n: [n * 100 + i for i in range(10)] for n in range(6)}


async def test_a_call_handed_to_the_event_loop_reaches_the_server_once(tmp_path: Path) -> None:
    marker = tmp_path / "tally"
    async with MCPManager({"life": lifecycle_server()}) as manager:
        await manager.call_tool("life", "pid", {})  # a live session
        key = ("s", "r", "tally-1")

        def send_and_leave() -> None:
            sent = manager.send_tool_quick(
                "life", "tally", {"marker": str(marker)}, key=key, output_schema=None
            )
            assert sent is not None
            sent.hand_over()  # the worker stops waiting at once

        await anyio.to_thread.run_sync(send_and_leave)
        result = await manager.call_tool("life", "tally", {"marker": str(marker)}, key=key)
        assert result.text_content == "1"
        assert marker.read_text(encoding="utf-8").splitlines() == ["call"]
        # Without a parked request under the key, the call goes through the session.
        again = await manager.call_tool("life", "tally", {"marker": str(marker)}, key=key)
        assert again.text_content == "2"


async def test_cancelling_the_loop_s_wait_cancels_the_request_on_the_server(
    tmp_path: Path,
) -> None:
    marker = tmp_path / "marker"
    args = {"seconds": 30, "marker": str(marker)}
    async with MCPManager({"life": lifecycle_server()}) as manager:
        await manager.call_tool("life", "pid", {})
        key = ("s", "r", "wait-1")

        def send_and_leave() -> None:
            sent = manager.send_tool_quick("life", "wait", args, key=key, output_schema=None)
            assert sent is not None
            sent.hand_over()

        await anyio.to_thread.run_sync(send_and_leave)
        async with anyio.create_task_group() as group:
            group.start_soon(lambda: manager.call_tool("life", "wait", args, key=key))
            await _marker_says(marker, "started")
            group.cancel_scope.cancel()
        await _marker_says(marker, "cancelled")
        assert (await manager.call_tool("life", "pid", {})).is_error is False


async def test_a_cancelled_quick_call_is_cancelled_on_the_server(tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    args = {"seconds": 30, "marker": str(marker)}
    async with MCPManager({"life": lifecycle_server()}) as manager:
        await manager.call_tool("life", "pid", {})
        sent = manager.send_tool_quick("life", "wait", args, key=("k",), output_schema=None)
        assert sent is not None
        await _marker_says(marker, "started")
        sent.cancel()
        await _marker_says(marker, "cancelled")
        # Nobody takes a cancelled request's answer: nothing is kept for the event loop.
        assert len(manager._connections["life"].parking) == 0


async def test_a_parked_request_nobody_takes_is_cancelled_after_its_timeout(
    tmp_path: Path,
) -> None:
    marker = tmp_path / "marker"
    async with MCPManager({"life": lifecycle_server(timeout_ms=300)}) as manager:
        await manager.call_tool("life", "pid", {})
        sent = manager.send_tool_quick(
            "life", "wait", {"seconds": 30, "marker": str(marker)}, key=("a",), output_schema=None
        )
        assert sent is not None
        sent.hand_over()
        await _marker_says(marker, "started")
        await anyio.sleep(0.35)  # past the request's timeout (a condition, not a wait for work)
        other = manager.send_tool_quick("life", "pid", {}, key=("b",), output_schema=None)
        assert other is not None
        other.hand_over()  # parking again sweeps the expired request away
        await _marker_says(marker, "cancelled")


async def test_a_server_dying_during_a_quick_call_reports_the_lost_connection() -> None:
    async with MCPManager({"life": lifecycle_server()}) as manager:
        first = await manager.call_tool("life", "pid", {})
        key = ("s", "r", "crash-1")
        assert await _quick(manager, "life", "crash", {}, key=key) is None  # handed over
        crashed = await manager.call_tool("life", "crash", {}, key=key)
        assert crashed.is_error is True
        assert crashed.text_content == (
            "MCP server 'life' connection lost: the server closed the connection "
            "during tools/call 'crash'"
        )
        second = await manager.call_tool("life", "pid", {})
        assert second.text_content != first.text_content
        assert manager.status()[0].starts == 2


async def test_what_the_server_sends_besides_the_answer_reaches_the_session(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="nodmix.mcp")
    async with MCPManager({"ev": everything_stdio()}) as manager:
        count = len(await manager.server_tools("ev"))
        info = manager.status()[0].info
        assert info is not None and info.protocol_version != "2026-07-28"
        result = await _quick(manager, "ev", "toggle-simulated-logging", {})
        assert result is not None and "Started simulated" in result.text_content
        # The server starts logging to the client during the call: the session receives it.
        await wait_until(lambda: "MCP server 'ev' logs (" in caplog.text, "a server log message")
        echo = await _quick(manager, "ev", "echo", {"message": "still here"})
        assert echo is not None and echo.text_content == "Echo: still here"
        assert len(await manager.server_tools("ev")) == count


async def test_servers_on_other_transports_take_no_quick_calls(
    streamable_http_server: HTTPServer,
) -> None:
    config = MCPServerConfig(url=f"{streamable_http_server.base}/mcp")
    async with MCPManager({"remote": config}) as manager:
        assert (await manager.call_tool("remote", "echo", {"message": "hi"})).is_error is False
        sent = manager.send_tool_quick(
            "remote", "echo", {"message": "hi"}, key=("k",), output_schema=None
        )
        assert sent is None


async def test_a_call_excluded_by_the_config_is_never_sent_quick() -> None:
    async with MCPManager(
        {"life": lifecycle_server(tools=MCPToolFilter(exclude=["pid"]))}
    ) as manager:
        await manager.call_tool("life", "measure", {"size": 1})
        assert manager.send_tool_quick("life", "pid", {}, key=("k",), output_schema=None) is None


SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}


@pytest.mark.parametrize(
    ("answer", "schema", "expected"),
    [
        (
            {"error": {"code": -32602, "message": "Unknown tool: nope"}},
            None,
            "MCP server 's' rejected tools/call 't': Unknown tool: nope",
        ),
        (
            {"result": {"content": [], "structuredContent": {"n": "x"}}},
            SCHEMA,
            "MCP server 's' tools/call 't' failed: RuntimeError: Invalid structured content "
            "returned by tool t: 'x' is not of type 'integer'",
        ),
        (
            {"result": {"content": [{"type": "text", "text": "hi"}]}},
            SCHEMA,
            "MCP server 's' tools/call 't' failed: RuntimeError: Tool t has an output schema but "
            "did not return structured content",
        ),
        (
            {"result": {"resultType": "input_required", "inputRequests": {}}},
            None,
            "MCP server 's' tools/call 't' failed: the server answered with a 'input_required' "
            "result",
        ),
    ],
)
def test_answers_that_are_not_results_are_errors_worded_as_through_the_session(
    answer: dict[str, Any], schema: dict[str, Any] | None, expected: str
) -> None:
    result = answer_result("s", "t", {"jsonrpc": "2.0", "id": "x", **answer}, schema)
    assert result is not None and result.is_error
    assert result.text_content.startswith(expected), result.text_content


def test_a_schema_mismatch_answer_sends_the_call_through_the_session() -> None:
    answer = {"jsonrpc": "2.0", "id": "x", "error": {"code": -32020, "message": "stale"}}
    assert answer_result("s", "t", answer, None) is None


def test_a_door_takes_no_call_before_its_session_sent_a_request() -> None:
    door = SideDoor(timeout=5)
    written: list[bytes] = []

    def write(line: bytes) -> bool:
        written.append(line)
        return True

    door.attach(write, loop=None)  # type: ignore[arg-type]
    assert door.send("t", {}) is None and written == []


async def _marker_says(path: Path, state: str) -> None:
    check: Callable[[], bool] = lambda: path.exists() and path.read_text("utf-8") == state  # noqa: E731
    await wait_until(check, f"marker {state!r}")


async def test_a_server_whose_line_never_ends_is_cut_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(nodmix.mcp.pipes, "MAX_LINE_BYTES", 1 << 20)
    server = Path(__file__).resolve().parent / "servers" / "endless_line_server.py"
    config = MCPServerConfig(command=sys.executable, args=[str(server)])
    async with MCPManager({"endless": config}) as manager:
        result = await manager.call_tool("endless", "anything", {})
        assert result.is_error is True
        assert result.text_content == (
            "MCP server 'endless' failed to start: sent a message longer than 1048576 bytes"
        )
