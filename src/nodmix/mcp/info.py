"""What the MCP layer reports about a server: its state, what it said about itself, its status."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, TypeAlias

from mcp.client import Client

from nodmix.mcp.targets import TransportKind

ServerState: TypeAlias = Literal["disabled", "idle", "connecting", "connected", "failed"]


@dataclass(frozen=True, slots=True, kw_only=True)
class MCPServerInfo:
    """What a connected server said about itself."""

    server: str
    """The configured server name."""
    protocol_version: str
    server_name: str | None
    """The implementation name the server reported, if any."""
    server_version: str | None
    instructions: str | None
    tools: bool
    """Whether the server offers tools."""
    resources: bool
    """Whether the server offers resources (`resources/list`, `resources/read`)."""
    prompts: bool
    """Whether the server offers prompts (`prompts/list`, `prompts/get`)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class MCPServerStatus:
    """The state of one configured server, for runs, `nodmix doctor` and `nodmix mcp`."""

    name: str
    transport: TransportKind
    target: str
    """The command line or URL."""
    enabled: bool
    state: ServerState
    error: str | None
    """Why the server or its tool listing is unavailable, as one line (`failed to start: …`,
    `connection lost: …`)."""
    tool_count: int | None
    """Tools the current session listed (before include/exclude filters)."""
    starts: int
    """How many times the server was started (restarts included)."""
    info: MCPServerInfo | None


def server_info(name: str, client: Client) -> MCPServerInfo:
    caps = client.server_capabilities
    impl = client.server_info
    return MCPServerInfo(
        server=name,
        protocol_version=client.protocol_version,
        server_name=impl.name if impl is not None else None,
        server_version=impl.version if impl is not None else None,
        instructions=client.instructions,
        tools=caps.tools is not None,
        resources=caps.resources is not None,
        prompts=caps.prompts is not None,
    )
