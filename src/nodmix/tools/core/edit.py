"""The `edit` tool: replace one exact piece of text in a workspace file.

Exactly one match is required. Zero matches and several matches are both errors that tell the
model how to fix its call, because silently editing the wrong place is worse than failing.
CRLF files are edited as if they used LF and written back with CRLF, since models write `\\n`.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import msgspec

from nodmix.errors import ToolError
from nodmix.messages import JsonObject
from nodmix.security.memory_guard import refusal as memory_refusal
from nodmix.security.workspace_guard import DEFAULT_ACCESS, WorkspaceAccess, keep_inode
from nodmix.tools.base import ToolContext, ToolResult, ToolSpec
from nodmix.tools.core.args import PATH_SCHEMA, CoreTool, require_str
from nodmix.tools.core.textfiles import read_text, write_atomic
from nodmix.tools.core.write import writable_path
from nodmix.tools.workspace import display_path

_DIFF_CONTEXT = 2
_MAX_DIFF_LINES = 40
# Fuzzy hints are a courtesy; do not spend seconds on them for huge files.
_MAX_HINT_LINES = 20_000


class EditOutcome(msgspec.Struct, frozen=True, kw_only=True):
    """Where an edit landed and what it changed."""

    first_line: int
    """1-based line where the replaced text started."""
    diff: str
    """Unified diff hunks of the change (shortened when long)."""


def _whitespace_hint(lines: list[str], old: str) -> str | None:
    wanted = [line.strip() for line in old.strip("\n").split("\n")]
    if not any(wanted):
        return None
    stripped = [line.strip() for line in lines]
    for start in range(len(stripped) - len(wanted) + 1):
        if stripped[start] == wanted[0] and stripped[start : start + len(wanted)] == wanted:
            return (
                f"The text matches at line {start + 1} if indentation and trailing whitespace "
                "are ignored; copy it exactly as the file has it (use `read`)."
            )
    return None


def _closest_line_hint(lines: list[str], old: str) -> str | None:
    probe = next((line.strip() for line in old.split("\n") if line.strip()), "")
    if not probe:
        return None
    best_ratio, best_index = 0.0, -1
    import difflib  # only when an edit fails to match (start-up time)

    matcher = difflib.SequenceMatcher(b=probe, autojunk=False)
    for index, line in enumerate(lines):
        matcher.set_seq1(line.strip())
        if matcher.real_quick_ratio() > best_ratio and matcher.quick_ratio() > best_ratio:
            ratio = matcher.ratio()
            if ratio > best_ratio:
                best_ratio, best_index = ratio, index
    if best_ratio < 0.5:
        return None
    return f"The closest line is {best_index + 1}: {lines[best_index].strip()!r}"


def _no_match_message(text: str, old: str, shown: str) -> str:
    message = f"oldText was not found in {shown}."
    lines = text.split("\n")
    if len(lines) <= _MAX_HINT_LINES:
        hint = _whitespace_hint(lines, old) or _closest_line_hint(lines, old)
        if hint:
            message += f" {hint}"
    return message + " oldText must match the file exactly, including whitespace."


def _diff(before: str, after: str) -> str:
    import difflib

    lines = list(
        difflib.unified_diff(before.split("\n"), after.split("\n"), n=_DIFF_CONTEXT, lineterm="")
    )[2:]  # drop the ---/+++ file header
    if len(lines) > _MAX_DIFF_LINES:
        cut = len(lines) - _MAX_DIFF_LINES
        lines = [*lines[:_MAX_DIFF_LINES], f"... ({cut} more diff lines)"]
    return "\n".join(lines)


def apply_edit(
    path: Path, shown: str, old: str, new: str, *, in_place: bool = False
) -> EditOutcome:
    """Replace the single occurrence of `old` with `new` in the file (blocking); `in_place`
    rewrites it through its own inode (`write_atomic`).

    Raises:
        ToolError: No match, several matches, or the file cannot be read or written.
    """
    raw = read_text(path, shown)
    crlf = "\r\n" in raw
    text = raw.replace("\r\n", "\n") if crlf else raw
    old, new = old.replace("\r\n", "\n"), new.replace("\r\n", "\n")
    count = text.count(old)
    if count == 0:
        raise ToolError(_no_match_message(text, old, shown))
    if count > 1:
        raise ToolError(
            f"oldText matches {count} places in {shown}; it must match exactly one. "
            "Include more surrounding lines in oldText to make it unique."
        )
    index = text.index(old)
    updated = text[:index] + new + text[index + len(old) :]
    data = (updated.replace("\n", "\r\n") if crlf else updated).encode("utf-8")
    write_atomic(path, data, shown, in_place=in_place)
    return EditOutcome(first_line=text.count("\n", 0, index) + 1, diff=_diff(text, updated))


class EditTool(CoreTool):
    """Replaces one exact, unique piece of text in a file."""

    def __init__(
        self, *, access: WorkspaceAccess = DEFAULT_ACCESS, also: tuple[Path, ...] | None = None
    ) -> None:
        """Create the tool; `access` and `also` as for `WriteTool`."""
        self.access = access
        self.also = also
        self._spec = ToolSpec(
            name="edit",
            label="Edit file",
            description=(
                "Replace text in a workspace file. `oldText` must appear in the file exactly once, "
                "character for character (whitespace and indentation included); add surrounding "
                "lines to make it unique. Returns a diff of the change."
            ),
            parameters={
                "type": "object",
                "properties": {
                    "path": PATH_SCHEMA,
                    "oldText": {
                        "type": "string",
                        "minLength": 1,
                        "description": "Exact text to replace; must occur exactly once.",
                    },
                    "newText": {
                        "type": "string",
                        "description": "Replacement text (empty to delete oldText).",
                    },
                },
                "required": ["path", "oldText", "newText"],
                "additionalProperties": False,
            },
        )

    async def call(self, args: JsonObject, ctx: ToolContext) -> ToolResult:
        """Apply the edit and show the changed lines."""
        written = require_str(args, "path")
        path = writable_path(ctx, written, self.access, self.also)
        hidden = memory_refusal(
            ctx.workspace,
            path,
            written=written,
            origin=ctx.origin,
            agent_id=ctx.agent_id,
            session_key=ctx.session_key,
            verb="edit",
        )
        if hidden is not None:  # an edit reads: its errors would tell what the file holds
            raise ToolError(hidden)
        old = require_str(args, "oldText", allow_empty=False)
        new = require_str(args, "newText")
        if old == new:
            raise ToolError("oldText and newText are identical; nothing to change.")
        shown = display_path(ctx.workspace, path)
        in_place = keep_inode(ctx.workspace, path)
        edit = await anyio.to_thread.run_sync(
            lambda: apply_edit(path, shown, old, new, in_place=in_place)
        )
        return ToolResult.text(
            f"Edited {shown} at line {edit.first_line}.\n\n{edit.diff}",
            details={"path": shown, "firstChangedLine": edit.first_line, "diff": edit.diff},
        )
