"""Anthropic Messages stream events -> `ModelEvent`s.

Event order: `message_start` (input usage), then per content block `content_block_start`,
`content_block_delta`s and `content_block_stop`, then `message_delta` (stop reason, output
usage) and `message_stop`. `ping` may appear anywhere; `error` can arrive mid-stream.
Text and thinking deltas pass straight through; a thinking block's `signature_delta` becomes
an empty `ThinkingDelta` carrying the signature; tool input arrives as `input_json_delta`
fragments and is emitted as one `ToolCallEvent` when its block stops.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import msgspec

from nodmix.errors import ContextOverflowError, ProviderProtocolError, ProviderUnavailableError
from nodmix.messages import StopReason, Usage
from nodmix.providers.anthropic.errors import error_from_stream
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

STOP_REASONS: dict[str, StopReason] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "pause_turn": "stop",
    "tool_use": "toolUse",
    "max_tokens": "length",
    "refusal": "refusal",
}
_OVERFLOW_STOP = "model_context_window_exceeded"

_USAGE_FIELDS = {
    "input_tokens": "input",
    "output_tokens": "output",
    "cache_read_input_tokens": "cache_read",
    "cache_creation_input_tokens": "cache_write",
}


class _ToolUse(msgspec.Struct):
    id: str
    name: str
    initial: dict[str, Any]
    parts: list[str] = msgspec.field(default_factory=list)


class EventParser:
    """Turns one response's stream events into model events. Feed events, then `finish()`."""

    def __init__(self, *, provider: str, budget: OutputBudget | None = None) -> None:
        self._provider = provider
        self._budget = budget or OutputBudget(None)
        self._tools: dict[int, _ToolUse] = {}
        self._usage: dict[str, int] = {}
        self._stop: StopReason = "stop"
        self._done = False

    def feed(self, event: str, data: str) -> list[ModelEvent]:
        """Parse one server-sent event.

        Raises:
            ProviderError: An `error` event, a malformed event, or a context-window stop.
        """
        try:
            payload = json.loads(data) if data.strip() else {}
        except ValueError:
            payload = None
        if not isinstance(payload, dict):
            raise ProviderProtocolError(
                f"{self._provider}: malformed stream event: {one_line(data, limit=120)}",
                provider=self._provider,
            )
        kind = payload.get("type") or event
        if kind == "error":
            raise error_from_stream(self._provider, payload.get("error"))
        if kind == "message_start":
            self._merge_usage((payload.get("message") or {}).get("usage"))
        elif kind == "content_block_start":
            return self._block_start(payload)
        elif kind == "content_block_delta":
            return self._block_delta(payload)
        elif kind == "content_block_stop":
            return self._block_stop(payload)
        elif kind == "message_delta":
            self._message_delta(payload)
        elif kind == "message_stop":
            self._done = True
            return [UsageEvent(usage=self.usage), ResponseDone(stop_reason=self._stop)]
        return []  # ping and event types added to the API later

    @property
    def cut(self) -> bool:
        """Whether the reply reached the output byte cap (stop reading then; see `cut_short`)."""
        return self._budget.exhausted

    def cut_short(self) -> list[ModelEvent]:
        """The end of a reply stopped at the byte cap; unfinished tool calls are dropped."""
        self._tools.clear()
        return [
            UsageEvent(usage=self.usage),
            ResponseDone(stop_reason="length", cut_at_bytes=self._budget.limit),
        ]

    def finish(self) -> list[ModelEvent]:
        """End of stream.

        Raises:
            ProviderUnavailableError: The stream stopped before `message_stop`.
        """
        if not self._done:
            raise ProviderUnavailableError(
                f"{self._provider}: the stream ended before the response finished",
                provider=self._provider,
            )
        return []

    @property
    def usage(self) -> Usage:
        """Usage reported so far."""
        fields = {ours: self._usage.get(theirs, 0) for theirs, ours in _USAGE_FIELDS.items()}
        return Usage(**fields, total_tokens=sum(fields.values()))

    def _merge_usage(self, raw: Any) -> None:
        # message_delta repeats usage cumulatively; later values replace earlier ones.
        if isinstance(raw, Mapping):
            for key in _USAGE_FIELDS:
                value = raw.get(key)
                if isinstance(value, int):
                    self._usage[key] = value

    def _block_start(self, payload: Mapping[str, Any]) -> list[ModelEvent]:
        block = payload.get("content_block") or {}
        kind = block.get("type")
        if kind == "text" and block.get("text"):
            return _text(self._budget.take(str(block["text"])))
        if kind == "thinking" and (block.get("thinking") or block.get("signature")):
            return [
                ThinkingDelta(
                    text=self._budget.take(str(block.get("thinking") or "")),
                    signature=block.get("signature") or None,
                )
            ]
        if kind in ("tool_use", "server_tool_use"):
            initial = block.get("input")
            self._tools[int(payload.get("index", 0))] = _ToolUse(
                id=str(block.get("id", "")),
                name=str(block.get("name", "")),
                initial=initial if isinstance(initial, dict) else {},
            )
        return []

    def _block_delta(self, payload: Mapping[str, Any]) -> list[ModelEvent]:
        delta = payload.get("delta") or {}
        kind = delta.get("type")
        if kind == "text_delta" and delta.get("text"):
            return _text(self._budget.take(str(delta["text"])))
        if kind == "thinking_delta" and delta.get("thinking"):
            thinking = self._budget.take(str(delta["thinking"]))
            return [ThinkingDelta(text=thinking)] if thinking else []
        if kind == "signature_delta" and delta.get("signature"):
            return [ThinkingDelta(text="", signature=str(delta["signature"]))]
        if kind == "input_json_delta":
            tool = self._tools.get(int(payload.get("index", 0)))
            if tool is not None:
                part = str(delta.get("partial_json", ""))
                self._budget.charge(part)
                tool.parts.append(part)
        return []

    def _block_stop(self, payload: Mapping[str, Any]) -> list[ModelEvent]:
        tool = self._tools.pop(int(payload.get("index", 0)), None)
        if tool is None:
            return []
        raw = "".join(tool.parts)
        arguments = parse_arguments(raw) if raw.strip() else tool.initial
        return [ToolCallEvent(id=tool.id, name=tool.name, arguments=arguments)]

    def _message_delta(self, payload: Mapping[str, Any]) -> None:
        self._merge_usage(payload.get("usage"))
        reason = (payload.get("delta") or {}).get("stop_reason")
        if reason == _OVERFLOW_STOP:
            raise ContextOverflowError(
                f"{self._provider}: stop reason {_OVERFLOW_STOP}: the prompt fills the model's"
                " context window",
                provider=self._provider,
            )
        if isinstance(reason, str):
            self._stop = STOP_REASONS.get(reason, "stop")


def _text(text: str) -> list[ModelEvent]:
    return [TextDelta(text=text)] if text else []


def parse_message(body: str, *, provider: str) -> list[ModelEvent]:
    """Events of a non-streamed Messages response (for proxies that ignore `stream`).

    Raises:
        ProviderError: The body carries an error or is not a message.
    """
    try:
        data = json.loads(body)
    except ValueError:
        data = None
    if not isinstance(data, dict) or data.get("type") == "error" or "content" not in data:
        if isinstance(data, dict) and data.get("error"):
            raise error_from_stream(provider, data["error"])
        raise ProviderProtocolError(
            f"{provider}: unexpected response body: {one_line(body, limit=120)}",
            provider=provider,
        )
    # Replay the message as the stream that would have delivered it.
    parser = EventParser(provider=provider)
    parser.feed("message_start", json.dumps({"type": "message_start", "message": data}))
    events: list[ModelEvent] = []
    for index, block in enumerate(data.get("content") or []):
        start = {"type": "content_block_start", "index": index, "content_block": block}
        events.extend(parser.feed("content_block_start", json.dumps(start)))
        stop = {"type": "content_block_stop", "index": index}
        events.extend(parser.feed("content_block_stop", json.dumps(stop)))
    delta = {"type": "message_delta", "delta": {"stop_reason": data.get("stop_reason")}}
    parser.feed("message_delta", json.dumps(delta))
    events.extend(parser.feed("message_stop", '{"type": "message_stop"}'))
    return events
