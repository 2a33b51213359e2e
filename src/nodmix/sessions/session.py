"""An open session: its key, its store entry and its transcript."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path

import msgspec

from nodmix.messages import Message, Usage, now_ms
from nodmix.sessions.entries import Entry, MessageEntry
from nodmix.sessions.keys import SessionKey
from nodmix.sessions.replay import messages_for_model
from nodmix.sessions.store import SessionEntry, SessionStore, StoreData
from nodmix.sessions.transcript import Transcript

logger = logging.getLogger(__name__)


class Session:
    """One open session: its key, its store entry and its transcript."""

    __slots__ = ("_store", "entry", "session_key", "transcript")

    def __init__(
        self,
        *,
        session_key: SessionKey,
        entry: SessionEntry,
        transcript: Transcript,
        store: SessionStore,
    ) -> None:
        """Bind the parts together; use `SessionManager.open` to get one."""
        self.session_key = session_key
        self.entry = entry
        """The store entry as last read or written by this process."""
        self.transcript = transcript
        self._store = store

    @property
    def key(self) -> str:
        """The full session key, `agent:<agentId>:<name>`."""
        return str(self.session_key)

    @property
    def agent_id(self) -> str:
        """The agent the session belongs to."""
        return self.session_key.agent_id

    @property
    def session_id(self) -> str:
        """The id of the current transcript."""
        return self.transcript.session_id

    @property
    def entries(self) -> Sequence[Entry]:
        """The transcript's entries in file order (a live view: do not mutate)."""
        return self.transcript.entries

    def append_message(
        self, message: Message, *, parent_tool_call_id: str | None = None
    ) -> MessageEntry:
        """Append a message to the transcript (see `Transcript.append_message`)."""
        return self.transcript.append_message(message, parent_tool_call_id=parent_tool_call_id)

    def messages_for_model(self) -> list[Message]:
        """What the model sees of this session (see `nodmix.sessions.replay`)."""
        return messages_for_model(self.transcript.entries)

    def update_usage(
        self,
        usage: Usage | None = None,
        *,
        context_tokens: int | None = None,
        model: str | None = None,
    ) -> SessionEntry:
        """Add a model response's token usage and mark the session as just used.

        `context_tokens` defaults to the usage's context size. If another process reset the
        session meanwhile, the new session's counters are left alone.
        """
        usage = usage or Usage()
        now = now_ms()

        def change(entry: SessionEntry) -> SessionEntry:
            return msgspec.structs.replace(
                entry,
                input_tokens=entry.input_tokens + usage.input,
                output_tokens=entry.output_tokens + usage.output,
                total_tokens=entry.total_tokens
                + (usage.total_tokens or usage.input + usage.output),
                context_tokens=usage.context_tokens if context_tokens is None else context_tokens,
                model=model or entry.model,
                updated_at=now,
                last_interaction_at=now,
            )

        return self._update(change, sync=False)

    def set_label(self, label: str | None) -> SessionEntry:
        """Set or clear the session's display label."""
        return self._update(lambda e: msgspec.structs.replace(e, label=label, updated_at=now_ms()))

    def record_compaction(self, *, context_tokens: int | None = None) -> SessionEntry:
        """Count a compaction and, if known, store the context size after it."""

        def change(entry: SessionEntry) -> SessionEntry:
            return msgspec.structs.replace(
                entry,
                compaction_count=entry.compaction_count + 1,
                context_tokens=entry.context_tokens if context_tokens is None else context_tokens,
                updated_at=now_ms(),
            )

        return self._update(change)

    def _update(
        self, change: Callable[[SessionEntry], SessionEntry], *, sync: bool = True
    ) -> SessionEntry:
        session_id = self.session_id

        def apply(data: StoreData) -> SessionEntry | None:
            current = data.get(self.key)
            if current is None or current.session_id != session_id:
                return None
            data[self.key] = change(current)
            return data[self.key]

        updated = self._store.update(apply, sync=sync)
        if updated is None:
            logger.warning(
                "session %s was reset or removed elsewhere; not updating session %s",
                self.key,
                session_id,
            )
            return self.entry
        self.entry = updated
        return updated


class SessionSummary(msgspec.Struct, frozen=True, kw_only=True):
    """One row of `SessionManager.list_sessions`."""

    key: str
    agent_id: str
    entry: SessionEntry
    path: Path
    """The current transcript file."""
    message_count: int
    """Top-level messages in the transcript (nested code-mode calls not counted)."""

    @property
    def session_id(self) -> str:
        """The current session id."""
        return self.entry.session_id
