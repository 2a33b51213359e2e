"""Events a turn emits while it runs: streamed text, tool activity, compaction, the outcome.

Consumers (the CLI, the gateway's WebSocket and SSE streams) receive them through an
`EventSink`, a plain callable that must not block.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, TypeAlias

import msgspec

from nodmix.messages import AssistantMessage, JsonObject, ToolResultMessage, Usage


class TurnStarted(msgspec.Struct, frozen=True, kw_only=True):
    """A turn began on a session."""

    run_id: str
    agent_id: str
    session_key: str
    session_id: str
    model: str
    kind: Literal["turn_started"] = "turn_started"


class TextDeltaEvent(msgspec.Struct, frozen=True, kw_only=True):
    """A piece of the assistant's answer."""

    text: str
    kind: Literal["text_delta"] = "text_delta"


class ThinkingDeltaEvent(msgspec.Struct, frozen=True, kw_only=True):
    """A piece of the model's reasoning."""

    text: str
    kind: Literal["thinking_delta"] = "thinking_delta"


class AssistantMessageEvent(msgspec.Struct, frozen=True, kw_only=True):
    """One complete model response (a turn may have several, one per step)."""

    message: AssistantMessage
    kind: Literal["assistant_message"] = "assistant_message"


class ToolCallStarted(msgspec.Struct, frozen=True, kw_only=True):
    """A tool call is about to run. `parent_call_id` is set for calls made by a code-mode cell."""

    call_id: str
    tool_name: str
    arguments: JsonObject
    parent_call_id: str | None = None
    tool_id: str | None = None
    kind: Literal["tool_started"] = "tool_started"


class ToolCallFinished(msgspec.Struct, frozen=True, kw_only=True):
    """A tool call finished."""

    result: ToolResultMessage
    parent_call_id: str | None = None
    duration_ms: float = 0.0
    kind: Literal["tool_finished"] = "tool_finished"


class ToolProgress(msgspec.Struct, frozen=True, kw_only=True):
    """A long tool call says what it is doing (a browser navigation, a page load)."""

    call_id: str
    tool_name: str
    text: str
    parent_call_id: str | None = None
    kind: Literal["tool_progress"] = "tool_progress"


class ModelFallback(msgspec.Struct, frozen=True, kw_only=True):
    """The model failed with a retryable error and the next one in the chain takes over."""

    failed: str
    next: str
    error: str
    kind: Literal["model_fallback"] = "model_fallback"


class CompactionEvent(msgspec.Struct, frozen=True, kw_only=True):
    """Compaction started or ended on the session."""

    phase: Literal["start", "end", "failed"]
    trigger: str
    tokens_before: int | None = None
    tokens_after: int | None = None
    message: str | None = None
    kind: Literal["compaction"] = "compaction"


class Notice(msgspec.Struct, frozen=True, kw_only=True):
    """Something the user should see that is not part of the conversation."""

    level: Literal["info", "warning"]
    text: str
    kind: Literal["notice"] = "notice"


class TurnFinished(msgspec.Struct, frozen=True, kw_only=True):
    """The turn ended. `reply` is the final assistant text."""

    reply: str
    stop_reason: str
    usage: Usage
    steps: int
    session_id: str
    model: str
    kind: Literal["turn_finished"] = "turn_finished"


class TurnFailed(msgspec.Struct, frozen=True, kw_only=True):
    """The turn could not complete; `error` is one readable line."""

    error: str
    error_kind: str
    kind: Literal["turn_failed"] = "turn_failed"


class ApprovalRequested(msgspec.Struct, frozen=True, kw_only=True):
    """Tool calls wait for the person talking to the agent (one batch, one or more requests).

    Each request is `{id, agentId, sessionKey, command, cwd, reason, expiresAt}`; answer with
    the `approvals.resolve` RPC or `/approve <id>` / `/deny <id>`."""

    requests: list[JsonObject]
    batch_id: str
    kind: Literal["approval_requested"] = "approval_requested"


class ApprovalResolved(msgspec.Struct, frozen=True, kw_only=True):
    """An approval request was answered (or timed out: `decision` is `timeout`)."""

    id: str
    decision: str
    by: str | None = None
    kind: Literal["approval_resolved"] = "approval_resolved"


RunEvent: TypeAlias = (
    TurnStarted
    | TextDeltaEvent
    | ThinkingDeltaEvent
    | AssistantMessageEvent
    | ToolCallStarted
    | ToolCallFinished
    | ToolProgress
    | ModelFallback
    | CompactionEvent
    | Notice
    | TurnFinished
    | TurnFailed
    | ApprovalRequested
    | ApprovalResolved
)

EventSink: TypeAlias = Callable[[RunEvent], Any]
"""Receives events; must return quickly (queue them if the consumer is slow)."""


def discard(event: RunEvent) -> None:
    """An `EventSink` that drops everything."""
