"""MCP servers as Nodmix tools, resources and prompts (the only package that uses the `mcp` SDK).

`MCPManager` owns the connections of one process; `MCPTool` is one server tool in direct mode,
named by the rules in `nodmix.mcp.names`.
"""

from nodmix.mcp.connection import MCPServerInfo, ServerState
from nodmix.mcp.manager import MCPManager, MCPServerStatus
from nodmix.mcp.names import ToolNamer, assign_server_names, sanitize_fragment
from nodmix.mcp.tool import MCPTool, MCPToolCaller, MCPToolDefinition
from nodmix.mcp.transport import TransportKind

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
