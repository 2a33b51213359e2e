"""Stdio servers that break the protocol, against the quick-call transport (`mcp.pipes`,
`mcp.quick_calls`): a server that stops reading its stdin, answers twice, writes garbage,
invalid UTF-8 or forged ids, or leaves a child holding its stdout. Nothing blocks the event
loop, no answer reaches the wrong call, failures are one line, and the session keeps working
(or restarts) afterwards. The server is `servers/hostile_server.py`."""

from __future__ import annotations

import asyncio
import logging
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pytest
from mcp_support import process_state, wait_until

from nodmix.config.schema import MCPServerConfig
from nodmix.mcp import MCPManager
from nodmix.tools.base import ToolResult

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

HOSTILE_SERVER = Path(__file__).resolve().parent / "servers" / "hostile_server.py"
ANSWER_WAIT_S = 10.0


def hostile(**env: str) -> MCPServerConfig:
    return MCPServerConfig(command=sys.executable, args=[str(HOSTILE_SERVER)], env=env)


def _quick_sync(
    manager: MCPManager, tool: str, args: dict[str, Any], key: tuple[str, ...]
) -> ToolResult | None:
    sent = manager.send_tool_quick("h", tool, args, key=key, output_schema=None)
    assert sent is not None, "the server's session took no quick call"
    ready = threading.Event()
    sent.notify(ready.set)
    assert ready.wait(ANSWER_WAIT_S), f"no answer to the quick call of {tool!r}"
    return sent.result()


async def _quick(
    manager: MCPManager, tool: str, args: dict[str, Any], key: tuple[str, ...] = ("k",)
) -> ToolResult | None:
    return await anyio.to_thread.run_sync(_quick_sync, manager, tool, args, key)


async def _echo_works(manager: MCPManager, value: int) -> None:
    session = await manager.call_tool("h", "echo", {"value": value})
    assert session.text_content == str(value)
    quick = await _quick(manager, "echo", {"value": value}, key=("echo", str(value)))
    assert quick is not None and quick.text_content == str(value)


def _problems(caplog: pytest.LogCaptureFixture) -> list[str]:
    """Records at ERROR or above, and warnings longer than one line."""
    return [
        r.getMessage()
        for r in caplog.records
        if r.levelno >= logging.ERROR or (r.levelno >= logging.WARNING and "\n" in r.getMessage())
    ]


@pytest.fixture
async def manager() -> AsyncIterator[MCPManager]:
    async with MCPManager({"h": hostile()}) as started:
        yield started


async def test_garbage_lines_quoting_a_quick_id_cost_one_warning_line_and_nothing_else(
    manager: MCPManager, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    await _echo_works(manager, 1)
    result = await _quick(manager, "garbage", {"value": "mine"})
    assert result is not None and result.text_content == '"mine"'
    assert _problems(caplog) == []
    warnings = [
        r.getMessage() for r in caplog.records if r.name == "nodmix.mcp" and r.levelno == 30
    ]
    assert len(warnings) == 1, warnings  # (later ones at debug level)
    assert warnings[0].startswith("MCP server 'h' sent a line that is not a JSON-RPC message")
    await _echo_works(manager, 2)
    assert manager.status()[0].starts == 1


async def test_an_answer_with_invalid_utf8_arrives_with_a_replacement_character(
    manager: MCPManager,
) -> None:
    await _echo_works(manager, 1)
    quick = await _quick(manager, "bad_utf8", {})
    assert quick is not None and quick.text_content == "caf\ufffd"
    with anyio.fail_after(ANSWER_WAIT_S):
        session = await manager.call_tool("h", "bad_utf8", {})
    assert session.text_content == "caf\ufffd"
    await _echo_works(manager, 2)


async def test_a_second_answer_to_a_quick_call_reaches_no_other_call(
    manager: MCPManager, caplog: pytest.LogCaptureFixture
) -> None:
    await _echo_works(manager, 1)
    first = await _quick(manager, "twice", {"value": "first"})
    assert first is not None and first.text_content == '"first"'
    # The stray "second" answer went to the session, which dropped it: the next calls,
    # whichever id they get, each receive their own answer.
    for n in range(5):
        await _echo_works(manager, n)
    assert _problems(caplog) == []


async def test_an_answer_forged_for_a_later_quick_id_is_not_taken_by_that_call(
    manager: MCPManager,
) -> None:
    await _echo_works(manager, 1)  # (quick id 1)
    # This call is quick id 2; it answers id 3 before anybody sent id 3.
    forged = await _quick(manager, "forge", {"target": "nodmix-quick-3", "value": "two"})
    assert forged is not None and forged.text_content == '"two"'
    third = await _quick(manager, "slow_echo", {"value": "three", "seconds": 0.1}, key=("3",))
    assert third is not None and third.text_content == '"three"'


async def test_a_server_that_stops_reading_its_stdin_blocks_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    lags: list[float] = []

    async def watch_the_loop() -> None:
        while True:
            before = time.monotonic()
            await asyncio.sleep(0.01)
            lags.append(time.monotonic() - before)

    big = "x" * 300_000
    config = MCPServerConfig(command=sys.executable, args=[str(HOSTILE_SERVER)], timeout_ms=500)
    async with MCPManager({"h": config}) as manager:
        async with anyio.create_task_group() as group:
            group.start_soon(watch_the_loop)
            assert (await manager.call_tool("h", "deafen", {})).text_content == "deaf"
            timed_out = "MCP server 'h' did not answer tools/call 'echo' within 0.5 s"
            # The next call makes it deaf; then a large one fills the pipe, the rest queue.
            assert (await manager.call_tool("h", "echo", {})).text_content == timed_out
            sent = await anyio.to_thread.run_sync(
                lambda: manager.send_tool_quick(
                    "h", "echo", {"value": big}, key=("big",), output_schema=None
                )
            )
            assert sent is not None
            sent.hand_over()
            adopted = await manager.call_tool("h", "echo", {"value": big}, key=("big",))
            assert adopted.text_content == timed_out
            # Nothing more goes out from another thread, at once, while anything is queued.
            took = time.monotonic()
            none = await anyio.to_thread.run_sync(
                lambda: manager.send_tool_quick("h", "echo", {}, key=("k",), output_schema=None)
            )
            assert none is None and time.monotonic() - took < 1.0
            for _ in range(2):
                with anyio.fail_after(10):
                    result = await manager.call_tool("h", "echo", {"value": big})
                assert result.text_content == timed_out
            group.cancel_scope.cancel()
        took = time.monotonic()
    assert time.monotonic() - took < 10  # closed: stdin dropped, the server terminated
    assert max(lags) < 1.0
    assert _problems(caplog) == []


async def test_a_server_that_exits_leaving_a_child_on_its_stdout_is_restarted(
    manager: MCPManager,
) -> None:
    child = int((await manager.call_tool("h", "fork", {})).text_content)
    assert process_state(child) not in (None, "Z")
    exited = await manager.call_tool("h", "exit", {})
    assert exited.text_content == (
        "MCP server 'h' connection lost: the server closed the connection during tools/call 'exit'"
    )
    await wait_until(lambda: process_state(child) in (None, "Z"), "the child to be ended")
    await _echo_works(manager, 1)
    assert manager.status()[0].starts == 2


async def test_shutdown_ends_a_child_holding_the_server_s_stdout() -> None:
    async with MCPManager({"h": hostile()}) as manager:
        child = int((await manager.call_tool("h", "fork", {})).text_content)
        assert process_state(child) not in (None, "Z")
        took = time.monotonic()
    assert time.monotonic() - took < 10
    gone: Callable[[], bool] = lambda: process_state(child) in (None, "Z")  # noqa: E731
    await wait_until(gone, "the child to be ended")


async def test_two_calls_handed_over_under_one_key_each_get_their_own_answer(
    manager: MCPManager,
) -> None:
    # Call ids come from the model: a model that repeats one gives two calls the same key.
    await _echo_works(manager, 1)
    key = ("s", "r", "same")

    def send_and_leave(value: str) -> None:
        args = {"value": value, "seconds": 0.3}
        sent = manager.send_tool_quick("h", "slow_echo", args, key=key, output_schema=None)
        assert sent is not None
        sent.hand_over()

    for value in ("a", "b"):
        await anyio.to_thread.run_sync(send_and_leave, value)
    got: dict[str, str] = {}

    async def call(value: str) -> None:
        args = {"value": value, "seconds": 0.3}
        got[value] = (await manager.call_tool("h", "slow_echo", args, key=key)).text_content

    async with anyio.create_task_group() as group:
        for value in ("a", "b"):
            group.start_soon(call, value)
    assert got == {"a": '"a"', "b": '"b"'}
    assert len(manager._connections["h"].parking) == 0
