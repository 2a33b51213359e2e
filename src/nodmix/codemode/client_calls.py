"""Client tool calls made by code-mode programs: held until the client sends the result.

A deferred client tool (`tools.deferred`, catalog id `client:<owner>:<name>`) runs in the
application that started the turn, not in Nodmix. When a program calls one, the call is not
dispatched: it is *held* in the run's pending calls with no task behind it, the step does not
wait for it, and the run is suspended at once with the waiting reason `client_tool`. The
agent turn then stops and hands the call to the client (`ClientCalls.for_turn`); when the
client answers, `ClientCalls.settle` records the result on the call (a durable run store
rewrites the run file, so the answer survives a restart from then on) and the model's next
`wait` delivers it to the guest like any other nested result.

Held calls are indexed in memory: after a restart, a run written by an earlier process gets
its unanswered client calls settled as `interrupted by restart` (like any call that was in
flight), and the client's late answer is refused.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from nodmix.codemode.runs import NestedCall, RunState
from nodmix.messages import ToolCallBlock
from nodmix.tools.base import ToolResult
from nodmix.tools.deferred import is_deferred

CLIENT_TOOL_REASON = "client_tool"


def is_client_call(call: NestedCall) -> bool:
    """Whether the call targets a tool the app runs itself (it is held, never run here)."""
    return is_deferred(call.entry.tool)


def only_client_calls_pending(state: RunState) -> bool:
    """Every unsettled call of the run waits for the client (so waiting longer is pointless)."""
    pending = [c for c in state.calls.values() if not c.done.is_set()]
    return bool(pending) and all(is_client_call(c) for c in pending)


def waiting_reason(state: RunState) -> str:
    """`approval` when a call waits for the user's approval, `client_tool` when the run waits
    only for client results, else `pending_tools`."""
    if state.awaiting_approval():
        return "approval"
    return CLIENT_TOOL_REASON if only_client_calls_pending(state) else "pending_tools"


@dataclass(slots=True)
class _Held:
    state: RunState
    call: NestedCall


class ClientCalls:
    """The engine's index of held client calls, by nested call id."""

    def __init__(self) -> None:
        self._held: dict[str, _Held] = {}

    def hold(self, services: Any, state: RunState, call: NestedCall) -> None:
        """Keep `call` pending without running it (the client will)."""
        call.services = services
        state.calls[call.request_id] = call
        self._held[call.call_id] = _Held(state, call)

    def _live(self) -> list[_Held]:
        # Drop calls that were delivered or whose run ended: the index stays bounded by the
        # store's cap on runs times the per-run cap on pending calls.
        for call_id, held in list(self._held.items()):
            call = held.call
            if call.abandoned or held.state.calls.get(call.request_id) is not call:
                del self._held[call_id]
        return list(self._held.values())

    def for_turn(self, turn_id: str) -> list[ToolCallBlock]:
        """Unanswered client calls made during agent turn `turn_id`, oldest first."""
        return [
            _block(h.call)
            for h in self._live()
            if h.state.turn_id == turn_id and not h.call.done.is_set()
        ]

    def pending(self, session_key: str) -> list[ToolCallBlock]:
        """Unanswered client calls of a session's parked runs."""
        return [
            _block(h.call)
            for h in self._live()
            if h.state.scope.session_key == session_key and not h.call.done.is_set()
        ]

    def settle(self, session_key: str, call_id: str, result: ToolResult) -> bool:
        """Give a held call its result; False when no unanswered call of the session has
        that id."""
        for held in self._live():
            call = held.call
            if call.call_id != call_id or held.state.scope.session_key != session_key:
                continue
            if call.done.is_set():
                return False
            call.result, call.ran = result, True
            call.finished = time.perf_counter()
            call.done.set()
            held.state.notify()
            return True
        return False


def _block(call: NestedCall) -> ToolCallBlock:
    return ToolCallBlock(id=call.call_id, name=call.entry.name, arguments=dict(call.input))
