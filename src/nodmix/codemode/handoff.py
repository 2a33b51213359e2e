"""The fast lane between a sandbox worker step and the event loop.

A guest awaiting a quick tool would otherwise cost two full trips per call: the worker step
returns to the event loop, the loop runs the tool, and a new worker step delivers the result
(~100 µs of thread and future machinery each way, plus a cold worker). With a `Handoff`, the
worker keeps the cell after a step that ends with pending calls: it asks the loop to dispatch
them and waits a few milliseconds. When a call settles on the loop within that window, the loop
builds the deliveries and hands them straight to the waiting worker, which delivers and pumps
again in the same step. Only when nothing settles in time does the step return, and the engine
falls back to its normal async wait (and, past the step budget, to a snapshot).

Thread rules: everything that touches the run's host state (dispatching calls, building
deliveries, which pops settled calls and writes the transcript) runs on the event loop, either
while the worker is parked in `exchange` or after the step has ended. The lock makes the
hand-over atomic, so a result is taken by exactly one side: the waiting worker, or the engine's
normal path once the worker has given up.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
import time
from collections.abc import Callable
from typing import Final

from nodmix.codemode.quick import QuickLane
from nodmix.codemode.runs import RunState, Settled
from nodmix.codemode.tasks import loop_context
from nodmix.sandbox import Outcome, Pending
from nodmix.sandbox.rendezvous import new_rendezvous
from nodmix.sandbox.threads import cpu_released

#: How long a worker waits for a nested call to settle before handing the run back to the
#: loop. Long enough for in-process tools and warm MCP calls, short enough that a worker
#: parked behind a slow tool is back in the pool almost at once.
FAST_WINDOW_SECONDS: Final = 0.005
#: At most this many requests are served in place, one after another, in one loop callback;
#: then the loop only answers, and the next request wakes it through its self-pipe, so timers
#: and I/O of other sessions come between (a guest whose results settle at once, such as an
#: eager tool, would otherwise hold the loop for its whole step).
MAX_SERVED_IN_PLACE: Final = 8

Delivery = tuple[int, bool, str]


class Handoff:
    """One worker step's rendezvous with the event loop (see the module docstring)."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        state: RunState,
        dispatch: Callable[[], None],
        deliveries: Callable[[list[Settled]], list[Delivery]],
        deadline: float,
        window: float | None = None,
        quick: QuickLane | None = None,
        context: contextvars.Context | None = None,
    ) -> None:
        """`deadline` is the step's end on the `time.monotonic()` clock; `dispatch` and
        `deliveries` run on the loop (dispatch the recorded calls; deliver settled ones);
        `window` defaults to `FAST_WINDOW_SECONDS`; `quick` runs the step's quick calls on the
        worker (it is published before results are handed over, so the transcript follows the
        order in which the program received them); `context` is what loop callbacks run in
        (default: `tasks.loop_context()`)."""
        self.quick = quick
        self._loop = loop
        self._state = state
        self._dispatch = dispatch
        self._deliveries = deliveries
        self._deadline = deadline
        self._window = FAST_WINDOW_SECONDS if window is None else window
        # Reentrant: with an eager task factory a quick call can finish inside `dispatch`,
        # and its `offer()` then comes back in on the same thread (see `_dispatching`).
        self._lock = threading.RLock()
        self._dispatching = False
        self._ready = new_rendezvous()
        self._items: list[Delivery] | None = None
        self._waiting = False
        self._closed = False
        # Loop callbacks run outside any task: in the engine's context (`tasks.loop_context`).
        self._context = context if context is not None else loop_context()
        self.error: BaseException | None = None
        """What dispatching or delivering raised on the loop; the engine re-raises it."""

    # ---- worker side ----------------------------------------------------------------------

    def drive(self, cell: object, outcome: Outcome, pump: Callable[..., Outcome]) -> Outcome:
        """Keep `cell` going while its calls settle within the window; returns the outcome the
        engine should handle (final, or pending with nothing settled in time)."""
        sent = None if self.quick is None else self.quick.sent
        try:
            while isinstance(outcome, Pending) and self._may_continue():
                items = None
                if sent is not None:  # answers to calls the worker sent itself
                    items = sent.collect(min(self._window, self._deadline - time.monotonic()))
                if items is None:
                    items = self._exchange()
                if items is None:
                    break
                outcome = pump(cell, items)
            return outcome
        finally:
            if sent is not None:
                sent.hand_over()
            with self._lock:
                self._closed = True
            self._ready.close()

    def _may_continue(self) -> bool:
        # Overflow, output over the limit and yield_control are the engine's to handle.
        state = self._state
        return not (state.overflow or state.output_exceeded or state.yield_request is not None)

    def _exchange(self) -> list[Delivery] | None:
        timeout = min(self._window, self._deadline - time.monotonic())
        if timeout <= 0:
            return None
        with self._lock:
            if self._closed:
                return None
            self._waiting, self._items = True, None
            self._ready.clear()
        # Only waiting from here on: another guest may have the CPU slot meanwhile. It is given
        # up before waking the loop, so that once the loop runs, this thread needs the GIL for
        # as little as possible before it blocks.
        with cpu_released():
            # A loop still listening after handing over the last result takes the request
            # directly; otherwise it is woken through its self-pipe.
            if self._ready.request_wait(timeout) is None:
                try:
                    self._loop.call_soon_threadsafe(self._on_loop, context=self._context)
                except RuntimeError:  # the loop is closing: the engine's normal path handles it
                    return None
                self._ready.wait(timeout)
        with self._lock:
            self._waiting = False
            items, self._items = self._items, None
        return items

    # ---- loop side ------------------------------------------------------------------------

    def _on_loop(self) -> None:
        served = 0
        while True:
            with self._lock:
                if self._closed or not self._waiting:
                    return
                self._dispatching = True
                try:
                    self._guarded(self._dispatch)
                finally:
                    self._dispatching = False
                handed = self._offer()
            served += 1
            if not (handed and self._answer(listen=served < MAX_SERVED_IN_PLACE)):
                return
            # The worker asked again while the loop listened: serve it here.

    def offer(self) -> None:
        """A nested call settled (called on the loop): hand the results to a waiting worker."""
        with self._lock:
            if self._closed or not self._waiting or self._dispatching:
                return  # (while dispatching, `_on_loop` offers once it is done)
            handed = self._offer()
        if handed and self._answer():
            self._on_loop()

    def _offer(self) -> bool:
        # True when results were handed over and the worker still has to be woken.
        if self._items is not None or self.error is not None:
            return False
        settled = self._state.settled()
        if not settled:
            return False
        self._guarded(lambda: self._hand_over(settled))
        return self._handed()

    def _handed(self) -> bool:
        return self._items is not None and self.error is None

    def _hand_over(self, settled: list[Settled]) -> None:
        # Building deliveries starts queued calls; one that finishes at once (eager tasks)
        # offers again re-entrantly: it is picked up by the next exchange instead. Quick calls
        # the worker ran before it asked go on record first.
        self._dispatching = True
        try:
            if self.quick is not None:
                self.quick.publish()
            self._items = self._deliveries(settled)
        finally:
            self._dispatching = False

    def _answer(self, listen: bool = True) -> bool:
        # Wake the worker outside the lock, so that it never waits for the loop to let go of
        # it. When nothing else is ready to run on the loop, listen briefly for the worker's
        # next request (True: it came, and the caller serves it now).
        if not listen or getattr(self._loop, "_ready", None):
            self._ready.set()
            return False
        return self._ready.set_and_listen()

    def _guarded(self, body: Callable[[], None]) -> None:
        # Never raise into a loop callback or a nested call's task: stop the fast lane and
        # let the engine raise the error where the normal path would have.
        if self.error is not None:
            return
        try:
            body()
        except Exception as exc:
            self.error, self._closed = exc, True
            self._ready.set()

    def cancel(self) -> None:
        """The turn was aborted (thread-safe): wake the worker and hand over nothing more."""
        with self._lock:
            self._closed = True
        if self.quick is not None:
            self.quick.close()
        self._ready.set()
