"""Guest timers on the host clock (`setTimeout`, `setInterval`, `sleep`, see `habits.py`).

A guest timer is a bridge request that stays pending until the host settles it. The sandbox
worker only *records* it (`Timers.add`, thread-safe with respect to the loop: it touches only
`new`); the engine arms recorded timers on the event loop as small tasks that sleep and then
wake the run like a settled tool call. Settled timers are delivered with the nested results of
the same round, so a program whose timers fire within the step's budget finishes in one `exec`,
and one whose timer outlives the budget is suspended like a pending call until `wait`.

`clearTimeout` marks its timer cleared (from the worker thread); a cleared timer counts as
settled at once, so it never holds a run open, and the guest ignores its delivery.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

import anyio

#: Timers a run may have armed at once, counted on the host side too (the guest refuses more
#: before asking, see `habits.MAX_TIMERS`; this bound holds whatever the guest does).
HOST_TIMER_CAP: Final = 1024


@dataclass(slots=True, kw_only=True)
class Timer:
    """One armed guest timer."""

    request_id: int
    token: str
    delay: float
    """Seconds."""
    fired: bool = False
    cleared: bool = False
    cancel: anyio.CancelScope | None = None
    order: int = 0
    """Arming order, to deliver timers that settle together in the order they were due."""
    due: float = 0.0
    """When it fires, on the event loop's clock (set when armed)."""
    wall_due: float = 0.0
    """When it fires in wall-clock seconds (set when armed): what a run file keeps, so a
    timer of a run resumed after a restart fires when it was due, not a full delay later."""

    def due_at(self) -> float:
        """Wall-clock time it fires (a timer recorded but not armed yet counts from now)."""
        return self.wall_due if self.cancel is not None else time.time() + self.delay

    @property
    def settled(self) -> bool:
        """Fired or cleared: ready to deliver."""
        return self.cleared or self.fired


class Timers:
    """The timers of one run: recorded during a step, armed on the loop, delivered when due."""

    __slots__ = ("active", "new", "_seq")

    def __init__(self) -> None:
        self.active: dict[int, Timer] = {}
        """Armed timers the guest has not been told about yet, by request id."""
        self.new: list[Timer] = []
        """Recorded during the current step; armed when it hands over to the loop."""
        self._seq = 0

    def __len__(self) -> int:
        return len(self.active) + len(self.new)

    def add(self, request_id: int, token: str, ms: float) -> str | None:
        """Record a timer (worker thread); an error message when the run has too many."""
        if len(self) >= HOST_TIMER_CAP:
            return f"too many active timers (limit {HOST_TIMER_CAP}); clear some first"
        self._seq += 1
        delay = max(0.0, min(float(ms), 2_147_483_647.0)) / 1000
        self.new.append(Timer(request_id=request_id, token=token, delay=delay, order=self._seq))
        return None

    def clear(self, token: str) -> None:
        """Mark the timer with `token` cleared (worker thread)."""
        for timer in (*self.new, *self.active.values()):
            if timer.token == token:
                timer.cleared = True
                return

    def restore(self, timer: Timer) -> None:
        """Put back a timer of a run written by an earlier process (armed by the next `arm`;
        one that had fired or was cleared is delivered at once)."""
        self._seq = max(self._seq, timer.order)
        self.new.append(timer)

    def arm(self, start: Callable[..., Any], notify: Callable[[], None]) -> None:
        """Start the recorded timers as tasks (`start(fn, *args)`, on the loop)."""
        new, self.new = self.new, []
        for timer in new:
            timer.cancel = anyio.CancelScope()
            timer.due = anyio.current_time() + timer.delay
            timer.wall_due = time.time() + timer.delay
            self.active[timer.request_id] = timer
            if timer.settled:
                continue
            start(_run_timer, timer, notify)

    def settled(self) -> list[Timer]:
        """Timers ready to deliver, in the order they were due."""
        return sorted(
            (t for t in self.active.values() if t.settled), key=lambda t: (t.due, t.order)
        )

    def any_settled(self) -> bool:
        """Whether a timer is ready to deliver."""
        return any(t.settled for t in self.active.values())

    def take(self, timer: Timer) -> tuple[int, bool, str]:
        """Forget a settled timer and return its delivery (the guest ignores cleared ones)."""
        self.active.pop(timer.request_id, None)
        if timer.cancel is not None:
            timer.cancel.cancel()  # a cleared timer's task may still be sleeping
        return timer.request_id, True, "null"

    def cancel_all(self) -> None:
        """The run ended: stop every armed timer and forget the recorded ones."""
        for timer in self.active.values():
            if timer.cancel is not None:
                timer.cancel.cancel()
        self.active.clear()
        self.new.clear()


async def _run_timer(timer: Timer, notify: Callable[[], None]) -> None:
    scope = timer.cancel if timer.cancel is not None else anyio.CancelScope()
    with scope:
        await anyio.sleep(timer.delay)
        timer.fired = True
        notify()
