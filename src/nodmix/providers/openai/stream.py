"""Chat-completions stream chunks -> `ModelEvent`s.

The parser is fed the `data:` payload of each server-sent event. Text and reasoning deltas
pass straight through; tool calls arrive as fragments keyed by `index` (name and id in the
first fragment, the JSON arguments spread over many) and are emitted whole once the choice
finishes. Usage comes in its own final chunk (`stream_options.include_usage`), after
`finish_reason`, so `ResponseDone` waits for `[DONE]` or the end of the stream.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import msgspec

from nodmix.errors import ProviderProtocolError, ProviderUnavailableError
from nodmix.messages import StopReason, Usage
from nodmix.providers.arguments import parse_arguments
from nodmix.providers.base import (
    ModelEvent,
    ResponseDone,
    TextDelta,
    ThinkingDelta,
    ToolCallEvent,
    UsageEvent,
)
from nodmix.providers.errors import one_line
from nodmix.providers.limits import OutputBudget
from nodmix.providers.openai.errors import error_from_stream

FINISH_REASONS: dict[str, StopReason] = {
    "stop": "stop",
    "tool_calls": "toolUse",
    "function_call": "toolUse",
    "length": "length",
    "content_filter": "content_filter",
    "error": "error",
}


def usage_from_openai(raw: Mapping[str, Any]) -> Usage:
    """Our `Usage` from an OpenAI `usage` object; cached prompt tokens become `cache_read`."""
    prompt = _int(raw.get("prompt_tokens"))
    completion = _int(raw.get("completion_tokens"))
    details = raw.get("prompt_tokens_details")
    cached = _int(details.get("cached_tokens")) if isinstance(details, Mapping) else 0
    cached = cached or _int(raw.get("prompt_cache_hit_tokens"))  # DeepSeek's spelling
    # `input` excludes the cached part so that input + cache_read is the whole prompt.
    return Usage(
        input=max(0, prompt - cached),
        output=completion,
        cache_read=cached,
        total_tokens=_int(raw.get("total_tokens")) or prompt + completion,
    )


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _reasoning(delta: Mapping[str, Any]) -> str:
    # DeepSeek/vLLM say `reasoning_content`, OpenRouter/Ollama `reasoning`; some servers send
    # both with the same text, so take one.
    for key in ("reasoning_content", "reasoning"):
        value = delta.get(key)
        if isinstance(value, str) and value:
            return value
    return ""


class _PendingCall(msgspec.Struct):
    id: str = ""
    name: str = ""
    arguments: list[str] = msgspec.field(default_factory=list)


class ChunkParser:
    """Turns one response's stream chunks into events. Feed `data:` payloads, then `finish()`."""

    def __init__(self, *, provider: str, budget: OutputBudget | None = None) -> None:
        self._provider = provider
        self._budget = budget or OutputBudget(None)
        self._calls: dict[int, _PendingCall] = {}
        self._ids: dict[str, int] = {}
        self._stop: StopReason | None = None
        self._done = False

    def feed(self, data: str) -> list[ModelEvent]:
        """Parse one chunk.

        Raises:
            ProviderError: The chunk carries an error, or is not JSON.
        """
        if data.strip() == "[DONE]":
            self._done = True
            return []
        if not data.strip():
            return []
        try:
            chunk = json.loads(data)
        except ValueError:
            chunk = None
        if not isinstance(chunk, dict):
            raise ProviderProtocolError(
                f"{self._provider}: malformed stream chunk: {one_line(data, limit=120)}",
                provider=self._provider,
            )
        if chunk.get("error"):
            raise error_from_stream(self._provider, chunk["error"])
        events: list[ModelEvent] = []
        for choice in chunk.get("choices") or []:
            if isinstance(choice, dict) and choice.get("index", 0) == 0:
                events.extend(self._choice(choice))
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            events.append(UsageEvent(usage=usage_from_openai(usage)))
        return events

    @property
    def cut(self) -> bool:
        """Whether the reply reached the output byte cap (stop reading then; see `cut_short`)."""
        return self._budget.exhausted

    def cut_short(self) -> list[ModelEvent]:
        """The end of a reply stopped at the byte cap; unfinished tool calls are dropped."""
        self._calls.clear()
        return [ResponseDone(stop_reason="length", cut_at_bytes=self._budget.limit)]

    def finish(self) -> list[ModelEvent]:
        """End of stream: remaining tool calls and `ResponseDone`.

        Raises:
            ProviderUnavailableError: The stream stopped before the response finished.
        """
        if self._stop is None and not self._done:
            raise ProviderUnavailableError(
                f"{self._provider}: the stream ended before the response finished",
                provider=self._provider,
            )
        return [*self._flush_calls(), ResponseDone(stop_reason=self._stop or "stop")]

    def _choice(self, choice: Mapping[str, Any]) -> list[ModelEvent]:
        events: list[ModelEvent] = []
        delta = choice.get("delta") or {}
        budget = self._budget
        reasoning = budget.take(_reasoning(delta))
        if reasoning:
            events.append(ThinkingDelta(text=reasoning))
        content = delta.get("content")
        if isinstance(content, str) and content:
            content = budget.take(content)
            if content:
                events.append(TextDelta(text=content))
        for fragment in delta.get("tool_calls") or []:
            if isinstance(fragment, dict):
                self._accumulate(fragment)
        if budget.exhausted:
            return events
        reason = choice.get("finish_reason")
        if isinstance(reason, str) and reason:
            self._stop = FINISH_REASONS.get(reason, "stop")
            events.extend(self._flush_calls())
        return events

    def _accumulate(self, fragment: Mapping[str, Any]) -> None:
        raw_id = fragment.get("id")
        call_id = raw_id if isinstance(raw_id, str) else ""
        index = fragment.get("index")
        if not isinstance(index, int):
            # Some compatible servers omit `index`; fall back to telling calls apart by id.
            if call_id and call_id not in self._ids:
                index = max(self._calls, default=-1) + 1
            else:
                index = self._ids.get(call_id, max(self._calls, default=0))
        slot = self._calls.setdefault(index, _PendingCall())
        if call_id:
            slot.id = call_id
            self._ids[call_id] = index
        function = fragment.get("function") or {}
        if function.get("name"):
            slot.name = str(function["name"])
        arguments = function.get("arguments")
        if isinstance(arguments, str):
            self._budget.charge(arguments)
            slot.arguments.append(arguments)
        elif isinstance(arguments, dict):
            slot.arguments = [json.dumps(arguments)]

    def _flush_calls(self) -> list[ModelEvent]:
        events: list[ModelEvent] = [
            ToolCallEvent(
                id=slot.id or f"call_{index}",
                name=slot.name,
                arguments=parse_arguments("".join(slot.arguments)),
            )
            for index, slot in sorted(self._calls.items())
        ]
        self._calls.clear()
        return events


def parse_completion(body: str, *, provider: str) -> list[ModelEvent]:
    """Events of a non-streamed `chat.completion` body (for servers that ignore `stream`).

    Raises:
        ProviderError: The body carries an error or is not a completion.
    """
    parser = ChunkParser(provider=provider)
    try:
        data = json.loads(body)
    except ValueError:
        data = None
    if not isinstance(data, dict) or not isinstance(data.get("choices"), list):
        if isinstance(data, dict) and data.get("error"):
            raise error_from_stream(provider, data["error"])
        raise ProviderProtocolError(
            f"{provider}: unexpected response body: {one_line(body, limit=120)}",
            provider=provider,
        )
    # A completion is a single chunk whose `message` plays the part of the `delta`.
    chunk = {
        "choices": [
            {**c, "delta": c.get("message") or {}} for c in data["choices"] if isinstance(c, dict)
        ],
        "usage": data.get("usage"),
    }
    events = parser.feed(json.dumps(chunk))
    parser.feed("[DONE]")
    return [*events, *parser.finish()]
