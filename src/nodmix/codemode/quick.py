"""Quick calls: a tool with a synchronous form runs on the sandbox worker that made the call.

An awaited call through the event loop costs two thread hand-offs: the worker asks the loop to
run the tool, and the loop wakes the worker with the result (`handoff.py`). Each costs what it
takes the other thread to get a CPU; spinning (`sandbox/rendezvous.py`) hides that only while
a second CPU is free. A tool that can answer synchronously (`tools.base.quick_form`: returns at
once, thread-safe, nothing bound to the loop) needs neither hand-off: when the executor finds
that nothing asynchronous has a say in the call (no hook runs for the tool and the gate does not
concern it, `ToolExecutor.run_quick`, which also validates and captures errors as `run` does),
the worker runs it inside the guest's request and the guest's promise settles in the same
crossing. A call that a tool can send from any thread (an MCP server's `tools/call`) is sent
from the worker too, and its answer collected there while the program waits
(`codemode.sent`). Every other call (hooks, exec approvals, async tools) goes through the loop.

What the loop does for a call it runs still happens for a quick one, on the loop and in order:
the start and finish events, the run's counters, the transcript entry. The worker queues each
finished call; the first of a batch wakes the loop (`call_soon_threadsafe`, without waiting
for it) to publish the batch a few milliseconds later. The loop also publishes the queue before
a loop call's start or finish event and before it hands loop results to the worker (so events
follow the order calls ran in, and the transcript the order the program received results), and
whenever a step ends, completed, failed or aborted.

A program that started a call without awaiting it (or armed a timer) and then makes quick calls
sends the first of those through the loop, which starts the pending call meanwhile. Results of
calls through the loop reach the program when it next waits for the loop, as promises resolved
at once let timers wait in JavaScript engines.

Cancellation: a turn aborted during a quick call lets it finish (it returns at once by
contract); it is recorded like any call that ran, and no quick call starts after the abort.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
import time
from typing import Final

from nodmix.codemode.nested import (
    RunServices,
    call_context,
    delivery,
    finished_event,
    project,
    started_event,
)
from nodmix.codemode.results import delivered
from nodmix.codemode.runs import NestedCall, RunState
from nodmix.codemode.sent import Sent, SentCalls
from nodmix.tools.base import ToolResult, quick_form, send_form

#: How long the events and transcript entries of quick calls may wait on the worker, so that
#: one wake-up of the loop publishes a batch of them (a step's end publishes at once).
PUBLISH_DELAY_SECONDS: Final = 0.005


class QuickCounts:
    """Quick calls this process ran on sandbox workers (for benchmarks; unlocked, so two
    workers may rarely lose a count)."""

    __slots__ = ("ran",)

    def __init__(self) -> None:
        self.ran = 0


quick_counts = QuickCounts()


class QuickLane:
    """One worker step's quick calls (see the module docstring)."""

    __slots__ = (
        "_context",
        "_done",
        "_lock",
        "_loop",
        "_scheduled",
        "_services",
        "_state",
        "closed",
        "error",
        "sent",
    )

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        services: RunServices,
        state: RunState,
        context: contextvars.Context,
    ) -> None:
        """`context` is what its loop callbacks run in (`tasks.loop_context()`)."""
        self._loop = loop
        self._services = services
        self._state = state
        self._lock = threading.Lock()
        self._done: list[tuple[NestedCall, bool, str]] = []
        self._scheduled = False
        self._context = context
        self.closed = False
        """Set when the turn is aborted or publishing failed: no quick call starts."""
        self.error: BaseException | None = None
        """What publishing raised on the loop; the engine re-raises it after the step."""
        self.sent = SentCalls(self, services, state)
        """Calls sent from the worker whose answers it collects."""

    # ---- worker side ----------------------------------------------------------------------

    def run(self, call: NestedCall) -> tuple[bool, str] | Sent | None:
        """Run `call` here if it is quick: the guest's delivery; `SENT` when it was sent from
        here and its answer is collected here (`codemode.sent`); None (nothing ran) when the
        call must be recorded for the loop."""
        tool, state = call.entry.tool, self._state
        # Calls and timers recorded since the last crossing are started by the loop: this call
        # goes that way too, so they start now rather than after a long run of quick calls.
        if self.closed or state.new_calls or state.timers.new:
            return None
        if quick_form(tool) is None:
            return None if send_form(tool) is None else self.sent.send(call)
        services = self._services
        ctx = call_context(services, state, call, may_wait=False)  # (it returns at once)
        result = services.executor.run_quick(tool, dict(call.input), ctx)
        if result is None:
            return None
        return self.finish(call, result)

    def finish(self, call: NestedCall, result: ToolResult) -> tuple[bool, str]:
        """Record the result of a call that ran on the worker; the guest's delivery."""
        call.result, call.ran = result, True
        call.finished = time.perf_counter()
        call.done.set()
        ok, payload = delivery(call)
        with self._lock:
            self._done.append((call, ok, payload))
            quick_counts.ran += 1
            wake = not self._scheduled
            self._scheduled = True
        if wake:
            try:
                self._loop.call_soon_threadsafe(self._arm, context=self._context)
            except RuntimeError:  # the loop is closing: the step's end publishes instead
                pass
        return ok, payload

    # ---- loop side ------------------------------------------------------------------------

    def _arm(self) -> None:
        # Waking the loop costs the worker a system call (~30 µs on a virtual machine), more
        # than a quick call itself: the first call of a batch arms a timer, and the calls made
        # until it fires go out with it.
        self._loop.call_later(PUBLISH_DELAY_SECONDS, self.publish, context=self._context)

    def publish(self) -> None:
        """Emit, count and record the quick calls that ran since the last time (on the loop).
        Never raises: the first error is kept for the engine and stops the lane."""
        with self._lock:
            done, self._done = self._done, []
            self._scheduled = False
        state, services = self._state, self._services
        for call, ok, payload in done:
            try:
                services.emit(started_event(call))
                services.emit(finished_event(call))
                state.catalog.counters.call += 1
                delivered(state, call)
                if not ok:
                    state.nested_errors.add(payload)
                project(services, call)
            except Exception as exc:  # the rest of the batch is still recorded
                self.closed = True
                if self.error is None:
                    self.error = exc

    def close(self) -> None:
        """The turn was aborted (thread-safe): run no more quick calls."""
        self.closed = True
        self.sent.wake()
