"""A small real MCP server (stdio) for lifecycle tests: its pid, a crash mid-call, a slow call.

The slow call writes its progress to a marker file, so tests can poll for "the request reached the
server" and "the server saw the cancellation" instead of sleeping.
"""

from __future__ import annotations

import os
from pathlib import Path

import anyio
from mcp.server.mcpserver import MCPServer

server = MCPServer("nodmix-lifecycle-test")


@server.tool()
def pid() -> int:
    """Return the server's process id."""
    return os.getpid()


@server.tool()
def crash() -> str:
    """Exit the server process in the middle of the call."""
    os._exit(17)


@server.tool()
async def wait(seconds: float, marker: str) -> str:
    """Sleep, recording started/cancelled/finished in the marker file."""
    path = Path(marker)
    path.write_text("started", encoding="utf-8")
    try:
        await anyio.sleep(seconds)
    except anyio.get_cancelled_exc_class():
        path.write_text("cancelled", encoding="utf-8")
        raise
    path.write_text("finished", encoding="utf-8")
    return "done"


if __name__ == "__main__":
    server.run("stdio")
