"""Tools: the seam (`Tool`, `ToolSpec`, `ToolResult`), core tools, policy and the executor."""

from nodmix.tools.base import (
    CORE_OWNER,
    FunctionTool,
    Tool,
    ToolContext,
    ToolFunction,
    ToolOrigin,
    ToolResult,
    ToolSource,
    ToolSpec,
)

__all__ = [
    "CORE_OWNER",
    "FunctionTool",
    "Tool",
    "ToolContext",
    "ToolFunction",
    "ToolOrigin",
    "ToolResult",
    "ToolSource",
    "ToolSpec",
]
