"""Starting what a program asked for: nested calls through a bounded queue, and its timers.

A program may start more calls than `maxPendingToolCalls` (`Promise.all` over a hundred
items): the calls recorded in a step join the run's queue, and at most that many run at once,
in the order the program made them. Each call that finishes starts the next queued one right
away (on the event loop, even while the run is parked between `exec` and `wait`), and each
result is delivered in the next round as it lands. The refusal of a batch past the queue cap
(`maxQueuedToolCalls`) happens when the call is recorded (`bridge.py`), before anything starts.

Thread rules as in `handoff.py`: everything here runs on the event loop; the worker thread
only appends to `state.new_calls` and `state.timers.new`, which are taken over only while no
worker step runs or while the worker is parked in the fast-lane exchange.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Coroutine
from typing import Any

from nodmix.codemode.nested import RunServices, delivery, dispatch, project
from nodmix.codemode.results import delivered
from nodmix.codemode.runs import NestedCall, RunState, Settled
from nodmix.codemode.timers import Timer

Start = Callable[..., None]
"""`start(fn, *args)`: run `fn(*args)` as a task on the loop (`tasks.NestedTasks.start`)."""

Delivery = tuple[int, bool, str]


def start_recorded(start: Start, services: RunServices, state: RunState) -> None:
    """Queue the calls recorded in the last step, arm its timers, and fill free slots."""
    if state.new_calls:
        state.queued.extend(state.new_calls)
        state.new_calls.clear()
    if state.timers.new:
        state.timers.arm(start, state.notify)
    refill(start, services, state)


def refill(start: Start, services: RunServices, state: RunState) -> int:
    """Start queued calls while fewer than `maxPendingToolCalls` are running; how many
    started."""
    queued = state.queued
    if not queued:
        return 0
    free = state.settings.max_pending_tool_calls - state.running()
    started = 0
    while queued and started < free:
        call = queued.popleft()
        dispatch(_refilling(start), services, state, call)
        started += 1
    return started


def _refilling(start: Start) -> Start:
    def start_call(fn: Callable[..., Coroutine[Any, Any, None]], *args: Any) -> None:
        start(_run_then_refill, start, fn, *args)

    return start_call


async def _run_then_refill(
    start: Start,
    fn: Callable[..., Coroutine[Any, Any, None]],
    services: RunServices,
    state: RunState,
    call: NestedCall,
) -> None:
    await fn(services, state, call)
    # The slot is free: the next queued call starts now (a parked run's file is rewritten,
    # so a restart does not queue a call that already started).
    # (A program that returned leaves its queue running: its calls are started too.)
    if refill(start, services, state) and not call.abandoned and state.on_settle is not None:
        state.on_settle()


def deliveries(
    start: Start, services: RunServices, state: RunState, settled: list[Settled]
) -> list[Delivery]:
    """What the guest receives this round (a pending yield first), projecting each call."""
    items: list[Delivery] = []
    if state.yield_request is not None:
        request_id, reason = state.yield_request
        items.append((request_id, True, json.dumps({"status": "yielded", "reason": reason})))
        state.yield_request = None
    for item in settled:
        if isinstance(item, Timer):
            items.append(state.timers.take(item))
            continue
        state.calls.pop(item.request_id, None)
        state.catalog.counters.call += 1
        ok, payload = delivery(item)
        delivered(state, item)
        if not ok:
            state.nested_errors.add(payload)
        items.append((item.request_id, ok, payload))
        project(services, item)
    refill(start, services, state)
    return items
