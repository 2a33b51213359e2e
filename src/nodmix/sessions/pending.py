"""Usage counters waiting to be written, batched into about one store write a second per agent.

A busy gateway runs many turns a second, each adding token usage to its session's store entry.
Each `Session` keeps its own changes in memory until its write interval passes; this tracker
collects those sessions so that, once any session of an agent is due, every pending session of
that agent goes out in the same store write.
"""

from __future__ import annotations

from collections.abc import Callable

from nodmix.sessions.index import SessionIndex
from nodmix.sessions.session import Session
from nodmix.sessions.store_entry import StoreData


class PendingUsage:
    """Sessions whose usage counters wait to be written (tracked by identity)."""

    def __init__(self, store: Callable[[str], SessionIndex]) -> None:
        """`store(agent_id)` is the agent's session store."""
        self._store = store
        self._sessions: dict[int, Session] = {}

    def track(self, session: Session) -> None:
        """A session started holding counters (its `on_pending` callback)."""
        self._sessions[id(session)] = session

    def forget(self, session: Session) -> None:
        """Stop tracking a session (it was archived)."""
        self._sessions.pop(id(session), None)

    @property
    def waiting(self) -> bool:
        """Whether any tracked session still holds unwritten counters."""
        return any(session.has_pending for session in self._sessions.values())

    def flush_due(self) -> int:
        """Write the counters that have waited long enough, one store write per agent.

        Returns how many sessions were written.
        """
        pending: dict[str, list[Session]] = {}
        due: set[str] = set()
        for key, session in list(self._sessions.items()):
            if not session.has_pending:  # it flushed on its own (a store write folds counters in)
                self._sessions.pop(key, None)
                continue
            pending.setdefault(session.agent_id, []).append(session)
            if session.flush_due():
                due.add(session.agent_id)
        batch = {agent: pending[agent] for agent in due}
        self._write(batch)
        return sum(len(v) for v in batch.values())

    def flush_all(self) -> None:
        """Write every pending counter (one store write per agent)."""
        due: dict[str, list[Session]] = {}
        for session in list(self._sessions.values()):
            if session.has_pending:
                due.setdefault(session.agent_id, []).append(session)
        self._write(due)
        self._sessions.clear()

    def _write(self, due: dict[str, list[Session]]) -> None:
        for agent_id, sessions in due.items():

            def apply(data: StoreData, sessions: list[Session] = sessions) -> None:
                for session in sessions:
                    session.take_pending(data)

            self._store(agent_id).update(apply, sync=False)
            for session in sessions:
                self._sessions.pop(id(session), None)
