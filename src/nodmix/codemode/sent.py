"""Calls sent from the sandbox worker, their answers collected there while the program waits.

Some tools can send a call from any thread and get the answer by themselves
(`tools.base.send_form`: an MCP server's `tools/call`, written to its stdin by the worker and
answered through the event loop, which reads the server's output anyway). When nothing
asynchronous has a say in such a call (`ToolExecutor.send_quick`: no hook, no gate), the
worker sends it at once, inside the guest's request, and the guest gets a pending promise.
The program goes on (so calls started together run together, as through the loop); when it
waits, the worker waits at most a few milliseconds for answers (`collect`) and delivers
them itself, recorded as quick calls are (`codemode.quick`): one wake-up of the worker per
answer, instead of the loop's two crossings and its session machinery.

Everything else goes to the loop: a call sent from here whose answer takes longer, any call
when the loop has calls or timers of this run to settle (so results are never held back behind
the worker's wait), and every call still unanswered when the step ends. A handed-over call
is recorded for the loop like any other, and the tool's `call` awaits the request already sent
(`SentCall.hand_over`), so nothing is sent twice. An aborted turn cancels what is in flight.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Final, Protocol

from nodmix.codemode.nested import CANCELLED_TEXT, call_context
from nodmix.codemode.runs import NestedCall, RunState
from nodmix.sandbox.threads import cpu_released
from nodmix.tools.base import SentCall, ToolResult

if TYPE_CHECKING:
    from nodmix.codemode.nested import RunServices


class Lane(Protocol):
    """What `SentCalls` needs of its quick lane (`codemode.quick.QuickLane`)."""

    @property
    def closed(self) -> bool:
        """The turn was aborted: nothing more is sent, what is in flight is cancelled."""
        ...

    def finish(self, call: NestedCall, result: ToolResult) -> tuple[bool, str]:
        """Record the result of a call answered on the worker; the guest's delivery."""
        ...


class Sent:
    """The type of `SENT`."""

    __slots__ = ()


SENT: Final = Sent()
"""`QuickLane.run`: the call was sent from the worker; the guest's promise stays pending."""

Delivery = tuple[int, bool, str]


class SentCalls:
    """One worker step's sent calls (see the module docstring). Worker side, except `wake`."""

    __slots__ = ("_answered", "_calls", "_lane", "_services", "_state")

    def __init__(self, lane: Lane, services: RunServices, state: RunState) -> None:
        self._lane = lane
        self._services = services
        self._state = state
        self._calls: list[tuple[NestedCall, SentCall]] = []
        self._answered: threading.Event | None = None
        """Set when an answer arrives (made with the first call sent)."""

    def send(self, call: NestedCall) -> tuple[bool, str] | Sent | None:
        """Send `call` from here if its tool can and nothing has a say: `SENT`; the guest's
        delivery when the call was refused before sending (invalid arguments); else None."""
        state, services = self._state, self._services
        if state.queued or len(state.calls) + len(self._calls) >= (
            state.settings.max_pending_tool_calls
        ):
            return None  # (the loop queues it)
        ctx = call_context(services, state, call, may_wait=False)
        sent = services.executor.send_quick(call.entry.tool, dict(call.input), ctx)
        if sent is None:
            return None
        if isinstance(sent, ToolResult):  # refused before sending (invalid arguments)
            return self._lane.finish(call, sent)
        self._calls.append((call, sent))
        state.in_flight += 1
        if self._answered is None:
            self._answered = threading.Event()
        sent.notify(self._answered.set)
        return SENT

    def collect(self, window: float) -> list[Delivery] | None:
        """Deliveries of the sent calls answered within `window` seconds (at least one), or
        None when there is nothing to collect here; every sent call is then handed over."""
        if not self._calls:
            return None
        state = self._state
        if self._lane.closed or state.new_calls or state.calls or state.timers.active:
            self.hand_over()
            return None
        deadline = time.monotonic() + window
        answered = self._answered
        assert answered is not None  # (made with the first call sent)
        while not self._any_answered():
            remaining = deadline - time.monotonic()
            if remaining <= 0 or self._lane.closed:
                self.hand_over()
                return None
            answered.clear()
            if self._any_answered():
                break
            with cpu_released():
                answered.wait(remaining)
        items: list[Delivery] = []
        waiting: list[tuple[NestedCall, SentCall]] = []
        for call, sent in self._calls:
            if not sent.answered():
                waiting.append((call, sent))
                continue
            state.in_flight -= 1
            result = sent.result()
            if result is None:  # the loop finishes it (`SentCall.result`)
                state.new_calls.append(call)
                continue
            ok, payload = self._lane.finish(call, result)
            items.append((call.request_id, ok, payload))
        self._calls = waiting
        if not items:
            self.hand_over()
            return None
        return items

    def _any_answered(self) -> bool:
        return any(sent.answered() for _, sent in self._calls)

    def hand_over(self) -> None:
        """Record every call still in flight for the loop (an aborted turn cancels them, and
        records them as cancelled)."""
        calls, self._calls = self._calls, []
        state = self._state
        for call, sent in calls:
            state.in_flight -= 1
            if self._lane.closed:
                # The call reached the server: it is told to stop, and the call is recorded
                # as cancelled, as a call through the loop is when the turn is aborted.
                sent.cancel()
                self._lane.finish(call, ToolResult.error(CANCELLED_TEXT))
            else:
                sent.hand_over()
                call.sent, call.services = sent, self._services
                state.new_calls.append(call)

    def wake(self) -> None:
        """Stop a collecting worker's wait (thread-safe; the turn was aborted)."""
        answered = self._answered
        if answered is not None:
            answered.set()
