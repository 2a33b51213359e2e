"""What the runtime tells the security layer about every turn, without loading it: the running
turns (the gate looks up a call's origin here), the shell tool's id (the only tool the gate
checks) and the chat's approval commands.

The policy, the allowlist and the approval broker (`nodmix.security.parts`) are built on the
first call they must check, so a run that never calls `exec` does not import them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING

import msgspec

from nodmix.events import EventSink, discard
from nodmix.origin import TurnOrigin

if TYPE_CHECKING:
    from nodmix.security.approvals import Answer

EXEC_TOOL_ID = "nodmix:core:exec"
"""The shell tool: every other tool call passes the gate at its first line."""

CHAT_COMMANDS: dict[str, Answer] = {
    "/approve": "allow-once",
    "/always": "allow-always",
    "/deny": "deny",
}
"""`/approve <id>`, `/always <id>` and `/deny <id>`: a chat's answers to approval requests."""


class TurnHandle(msgspec.Struct, frozen=True):
    """A running turn as the gate sees it: who is talking and where its events go."""

    origin: TurnOrigin | None
    """None for the owner's own turns."""
    emit: EventSink = discard


class TurnRegistry:
    """Running turns by run id, and each session's latest turn."""

    def __init__(self) -> None:
        self._runs: dict[str, TurnHandle] = {}
        self._sessions: dict[str, TurnHandle] = {}

    def add(
        self, run_id: str, session_key: str, handle: TurnHandle, *, latest: bool = True
    ) -> None:
        """A turn started; with `latest` it also becomes its session's latest turn (a single
        `/tools/invoke` call does not, so it cannot lend its origin to a channel session)."""
        self._runs[run_id] = handle
        if latest:
            self._sessions[session_key] = handle

    def remove(self, run_id: str) -> None:
        """A turn ended (the session keeps it as its latest: parked programs may still ask)."""
        self._runs.pop(run_id, None)

    @contextlib.contextmanager
    def running(
        self, run_id: str, session_key: str, handle: TurnHandle, *, latest: bool = True
    ) -> Iterator[None]:
        """Register a turn for the duration of the block."""
        self.add(run_id, session_key, handle, latest=latest)
        try:
            yield
        finally:
            self.remove(run_id)

    def find(self, run_id: str, session_key: str) -> TurnHandle | None:
        """The turn of a call: by run id, else the session's latest turn."""
        return self._runs.get(run_id) or self._sessions.get(session_key)
