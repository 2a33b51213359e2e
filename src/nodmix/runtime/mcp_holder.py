"""The runtime's MCP manager, held open by a task of its own.

MCP managers must be closed by the task that opened them, so each one lives in a small holder
task in the runtime's background group: the runtime opens one at start, and a config reload
opens a new one and closes the old one (`reconfigure.py`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import anyio
import anyio.abc

from nodmix.config.schema import MCPServerConfig


class McpHolder:
    """Opens an MCP manager in its own task and closes it there when released."""

    def __init__(self, manager: Any) -> None:
        self.manager = manager
        self._ready = anyio.Event()
        self._release = anyio.Event()
        self._closed = anyio.Event()

    async def start(self, group: anyio.abc.TaskGroup) -> Any:
        """Open the manager in `group`; returns it once its servers can be reached."""
        group.start_soon(self._hold)
        await self._ready.wait()
        return self.manager

    async def _hold(self) -> None:
        try:
            async with self.manager:
                self._ready.set()
                await self._release.wait()
        finally:
            self._ready.set()
            self._closed.set()

    async def close(self, timeout: float = 15.0) -> None:
        """Close the manager (in its task) and wait up to `timeout` seconds for it."""
        self._release.set()
        with anyio.move_on_after(timeout, shield=True):
            await self._closed.wait()


async def open_mcp(
    servers: Mapping[str, MCPServerConfig], env: Mapping[str, str], group: anyio.abc.TaskGroup
) -> McpHolder | None:
    """A holder with an open manager for `servers`, or None when none is enabled."""
    if not any(s.enabled for s in servers.values()):
        return None
    from nodmix.mcp import MCPManager

    holder = McpHolder(MCPManager(servers, env))
    await holder.start(group)
    return holder
