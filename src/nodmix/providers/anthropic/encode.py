"""Nodmix assistant messages -> Anthropic Messages responses (the server side of the wire).

Used by the scripted model server and by round-trip tests. The event sequence mirrors what
Anthropic sends, including a `ping`, signature deltas for thinking, and tool input split
into `input_json_delta` fragments.
"""

from __future__ import annotations

import json

from nodmix.messages import (
    AssistantMessage,
    JsonObject,
    StopReason,
    TextBlock,
    ThinkingBlock,
    Usage,
)
from nodmix.providers.anthropic.errors import ERROR_TYPE_STATUS
from nodmix.providers.anthropic.mapping import tool_use_id
from nodmix.providers.errors import short_reason
from nodmix.providers.fake import split_text

_STOP: dict[StopReason, str] = {
    "stop": "end_turn",
    "toolUse": "tool_use",
    "length": "max_tokens",
    "error": "refusal",
    "aborted": "end_turn",
    "refusal": "refusal",
    "content_filter": "refusal",
}
_TYPE_FOR_STATUS = {status: kind for kind, status in ERROR_TYPE_STATUS.items()}

SSEMessage = tuple[str, JsonObject]
"""An event name and its JSON data."""


def usage_to_anthropic(usage: Usage) -> JsonObject:
    """An Anthropic `usage` object."""
    return {
        "input_tokens": usage.input,
        "output_tokens": usage.output,
        "cache_read_input_tokens": usage.cache_read,
        "cache_creation_input_tokens": usage.cache_write,
    }


def _content(message: AssistantMessage) -> list[JsonObject]:
    blocks: list[JsonObject] = []
    for block in message.content:
        if isinstance(block, ThinkingBlock):
            blocks.append(
                {
                    "type": "thinking",
                    "thinking": block.thinking,
                    "signature": block.thinking_signature or "",
                }
            )
        elif isinstance(block, TextBlock):
            blocks.append({"type": "text", "text": block.text})
        else:
            blocks.append(
                {
                    "type": "tool_use",
                    "id": tool_use_id(block.id),
                    "name": block.name,
                    "input": block.arguments,
                }
            )
    return blocks


def message_body(message: AssistantMessage, *, message_id: str, model: str) -> JsonObject:
    """A non-streamed Messages response for `message`."""
    return {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": _content(message),
        "stop_reason": _STOP[message.stop_reason],
        "stop_sequence": None,
        "usage": usage_to_anthropic(message.usage),
    }


def message_events(message: AssistantMessage, *, message_id: str, model: str) -> list[SSEMessage]:
    """The stream events that deliver `message`."""
    start = {**message_body(message, message_id=message_id, model=model), "content": []}
    start["stop_reason"] = None
    start["usage"] = {**usage_to_anthropic(message.usage), "output_tokens": 0}
    events: list[SSEMessage] = [
        ("message_start", {"type": "message_start", "message": start}),
        ("ping", {"type": "ping"}),
    ]
    for index, block in enumerate(_content(message)):
        events.extend(_block_events(index, block))
    events.append(
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": _STOP[message.stop_reason], "stop_sequence": None},
                "usage": {"output_tokens": message.usage.output},
            },
        )
    )
    events.append(("message_stop", {"type": "message_stop"}))
    return events


def _delta(index: int, delta: JsonObject) -> SSEMessage:
    return ("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta})


def _block_events(index: int, block: JsonObject) -> list[SSEMessage]:
    kind = block["type"]
    if kind == "thinking":
        empty: JsonObject = {"type": "thinking", "thinking": "", "signature": ""}
        deltas = [
            _delta(index, {"type": "thinking_delta", "thinking": piece})
            for piece in split_text(block["thinking"])
        ]
        if block["signature"]:
            deltas.append(
                _delta(index, {"type": "signature_delta", "signature": block["signature"]})
            )
    elif kind == "text":
        empty = {"type": "text", "text": ""}
        deltas = [
            _delta(index, {"type": "text_delta", "text": piece})
            for piece in split_text(block["text"])
        ]
    else:
        empty = {**block, "input": {}}
        deltas = [
            _delta(index, {"type": "input_json_delta", "partial_json": piece})
            for piece in split_text(json.dumps(block["input"], ensure_ascii=False))
        ]
    start = {"type": "content_block_start", "index": index, "content_block": empty}
    stop = {"type": "content_block_stop", "index": index}
    return [("content_block_start", start), *deltas, ("content_block_stop", stop)]


def error_type(status: int) -> str:
    """Anthropic's error type for an HTTP status (`api_error` for unknown 5xx)."""
    if status in _TYPE_FOR_STATUS:
        return _TYPE_FOR_STATUS[status]
    return "api_error" if status >= 500 else "invalid_request_error"


def error_body(status: int, message: str) -> JsonObject:
    """An Anthropic-shaped error body (also the data of a stream `error` event)."""
    return {
        "type": "error",
        "error": {"type": error_type(status), "message": message or short_reason(status)},
    }
