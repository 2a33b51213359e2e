"""Nested tool calls: dispatch through the shared executor, delivery to the guest, projection.

Every guest tool call runs through the same `ToolRunner` as a direct model call (policy hooks,
validation, error capture, abort), emits the same start/finish events with `parent_call_id`, and
is written to the transcript as a real tool call under its parent `exec`/`wait` call once the
guest receives its result (or, if the run ends first, once the call stops: a call that ran is
always on record).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from nodmix.catalog import RunCatalog
from nodmix.codemode.runs import NestedCall, RunScope, RunState
from nodmix.codemode.tasks import CallCancel
from nodmix.events import EventSink, ToolCallFinished, ToolCallStarted, ToolProgress
from nodmix.messages import ToolResultMessage
from nodmix.tools.base import APPROVAL_WAITING, PROGRESS, ToolContext, ToolResult, ToolRunner

log = logging.getLogger("nodmix.codemode")
CANCELLED_TEXT = "Cancelled: the code-mode run ended before this tool call finished."


class NestedRecorder(Protocol):
    """Writes a finished nested call to the transcript (assistant call + tool result)."""

    def __call__(self, parent_call_id: str, call: NestedCall, result: ToolResultMessage) -> None:
        """Append the projection."""
        ...


@dataclass(frozen=True, slots=True, kw_only=True)
class RunServices:
    """What a code-mode run needs from the agent turn that owns it."""

    scope: RunScope
    catalog: RunCatalog
    executor: ToolRunner
    workspace: Path
    emit: EventSink
    record: NestedRecorder | None = None


def tool_message(call: NestedCall, result: ToolResult) -> ToolResultMessage:
    """The transcript/event form of a nested result."""
    return ToolResultMessage(
        tool_call_id=call.call_id,
        tool_name=call.entry.name,
        content=result.content,
        details=result.details,
        is_error=result.is_error,
    )


def dispatch(
    start: Callable[..., Any], services: RunServices, state: RunState, call: NestedCall
) -> None:
    """Start a recorded call as a new task (`start(fn, *args)`, see `tasks.NestedTasks`).

    Its `CallCancel` is created here rather than in the task, so `cancel_all` right after
    dispatch (an exec aborted at that moment) stops the call even if its task has not started
    yet; otherwise the tool would run anyway, after its run was gone.
    """
    call.cancel = CallCancel()
    call.services = services
    state.calls[call.request_id] = call
    start(run_nested, services, state, call)


async def run_nested(services: RunServices, state: RunState, call: NestedCall) -> None:
    """Run one nested call to completion or cancellation; always marks it done."""
    handle = call.cancel if call.cancel is not None else CallCancel()
    call.cancel, call.services = handle, services
    if handle.cancel_called:  # the run ended before this task started: the tool never runs
        drop_sent(call)
        call.result = ToolResult.error(CANCELLED_TEXT)
        call.done.set()
        state.notify()
        return
    call.ran, call.sent = True, None  # (the tool's run takes a sent call's answer)
    _quick_first(state)
    services.emit(started_event(call))
    ctx = call_context(services, state, call)
    run = services.executor.run(call.entry.tool, dict(call.input), ctx, kind="code_mode_nested")
    result: ToolResult | None = None
    try:
        task = asyncio.current_task()
    except RuntimeError:  # another backend (no asyncio loop): the call's own cancel scope
        task = None
    if task is None:
        with handle.scope():
            result = await run
    else:
        handle.running_in(task)
        try:
            result = await run
        except asyncio.CancelledError as exc:
            if not handle.caught(exc):
                raise
        finally:
            handle.running_in(None)
    call.result = result or ToolResult.error(CANCELLED_TEXT)
    call.finished = time.perf_counter()
    call.done.set()
    try:  # the finished event goes out before the guest (possibly on a waiting worker) sees it
        _quick_first(state)
        services.emit(finished_event(call))
    finally:
        state.notify()
    if call.abandoned:
        # The guest will never receive it, but the tool did run: keep it in the transcript.
        project_abandoned(call)


def _quick_first(state: RunState) -> None:
    # Quick calls the worker ran meanwhile (`codemode.quick`) are published before this call's
    # event, so events follow the order in which calls ran.
    handoff = state.handoff
    if handoff is not None and handoff.quick is not None:
        handoff.quick.publish()


def started_event(call: NestedCall) -> ToolCallStarted:
    """The event of a nested call starting."""
    return ToolCallStarted(
        call_id=call.call_id,
        tool_name=call.entry.name,
        arguments=call.input,
        parent_call_id=call.parent_call_id,
        tool_id=call.entry.id,
    )


def finished_event(call: NestedCall) -> ToolCallFinished:
    """The event of a nested call finishing (its result set)."""
    assert call.result is not None and call.finished is not None
    return ToolCallFinished(
        result=tool_message(call, call.result),
        parent_call_id=call.parent_call_id,
        duration_ms=(call.finished - call.started) * 1000,
    )


def call_context(
    services: RunServices, state: RunState, call: NestedCall, *, may_wait: bool = True
) -> ToolContext:
    """The `ToolContext` of a nested call. One that `may_wait` (it runs on the loop) carries
    the callbacks that say it waits for a person's approval and report its progress; a quick
    call (on a sandbox worker, returning at once) has neither."""
    scope = services.scope
    return ToolContext(
        agent_id=scope.agent_id,
        session_key=scope.session_key,
        session_id=scope.session_id,
        run_id=scope.run_id,
        call_id=call.call_id,
        workspace=services.workspace,
        parent_call_id=call.parent_call_id,
        extra=_loop_callbacks(services, state, call) if may_wait else {},
        origin=scope.origin,
    )


def _loop_callbacks(services: RunServices, state: RunState, call: NestedCall) -> dict[str, Any]:
    def progress(text: str) -> None:
        services.emit(
            ToolProgress(
                call_id=call.call_id,
                tool_name=call.entry.name,
                text=text,
                parent_call_id=call.parent_call_id,
            )
        )

    return {APPROVAL_WAITING: _approval_flag(state, call), PROGRESS: progress}


def _approval_flag(state: RunState, call: NestedCall) -> Callable[[bool], None]:
    def waiting(flag: bool) -> None:
        call.awaiting_approval = flag
        state.changed.set()  # a step waiting for results re-checks: it may suspend now

    return waiting


def delivery(call: NestedCall) -> tuple[bool, str]:
    """What the guest receives: `(True, value_json)` or `(False, error message)`."""
    result = call.result
    assert result is not None
    text = result.text_content
    if call.kind == "mcp":
        details = result.details
        if isinstance(details, dict) and "content" in details:
            return True, _dumps(details)  # MCP isError results resolve; the guest inspects them
        return False, text or f"{call.entry.name} failed"
    if result.is_error:
        return False, text or f"{call.entry.name} failed"
    if call.kind in ("ns", "mcp_aux"):
        value = result.details if result.details is not None else {"text": text}
        return True, _dumps(value)
    return True, _dumps({"tool": call.entry.id, "text": text, "details": result.details})


#: `json.dumps` with options builds a new encoder on every call; each delivery uses this one.
_ENCODER = json.JSONEncoder(ensure_ascii=False, default=str)


def _dumps(value: Any) -> str:
    return _ENCODER.encode(value)


def project(services: RunServices, call: NestedCall) -> None:
    """Record a nested call in the transcript under its parent call (at most once)."""
    if services.record is None or call.result is None or call.projected or not call.ran:
        return
    call.projected = True
    services.record(call.parent_call_id, call, tool_message(call, call.result))


def project_abandoned(call: NestedCall) -> None:
    """Project a call whose run ended first; never raises (it may run during shutdown)."""
    if call.services is None:
        return
    try:
        project(call.services, call)
    except Exception:
        log.warning("could not record abandoned nested call %s", call.call_id, exc_info=True)


def drop_sent(call: NestedCall) -> None:
    """A call sent from a sandbox worker (`codemode.sent`) whose run on the loop will never
    start: the tool is told to stop, and the call, which reached it, goes to the transcript
    as cancelled."""
    sent, call.sent = call.sent, None
    if sent is None:
        return
    sent.cancel()
    call.ran = call.abandoned = True
    call.result = ToolResult.error(CANCELLED_TEXT)
    call.finished = time.perf_counter()
    call.done.set()
    project_abandoned(call)


def cancel_all(state: RunState) -> None:
    """End a run's nested calls that the guest will never receive.

    Running calls are cancelled, calls whose task has not started never run, and undispatched
    or queued ones are dropped, like the run's timers (one the worker already sent to its
    server, `codemode.sent`, is cancelled there). Calls that did run still go into the
    transcript under their parent (with their result, or the cancellation once they stop), so
    an aborted or failed program leaves a complete record of what it did.
    """
    for call in state.calls.values():
        call.abandoned = True
        if call.done.is_set():
            project_abandoned(call)
        elif call.cancel is not None:
            call.cancel.cancel()
    for call in (*state.new_calls, *state.queued):
        drop_sent(call)
    state.new_calls.clear()
    state.queued.clear()  # queued calls never started: nothing else to cancel or record
    state.timers.cancel_all()
