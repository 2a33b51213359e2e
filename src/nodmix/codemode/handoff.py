"""The fast lane between a sandbox worker step and the event loop.

A guest awaiting a quick tool would otherwise cost two full trips per call: the worker step
returns to the event loop, the loop runs the tool, and a new worker step delivers the result
(~100 µs of thread and future machinery each way, plus a cold worker). With a `Handoff`, the
worker keeps the cell after a step that ends with pending calls: it asks the loop to dispatch
them and waits a few milliseconds. When a call settles on the loop within that window, the loop
builds the deliveries and hands them straight to the waiting worker, which delivers and pumps
again in the same step. Only when nothing settles in time does the step return, and the engine
falls back to its normal async wait (and, past the step budget, to a snapshot).

A call still running on the loop when the window ends (an MCP call on a busy machine, where
its server may wait milliseconds for a CPU) is waited for a while longer instead
(`LATE_WINDOW_SECONDS`), as long as the loop has said, when it dispatched the call, that every
running call will settle by itself (none waits for a person's approval or for the client app)
and fewer than `MAX_LATE_WAITERS` workers wait so: handing the run back would cost a trip to
the loop and a new step on another worker once the call settles. A call that starts waiting for
an approval meanwhile makes the loop give the worker up at once, as a timeout would.

Per awaited call through the loop, two threads hand over: the worker asks the loop (its
self-pipe, or a listening loop) and the loop wakes the worker with the result. An MCP call adds
two process hand-overs (the request to the server and its answer, the same as a direct call's),
so a call costs four wake-ups where a direct call costs two. The worker is woken only once the
loop has nothing else ready to run (`offer`): the step that settled the call usually leaves
more (an MCP session's reader going back to its stream), and a worker woken during it would
find the GIL taken and sleep once more until the loop let go of it.

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

from nodmix.codemode.client_calls import is_client_call
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
#: How much longer a worker waits for calls that are still running on the loop and will settle
#: by themselves (see the module docstring); and how many workers may wait so at once (each
#: keeps a thread of the sandbox pool, though no CPU slot, meanwhile).
LATE_WINDOW_SECONDS: Final = 0.05
MAX_LATE_WAITERS: Final = 8
#: At most this many requests are served in place, one after another, in one loop callback;
#: then the loop only answers, and the next request wakes it through its self-pipe, so timers
#: and I/O of other sessions come between (a guest whose results settle at once, such as an
#: eager tool, would otherwise hold the loop for its whole step).
MAX_SERVED_IN_PLACE: Final = 8

Delivery = tuple[int, bool, str]

_late_waiters = threading.BoundedSemaphore(MAX_LATE_WAITERS)


def _settles_by_itself(state: RunState) -> bool:
    """Whether the run has calls running or queued on the loop and none that waits for someone
    outside the process (a person's approval, the client app's result); on the loop."""
    pending = [c for c in state.calls.values() if not c.done.is_set()]
    if not pending and not state.queued:
        return False
    return not any(c.awaiting_approval or is_client_call(c) for c in pending)


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
        # Late waits (see the module docstring): the worker's request is not dispatched yet
        # (`_asked`), the loop found the run's calls settle by themselves (`_keep`), the
        # worker waits past the window (`_late`).
        self._asked = self._keep = self._late = False
        # Loop callbacks run outside any task: in the engine's context (`tasks.loop_context`).
        self._context = context if context is not None else loop_context()
        self.error: BaseException | None = None
        """What dispatching or delivering raised on the loop; the engine re-raises it."""

    # ---- worker side ----------------------------------------------------------------------

    def drive(self, cell: object, outcome: Outcome, pump: Callable[..., Outcome]) -> Outcome:
        """Keep `cell` going while its calls settle within the window; returns the outcome the
        engine should handle (final, or pending with nothing settled in time)."""
        try:
            while isinstance(outcome, Pending) and self._may_continue():
                items = self._exchange()
                if items is None:
                    break
                outcome = pump(cell, items)
            return outcome
        finally:
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
            self._asked, self._keep = True, False
            self._ready.clear()
        # Only waiting from here on: another guest may have the CPU slot meanwhile. It is given
        # up before waking the loop, so that once the loop runs, this thread needs the GIL for
        # as little as possible before it blocks.
        with cpu_released():
            # A loop still listening after handing over the last result takes the request
            # directly; otherwise it is woken through its self-pipe.
            answered = self._ready.request_wait(timeout, last=False)
            if answered is None:
                try:
                    self._loop.call_soon_threadsafe(self._on_loop, context=self._context)
                except RuntimeError:  # the loop is closing: the engine's normal path handles it
                    return None
                answered = self._ready.wait(timeout, last=False)
            if not answered:
                self._wait_late()
        with self._lock:
            self._waiting = False
            items, self._items = self._items, None
        return items

    def _wait_late(self) -> None:
        # The window passed without an answer: wait on while the loop has not looked at the
        # request yet or found that the run's calls settle by themselves (else only look).
        with self._lock:
            self._late = (self._asked or self._keep) and not self._closed and self._items is None
        permit = self._late and _late_waiters.acquire(blocking=False)
        try:
            late = min(LATE_WINDOW_SECONDS, self._deadline - time.monotonic()) if permit else 0
            self._ready.wait_more(max(late, 0.0))
        finally:
            if permit:
                _late_waiters.release()
            with self._lock:
                self._late = False

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
                if not handed:
                    self._asked = False
                    self._recheck()
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
        if not handed:
            return
        if getattr(self._loop, "_ready", None):
            # What settled the call has more to do on the loop (an MCP session's reader goes
            # back to its stream): wake the worker after it, once the loop is about to wait.
            # Woken now, the worker would find the GIL taken and sleep again until the loop
            # let go of it, one more hand-off on the way to the guest (see the module
            # docstring). The results are handed over already: a worker whose wait ends
            # meanwhile takes them.
            self._loop.call_soon(self._answer_later, context=self._context)
            return
        if self._answer():
            self._on_loop()

    def _answer_later(self) -> None:
        if self._answer():
            self._on_loop()

    def recheck(self) -> None:
        """Whether the run's calls still settle by themselves changed (a call waits for an
        approval, on the loop): a worker waiting past its window for them gives up."""
        with self._lock:
            if self._waiting and not self._asked:
                self._recheck()

    def _recheck(self) -> None:
        # (Under the lock, on the loop.)
        self._keep = _settles_by_itself(self._state)
        if self._late and not self._keep and self._items is None:
            self._ready.set()  # it wakes without results: the step ends as on a timeout

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
