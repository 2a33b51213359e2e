"""`MCPTool`: one tool of an MCP server, as a Nodmix `Tool`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import mcp_types as types

from nodmix.mcp.results import input_schema, to_json, tool_title
from nodmix.messages import JsonObject
from nodmix.tools.base import SentCall, ToolContext, ToolOrigin, ToolResult, ToolSpec


@dataclass(frozen=True, slots=True, kw_only=True)
class MCPToolDefinition:
    """A tool exactly as its MCP server declared it (JSON-safe, camelCase wire shapes).

    Code mode renders its `.d.ts` declarations from these fields.
    """

    server: str
    """The configured server name (`mcp.servers` key)."""
    name: str
    """The server's own tool name."""
    title: str | None
    """Display title (`title`, else `annotations.title`)."""
    description: str
    """The server's description; empty when it gave none."""
    input_schema: JsonObject
    """JSON Schema of the arguments (always an object schema)."""
    output_schema: JsonObject | None
    """JSON Schema of `structuredContent`, when the server declares one."""
    annotations: JsonObject | None
    """Behaviour hints (`readOnlyHint`, `destructiveHint`, …)."""
    raw: JsonObject
    """The whole definition as sent by the server."""

    @classmethod
    def from_mcp(cls, server: str, tool: types.Tool) -> MCPToolDefinition:
        """Build a definition from the SDK's `Tool` model."""
        return cls(
            server=server,
            name=tool.name,
            title=tool_title(tool),
            description=(tool.description or "").strip(),
            input_schema=input_schema(tool),
            output_schema=dict(tool.output_schema) if tool.output_schema is not None else None,
            annotations=to_json(tool.annotations) if tool.annotations is not None else None,
            raw=to_json(tool),
        )


class MCPToolCaller(Protocol):
    """What an `MCPTool` calls through; `MCPManager` implements it."""

    async def call_tool(
        self,
        server: str,
        tool: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        key: tuple[str, ...] | None = None,
        output_schema: JsonObject | None = None,
    ) -> ToolResult:
        """Call `tool` on `server`; failures come back as error results. `key` names the call,
        whose quick request (if one was sent) is awaited instead of sending another."""
        ...

    def send_tool_quick(
        self,
        server: str,
        tool: str,
        arguments: Mapping[str, Any],
        *,
        key: tuple[str, ...],
        output_schema: JsonObject | None,
    ) -> SentCall | None:
        """The call sent from any thread (`tools.base.SentCall`); None when it cannot be."""
        ...


@dataclass(frozen=True, slots=True, kw_only=True)
class MCPTool:
    """An MCP server's tool in direct mode: a normal tool named `<server>__<tool>`.

    Calls go through the manager that listed it, so a restarted server is used transparently.
    """

    spec: ToolSpec
    """What the model sees: the direct-mode name, the server's description and schema."""
    origin: ToolOrigin
    """`mcp:<server>:<raw tool name>`."""
    definition: MCPToolDefinition
    """The raw MCP definition (title, annotations, output schema)."""
    caller: MCPToolCaller
    """Where calls are sent."""

    @property
    def server(self) -> str:
        """The configured server name."""
        return self.origin.owner

    async def call(self, args: JsonObject, ctx: ToolContext) -> ToolResult:
        """Call the tool on its server.

        Returns:
            The server's result (`details` holds `content`, `structuredContent`, `isError`),
            or an error result when the server cannot be reached, times out or rejects the call.
        """
        return await self.caller.call_tool(
            self.origin.owner,
            self.origin.name,
            args,
            key=(ctx.session_id, ctx.run_id, ctx.call_id),
            output_schema=self.definition.output_schema,
        )

    def send_quick(self, args: JsonObject, ctx: ToolContext) -> SentCall | None:
        """The sending form (`tools.base.send_form`): the call written from this thread
        straight to a stdio server; None (nothing sent) when the server's session cannot take
        it now. A call handed over is awaited by `call` for the same call id."""
        return self.caller.send_tool_quick(
            self.origin.owner,
            self.origin.name,
            args,
            key=(ctx.session_id, ctx.run_id, ctx.call_id),
            output_schema=self.definition.output_schema,
        )

    @classmethod
    def create(cls, definition: MCPToolDefinition, *, name: str, caller: MCPToolCaller) -> MCPTool:
        """Wrap a definition under its allocated direct-mode `name`."""
        description = (
            definition.description
            or definition.title
            or (f"Tool {definition.name!r} of the MCP server {definition.server!r}.")
        )
        spec = ToolSpec(
            name=name,
            description=description,
            parameters=definition.input_schema,
            label=definition.title,
        )
        origin = ToolOrigin(source="mcp", owner=definition.server, name=definition.name)
        return cls(spec=spec, origin=origin, definition=definition, caller=caller)
