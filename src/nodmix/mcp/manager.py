"""`MCPManager`: every configured MCP server of a process, as tools, resources and prompts.

One manager per process, owned by the runtime (`async with MCPManager(...)`). Servers start
lazily on first use and are shared by all runs; a server that fails to start or crashes only
affects its own tools, and is tried again on a later use.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from fnmatch import fnmatchcase
from types import TracebackType
from typing import Any

import anyio
import mcp_types as types
from anyio.abc import TaskGroup
from mcp.client import Client

from nodmix.config.schema import MCPConfig, MCPServerConfig
from nodmix.errors import MCPError
from nodmix.mcp.connection import ServerConnection
from nodmix.mcp.info import MCPServerInfo, MCPServerStatus, ServerState
from nodmix.mcp.names import ToolNamer, assign_server_names
from nodmix.mcp.quick_connection import QuickCall, adopt_quick, send_quick
from nodmix.mcp.results import all_pages, error_result, listed, result_json, tool_result
from nodmix.mcp.targets import describe_target, transport_kind
from nodmix.mcp.tool import MCPTool, MCPToolDefinition
from nodmix.messages import JsonObject
from nodmix.tools.base import ToolResult

_SHUTDOWN_S = 15.0
"""Bound on closing every session at shutdown; the SDK escalates to SIGKILL within it."""


class MCPManager:
    """Connects Nodmix to the configured MCP servers.

    Use it as an async context manager (entered and exited by the same task, as any anyio task
    group). Nothing starts on entry: each server is started by its first use.

    Args:
        servers: `mcp.servers` from the config, in declaration order.
        env: Environment for `${VAR}` references and the variables stdio servers inherit
            (default: this process's environment).
        retry_backoff: Seconds before a server that failed to start is tried again; doubles
            with each further failure, up to 30 s.
        start_timeout: Seconds a server may take to start (spawn or connect, and handshake).
            Default: its `timeoutMs`, but at least 30 s.
    """

    def __init__(
        self,
        servers: Mapping[str, MCPServerConfig],
        env: Mapping[str, str] | None = None,
        *,
        retry_backoff: float = 1.0,
        start_timeout: float | None = None,
    ) -> None:
        self._configs = dict(servers)
        self._env: Mapping[str, str] = os.environ if env is None else env
        self._backoff = retry_backoff
        self._start_timeout = start_timeout
        self._parts = assign_server_names(self._configs)
        self._connections: dict[str, ServerConnection] = {}
        self._list_errors: dict[str, str] = {}
        self._tg: TaskGroup | None = None
        self._closed = False

    @classmethod
    def from_config(cls, config: MCPConfig, env: Mapping[str, str] | None = None) -> MCPManager:
        """A manager for the `mcp` section of the config."""
        return cls(config.servers, env)

    async def __aenter__(self) -> MCPManager:
        if self._tg is not None or self._closed:
            raise RuntimeError("an MCPManager can be opened only once")
        tg = anyio.create_task_group()
        await tg.__aenter__()
        self._tg = tg
        for name, config in self._configs.items():
            self._connections[name] = ServerConnection(
                name,
                config,
                self._env,
                task_group=tg,
                backoff=self._backoff,
                start_timeout=self._start_timeout,
            )
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close every session and reap every server process (idempotent).

        Called by `__aexit__`; call it directly only from the task that entered the manager.
        """
        tg, self._tg, self._closed = self._tg, None, True
        if tg is None:
            return
        connections = list(self._connections.values())
        for connection in connections:
            connection.stop()
        # Shielded: shutting down because of a cancellation must still close the servers.
        with anyio.move_on_after(_SHUTDOWN_S, shield=True):
            for connection in connections:
                await connection.aclose()
        tg.cancel_scope.cancel()
        await tg.__aexit__(None, None, None)

    # ---- configuration and status ---------------------------------------------------------------

    @property
    def servers(self) -> tuple[str, ...]:
        """Every configured server name, in declaration order."""
        return tuple(self._configs)

    @property
    def enabled_servers(self) -> tuple[str, ...]:
        """The servers whose tools runs can use."""
        return tuple(name for name, config in self._configs.items() if config.enabled)

    def server_part(self, server: str) -> str:
        """The sanitised server prefix of the server's direct-mode tool names."""
        return self._parts[self._known(server)]

    @property
    def failures(self) -> dict[str, str]:
        """Enabled servers whose tools are missing, with a one-line reason each."""
        out: dict[str, str] = {}
        for name in self.enabled_servers:
            connection = self._connections.get(name)
            if connection is not None and connection.state == "failed" and connection.last_error:
                out[name] = f"MCP server {name!r} {connection.last_error}"
            elif name in self._list_errors:
                out[name] = self._list_errors[name]
        return out

    def status(self) -> list[MCPServerStatus]:
        """The state of every configured server."""
        out: list[MCPServerStatus] = []
        failures = self.failures
        for name, config in self._configs.items():
            connection = self._connections.get(name)
            state: ServerState = "idle" if config.enabled else "disabled"
            error = failures.get(name, "").removeprefix(f"MCP server {name!r} ") or None
            if connection is not None:
                state = connection.state
                error = error or connection.last_error
            out.append(
                MCPServerStatus(
                    name=name,
                    transport=transport_kind(config),
                    target=describe_target(config),
                    enabled=config.enabled,
                    state=state,
                    error=error,
                    tool_count=connection.cached_tool_count if connection else None,
                    starts=connection.starts if connection else 0,
                    info=connection.info if connection else None,
                )
            )
        return out

    def allows(self, server: str, tool: str) -> bool:
        """Whether the server's `tools.include`/`tools.exclude` filters let a raw tool name in.

        Patterns are shell-style (`get_*`); a plain name matches only itself.
        """
        tools = self._configs[self._known(server)].tools
        if tools is None:
            return True
        if tools.include is not None and not any(fnmatchcase(tool, p) for p in tools.include):
            return False
        return not any(fnmatchcase(tool, p) for p in tools.exclude)

    def _known(self, server: str) -> str:
        if server not in self._configs:
            known = ", ".join(self._configs) or "none configured"
            raise MCPError(f"unknown MCP server {server!r} (configured: {known})")
        return server

    def _connection(self, server: str, *, allow_disabled: bool = False) -> ServerConnection:
        self._known(server)
        if not allow_disabled and not self._configs[server].enabled:
            raise MCPError(f"MCP server {server!r} is disabled in the config")
        connection = self._connections.get(server)
        if connection is None or self._tg is None:
            raise MCPError("the MCP manager is not open (use `async with MCPManager(...)`)")
        return connection

    # ---- tools ----------------------------------------------------------------------------------

    async def list_tools(self, *, reserved: Iterable[str] = ()) -> list[MCPTool]:
        """Direct-mode tools of every enabled server, starting servers as needed.

        Servers are contacted concurrently. A server that cannot be started or listed contributes
        no tools and is reported in `failures`; the others are unaffected.

        Args:
            reserved: Tool names already in use in the run; MCP tools get suffixes instead.
        """
        listings: dict[str, list[types.Tool]] = {}

        async def fetch(server: str) -> None:
            try:
                listings[server] = await self._connection(server).list_tools()
            except MCPError as exc:
                self._list_errors[server] = str(exc)
            else:
                self._list_errors.pop(server, None)

        async with anyio.create_task_group() as tg:
            for server in self.enabled_servers:
                tg.start_soon(fetch, server)
        namer = ToolNamer(reserved)
        return [
            tool
            for server in self.enabled_servers
            for tool in self._wrap(server, listings.get(server, []), namer, filtered=True)
        ]

    async def server_tools(self, server: str, *, include_filtered: bool = False) -> list[MCPTool]:
        """Direct-mode tools of one server (also for a disabled server, e.g. from the CLI).

        Args:
            server: The configured server name.
            include_filtered: Also return tools that `tools.include`/`exclude` hide.

        Raises:
            MCPError: Unknown server, or it cannot be started or listed.
        """
        listing = await self._connection(server, allow_disabled=True).list_tools()
        return self._wrap(server, listing, ToolNamer(), filtered=not include_filtered)

    def _wrap(
        self, server: str, listing: list[types.Tool], namer: ToolNamer, *, filtered: bool
    ) -> list[MCPTool]:
        part = self._parts[server]
        return [
            MCPTool.create(
                MCPToolDefinition.from_mcp(server, tool),
                name=namer.name(part, tool.name),
                caller=self,
            )
            for tool in listing
            if not filtered or self.allows(server, tool.name)
        ]

    async def call_tool(
        self,
        server: str,
        tool: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        key: tuple[str, ...] | None = None,
        output_schema: JsonObject | None = None,
    ) -> ToolResult:
        """Call a tool by its raw MCP name. Never raises for server trouble.

        A call whose quick request (`call_tool_quick`) was handed over under `key` awaits that
        request's answer instead of sending another (`output_schema` checks it).

        Returns:
            The converted MCP result, or an error result (`is_error`, one-line text) when the
            server is unknown, disabled, cannot be started, times out or rejects the call.
        """
        try:
            connection = self._connection(server)
            if not self.allows(server, tool):
                raise MCPError(f"tool {tool!r} of MCP server {server!r} is excluded by the config")
        except MCPError as exc:
            return error_result(str(exc))
        args = dict(arguments or {})
        parked = connection.parking.take(key, tool, args) if key is not None else None
        if parked is not None:
            adopted = await adopt_quick(connection, tool, parked, output_schema)
            if adopted is not None:
                return adopted

        async def call(client: Client) -> types.CallToolResult:
            return await client.call_tool(tool, args)

        try:
            result = await connection.request(f"tools/call {tool!r}", call)
        except MCPError as exc:
            return error_result(str(exc))
        return tool_result(result)

    def send_tool_quick(
        self,
        server: str,
        tool: str,
        arguments: Mapping[str, Any],
        *,
        key: tuple[str, ...],
        output_schema: JsonObject | None,
    ) -> QuickCall | None:
        """`call_tool` sent from any thread, for code mode's sandbox workers: the request goes
        straight to a stdio server's stdin (`quick_calls`); None, having sent nothing, when the
        call must go through `call_tool` (another transport, no live session, a backlog).
        A call handed over is finished by `call_tool(..., key=key)` on the event loop."""
        connection = self._connections.get(server)
        if connection is None or not self.allows(server, tool):
            return None
        return send_quick(connection, tool, arguments, key=key, output_schema=output_schema)

    # ---- capabilities, resources and prompts ----------------------------------------------------

    async def server_info(self, server: str) -> MCPServerInfo:
        """Connect (if needed) and return what the server offers.

        Raises:
            MCPError: Unknown or disabled server, or it cannot be started.
        """
        live = await self._connection(server).session()
        if live.info is None:  # the session closed right after starting
            raise MCPError(f"MCP server {server!r} closed the connection")
        return live.info

    async def _offers(self, server: str, capability: str) -> bool:
        info = await self.server_info(server)
        return bool(getattr(info, capability))

    async def _require(self, server: str, capability: str) -> None:
        if not await self._offers(server, capability):
            raise MCPError(f"MCP server {server!r} does not offer {capability}")

    async def list_resources(self, server: str) -> list[JsonObject]:
        """The server's resources (`uri`, `name`, `mimeType`, …); empty if it has none.

        Raises:
            MCPError: The server is unavailable or the request failed.
        """
        if not await self._offers(server, "resources"):
            return []
        return await self._connection(server).request(
            "resources/list",
            lambda c: all_pages(lambda cur: c.list_resources(cursor=cur), _resources),
        )

    async def list_resource_templates(self, server: str) -> list[JsonObject]:
        """The server's resource templates (`uriTemplate`, `name`, …); empty if it has none.

        Raises:
            MCPError: The server is unavailable or the request failed.
        """
        if not await self._offers(server, "resources"):
            return []
        return await self._connection(server).request(
            "resources/templates/list",
            lambda c: all_pages(lambda cur: c.list_resource_templates(cursor=cur), _templates),
        )

    async def read_resource(self, server: str, uri: str) -> JsonObject:
        """Read one resource: `{"contents": [{"uri", "mimeType", "text" | "blob"}, …]}`.

        Raises:
            MCPError: The server is unavailable, offers no resources, or the read failed.
        """
        await self._require(server, "resources")

        async def read(client: Client) -> JsonObject:
            return result_json(await client.read_resource(uri))

        return await self._connection(server).request(f"resources/read {uri!r}", read)

    async def list_prompts(self, server: str) -> list[JsonObject]:
        """The server's prompts (`name`, `description`, `arguments`); empty if it has none.

        Raises:
            MCPError: The server is unavailable or the request failed.
        """
        if not await self._offers(server, "prompts"):
            return []
        return await self._connection(server).request(
            "prompts/list",
            lambda c: all_pages(lambda cur: c.list_prompts(cursor=cur), _prompts),
        )

    async def get_prompt(
        self, server: str, name: str, arguments: Mapping[str, Any] | None = None
    ) -> JsonObject:
        """Render one prompt: `{"description"?, "messages": [{"role", "content"}, …]}`.

        Prompt arguments are strings in MCP; other JSON values are sent as their JSON text.

        Raises:
            MCPError: The server is unavailable, offers no prompts, or rejected the request.
        """
        await self._require(server, "prompts")
        args = {k: v if isinstance(v, str) else json.dumps(v) for k, v in (arguments or {}).items()}

        async def get(client: Client) -> JsonObject:
            return result_json(await client.get_prompt(name, args or None))

        return await self._connection(server).request(f"prompts/get {name!r}", get)


def _resources(page: types.ListResourcesResult) -> list[JsonObject]:
    return listed(page.resources)


def _templates(page: types.ListResourceTemplatesResult) -> list[JsonObject]:
    return listed(page.resource_templates)


def _prompts(page: types.ListPromptsResult) -> list[JsonObject]:
    return listed(page.prompts)
