"""The chats each channel has seen as direct ones, for platforms whose ids cannot say.

On Discord, Mattermost and Matrix a person's chat and a room share one id space
(`chat_kinds.py` answers `unknown`). When an allowed sender writes to the bot in a direct chat
the channel manager records the chat here, so `allowFrom: ["*"]` lets the agent answer that
person later (a cron job, `nodmix message send`) while a room it never saw as direct stays
refused.

Kept behind the delivery-log seam (`open_delivery_log`, a document per channel on the
postgres backend) under the name `<channel>.direct`, bounded to `MAX_CHATS` (the least
recently seen forgotten first: a forgotten chat is refused again, never opened), and written
only when a chat is new.
"""

from __future__ import annotations

from pathlib import Path

import anyio

from nodmix import offload
from nodmix.channels.delivery import DeliveryLog, open_delivery_log

MAX_CHATS = 2000


class DirectChats:
    """Direct chats seen per channel (see the module docstring)."""

    def __init__(self, state_dir: Path) -> None:
        self._state_dir = state_dir
        self._logs: dict[str, DeliveryLog] = {}
        self._seen: dict[str, dict[str, None]] = {}
        self._writing: anyio.Lock | None = None

    def _log(self, channel: str) -> DeliveryLog:
        log = self._logs.get(channel)
        if log is None:
            log = self._logs[channel] = open_delivery_log(self._state_dir, f"{channel}.direct")
        return log

    def _stored(self, channel: str) -> dict[str, None]:
        chats = self._log(channel).position().get("chats", [])
        found = dict.fromkeys(str(c) for c in chats) if isinstance(chats, list) else {}
        self._seen[channel] = found
        return found

    def seen(self, channel: str, chat_id: str) -> bool:
        """Whether `chat_id` was seen as a direct chat (read again on a miss: another process
        or replica may have recorded it)."""
        known = self._seen.get(channel)
        if known is not None and chat_id in known:
            return True
        return chat_id in self._stored(channel)

    def remember(self, channel: str, chat_id: str) -> None:
        """Record (durably) that `chat_id` is a direct chat; a no-op when known."""
        known = self._seen.get(channel)
        if known is not None and chat_id in known:
            return
        known = self._stored(channel)
        if chat_id in known:
            return
        known[chat_id] = None
        while len(known) > MAX_CHATS:
            del known[next(iter(known))]
        self._log(channel).save_position({"chats": list(known)})

    async def remember_async(self, channel: str, chat_id: str) -> None:
        """`remember` for code on the event loop: a known chat costs nothing, a new one is
        recorded off the loop on a database (one at a time: each write is the whole list)."""
        known = self._seen.get(channel)
        if known is not None and chat_id in known:
            return
        log = self._log(channel)
        if not offload.round_trips(log):
            self.remember(channel, chat_id)
            return
        if self._writing is None:
            self._writing = anyio.Lock()
        async with self._writing:
            await offload.call(log, self.remember, channel, chat_id)
