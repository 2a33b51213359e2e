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
from nodmix.tools.core import core_tools
from nodmix.tools.executor import ContextFactory, ToolExecutor
from nodmix.tools.policy import ToolPolicy
from nodmix.tools.workspace import resolve_path

__all__ = [
    "CORE_OWNER",
    "ContextFactory",
    "FunctionTool",
    "Tool",
    "ToolContext",
    "ToolExecutor",
    "ToolFunction",
    "ToolOrigin",
    "ToolPolicy",
    "ToolResult",
    "ToolSource",
    "ToolSpec",
    "core_tools",
    "resolve_path",
]
