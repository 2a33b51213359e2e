"""The conversation as plain text for the summarising model, and the files it touched.

Summarisers see a transcript-like text, one labelled paragraph per message, not a chat history:
a chat history would invite the model to continue the conversation instead of describing it.
Tool results are capped (the summary needs their gist, and the transcript keeps them whole),
tool `details` and nested code-mode calls are left out (the model never saw them either).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any, Final

import msgspec

from nodmix.messages import (
    AssistantMessage,
    ImageBlock,
    ImageRefBlock,
    Message,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultMessage,
)
from nodmix.sessions.entries import CompactionEntry, Entry, MessageEntry

TOOL_RESULT_CAP: Final = 2000
TOOL_ARGS_CAP: Final = 1500
THINKING_CAP: Final = 600

READ_TOOLS: Final = frozenset({"read"})
WRITE_TOOLS: Final = frozenset({"write", "edit"})


def _cap(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\n[... {len(text) - limit:,} more characters not shown]"


def _blocks(blocks: Iterable[object]) -> str:
    parts: list[str] = []
    for block in blocks:
        if isinstance(block, TextBlock):
            parts.append(block.text)
        elif isinstance(block, ImageBlock):
            parts.append("[image]")
        elif isinstance(block, ImageRefBlock):
            parts.append(block.note)
    return "\n".join(parts)


def _call(call: ToolCallBlock) -> str:
    args = json.dumps(call.arguments, ensure_ascii=False, default=str)
    return f"{call.name}({_cap(args, TOOL_ARGS_CAP)})"


def serialize_message(message: Message) -> str:
    """One message as a labelled paragraph."""
    if isinstance(message, AssistantMessage):
        parts: list[str] = []
        for block in message.content:
            if isinstance(block, ThinkingBlock) and block.thinking.strip():
                parts.append(f"Assistant (reasoning): {_cap(block.thinking, THINKING_CAP)}")
            elif isinstance(block, TextBlock) and block.text.strip():
                parts.append(f"Assistant: {block.text}")
        calls = message.tool_calls
        if calls:
            parts.append("Assistant called: " + "; ".join(_call(c) for c in calls))
        if message.stop_reason in ("aborted", "error"):
            parts.append(f"(this response ended early: {message.stop_reason})")
        return "\n\n".join(parts)
    if isinstance(message, ToolResultMessage):
        label = "Tool error" if message.is_error else "Tool result"
        return f"{label} ({message.tool_name}): {_cap(_blocks(message.content), TOOL_RESULT_CAP)}"
    return f"User: {_blocks(message.content)}"


def serialize_conversation(messages: Sequence[Message]) -> str:
    """Messages as paragraphs separated by blank lines (empty ones left out)."""
    return "\n\n".join(text for text in map(serialize_message, messages) if text)


def split_text(text: str, max_chars: int) -> list[str]:
    """`text` in pieces of at most `max_chars`, broken at paragraph or line ends when possible."""
    if len(text) <= max_chars:
        return [text]
    pieces: list[str] = []
    rest = text
    while len(rest) > max_chars:
        window = rest[:max_chars]
        cut = max(window.rfind("\n\n"), window.rfind("\n"))
        if cut < max_chars // 2:
            cut = max_chars
        pieces.append(rest[:cut])
        rest = rest[cut:].lstrip("\n")
    if rest:
        pieces.append(rest)
    return pieces


class FileOps(msgspec.Struct):
    """Files read and changed in a stretch of history (tool calls with a `path`)."""

    read: set[str] = msgspec.field(default_factory=set)
    modified: set[str] = msgspec.field(default_factory=set)

    def add_call(self, call: ToolCallBlock) -> None:
        """Record one tool call, if it is a file tool."""
        path = call.arguments.get("path")
        if not isinstance(path, str) or not path:
            return
        if call.name in READ_TOOLS:
            self.read.add(path)
        elif call.name in WRITE_TOOLS:
            self.modified.add(path)

    def add_previous(self, details: Any) -> None:
        """Carry over the lists of an earlier compaction's `details`."""
        if not isinstance(details, dict):
            return
        for key, target in (("readFiles", self.read), ("modifiedFiles", self.modified)):
            value = details.get(key)
            if isinstance(value, list):
                target.update(v for v in value if isinstance(v, str))

    @property
    def read_only(self) -> list[str]:
        """Files read and never written, sorted."""
        return sorted(self.read - self.modified)

    def details(self) -> dict[str, list[str]]:
        """The `details` shape of a compaction entry."""
        return {"readFiles": self.read_only, "modifiedFiles": sorted(self.modified)}

    def render(self) -> str:
        """The sections appended to a summary (empty when no files were touched)."""
        out = ""
        if self.read_only:
            out += "\n\n<read-files>\n" + "\n".join(self.read_only) + "\n</read-files>"
        if self.modified:
            out += (
                "\n\n<modified-files>\n" + "\n".join(sorted(self.modified)) + "\n</modified-files>"
            )
        return out


def collect_file_ops(entries: Iterable[Entry], previous: CompactionEntry | None) -> FileOps:
    """File operations of `entries` (nested code-mode calls included) plus earlier ones."""
    ops = FileOps()
    if previous is not None:
        ops.add_previous(previous.details)
    for entry in entries:
        if isinstance(entry, MessageEntry) and isinstance(entry.message, AssistantMessage):
            for call in entry.message.tool_calls:
                ops.add_call(call)
    return ops
