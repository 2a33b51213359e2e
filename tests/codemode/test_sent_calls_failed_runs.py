"""A program that fails while MCP calls it sent from the sandbox worker are in flight: the
server is told to stop them (as an aborted turn does), and nothing stays parked for a loop
that will never adopt it."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from nodmix.codemode import CodeModeEngine
from nodmix.config.schema import MCPServerConfig
from nodmix.mcp import MCPManager
from nodmix.sessions import SessionManager

from .support import build_harness, wait_until

LIFECYCLE_SERVER = Path(__file__).resolve().parents[1] / "mcp" / "servers" / "lifecycle_server.py"


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"  # (the worker's fast lane exists only there)


@pytest.fixture(scope="module")
async def mcp() -> AsyncIterator[MCPManager]:
    servers = {"life": MCPServerConfig(command=sys.executable, args=[str(LIFECYCLE_SERVER)])}
    async with MCPManager(servers) as manager:
        yield manager


@pytest.mark.anyio
@pytest.mark.parametrize(
    "ending",
    ["throw new Error('boom')", "console.log('x'.repeat(100000)); return 1"],
    ids=["throws", "output-limit"],
)
async def test_a_failed_program_cancels_the_mcp_calls_it_left_in_flight(
    engine: CodeModeEngine,
    sessions: SessionManager,
    workspace: Path,
    mcp: MCPManager,
    tmp_path: Path,
    ending: str,
) -> None:
    h = await build_harness(engine, sessions, workspace, sources=[mcp], mcp=mcp)
    await mcp.call_tool("life", "pid", {})  # a live session, so the worker can send
    marker = tmp_path / "wait"
    result = await h.exec(f"MCP.life.wait({{ seconds: 30, marker: {str(marker)!r} }}); {ending}")
    assert result["status"] == "failed"
    await wait_until(
        lambda: marker.exists() and marker.read_text("utf-8") == "cancelled",
        "the server to cancel the call",
    )
    assert len(mcp._connections["life"].parking) == 0
    assert len(engine.store) == 0
