"""Fixtures for the MCP tests (helpers live in `mcp_support.py`)."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

# The helpers are a plain module next to this file. This directory cannot be a package: under
# pytest's default import mode a `tests/mcp/__init__.py` would make `import mcp` find the tests
# instead of the SDK. So put the directory on sys.path ourselves, whatever the import mode.
sys.path.insert(0, str(Path(__file__).resolve().parent))

from mcp_support import HTTPServer, everything_stdio, time_server

from nodmix.mcp import MCPManager


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    """Module scope, so module-scoped async fixtures can share one server connection."""
    return "asyncio"


@pytest.fixture(scope="module")
def streamable_http_server() -> Iterator[HTTPServer]:
    """server-everything over streamable HTTP (`/mcp`), shared by a test module."""
    server = HTTPServer("streamableHttp").start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def sse_server() -> Iterator[HTTPServer]:
    """server-everything over SSE (`/sse`), shared by a test module."""
    server = HTTPServer("sse").start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
async def shared_manager() -> AsyncIterator[MCPManager]:
    """mcp-server-time and server-everything over stdio, started once per module."""
    servers = {"time": time_server(), "everything": everything_stdio()}
    async with MCPManager(servers) as manager:
        yield manager
