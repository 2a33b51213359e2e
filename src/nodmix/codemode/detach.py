"""Tool calls a program started without awaiting them, when the program returns.

`tools.note_add({...}); return 'saved'` returns before the call settles. Like a promise in
Node, the call still runs: calls the program recorded but that had not started yet are
started (through the run's queue, at most `maxPendingToolCalls` at once), running ones keep
running, and each is written to the transcript under its `exec`/`wait` call when it finishes.
Nothing receives their results, so the `completed` result lists them (`inFlightToolCalls`)
with a warning the model reads. A client application's own tool cannot run without a round
trip to the app that the finished program no longer waits for: such calls are dropped and the
warning says so.

Detached calls end with their turn if it is aborted, and with the process (like any nested
call); `DetachedRuns` keeps, per agent turn, the runs that still have some.
"""

from __future__ import annotations

from dataclasses import dataclass

from nodmix.codemode import fanout
from nodmix.codemode.client_calls import is_client_call
from nodmix.codemode.nested import RunServices, cancel_all, project_abandoned
from nodmix.codemode.runs import NestedCall, RunState

_NAMES_SHOWN = 5


@dataclass(frozen=True, slots=True)
class Detached:
    """What a returning program left unfinished."""

    running: tuple[NestedCall, ...]
    """Calls that keep running (started, or queued to start) after the program returned."""
    dropped: tuple[NestedCall, ...]
    """Client tool calls that will never be made."""

    def describe(self) -> list[dict[str, str]]:
        """`inFlightToolCalls` of the result: the calls that keep running."""
        return [call.describe() for call in self.running]

    def warning(self) -> str:
        """The sentence the model reads about them."""
        parts = []
        if self.running:
            parts.append(
                f"{_count(self.running)} still running when the program returned "
                f"({_names(self.running)}): they keep running and are recorded in the "
                "transcript, but their results reach no one."
            )
        if self.dropped:
            calls = "1 call" if len(self.dropped) == 1 else f"{len(self.dropped)} calls"
            parts.append(
                f"{calls} to the client app's own tools ({_names(self.dropped)}) never ran: "
                "the app runs them only for a program that waits for them."
            )
        parts.append(
            "To use a result, await the call (e.g. `await Promise.all(calls)`) before returning."
        )
        return " ".join(parts)


def start_detached(start: fanout.Start, services: RunServices, state: RunState) -> Detached:
    """Start what the returning program recorded and leave its unsettled calls running
    (`start` as in `fanout`); finished but undelivered calls go to the transcript now."""
    dropped = [c for c in state.new_calls if is_client_call(c)]
    if dropped:
        state.new_calls[:] = [c for c in state.new_calls if not is_client_call(c)]
    state.timers.new.clear()  # a finished program's timers never fire
    fanout.start_recorded(start, services, state)
    running: list[NestedCall] = []
    for call in state.calls.values():
        call.abandoned = True  # recorded in the transcript when it stops
        if call.done.is_set():
            project_abandoned(call)
        elif is_client_call(call):
            dropped.append(call)  # held for the app: it will never be answered now
        else:
            running.append(call)
    for call in state.queued:
        call.abandoned = True
        running.append(call)
    state.timers.cancel_all()
    return Detached(tuple(running), tuple(dropped))


class DetachedRuns:
    """Runs of each agent turn whose programs returned with calls still running."""

    def __init__(self) -> None:
        self._by_turn: dict[str, list[RunState]] = {}

    def add(self, state: RunState) -> None:
        """Keep `state` until its calls are done (or its turn is aborted)."""
        self._by_turn.setdefault(state.turn_id, []).append(state)

    def abort_turn(self, turn_id: str) -> int:
        """Cancel the detached calls of an aborted turn; how many runs had some."""
        states = self._by_turn.pop(turn_id, [])
        for state in states:
            cancel_all(state)
        return len(states)

    def sweep(self) -> None:
        """Forget runs whose detached calls have all finished."""
        if not self._by_turn:
            return
        for turn_id, states in list(self._by_turn.items()):
            live = [s for s in states if s.queued or s.running()]
            if live:
                self._by_turn[turn_id] = live
            else:
                del self._by_turn[turn_id]

    def __len__(self) -> int:
        return sum(len(states) for states in self._by_turn.values())


def _count(calls: tuple[NestedCall, ...]) -> str:
    return "1 tool call was" if len(calls) == 1 else f"{len(calls)} tool calls were"


def _names(calls: tuple[NestedCall, ...]) -> str:
    names = list(dict.fromkeys(call.entry.name for call in calls))
    shown = ", ".join(names[:_NAMES_SHOWN])
    return shown if len(names) <= _NAMES_SHOWN else f"{shown} and {len(names) - _NAMES_SHOWN} more"
