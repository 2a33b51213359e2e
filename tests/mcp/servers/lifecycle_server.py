"""A small real MCP server (stdio) for lifecycle tests: its pid, a crash mid-call, a slow call.

The slow call writes its progress to a marker file, so tests can poll for "the request reached the
server" and "the server saw the cancellation" instead of sleeping. `tally` and `gather` let tests
count the requests a server received and see calls run at the same time; `measure` declares
an output schema; `protocol` says what protocol version the request carried.
"""

from __future__ import annotations

import os
from pathlib import Path

import anyio
from mcp.server.mcpserver import Context, MCPServer
from pydantic import BaseModel

server = MCPServer("nodmix-lifecycle-test")


class Measured(BaseModel):
    size: int
    unit: str


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


@server.tool()
async def tally(marker: str, seconds: float = 0) -> int:
    """Append a line to the marker file, wait `seconds`; return how many lines it has (the
    requests received)."""
    with Path(marker).open("a", encoding="utf-8") as out:
        out.write("call\n")
    await anyio.sleep(seconds)
    return len(Path(marker).read_text(encoding="utf-8").splitlines())


@server.tool()
async def gather(count: int, marker: str) -> str:
    """Arrive at a barrier of `count` calls (lines of the marker file); `together` when all
    arrived within 10 s, `alone` otherwise."""
    path = Path(marker)
    with path.open("a", encoding="utf-8") as out:
        out.write("arrived\n")
    with anyio.move_on_after(10):
        while len(path.read_text(encoding="utf-8").splitlines()) < count:
            await anyio.sleep(0.01)
        return "together"
    return "alone"


@server.tool()
def protocol(ctx: Context) -> str:  # type: ignore[type-arg]
    """The protocol version the request said it speaks."""
    return str(ctx.protocol_version)


@server.tool()
def measure(size: int) -> Measured:
    """A result with an output schema."""
    return Measured(size=size, unit="bytes")


if __name__ == "__main__":
    server.run("stdio")
