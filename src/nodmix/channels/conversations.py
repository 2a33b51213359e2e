"""Where replies to a chat go, for channels whose platform says so only in incoming messages.

A Teams bot can write to a conversation only at the service URL the conversation's messages
came from; a Google Chat app writes to a person's direct-message space, not to the person. The
adapters of such channels record, for each chat key (a sender's id for direct messages, a chat
id for groups), the platform's address of the chat, and read it back when a reply, a pending
message after a restart, or `nodmix message send` needs it.

The record is kept with the channel's delivery state (`position.json`, `DeliveryLog`), bounded
to `MAX_CHATS` (the least recently seen are forgotten first), and written only when it changes.
"""

from __future__ import annotations

from typing import Any

from nodmix.channels.delivery import DeliveryLog

MAX_CHATS = 2000


class ChatAddresses:
    """`{chat key: address}` of one channel, persisted (see the module docstring)."""

    def __init__(self, delivery: DeliveryLog, field: str = "chats") -> None:
        self._delivery = delivery
        self._field = field
        self._chats = self._stored()

    def _stored(self) -> dict[str, dict[str, Any]]:
        stored = self._delivery.position().get(self._field, {})
        return (
            {str(k): v for k, v in stored.items() if isinstance(v, dict)}
            if isinstance(stored, dict)
            else {}
        )

    def get(self, chat_key: str) -> dict[str, Any] | None:
        """The address recorded for `chat_key` (read again when this process has not seen
        it: with the postgres state backend, another replica may have learned it)."""
        found = self._chats.get(chat_key)
        if found is None:
            self._chats = self._stored()
            found = self._chats.get(chat_key)
        return found

    def all(self) -> list[dict[str, Any]]:
        """Every recorded address."""
        self._chats = self._stored()
        return list(self._chats.values())

    def remember(self, chat_key: str, address: dict[str, Any]) -> None:
        """Record (durably) where `chat_key`'s chat is; a no-op when nothing changed. The
        stored record is read first, so what other replicas recorded is kept."""
        if self._chats.get(chat_key) == address:
            self._chats[chat_key] = self._chats.pop(chat_key)  # most recently seen last
            return
        position = self._delivery.position()
        self._chats = self._stored()
        self._chats.pop(chat_key, None)
        self._chats[chat_key] = address
        while len(self._chats) > MAX_CHATS:
            del self._chats[next(iter(self._chats))]
        position[self._field] = self._chats
        self._delivery.save_position(position)
