"""Human-readable transcript lines for `nodmix sessions show` and `tail`.

Entries render one after another in file order. Calls made inside a code-mode program were
appended while their outer `exec`/`wait` call ran, so indenting them by nesting depth is enough
to show them under that call.
"""

from __future__ import annotations

import json
from typing import Any, Final

from nodmix.messages import (
    AssistantMessage,
    ImageBlock,
    ImageRefBlock,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultMessage,
    UserMessage,
)
from nodmix.sessions.entries import (
    CompactionEntry,
    CustomEntry,
    CustomMessageEntry,
    Entry,
    MessageEntry,
    ModelChangeEntry,
    OpaqueEntry,
    SessionInfoEntry,
)

TEXT_LIMIT: Final = 2000
ARGS_LIMIT: Final = 400
_INDENT: Final = "    "


def _clip(text: str, limit: int | None) -> str:
    if limit is None or len(text) <= limit:
        return text
    return f"{text[:limit]}… [{len(text) - limit} more characters]"


def _when(timestamp: str) -> str:
    # "2026-01-02T03:04:05.678Z" -> "2026-01-02 03:04:05": enough to follow a conversation.
    return timestamp[:19].replace("T", " ")


def _blocks_text(blocks: tuple[Any, ...]) -> str:
    parts: list[str] = []
    for block in blocks:
        if isinstance(block, TextBlock):
            parts.append(block.text)
        elif isinstance(block, ImageBlock):
            parts.append(f"[image {block.mime_type}, {len(block.data) * 3 // 4} bytes]")
        elif isinstance(block, ImageRefBlock):
            parts.append(block.note)
    return "\n".join(parts)


class EntryRenderer:
    """Turns entries into indented text lines, remembering call nesting across entries."""

    def __init__(self, *, full: bool = False) -> None:
        """`full=True` prints long texts, arguments and reasoning without clipping."""
        self.full = full
        self._depth: dict[str, int] = {}  # tool call id -> nesting depth of the call

    def render(self, entry: Entry) -> list[str]:
        """The lines for one entry."""
        depth = 0
        if isinstance(entry, MessageEntry) and entry.parent_tool_call_id is not None:
            depth = self._depth.get(entry.parent_tool_call_id, 0) + 1
        pad = _INDENT * depth
        head = f"{pad}{_when(entry.timestamp)} "
        body_pad = pad + _INDENT
        lines = self._lines(entry, depth)
        first, rest = lines[0], lines[1:]
        return [head + first, *(body_pad + line for line in rest)]

    def _limit(self, limit: int) -> int | None:
        return None if self.full else limit

    def _text_lines(self, text: str) -> list[str]:
        return _clip(text, self._limit(TEXT_LIMIT)).splitlines() or [""]

    def _lines(self, entry: Entry, depth: int) -> list[str]:
        if isinstance(entry, MessageEntry):
            return self._message_lines(entry, depth)
        if isinstance(entry, CompactionEntry):
            head = (
                f"compaction: {entry.tokens_before} tokens before;"
                f" kept from entry {entry.first_kept_entry_id}"
            )
            return [head, *self._text_lines(entry.summary)]
        if isinstance(entry, CustomMessageEntry):
            text = entry.content if isinstance(entry.content, str) else _blocks_text(entry.content)
            return [f"custom message ({entry.custom_type}):", *self._text_lines(text)]
        if isinstance(entry, CustomEntry):
            return [f"custom state ({entry.custom_type})"]
        if isinstance(entry, ModelChangeEntry):
            return [f"model changed to {entry.provider}/{entry.model_id}"]
        if isinstance(entry, SessionInfoEntry):
            return [f"session title: {entry.name}"]
        assert isinstance(entry, OpaqueEntry)
        return [f"{entry.type} entry (not understood by this version)"]

    def _message_lines(self, entry: MessageEntry, depth: int) -> list[str]:
        message = entry.message
        if isinstance(message, UserMessage):
            return ["user:", *self._text_lines(_blocks_text(message.content))]
        if isinstance(message, ToolResultMessage):
            status = "error" if message.is_error else "ok"
            head = f"result {message.tool_name} [{message.tool_call_id}] ({status}):"
            return [head, *self._text_lines(_blocks_text(message.content))]
        for call in message.tool_calls:
            self._depth.setdefault(call.id, depth)
        if depth and message.tool_calls:
            # A projected call from a code-mode program: the calls are all there is to say.
            return [f"program {line}" for line in map(self._call_line, message.tool_calls)]
        return self._assistant_lines(message)

    def _call_line(self, block: ToolCallBlock) -> str:
        args = json.dumps(block.arguments, ensure_ascii=False, default=str)
        return f"call {block.name} [{block.id}] {_clip(args, self._limit(ARGS_LIMIT))}"

    def _assistant_lines(self, message: AssistantMessage) -> list[str]:
        model = "/".join(p for p in (message.provider, message.model) if p)
        tags = ", ".join(t for t in (model, message.stop_reason) if t)
        lines = [f"assistant [{tags}]:"]
        for block in message.content:
            if isinstance(block, TextBlock):
                lines.extend(self._text_lines(block.text))
            elif isinstance(block, ThinkingBlock):
                if self.full:
                    lines.extend(f"(thinking) {line}" for line in block.thinking.splitlines())
                else:
                    lines.append(f"(thinking: {len(block.thinking)} characters)")
            elif isinstance(block, ToolCallBlock):
                lines.append(self._call_line(block))
        if message.error_message:
            lines.append(f"error: {message.error_message}")
        return lines
