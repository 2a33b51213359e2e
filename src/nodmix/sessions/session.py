"""An open session: its key, its store entry and its transcript."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import msgspec

from nodmix.messages import Message, Usage, now_ms
from nodmix.sessions.entries import Entry, MessageEntry
from nodmix.sessions.index import SessionIndex
from nodmix.sessions.keys import SessionKey
from nodmix.sessions.replay import messages_for_model
from nodmix.sessions.store_entry import SessionEntry, StoreData
from nodmix.sessions.transcript import Transcript

logger = logging.getLogger(__name__)


USAGE_WRITE_INTERVAL = 1.0
"""Seconds between store writes of one session's usage counters."""


class Session:
    """One open session: its key, its store entry and its transcript."""

    __slots__ = (
        "_guard",
        "_last_write",
        "_pending",
        "_store",
        "entry",
        "on_pending",
        "session_key",
        "transcript",
        "write_inline",
    )

    def __init__(
        self,
        *,
        session_key: SessionKey,
        entry: SessionEntry,
        transcript: Transcript,
        store: SessionIndex,
    ) -> None:
        """Bind the parts together; use `SessionManager.open` to get one."""
        self.session_key = session_key
        self.entry = entry
        """The store entry as last read or written by this process."""
        self.transcript = transcript
        self._store = store
        self._pending: Callable[[SessionEntry], SessionEntry] | None = None
        """Usage changes not written to the store yet (see `update_usage`)."""
        self._last_write = time.monotonic()  # a new or freshly opened entry was just read
        self.on_pending: Callable[[Session], None] | None = None
        """Told when counters start waiting to be written (the manager tracks those sessions)."""
        self.write_inline = True
        """Whether `update_usage` writes due counters itself; False with a database backend,
        whose usage writer runs off the event loop (`runtime.usage_flush`)."""
        self._guard = threading.Lock()  # `_pending`: the usage writer may take it in a thread

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

        # Counters are bookkeeping: write them at most once a second per session (a busy
        # gateway would otherwise rewrite the store on every turn) and fold the rest into the
        # next write or `flush()`. `entry` is always current in this process.
        with self._guard:
            earlier = self._pending
            self._pending = change if earlier is None else (lambda e: change(earlier(e)))
        if earlier is None and self.on_pending is not None:
            self.on_pending(self)
        self.entry = change(self.entry)
        if self.write_inline and time.monotonic() - self._last_write >= USAGE_WRITE_INTERVAL:
            return self.flush()
        return self.entry

    def flush(self) -> SessionEntry:
        """Write usage counters that are still only in memory."""
        if self._pending is None:
            return self.entry
        return self._update(lambda entry: entry, sync=False)

    @property
    def has_pending(self) -> bool:
        """Whether usage counters are waiting to be written."""
        return self._pending is not None

    def flush_due(self) -> bool:
        """Whether counters are pending and the write interval has passed."""
        return (
            self._pending is not None
            and time.monotonic() - self._last_write >= USAGE_WRITE_INTERVAL
        )

    def take_pending(self, data: StoreData) -> None:
        """Apply pending counters to `data` (inside a store update) and clear them."""
        with self._guard:
            pending, self._pending = self._pending, None
        self._last_write = time.monotonic()
        current = data.get(self.key)
        if pending is None or current is None or current.session_id != self.session_id:
            return
        data[self.key] = pending(current)

    def set_label(self, label: str | None) -> SessionEntry:
        """Set or clear the session's display label."""
        return self._update(lambda e: msgspec.structs.replace(e, label=label, updated_at=now_ms()))

    def set_spawned(self, parent_key: str, label: str | None) -> SessionEntry:
        """Mark the session as a subagent's, spawned from `parent_key` (and give it a label)."""
        # Not fsynced, like a new session's own entry: lost in a power cut with it.
        return self._update(
            lambda e: msgspec.structs.replace(e, spawned_by=parent_key, label=label or e.label),
            sync=False,
        )

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
        with self._guard:
            pending, self._pending = self._pending, None

        def apply(data: StoreData) -> SessionEntry | None:
            current = data.get(self.key)
            if current is None or current.session_id != session_id:
                return None
            if pending is not None:
                current = pending(current)
            data[self.key] = change(current)
            return data[self.key]

        self._last_write = time.monotonic()
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
