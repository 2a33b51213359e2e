"""Events a turn emits while it runs: streamed text, tool activity, compaction, the outcome.

Consumers (the CLI, the gateway's WebSocket and SSE streams) receive them through an
`EventSink`, a plain callable that must not block.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from nodmix.messages import AssistantMessage, JsonObject, ToolResultMessage, Usage


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnStarted:
    """A turn began on a session."""

    run_id: str
    agent_id: str
    session_key: str
    session_id: str
    model: str
    kind: Literal["turn_started"] = "turn_started"


@dataclass(frozen=True, slots=True, kw_only=True)
class TextDeltaEvent:
    """A piece of the assistant's answer."""

    text: str
    kind: Literal["text_delta"] = "text_delta"


@dataclass(frozen=True, slots=True, kw_only=True)
class ThinkingDeltaEvent:
    """A piece of the model's reasoning."""

    text: str
    kind: Literal["thinking_delta"] = "thinking_delta"


@dataclass(frozen=True, slots=True, kw_only=True)
class AssistantMessageEvent:
    """One complete model response (a turn may have several, one per step)."""

    message: AssistantMessage
    kind: Literal["assistant_message"] = "assistant_message"


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallStarted:
    """A tool call is about to run. `parent_call_id` is set for calls made by a code-mode cell."""

    call_id: str
    tool_name: str
    arguments: JsonObject
    parent_call_id: str | None = None
    tool_id: str | None = None
    kind: Literal["tool_started"] = "tool_started"


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallFinished:
    """A tool call finished."""

    result: ToolResultMessage
    parent_call_id: str | None = None
    duration_ms: float = 0.0
    kind: Literal["tool_finished"] = "tool_finished"


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelFallback:
    """The model failed with a retryable error and the next one in the chain takes over."""

    failed: str
    next: str
    error: str
    kind: Literal["model_fallback"] = "model_fallback"


@dataclass(frozen=True, slots=True, kw_only=True)
class CompactionEvent:
    """Compaction started or ended on the session."""

    phase: Literal["start", "end", "failed"]
    trigger: str
    tokens_before: int | None = None
    tokens_after: int | None = None
    message: str | None = None
    kind: Literal["compaction"] = "compaction"


@dataclass(frozen=True, slots=True, kw_only=True)
class Notice:
    """Something the user should see that is not part of the conversation."""

    level: Literal["info", "warning"]
    text: str
    kind: Literal["notice"] = "notice"


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnFinished:
    """The turn ended. `reply` is the final assistant text."""

    reply: str
    stop_reason: str
    usage: Usage
    steps: int
    session_id: str
    model: str
    kind: Literal["turn_finished"] = "turn_finished"


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnFailed:
    """The turn could not complete; `error` is one readable line."""

    error: str
    error_kind: str
    kind: Literal["turn_failed"] = "turn_failed"


RunEvent: TypeAlias = (
    TurnStarted
    | TextDeltaEvent
    | ThinkingDeltaEvent
    | AssistantMessageEvent
    | ToolCallStarted
    | ToolCallFinished
    | ModelFallback
    | CompactionEvent
    | Notice
    | TurnFinished
    | TurnFailed
)

EventSink: TypeAlias = Callable[[RunEvent], Any]
"""Receives events; must return quickly (queue them if the consumer is slow)."""


def discard(event: RunEvent) -> None:
    """An `EventSink` that drops everything."""
