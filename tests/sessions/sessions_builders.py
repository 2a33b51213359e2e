"""Message and entry builders shared by the session tests."""

from __future__ import annotations

from typing import Any

from nodmix.messages import (
    AssistantMessage,
    StopReason,
    TextBlock,
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
)

TS = "2026-01-02T03:04:05.000Z"


def user(text: str) -> UserMessage:
    return UserMessage(content=(TextBlock(text=text),), timestamp=1)


def assistant(text: str = "", *calls: str, stop: StopReason | None = None) -> AssistantMessage:
    """An assistant message with optional text and tool calls named by their ids."""
    blocks: list[TextBlock | ToolCallBlock] = [TextBlock(text=text)] if text else []
    blocks += [ToolCallBlock(id=c, name=f"tool_{c}", arguments={"arg": c}) for c in calls]
    reason: StopReason = stop or ("toolUse" if calls else "stop")
    return AssistantMessage(content=tuple(blocks), stop_reason=reason, timestamp=2)


def result(call_id: str, text: str = "ok", *, is_error: bool = False) -> ToolResultMessage:
    return ToolResultMessage(
        tool_call_id=call_id,
        tool_name=f"tool_{call_id}",
        content=(TextBlock(text=text),),
        is_error=is_error,
        timestamp=3,
    )


class EntryChain:
    """Builds a linear list of entries with ids e1, e2, ... and matching parent ids."""

    def __init__(self) -> None:
        self.entries: list[Entry] = []

    def _ids(self) -> dict[str, Any]:
        parent = self.entries[-1].id if self.entries else None
        return {"id": f"e{len(self.entries) + 1}", "parent_id": parent, "timestamp": TS}

    def message(self, message: Any, *, nested_in: str | None = None) -> str:
        entry = MessageEntry(**self._ids(), message=message, parent_tool_call_id=nested_in)
        self.entries.append(entry)
        return entry.id

    def compaction(self, summary: str, first_kept: str, tokens_before: int = 1000) -> str:
        entry = CompactionEntry(
            **self._ids(),
            summary=summary,
            first_kept_entry_id=first_kept,
            tokens_before=tokens_before,
        )
        self.entries.append(entry)
        return entry.id

    def custom_message(self, text: str) -> str:
        entry = CustomMessageEntry(**self._ids(), custom_type="note", content=text, display=False)
        self.entries.append(entry)
        return entry.id

    def custom(self, data: Any) -> str:
        entry = CustomEntry(**self._ids(), custom_type="state", data=data)
        self.entries.append(entry)
        return entry.id
