"""The `read` tool: page through a text file in the workspace (an image file comes back as
image content, `nodmix.media.tool_images`).

The text comes back exactly as it is in the file, without line-number prefixes: the `edit` tool
matches text exactly, and numbered output invites models to paste the numbers into `oldText`.
Position is reported in a footer instead (`[Lines 1-2000 of 5000. Use offset=2001 ...]`), which
is all `offset`/`limit` paging needs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path

import anyio

from nodmix.errors import ToolError, WorkspaceEscapeError
from nodmix.messages import JsonObject
from nodmix.security.memory_guard import refusal as memory_refusal
from nodmix.tools.base import ToolContext, ToolResult, ToolSpec
from nodmix.tools.core.args import PATH_SCHEMA, CoreTool, optional_int, require_str
from nodmix.tools.core.textfiles import LineWindow, read_lines
from nodmix.tools.workspace import display_path, resolve_path

DEFAULT_MAX_LINES = 2000
DEFAULT_MAX_BYTES = 100 * 1024
#: Files up to this size are read on the event loop, or, in code mode, on the sandbox worker
#: that asked (`call_quick`): that takes tens of microseconds, less than the hop to a worker
#: thread (code-mode programs often read many small files in a row). Larger files are read in a
#: worker, since counting their lines reads all of them.
INLINE_READ_BYTES = 64 * 1024
IMAGE_SUFFIXES = frozenset({".png", ".jpg", ".jpeg", ".gif", ".webp", ".bmp", ".tif", ".tiff"})
"""Files read as images (their content is checked; `nodmix.media.tool_images`)."""

_DESCRIPTION = (
    "Read a text file from the workspace. Returns the text exactly as stored (no line numbers), "
    "at most {lines} lines or {kb} KB per call; a footer gives the line range when the file "
    "continues. Use `offset` and `limit` to page through large files. An image file (PNG, "
    "JPEG, GIF, WebP) is returned as the image itself."
)


def _footer(window: LineWindow, limit: int) -> str | None:
    if window.cut_long_line:
        return (
            f"[Line {window.first_line} is too long and was cut. "
            "Use `exec` with `cut` or `head -c` to see the rest of it.]"
        )
    if window.last_line >= window.total_lines:
        if window.first_line == 1:
            return None
        return (
            f"[Lines {window.first_line}-{window.last_line} of {window.total_lines}. End of file.]"
        )
    why = "" if window.last_line - window.first_line + 1 >= limit else " (size cap reached)"
    return (
        f"[Lines {window.first_line}-{window.last_line} of {window.total_lines}{why}. "
        f"Use offset={window.last_line + 1} to continue.]"
    )


class ReadTool(CoreTool):
    """Reads text files in pages of lines."""

    def __init__(
        self,
        *,
        max_lines: int = DEFAULT_MAX_LINES,
        max_bytes: int = DEFAULT_MAX_BYTES,
        read_roots: Sequence[Path] = (),
    ) -> None:
        """Create the tool.

        Args:
            max_lines: Most lines returned by one call (also the default `limit`).
            max_bytes: Most bytes of text returned by one call.
            read_roots: Folders outside the workspace that may be read too (the offered
                skills' folders); paths into them must be absolute or start with `~`.
        """
        self._read_roots = tuple(root.resolve() for root in read_roots)
        self._max_lines = max_lines
        self._max_bytes = max_bytes
        self._spec = ToolSpec(
            name="read",
            label="Read file",
            description=_DESCRIPTION.format(lines=max_lines, kb=max_bytes // 1024),
            parameters={
                "type": "object",
                "properties": {
                    "path": PATH_SCHEMA,
                    "offset": {
                        "type": "integer",
                        "minimum": 1,
                        "description": "1-based line number to start at (default 1).",
                    },
                    "limit": {
                        "type": "integer",
                        "minimum": 1,
                        "description": f"Maximum number of lines to return (default {max_lines}).",
                    },
                },
                "required": ["path"],
                "additionalProperties": False,
            },
        )

    async def call(self, args: JsonObject, ctx: ToolContext) -> ToolResult:
        """Return the requested lines, with a footer saying where to continue."""
        path, shown, limit, read = self._request(args, ctx)
        if read is None:
            return await self._image(ctx.workspace, path, shown)
        if _small(path):
            return _result(read(path, shown), shown, limit)
        return _result(await anyio.to_thread.run_sync(read, path, shown), shown, limit)

    def call_quick(self, args: JsonObject, ctx: ToolContext) -> ToolResult | None:
        """`call` on any thread for a text file small enough to read at once (code mode reads
        it on the sandbox worker that asked); None for a larger one or an image."""
        path, shown, limit, read = self._request(args, ctx)
        if read is None or not _small(path):
            return None
        return _result(read(path, shown), shown, limit)

    def _request(
        self, args: JsonObject, ctx: ToolContext
    ) -> tuple[Path, str, int, Callable[[Path, str], LineWindow] | None]:
        # The file, how it is shown, the line limit, and how to read it (None: an image).
        raw_path = require_str(args, "path")
        offset = optional_int(args, "offset", minimum=1) or 1
        limit = min(optional_int(args, "limit", minimum=1) or self._max_lines, self._max_lines)
        path = self._resolve(ctx.workspace, raw_path)
        hidden = memory_refusal(
            ctx.workspace,
            path,
            written=raw_path,
            origin=ctx.origin,
            agent_id=ctx.agent_id,
            session_key=ctx.session_key,
        )
        if hidden is not None:
            raise ToolError(hidden)
        shown = display_path(ctx.workspace, path)
        if path.suffix.lower() in IMAGE_SUFFIXES and path.is_file():
            return path, shown, limit, None
        read = partial(read_lines, offset=offset, limit=limit, max_bytes=self._max_bytes)
        return path, shown, limit, read

    async def _image(self, workspace: Path, path: Path, shown: str) -> ToolResult:
        """An image file: a reference a vision model sees as the picture (`nodmix.media`)."""
        from nodmix.media.tool_images import inline_image, workspace_image

        if not Path(shown).is_absolute():
            return await workspace_image(workspace, shown)
        try:
            data = await anyio.Path(path).read_bytes()
        except OSError as exc:
            return ToolResult.error(f"{shown}: cannot be read ({exc})")
        return await inline_image(data, label=f"image {shown}")

    def _resolve(self, workspace: Path, raw_path: str) -> Path:
        try:
            return resolve_path(workspace, raw_path)
        except WorkspaceEscapeError:
            candidate = Path(raw_path).expanduser()
            if candidate.is_absolute():
                resolved = candidate.resolve()
                if any(resolved.is_relative_to(root) for root in self._read_roots):
                    return resolved
            raise


def _small(path: Path) -> bool:
    try:
        return path.stat().st_size <= INLINE_READ_BYTES
    except OSError:
        return True  # missing or unreadable: `read_lines` says so at once


def _result(window: LineWindow, shown: str, limit: int) -> ToolResult:
    details = {
        "path": shown,
        "startLine": window.first_line,
        "endLine": window.last_line,
        "totalLines": window.total_lines,
        "truncated": window.cut_long_line or window.last_line < window.total_lines,
    }
    if window.total_lines == 0:
        return ToolResult.text(f"({shown} is empty)", details=details)
    footer = _footer(window, limit)
    text = window.text if footer is None else f"{window.text}\n\n{footer}"
    return ToolResult.text(text, details=details)
