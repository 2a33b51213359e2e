"""What a server config names, without the `mcp` SDK: `nodmix mcp list` and `show` print
configs from here and never import it."""

from __future__ import annotations

from typing import Literal, TypeAlias

from nodmix.config.schema import MCPServerConfig

TransportKind: TypeAlias = Literal["stdio", "streamable-http", "sse"]


def transport_kind(config: MCPServerConfig) -> TransportKind:
    """Which transport a server config selects."""
    if config.command:
        return "stdio"
    return config.transport or "streamable-http"


def describe_target(config: MCPServerConfig) -> str:
    """The command line or URL of a server, for listings and messages."""
    if config.command:
        return " ".join([config.command, *config.args])
    return config.url or ""
