"""Who works for whom: the origin a subagent's turn carries, how deep a session is nested, and
which sessions are waiting on which (so no call ever waits on itself).

A subagent's turn, and a turn `sessions_send` starts in another session, carries its
requester's origin with `spawned_by` naming the requester's session: the chat it answers stays
the requester's (approvals and announcements go there), and whom it speaks for is decided as
for the requester (`nodmix.origin.is_owner_turn`), never afresh. A turn with no origin (the
CLI, the web page, the API: the owner) starts turns with none.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterator

import msgspec

from nodmix.origin import TurnOrigin
from nodmix.subagents.records import SubagentRun, run_id_of

MAX_REMEMBERED = 4096
"""Sessions whose depth, and turns whose spawn count, are kept in memory."""
UNKNOWN_DEPTH = 1000
"""The depth of a subagent's session whose run left no record (a crash before it was written):
deeper than any limit, so it spawns nothing."""


def child_origin(parent: TurnOrigin | None, parent_key: str) -> TurnOrigin | None:
    """The origin of a turn `parent_key`'s turn (with origin `parent`) starts elsewhere."""
    if parent is None:
        return None
    return msgspec.structs.replace(parent, spawned_by=parent.spawned_by or parent_key)


class Depths:
    """How deep each session is nested (0 for a session nobody spawned), from the runs."""

    def __init__(self, lookup: Callable[[str], SubagentRun | None]) -> None:
        self._lookup = lookup
        self._known: OrderedDict[str, int] = OrderedDict()

    def remember(self, run: SubagentRun) -> None:
        """Note a run's child session."""
        self._known[run.child_key] = run.depth
        self._known.move_to_end(run.child_key)
        while len(self._known) > MAX_REMEMBERED:
            self._known.popitem(last=False)

    def of(self, session_key: str) -> int:
        """The depth of `session_key` (`UNKNOWN_DEPTH` for a subagent's session without a
        record)."""
        known = self._known.get(session_key)
        if known is not None:
            return known
        run_id = run_id_of(session_key)
        if run_id is None:
            return 0
        run = self._lookup(run_id)
        if run is None:
            return UNKNOWN_DEPTH
        self.remember(run)
        return run.depth


class TurnCounts:
    """Subagents spawned per requester turn (bounded: the oldest turns are forgotten)."""

    def __init__(self) -> None:
        self._counts: OrderedDict[str, int] = OrderedDict()

    def get(self, run_id: str) -> int:
        return self._counts.get(run_id, 0)

    def add(self, run_id: str, delta: int) -> None:
        count = self._counts.get(run_id, 0) + delta
        self._counts[run_id] = max(0, count)
        self._counts.move_to_end(run_id)
        while len(self._counts) > MAX_REMEMBERED:
            self._counts.popitem(last=False)


class Waits:
    """Which sessions' turns wait on which (a waiting spawn, a `sessions_send`)."""

    def __init__(self) -> None:
        self._waiters: dict[str, list[str]] = {}

    def waiting_for(self, target: str) -> Iterator[str]:
        """Every session waiting, directly or through others, on `target`'s turn."""
        seen: set[str] = set()
        todo = list(self._waiters.get(target, ()))
        while todo:
            key = todo.pop()
            if key in seen:
                continue
            seen.add(key)
            yield key
            todo.extend(self._waiters.get(key, ()))

    def cycle(self, waiter: str, target: str) -> bool:
        """Whether `waiter` waiting on `target` would wait on itself."""
        return waiter == target or target in self.waiting_for(waiter)

    def add(self, waiter: str, target: str) -> None:
        self._waiters.setdefault(target, []).append(waiter)

    def remove(self, waiter: str, target: str) -> None:
        waiters = self._waiters.get(target)
        if waiters is None:
            return
        if waiter in waiters:
            waiters.remove(waiter)
        if not waiters:
            del self._waiters[target]
