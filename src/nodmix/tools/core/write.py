"""The `write` tool: create or replace a file in the workspace."""

from __future__ import annotations

import anyio

from nodmix.messages import JsonObject
from nodmix.tools.base import ToolContext, ToolResult, ToolSpec
from nodmix.tools.core.args import PATH_SCHEMA, CoreTool, require_str
from nodmix.tools.core.textfiles import write_atomic
from nodmix.tools.workspace import display_path, resolve_path


class WriteTool(CoreTool):
    """Writes whole files atomically, creating missing parent directories."""

    def __init__(self) -> None:
        """Create the tool."""
        self._spec = ToolSpec(
            name="write",
            label="Write file",
            description=(
                "Create a file in the workspace, or replace its entire content. Missing parent "
                "directories are created. Use `edit` to change part of an existing file."
            ),
            parameters={
                "type": "object",
                "properties": {
                    "path": PATH_SCHEMA,
                    "content": {
                        "type": "string",
                        "description": "The complete new file content (UTF-8 text).",
                    },
                },
                "required": ["path", "content"],
                "additionalProperties": False,
            },
        )

    async def call(self, args: JsonObject, ctx: ToolContext) -> ToolResult:
        """Write the file and report how many bytes were written."""
        path = resolve_path(ctx.workspace, require_str(args, "path"))
        data = require_str(args, "content").encode("utf-8")
        shown = display_path(ctx.workspace, path)
        existed = path.exists()
        await anyio.to_thread.run_sync(write_atomic, path, data, shown)
        verb = "Replaced" if existed else "Created"
        return ToolResult.text(
            f"{verb} {shown} ({len(data)} bytes).",
            details={"path": shown, "bytes": len(data), "created": not existed},
        )
