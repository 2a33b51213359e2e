"""Trajectory export: a whole session as one JSON document, for debugging and evaluation.

Unlike the flat transcript, the trajectory is a tree: each assistant tool call carries its
result, and calls a code-mode program made (entries with `parentToolCallId`) sit under the
`exec`/`wait` call that ran them, at any depth. Compactions stay in place, with their summaries,
so a reader sees both the full history and where the model's view was condensed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final

import msgspec

from nodmix.messages import AssistantMessage, ToolCallBlock, ToolResultMessage, UserMessage
from nodmix.sessions.entries import (
    CompactionEntry,
    Entry,
    MessageEntry,
    SessionHeader,
    entry_to_builtins,
    iso_now,
)

if TYPE_CHECKING:
    from nodmix.sessions.session import Session

TRAJECTORY_FORMAT: Final = "nodmix.trajectory"
TRAJECTORY_VERSION: Final = 1

JsonDict = dict[str, Any]


def export_trajectory(session: Session) -> JsonDict:
    """The session's conversation as a JSON-ready dict (see the module docstring)."""
    document = build_trajectory(session.transcript.header, session.transcript.entries)
    document["sessionKey"] = session.key
    document["agentId"] = session.agent_id
    return document


def build_trajectory(header: SessionHeader, entries: Sequence[Entry]) -> JsonDict:
    """The trajectory of a transcript, from its header and entries in file order."""
    builder = _TrajectoryBuilder()
    for entry in entries:
        builder.add(entry)
    return {
        "format": TRAJECTORY_FORMAT,
        "version": TRAJECTORY_VERSION,
        "sessionId": header.id,
        "exportedAt": iso_now(),
        "header": entry_to_builtins(header),
        "items": builder.items,
    }


def _builtins(value: object) -> Any:
    # Through JSON rather than `to_builtins`, which keeps tuples: the result must be plain JSON.
    return msgspec.json.decode(msgspec.json.encode(value))


class _TrajectoryBuilder:
    def __init__(self) -> None:
        self.items: list[JsonDict] = []
        # Every tool call seen so far, top-level or nested, by call id: where results and
        # nested calls attach.
        self.calls: dict[str, JsonDict] = {}

    def add(self, entry: Entry) -> None:
        if isinstance(entry, MessageEntry):
            self._add_message(entry)
        elif isinstance(entry, CompactionEntry):
            self.items.append(
                {
                    "kind": "compaction",
                    "entryId": entry.id,
                    "timestamp": entry.timestamp,
                    "summary": entry.summary,
                    "firstKeptEntryId": entry.first_kept_entry_id,
                    "tokensBefore": entry.tokens_before,
                    "details": entry.details,
                    "fromHook": entry.from_hook,
                }
            )
        else:
            item = entry_to_builtins(entry)
            item["kind"] = item.pop("type", "unknown")
            item["entryId"] = item.pop("id", entry.id)
            item.pop("parentId", None)
            self.items.append(item)

    def _add_message(self, entry: MessageEntry) -> None:
        message = entry.message
        parent = (
            self.calls.get(entry.parent_tool_call_id)
            if entry.parent_tool_call_id is not None
            else None
        )
        if isinstance(message, ToolResultMessage):
            call = self.calls.get(message.tool_call_id)
            if call is not None and call["result"] is None:
                call["result"] = _result(entry, message)
                return
        if isinstance(message, AssistantMessage) and parent is not None:
            # A projected call from inside a code-mode program: only its calls matter.
            for block in message.tool_calls:
                parent["nested"].append(self._call(entry, block))
            return
        item = self._message_item(entry)
        if entry.parent_tool_call_id is not None:
            item["parentToolCallId"] = entry.parent_tool_call_id
        target = parent["nested"] if parent is not None else self.items
        target.append(item)

    def _message_item(self, entry: MessageEntry) -> JsonDict:
        message = entry.message
        base: JsonDict = {"entryId": entry.id, "timestamp": entry.timestamp}
        if isinstance(message, UserMessage):
            return {"kind": "user", **base, "content": _builtins(message.content)}
        if isinstance(message, ToolResultMessage):  # a result whose call was never recorded
            return {"kind": "toolResult", **base, **_result(entry, message)}
        return {
            "kind": "assistant",
            **base,
            "provider": message.provider,
            "model": message.model,
            "stopReason": message.stop_reason,
            "errorMessage": message.error_message,
            "usage": _builtins(message.usage),
            "content": [_builtins(b) for b in message.content if not isinstance(b, ToolCallBlock)],
            "toolCalls": [self._call(entry, b) for b in message.tool_calls],
        }

    def _call(self, entry: MessageEntry, block: ToolCallBlock) -> JsonDict:
        call: JsonDict = {
            "kind": "toolCall",
            "id": block.id,
            "name": block.name,
            "arguments": block.arguments,
            "entryId": entry.id,
            "timestamp": entry.timestamp,
            "result": None,
            "nested": [],
        }
        self.calls.setdefault(block.id, call)
        return call


def _result(entry: MessageEntry, message: ToolResultMessage) -> JsonDict:
    return {
        "entryId": entry.id,
        "timestamp": entry.timestamp,
        "toolCallId": message.tool_call_id,
        "toolName": message.tool_name,
        "isError": message.is_error,
        "content": _builtins(message.content),
        "details": message.details,
    }
