"""WhatsApp's customer-service window and the handled-message store.

A business may send free-form messages to a user only within 24 hours of that user's last
message; after that only an approved template message may open the conversation again (Meta
answers a free-form send with error 131047). So the adapter remembers, per chat, when the user
last wrote, and refuses a send outside the window at once with one line that says so, rather
than letting the reply vanish.

The same store remembers the ids of handled messages, so a webhook Meta posts again (it
retries until it gets a 200) or a captured request replayed by someone else is answered once.
A message older than the window is never handled: it could not be answered anyway, and it
bounds how long ids must be kept. At most `MAX_HANDLED` ids are kept; when more arrive within
the window, the oldest are dropped and the store remembers the newest time it dropped (the
floor): a message sent at or before the floor is refused as a replay too. Meta signs the whole
body, timestamps included, so a replayed update cannot claim a newer time, and replay
protection holds whatever the number of messages (a message Meta first delivers after
`MAX_HANDLED` newer ones were handled is refused as well; at that volume, a lesser harm).

`WhatsAppStore` is the seam; `FileWhatsAppStore` keeps both in the channel's delivery state
(`open_delivery_log`: files under `<state>/channels/whatsapp/`, or the database with the
postgres state backend). A handled id is appended as one record (`DeliveryLog.append_record`:
`handled.jsonl`, or one row), never by rewriting the others; when the records pass
`COMPACT_AT`, they are compacted to the ids still kept and the floor. A crash mid-append
loses at most the torn record being written, never a readable one, and a compaction is
atomic. Ids kept in the position by an older Nodmix are moved into the records once. The
chats' last inbound times (up to `MAX_CHATS`) go to a position of their own
(`whatsapp.window`), written only when a chat is new or its time moved by
`INBOUND_WRITE_SECONDS`, so a message does not rewrite thousands of chats (after a restart a
window may close up to that much early, never late). The webhook runs on every replica, so on
a shared store a miss (an id not handled here, a chat whose user wrote to another replica) is
read again before it is trusted: only the records appended since the last read.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Protocol

from nodmix import offload
from nodmix.channels.delivery import DeliveryLog

WINDOW_SECONDS = 24 * 3600
MAX_HANDLED = 2000
COMPACT_AT = 2 * MAX_HANDLED
"""Records of handled ids (and floors) past which they are compacted to the kept ones."""
HANDLED_RECORDS = "handled"
MAX_CHATS = 5000
FUTURE_SLACK_SECONDS = 300
INBOUND_WRITE_SECONDS = 600


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

    def handled(self, message_id: str, sent_at: float | None = None) -> bool:
        """Handled before (a redelivery or a replay): its id is known, or it was sent at or
        before the floor (older than the ids kept)."""
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
    """`WhatsAppStore` in the channel's delivery state (see the module docstring)."""

    def __init__(
        self,
        delivery: DeliveryLog,
        *,
        windows: DeliveryLog | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """`windows`: where the last inbound times go (None: the delivery position)."""
        self._delivery = delivery
        self._windows = windows or delivery
        self._inbound_dirty = False
        self._inbound_saved: dict[str, float] = {}
        self._clock = clock
        self._handled: dict[str, float] = {}
        self._inbound: dict[str, float] = {}
        self._floor = 0.0
        """The newest send time of a handled id that was dropped (see the module docstring)."""
        self._mark = 0
        """How far the handled records were read."""
        self._records = 0
        """Handled records in the store (read or appended) since the last compaction."""
        self._legacy = False
        """The position still holds ids an older Nodmix kept there (moved on next write)."""
        self._load_position()
        self._read_records()

    @property
    def round_trips(self) -> bool:
        """Whether its reads and writes are database round trips (`nodmix.offload`):
        the webhook then checks and records handled ids off the event loop."""
        return offload.round_trips(self._delivery) or offload.round_trips(self._windows)

    def _load_position(self) -> None:
        position = self._delivery.position()
        inbound = _times(position.get("lastInbound"))  # with the ids, as before the split
        if self._windows is not self._delivery:
            self._inbound_dirty = bool(inbound)  # moved on next write
            inbound.update(_times(self._windows.position().get("lastInbound")))
        self._inbound_saved = dict(inbound)
        _merge(self._inbound, inbound)
        legacy = _times(position.get("handled"))
        floor = position.get("handledFloor")
        self._legacy = bool(legacy) or floor is not None
        _merge(self._handled, legacy)
        if isinstance(floor, int | float):
            self._floor = max(self._floor, float(floor))

    def _read_records(self) -> None:
        """Take in the handled records appended since the last read (any replica's)."""
        records, self._mark = self._delivery.records(HANDLED_RECORDS, self._mark)
        self._take(records)

    def _take(self, records: list[dict[str, Any]]) -> None:
        self._records += len(records)
        for record in records:
            message_id, at, floor = record.get("id"), record.get("at"), record.get("floor")
            if isinstance(message_id, str) and isinstance(at, int | float):
                if at > self._handled.get(message_id, 0.0):
                    self._handled[message_id] = float(at)
            elif isinstance(floor, int | float):
                self._floor = max(self._floor, float(floor))
        self._handled, dropped = _kept(self._handled, self._clock(), MAX_HANDLED)
        self._floor = max(self._floor, dropped)

    def _known(self, message_id: str, sent_at: float | None) -> bool:
        return message_id in self._handled or (sent_at is not None and sent_at <= self._floor)

    def handled(self, message_id: str, sent_at: float | None = None) -> bool:
        if self._known(message_id, sent_at):
            return True
        if self._delivery.shared:
            self._read_records()
        return self._known(message_id, sent_at)

    def opened(self, chat_id: str, sent_at: float) -> None:
        sent_at = min(sent_at, self._clock() + FUTURE_SLACK_SECONDS)
        if sent_at > self._inbound.get(chat_id, 0.0):
            self._inbound[chat_id] = sent_at
            if sent_at - self._inbound_saved.get(chat_id, 0.0) >= INBOUND_WRITE_SECONDS:
                self._inbound_dirty = True

    def remember(self, message_id: str, sent_at: float) -> None:
        now = self._clock()
        at = min(sent_at, now + FUTURE_SLACK_SECONDS)
        self._delivery.append_record(HANDLED_RECORDS, {"id": message_id, "at": at})
        self._take([{"id": message_id, "at": at}])
        if self._records > COMPACT_AT or self._legacy:
            self._compact(now)
        if self._inbound_dirty:
            self._save_inbound(now)

    def _compact(self, now: float) -> None:
        """Rewrite the handled records as the ids kept and the floor."""
        self._read_records()  # up to the mark: what this store and other replicas appended
        kept: list[dict[str, Any]] = [{"id": k, "at": t} for k, t in self._handled.items()]
        if self._floor and not stale(self._floor, now=now):
            kept.insert(0, {"floor": self._floor})
        later, self._mark = self._delivery.compact_records(HANDLED_RECORDS, kept, upto=self._mark)
        self._records = len(kept)
        self._take(later)
        if self._legacy:  # the ids an older Nodmix kept in the position are records now
            position = self._delivery.position()
            position.pop("handled", None)
            position.pop("handledFloor", None)
            self._delivery.save_position(position)
            self._legacy = False

    def _save_inbound(self, now: float) -> None:
        if self._windows.shared:
            stored = _times(self._windows.position().get("lastInbound"))
            _merge(self._inbound, stored)  # what other replicas recorded
        self._inbound = _recent(self._inbound, now, MAX_CHATS)
        position = self._windows.position() if self._windows is self._delivery else {}
        position["lastInbound"] = self._inbound
        self._windows.save_position(position)
        self._inbound_saved, self._inbound_dirty = dict(self._inbound), False
        if self._windows is not self._delivery:
            old = self._delivery.position()
            if "lastInbound" in old:  # kept with the ids before the split
                old.pop("lastInbound")
                self._delivery.save_position(old)

    def last_inbound(self, chat_id: str) -> float | None:
        last = self._inbound.get(chat_id)
        if self._windows.shared and (last is None or stale(last, now=self._clock())):
            _merge(self._inbound, _times(self._windows.position().get("lastInbound")))
            last = self._inbound.get(chat_id)
        if last is None or stale(last, now=self._clock()):
            return None
        return last


def _merge(mine: dict[str, float], stored: dict[str, float]) -> None:
    """Take in `stored` times (the newer of stored and known, per key)."""
    for key, at in stored.items():
        if at > mine.get(key, 0.0):
            mine[key] = at


def _times(raw: Any) -> dict[str, float]:
    if not isinstance(raw, dict):
        return {}
    return {str(k): float(v) for k, v in raw.items() if isinstance(v, int | float)}


def _kept(entries: dict[str, float], now: float, keep: int) -> tuple[dict[str, float], float]:
    """Ids within the window, at most `keep`, and the newest time among those dropped for
    the bound (0: none). Every id sent at that time goes, so the floor covers all dropped
    ids and no kept one."""
    fresh = {k: t for k, t in entries.items() if not stale(t, now=now)}
    if len(fresh) <= keep:
        return fresh, 0.0
    ordered = sorted(fresh.items(), key=lambda item: item[1])
    floor = ordered[-keep - 1][1]
    return {k: t for k, t in ordered if t > floor}, floor


def _recent(entries: dict[str, float], now: float, keep: int) -> dict[str, float]:
    """Entries within the window, at most `keep` (the newest)."""
    fresh = {k: t for k, t in entries.items() if not stale(t, now=now)}
    if len(fresh) > keep:
        fresh = dict(sorted(fresh.items(), key=lambda item: item[1])[-keep:])
    return fresh
