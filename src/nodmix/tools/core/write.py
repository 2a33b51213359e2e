"""The `write` tool: create or replace a file in the workspace."""

from __future__ import annotations

from pathlib import Path

import anyio

from nodmix.config.paths import config_path
from nodmix.errors import ToolError
from nodmix.messages import JsonObject
from nodmix.security.workspace_guard import (
    DEFAULT_ACCESS,
    WorkspaceAccess,
    keep_inode,
    refusal,
)
from nodmix.tools.base import ToolContext, ToolResult, ToolSpec
from nodmix.tools.core.args import PATH_SCHEMA, CoreTool, require_str
from nodmix.tools.core.textfiles import write_atomic
from nodmix.tools.workspace import display_path, resolve_path


def writable_path(
    ctx: ToolContext,
    path: str,
    access: WorkspaceAccess = DEFAULT_ACCESS,
    also: tuple[Path, ...] | None = None,
) -> Path:
    """`path` resolved in the workspace, if this turn may write it: a turn that does not speak
    for the owner may not write what the owner's sessions read as instructions
    (`nodmix.security.workspace_guard`), nor the paths of `also` (default: the config file).
    The check is on the resolved path the tool then writes, so `..`, symlinks and letter case
    do not get around it.

    Raises:
        ToolError: outside the workspace, or protected from this turn.
    """
    resolved = resolve_path(ctx.workspace, path)
    why = refusal(
        ctx.workspace,
        resolved,
        origin=ctx.origin,
        agent_id=ctx.agent_id,
        session_key=ctx.session_key,
        access=access,
        also=(config_path(),) if also is None else also,
    )
    if why is not None:
        raise ToolError(why)
    return resolved


class WriteTool(CoreTool):
    """Writes whole files atomically, creating missing parent directories."""

    def __init__(
        self, *, access: WorkspaceAccess = DEFAULT_ACCESS, also: tuple[Path, ...] | None = None
    ) -> None:
        """Create the tool; `access` is the agent's `sandbox.workspaceAccess`, `also` what
        else is protected (`workspace_guard.instruction_sources`; default the config file)."""
        self.access = access
        self.also = also
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
        path = writable_path(ctx, require_str(args, "path"), self.access, self.also)
        data = require_str(args, "content").encode("utf-8")
        shown = display_path(ctx.workspace, path)
        existed = path.exists()
        in_place = keep_inode(ctx.workspace, path)
        await anyio.to_thread.run_sync(lambda: write_atomic(path, data, shown, in_place=in_place))
        verb = "Replaced" if existed else "Created"
        return ToolResult.text(
            f"{verb} {shown} ({len(data)} bytes).",
            details={"path": shown, "bytes": len(data), "created": not existed},
        )
