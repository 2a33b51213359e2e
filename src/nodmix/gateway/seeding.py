"""An API client's earlier conversation, recorded by the turn it came with, and the session a
refused request created, dropped again.

A stateless client resends its whole history with each request; the gateway records it into
a session that has no messages yet. The turn itself records it (`ClientTurn.seed`), after it
has checked that the prompt fits the model's window next to the tool definitions and the
system prompt, so a request refused as too large seeds nothing, and `removed_if_refused` then
deletes every image it saved. A session the refused request had to create (a new key) is
taken off the agent's list again and its empty transcript removed: a refusal leaves nothing
behind.
"""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass
from typing import Any

import anyio

from nodmix.agents import AgentProfile
from nodmix.errors import NodmixError, PromptTooLargeError
from nodmix.gateway.media_writes import MediaWrites, Undo
from nodmix.messages import now_ms
from nodmix.runtime import Runtime
from nodmix.sessions import CustomMessageEntry, MessageEntry, Session

log = logging.getLogger("nodmix.gateway")


@dataclass(frozen=True, slots=True)
class HistorySeed:
    """Records `note` and `history` into a session with no messages (`ClientTurn.seed`)."""

    note: str | None
    history: list[Any]
    note_type: str
    writes: MediaWrites

    def __call__(self, session: Session) -> None:
        entries = session.entries
        if any(isinstance(entry, MessageEntry | CustomMessageEntry) for entry in entries):
            return  # the session has its own conversation: the resent history is already there
        if self.note:
            session.transcript.append_custom_message(self.note_type, self.note, display=False)
        for message in self.history:
            session.append_message(message)
        self.writes.history_recorded = True  # its transcript names the history's files


def dropped_if_refused(runtime: Runtime, agent: AgentProfile, key: str) -> Undo:
    """What `removed_if_refused` also undoes for a request whose turn is refused as too large
    for the window: the session is taken off the list again if the request created it (its
    entry is no older than the request)."""
    started = now_ms()

    async def drop(exc: BaseException) -> None:
        if not isinstance(exc, PromptTooLargeError):
            return
        try:
            sessions = runtime.sessions
            entry = sessions.store(agent.id).get(key)
            if entry is None or entry.created_at < started:
                return  # an earlier request's session: the refusal recorded nothing in it
            files = sessions.archive(agent.id, [key])
            for path in files.values():
                await anyio.to_thread.run_sync(functools.partial(path.unlink, missing_ok=True))
        except (NodmixError, OSError) as problem:
            log.warning("could not drop %s of a refused request: %s", key, problem)

    return drop
