"""Nodmix assistant messages -> OpenAI chat-completions responses (the server side of the wire).

Used by the scripted model server and by round-trip tests (encode, then parse with `stream`,
and get the same message back). The shapes follow what OpenAI sends: a role chunk, content
deltas, tool calls split into fragments, a finish chunk, then a usage-only chunk.
"""

from __future__ import annotations

import json

from nodmix.messages import (
    AssistantMessage,
    JsonObject,
    StopReason,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    Usage,
)
from nodmix.providers.errors import short_reason
from nodmix.providers.fake import split_text
from nodmix.providers.overflow import is_context_overflow

_FINISH: dict[StopReason, str] = {
    "stop": "stop",
    "toolUse": "tool_calls",
    "length": "length",
    "error": "content_filter",
    "aborted": "stop",
    "content_filter": "content_filter",
    "refusal": "content_filter",
}


def usage_to_openai(usage: Usage) -> JsonObject:
    """An OpenAI `usage` object (cached tokens are part of `prompt_tokens`)."""
    prompt = usage.input + usage.cache_read + usage.cache_write
    return {
        "prompt_tokens": prompt,
        "completion_tokens": usage.output,
        "total_tokens": usage.total_tokens or prompt + usage.output,
        "prompt_tokens_details": {"cached_tokens": usage.cache_read},
    }


def _chunk(response_id: str, model: str, delta: JsonObject, finish: str | None) -> JsonObject:
    return {
        "id": response_id,
        "object": "chat.completion.chunk",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def completion_chunks(
    message: AssistantMessage, *, response_id: str, model: str, include_usage: bool = True
) -> list[JsonObject]:
    """The stream chunks (`data:` payloads, without `[DONE]`) that deliver `message`."""
    chunks = [_chunk(response_id, model, {"role": "assistant", "content": ""}, None)]
    calls = 0
    for block in message.content:
        if isinstance(block, ThinkingBlock):
            chunks.extend(
                _chunk(response_id, model, {"reasoning_content": piece}, None)
                for piece in split_text(block.thinking)
            )
        elif isinstance(block, TextBlock):
            chunks.extend(
                _chunk(response_id, model, {"content": piece}, None)
                for piece in split_text(block.text)
            )
        else:
            chunks.extend(_tool_call_chunks(block, calls, response_id, model))
            calls += 1
    chunks.append(_chunk(response_id, model, {}, _FINISH[message.stop_reason]))
    if include_usage:
        chunks.append(
            {
                "id": response_id,
                "object": "chat.completion.chunk",
                "created": 0,
                "model": model,
                "choices": [],
                "usage": usage_to_openai(message.usage),
            }
        )
    return chunks


def _tool_call_chunks(
    block: ToolCallBlock, index: int, response_id: str, model: str
) -> list[JsonObject]:
    # Like OpenAI: id and name first with empty arguments, then the JSON in fragments.
    head = {
        "index": index,
        "id": block.id,
        "type": "function",
        "function": {"name": block.name, "arguments": ""},
    }
    out = [_chunk(response_id, model, {"tool_calls": [head]}, None)]
    for piece in split_text(json.dumps(block.arguments, ensure_ascii=False)):
        fragment = {"index": index, "function": {"arguments": piece}}
        out.append(_chunk(response_id, model, {"tool_calls": [fragment]}, None))
    return out


def completion_body(message: AssistantMessage, *, response_id: str, model: str) -> JsonObject:
    """A non-streamed `chat.completion` response for `message`."""
    text = "".join(b.text for b in message.content if isinstance(b, TextBlock))
    reasoning = "".join(b.thinking for b in message.content if isinstance(b, ThinkingBlock))
    reply: JsonObject = {"role": "assistant", "content": text or None}
    if reasoning:
        reply["reasoning_content"] = reasoning
    calls = [
        {
            "id": b.id,
            "type": "function",
            "function": {"name": b.name, "arguments": json.dumps(b.arguments, ensure_ascii=False)},
        }
        for b in message.content
        if isinstance(b, ToolCallBlock)
    ]
    if calls:
        reply["tool_calls"] = calls
    return {
        "id": response_id,
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "message": reply, "finish_reason": _FINISH[message.stop_reason]}],
        "usage": usage_to_openai(message.usage),
    }


_ERROR_TYPES = {
    401: ("authentication_error", "invalid_api_key"),
    403: ("permission_error", None),
    404: ("invalid_request_error", "model_not_found"),
    429: ("rate_limit_error", "rate_limit_exceeded"),
}


def error_body(status: int, message: str) -> JsonObject:
    """An OpenAI-shaped error body for an HTTP error status."""
    kind, code = _ERROR_TYPES.get(status, ("invalid_request_error", None))
    if status >= 500:
        kind = "server_error"
    if is_context_overflow(message):
        code = "context_length_exceeded"
    return {"error": {"message": message or short_reason(status), "type": kind, "code": code}}


def stream_error_chunk(status: int, message: str) -> JsonObject:
    """An error sent inside a stream after a `200` (OpenRouter style: `code` is the status)."""
    return {"error": {"message": message, "code": status}}
