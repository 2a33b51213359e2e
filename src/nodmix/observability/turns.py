"""Run events as log records and metric updates.

`TurnObserver.wrap(emit)` returns a sink that records each event of one turn and passes it on
unchanged. Records go to the `nodmix.turns` logger with the run id, agent and session as JSON
fields, so `nodmix logs -f` shows a turn step by step as it happens.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

import msgspec

from nodmix.events import (
    AssistantMessageEvent,
    CompactionEvent,
    EventSink,
    ModelFallback,
    RunEvent,
    ToolCallFinished,
    ToolCallStarted,
    TurnFailed,
    TurnFinished,
    TurnStarted,
)

if TYPE_CHECKING:
    from nodmix.observability.metrics import Metrics

log = logging.getLogger("nodmix.turns")

CODEMODE_STEPS = {"nodmix:codemode:exec": "exec", "nodmix:codemode:wait": "wait"}


class _TurnState(msgspec.Struct, kw_only=True):
    agent_id: str
    fields: dict[str, str] = msgspec.field(default_factory=dict)
    step_started: float = msgspec.field(default_factory=time.monotonic)
    calls: dict[str, tuple[str, str | None]] = msgspec.field(default_factory=dict)
    """Running calls: call id → (tool name, tool id)."""


class _Off:
    """A metric that is not collected (the process serves no `/metrics`)."""

    def labels(self, *values: str) -> _Off:
        return self

    def inc(self, amount: float = 1) -> None:
        pass

    def observe(self, amount: float) -> None:
        pass


class NoMetrics:
    """What `TurnObserver` counts into until metrics are enabled: nothing, at no cost (the
    Prometheus client is only imported by processes that serve `/metrics`)."""

    turns = tool_calls = codemode_steps = compactions = model_latency = errors = _Off()


UNKNOWN_TOOL = "(unknown)"
"""The `tool` label of calls to a name that is no tool of the turn."""


class TurnObserver:
    """Logs and counts what turns do."""

    def __init__(self) -> None:
        self.metrics: Metrics | NoMetrics = NoMetrics()

    def enable_metrics(self) -> Metrics:
        """Start collecting metrics (idempotent) and return them."""
        from nodmix.observability.metrics import Metrics

        if not isinstance(self.metrics, Metrics):
            self.metrics = Metrics()
        return self.metrics

    def wrap(self, emit: EventSink, *, agent_id: str) -> EventSink:
        """A sink that observes one turn's events, then passes each to `emit`."""
        state = _TurnState(agent_id=agent_id)

        def observed(event: RunEvent) -> None:
            try:
                self._observe(state, event)
            except Exception:  # observing must never break a turn
                log.exception("could not record a run event")
            emit(event)

        return observed

    def _observe(self, state: _TurnState, event: RunEvent) -> None:
        m = self.metrics
        if isinstance(event, TurnStarted):
            state.fields = {
                "runId": event.run_id,
                "agent": event.agent_id,
                "sessionKey": event.session_key,
            }
            state.agent_id = event.agent_id
            state.step_started = time.monotonic()
            log.info("turn started (model %s)", event.model, extra=state.fields)
        elif isinstance(event, AssistantMessageEvent):
            message = event.message
            model = f"{message.provider}/{message.model}" if message.provider else message.model
            m.model_latency.labels(model or "unknown").observe(
                time.monotonic() - state.step_started
            )
        elif isinstance(event, ToolCallStarted):
            state.calls[event.call_id] = (event.tool_name, event.tool_id)
            nested = f" inside {event.parent_call_id}" if event.parent_call_id else ""
            log.info("tool call %s%s", event.tool_name, nested, extra=state.fields)
        elif isinstance(event, ToolCallFinished):
            self._tool_finished(state, event)
        elif isinstance(event, CompactionEvent):
            if event.phase != "start":
                m.compactions.labels(event.trigger, event.phase).inc()
            log.info("compaction %s (%s)", event.phase, event.trigger, extra=state.fields)
        elif isinstance(event, ModelFallback):
            m.errors.labels("model_fallback").inc()
            log.warning(
                "model %s failed (%s); falling back to %s",
                event.failed,
                event.error,
                event.next,
                extra=state.fields,
            )
        elif isinstance(event, TurnFinished):
            m.turns.labels(state.agent_id, event.stop_reason).inc()
            log.info(
                "turn finished: %s after %d step(s), %d tokens",
                event.stop_reason,
                event.steps,
                event.usage.total_tokens,
                extra=state.fields,
            )
        elif isinstance(event, TurnFailed):
            m.turns.labels(state.agent_id, "failed").inc()
            m.errors.labels(event.error_kind).inc()
            log.error(
                "turn failed: %s", event.error, extra={**state.fields, "code": event.error_kind}
            )

    def _tool_finished(self, state: _TurnState, event: ToolCallFinished) -> None:
        result = event.result
        name, tool_id = state.calls.pop(result.tool_call_id, (result.tool_name, None))
        status = "error" if result.is_error else "ok"
        # A name the model made up is not a tool: one label for all of them keeps the series
        # bounded whatever a chat asks the model to call.
        self.metrics.tool_calls.labels(name if tool_id else UNKNOWN_TOOL, status).inc()
        step = CODEMODE_STEPS.get(tool_id or "")
        if step is not None:
            self.metrics.codemode_steps.labels(step, status).inc()
        if event.parent_call_id is None:
            state.step_started = time.monotonic()  # the next model request starts now
        level = logging.WARNING if result.is_error else logging.INFO
        log.log(
            level,
            "tool %s %s in %.0f ms",
            name,
            "failed" if result.is_error else "done",
            event.duration_ms,
            extra=state.fields,
        )
