"""WhatsApp's customer-service window and the handled-message store.

A business may send free-form messages to a user only within 24 hours of that user's last
message; after that only an approved template message may open the conversation again (Meta
answers a free-form send with error 131047). So the adapter remembers, per chat, when the user
last wrote, and refuses a send outside the window at once with one line that says so, rather
than letting the reply vanish.

The same store remembers the ids of handled messages, so a webhook Meta posts again (it
retries until it gets a 200) or a captured request replayed by someone else is answered once.
A message older than the window is never handled: it could not be answered anyway, and it
bounds how long ids must be kept.

`WhatsAppStore` is the seam; `FileWhatsAppStore` keeps both in the channel's delivery position
(`open_delivery_log`: `<state>/channels/whatsapp/position.json`, written atomically, or the
database with the postgres state backend), as Telegram keeps its offset. The webhook runs on
every replica, so on a shared position a miss (an id not handled here, a chat whose user
wrote to another replica) is read again before it is trusted, and a write keeps what other
replicas recorded.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Protocol

from nodmix.channels.delivery import DeliveryLog

WINDOW_SECONDS = 24 * 3600
MAX_HANDLED = 5000
MAX_CHATS = 5000
FUTURE_SLACK_SECONDS = 300


class OutsideWindow(Exception):
    """A free-form send to a chat whose window is closed."""

    def __init__(self, chat_id: str, last: float | None) -> None:
        self.chat_id = chat_id
        self.last = last
        when = "has not written in the last 24 hours" if last else "has never written"
        super().__init__(
            f"WhatsApp: {chat_id} {when}, and outside the 24-hour customer-service window a "
            "reply needs a template message, which Nodmix does not send"
        )


class WhatsAppStore(Protocol):
    """Handled message ids and each chat's last inbound time."""

    def handled(self, message_id: str) -> bool:
        """Handled before (a redelivery or a replay)."""
        ...

    def opened(self, chat_id: str, sent_at: float) -> None:
        """The chat's user wrote at `sent_at` (kept durably with the next `remember`)."""
        ...

    def remember(self, message_id: str, sent_at: float) -> None:
        """Record a handled message (durably, with the chats' last inbound times)."""
        ...

    def last_inbound(self, chat_id: str) -> float | None:
        """When the chat's user last wrote (None: not within the window)."""
        ...


def window_open(store: WhatsAppStore, chat_id: str, *, now: float) -> bool:
    """Whether a free-form message may go to `chat_id` now."""
    last = store.last_inbound(chat_id)
    return last is not None and now - last < WINDOW_SECONDS


def stale(sent_at: float, *, now: float) -> bool:
    """A message too old to answer (and to remember)."""
    return now - sent_at >= WINDOW_SECONDS


class FileWhatsAppStore:
    """`WhatsAppStore` in the channel's delivery position file."""

    def __init__(self, delivery: DeliveryLog, *, clock: Callable[[], float] = time.time) -> None:
        self._delivery = delivery
        self._clock = clock
        self._handled: dict[str, float] = {}
        self._inbound: dict[str, float] = {}
        self._reload()

    def _reload(self) -> None:
        """Take in the stored entries (the newer time of stored and known, per key)."""
        position = self._delivery.position()
        for mine, stored in (
            (self._handled, _times(position.get("handled"))),
            (self._inbound, _times(position.get("lastInbound"))),
        ):
            for key, at in stored.items():
                if at > mine.get(key, 0.0):
                    mine[key] = at

    def handled(self, message_id: str) -> bool:
        if message_id in self._handled:
            return True
        if self._delivery.shared:
            self._reload()
        return message_id in self._handled

    def opened(self, chat_id: str, sent_at: float) -> None:
        sent_at = min(sent_at, self._clock() + FUTURE_SLACK_SECONDS)
        if sent_at > self._inbound.get(chat_id, 0.0):
            self._inbound[chat_id] = sent_at

    def remember(self, message_id: str, sent_at: float) -> None:
        if self._delivery.shared:
            self._reload()
        now = self._clock()
        self._handled[message_id] = min(sent_at, now + FUTURE_SLACK_SECONDS)
        self._handled = _recent(self._handled, now, MAX_HANDLED)
        self._inbound = _recent(self._inbound, now, MAX_CHATS)
        self._delivery.save_position({"handled": self._handled, "lastInbound": self._inbound})

    def last_inbound(self, chat_id: str) -> float | None:
        last = self._inbound.get(chat_id)
        if self._delivery.shared and (last is None or stale(last, now=self._clock())):
            self._reload()
            last = self._inbound.get(chat_id)
        if last is None or stale(last, now=self._clock()):
            return None
        return last


def _times(raw: Any) -> dict[str, float]:
    if not isinstance(raw, dict):
        return {}
    return {str(k): float(v) for k, v in raw.items() if isinstance(v, int | float)}


def _recent(entries: dict[str, float], now: float, keep: int) -> dict[str, float]:
    """Entries within the window, at most `keep` (the newest)."""
    fresh = {k: t for k, t in entries.items() if not stale(t, now=now)}
    if len(fresh) > keep:
        fresh = dict(sorted(fresh.items(), key=lambda item: item[1])[-keep:])
    return fresh
