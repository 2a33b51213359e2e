"""Tools the application that started a turn runs itself (deferred tools).

An app that talks to the gateway through the OpenAI API brings its own functions. They are
real tools of the run (the model sees them, policy filters them, code mode catalogs them as
`client:<owner>:<name>`), but they never run in Nodmix: the agent loop stops the turn when
the model calls one and hands the call to the app, and the code-mode engine holds a program's
call until the app's result arrives. Other client tools (a tool source that runs in process)
are ordinary tools and run like any other.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import ClassVar

import msgspec

from nodmix.messages import JsonObject, ToolCallBlock
from nodmix.tools.base import Tool, ToolContext, ToolOrigin, ToolResult, ToolSpec

NOT_HERE = "this tool runs in the client application; it cannot run here"


class DeferredTool(msgspec.Struct, frozen=True, kw_only=True):
    """A tool whose calls go back to the application that offered it."""

    spec: ToolSpec
    origin: ToolOrigin
    deferred: ClassVar[bool] = True

    async def call(self, args: JsonObject, ctx: ToolContext) -> ToolResult:
        """Never reached through a turn; a direct invocation must not pretend to run it."""
        return ToolResult.error(NOT_HERE)


def is_deferred(tool: Tool) -> bool:
    """Whether the run hands calls of `tool` to the application instead of running them."""
    return bool(getattr(tool, "deferred", False))


def partition_deferred(
    calls: Sequence[ToolCallBlock], by_name: Mapping[str, Tool]
) -> tuple[list[ToolCallBlock], list[ToolCallBlock]]:
    """`(calls the run executes, calls of deferred tools)`: the app runs the latter itself."""
    ours: list[ToolCallBlock] = []
    theirs: list[ToolCallBlock] = []
    for call in calls:
        tool = by_name.get(call.name)
        (theirs if tool is not None and is_deferred(tool) else ours).append(call)
    return ours, theirs
