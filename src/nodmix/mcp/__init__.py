"""MCP servers as Nodmix tools, resources and prompts (the only package that uses the `mcp` SDK).

`MCPManager` owns the connections of one process; `MCPTool` is one server tool in direct mode,
named by the rules in `nodmix.mcp.names`. Importing this package is cheap: the names below load
their modules (and the SDK) on first use, so `nodmix.mcp.targets` (what `nodmix mcp list`
reads) never pulls the SDK in.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from nodmix.mcp.info import MCPServerInfo, MCPServerStatus, ServerState
    from nodmix.mcp.manager import MCPManager
    from nodmix.mcp.names import ToolNamer, assign_server_names, sanitize_fragment
    from nodmix.mcp.targets import TransportKind
    from nodmix.mcp.tool import MCPTool, MCPToolCaller, MCPToolDefinition

_LAZY = {
    "MCPManager": "nodmix.mcp.manager",
    "MCPServerInfo": "nodmix.mcp.info",
    "MCPServerStatus": "nodmix.mcp.info",
    "MCPTool": "nodmix.mcp.tool",
    "MCPToolCaller": "nodmix.mcp.tool",
    "MCPToolDefinition": "nodmix.mcp.tool",
    "ServerState": "nodmix.mcp.info",
    "ToolNamer": "nodmix.mcp.names",
    "TransportKind": "nodmix.mcp.targets",
    "assign_server_names": "nodmix.mcp.names",
    "sanitize_fragment": "nodmix.mcp.names",
}

__all__ = [
    "MCPManager",
    "MCPServerInfo",
    "MCPServerStatus",
    "MCPTool",
    "MCPToolCaller",
    "MCPToolDefinition",
    "ServerState",
    "ToolNamer",
    "TransportKind",
    "assign_server_names",
    "sanitize_fragment",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'nodmix.mcp' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
