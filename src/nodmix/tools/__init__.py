"""Tools: the seam (`Tool`, `ToolSpec`, `ToolResult`), core tools, policy and the executor.

The seam types import eagerly; the core tools, executor and policy load on first access, so
importing `nodmix.tools` (which every provider does through `ToolSpec`) stays cheap.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from nodmix.tools.base import (
    CORE_OWNER,
    FunctionTool,
    Tool,
    ToolContext,
    ToolFunction,
    ToolOrigin,
    ToolResult,
    ToolRunner,
    ToolSource,
    ToolSpec,
)

if TYPE_CHECKING:
    from nodmix.tools.core import core_tools
    from nodmix.tools.executor import ContextFactory, ToolExecutor
    from nodmix.tools.policy import ToolPolicy
    from nodmix.tools.workspace import resolve_path

_LAZY = {
    "core_tools": "nodmix.tools.core",
    "ContextFactory": "nodmix.tools.executor",
    "ToolExecutor": "nodmix.tools.executor",
    "ToolPolicy": "nodmix.tools.policy",
    "resolve_path": "nodmix.tools.workspace",
}

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
    "ToolRunner",
    "ToolSource",
    "ToolSpec",
    "core_tools",
    "resolve_path",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'nodmix.tools' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
