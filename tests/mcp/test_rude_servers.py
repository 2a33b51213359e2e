"""Quick calls against a rude stdio server (`servers/rude_server.py`): answers twice,
under forged ids, as non-objects or broken UTF-8, a server that stops reading or closes its
output: each call still ends with the server's answer or a clear error, and the session
stays usable. A cancellation reaches the server even while the session's output is queued.
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import msgspec
import pytest
from mcp_support import wait_until

from nodmix.config.schema import MCPServerConfig
from nodmix.mcp import MCPManager
from nodmix.tools.base import SentCall, ToolResult

pytestmark = pytest.mark.anyio
RUDE = Path(__file__).resolve().parent / "servers" / "rude_server.py"
ANSWER_WAIT_S = 10.0


def hostile(*args: str, **overrides: Any) -> MCPServerConfig:
    config = MCPServerConfig(command=sys.executable, args=[str(RUDE), *args])
    return msgspec.structs.replace(config, **overrides)


def _answer(sent: SentCall) -> ToolResult | None:
    ready = threading.Event()
    sent.notify(ready.set)
    assert ready.wait(ANSWER_WAIT_S), "no answer to a quick call"
    return sent.result()


async def _quick(manager: MCPManager, tool: str, key: str) -> ToolResult | None:
    def call() -> ToolResult | None:
        sent = manager.send_tool_quick("h", tool, {}, key=("s", "r", key), output_schema=None)
        assert sent is not None, "the session took no quick call"
        return _answer(sent)

    return await anyio.to_thread.run_sync(call)


async def test_misbehaving_answers_end_each_call_and_leave_the_session_usable() -> None:
    async with MCPManager({"h": hostile()}) as manager:
        assert not (await manager.call_tool("h", "echo", {})).is_error
        twice = await _quick(manager, "twice", "1")
        assert twice is not None and twice.text_content == "twice:{}"
        forged = await _quick(manager, "forged", "2")
        assert forged is not None and forged.text_content == "forged:{}"
        broken = await _quick(manager, "broken_utf8", "3")
        assert broken is not None and broken.text_content == "broken_utf8:{}"
        garbage = await _quick(manager, "garbage", "4")
        assert garbage is not None and garbage.is_error
        assert "answered with a 'str' result" in garbage.text_content
        after = await manager.call_tool("h", "echo", {"n": 1})
        assert after.text_content == "echo:{'n': 1}"
        assert manager.status()[0].starts == 1


async def test_a_server_that_closes_its_output_fails_the_quick_call_clearly() -> None:
    async with MCPManager({"h": hostile()}) as manager:
        await manager.call_tool("h", "echo", {})
        key = ("s", "r", "hush")

        def send() -> ToolResult | None:
            sent = manager.send_tool_quick(
                "h", "hush", {"seconds": 30}, key=key, output_schema=None
            )
            assert sent is not None
            return _answer(sent)

        assert await anyio.to_thread.run_sync(send) is None  # handed to the loop
        lost = await manager.call_tool("h", "hush", {"seconds": 30}, key=key)
        assert lost.is_error and "closed the connection" in lost.text_content
        assert (await manager.call_tool("h", "echo", {})).text_content == "echo:{}"


async def test_a_cancelled_quick_call_reaches_the_server_behind_queued_output(
    tmp_path: Path,
) -> None:
    record = tmp_path / "received"
    async with MCPManager({"h": hostile(str(record))}) as manager:
        await manager.call_tool("h", "echo", {})
        stalled: list[SentCall] = []

        def send_stall() -> None:
            sent = manager.send_tool_quick(
                "h", "stall", {"seconds": 2}, key=("s", "r", "stall"), output_schema=None
            )
            assert sent is not None
            stalled.append(sent)

        await anyio.to_thread.run_sync(send_stall)
        await wait_until(lambda: b'"stall"' in record.read_bytes(), "the server to stop reading")
        async with anyio.create_task_group() as group:
            # A request bigger than the pipe: the rest waits in the transport's queue.
            group.start_soon(manager.call_tool, "h", "echo", {"x": "y" * (1 << 20)})

            def declined() -> bool:
                sent = manager.send_tool_quick(
                    "h", "echo", {}, key=("s", "r", "probe"), output_schema=None
                )
                return sent is None

            await wait_until(declined, "the session's request to be queued")
            await anyio.to_thread.run_sync(stalled[0].cancel)
        await wait_until(
            lambda: b"notifications/cancelled" in record.read_bytes(), "the cancellation"
        )


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8")
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


async def test_children_a_server_leaves_behind_end_with_its_connection() -> None:
    async with MCPManager({"h": hostile()}) as manager:
        forked = await manager.call_tool("h", "fork", {"seconds": 60})
        child = int(forked.text_content)
        assert _alive(child)
    await wait_until(lambda: not _alive(child), "the server's child to end")
