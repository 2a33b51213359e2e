"""Where replies to a chat go, for channels whose platform says so only in incoming messages.

A Teams bot can write to a conversation only at the service URL the conversation's messages
came from; a Google Chat app writes to a person's direct-message space, not to the person. The
adapters of such channels record, for each chat key (a sender's id for direct messages, a chat
id for groups), the platform's address of the chat, and read it back when a reply, a pending
message after a restart, or `nodmix message send` needs it.

An address is recorded when a message arrives, before the access check (a stranger's pairing
code goes there), among the strangers' addresses. When the check lets the chat in, the
channel manager calls the adapter's `admitted` and the address moves to the allowed chats'
part, or the owners' part for an owner's direct chat. Each part is bounded to `MAX_CHATS`
on its own (the least recently seen are forgotten first), so a flood of strangers pushes out
only strangers, and nobody but owners pushes out an owner.

The record is kept with the channel's delivery state (`position.json`, `DeliveryLog`) and
written only when it changes.
"""

from __future__ import annotations

from typing import Any, Literal

from nodmix.channels.delivery import DeliveryLog

MAX_CHATS = 2000
"""Addresses kept per part (strangers, allowed chats, owners)."""

Tier = Literal["owner", "allowed", "stranger"]
_ORDER: tuple[Tier, ...] = ("owner", "allowed", "stranger")


def _part(stored: object) -> dict[str, dict[str, Any]]:
    if not isinstance(stored, dict):
        return {}
    return {str(k): v for k, v in stored.items() if isinstance(v, dict)}


class ChatAddresses:
    """`{chat key: address}` of one channel, persisted (see the module docstring)."""

    def __init__(self, delivery: DeliveryLog, field: str = "chats") -> None:
        self._delivery = delivery
        self._fields: dict[Tier, str] = {
            "owner": f"{field}Owners",
            "allowed": f"{field}Allowed",
            "stranger": field,
        }
        self._parts = self._stored()

    def _stored(self) -> dict[Tier, dict[str, dict[str, Any]]]:
        position = self._delivery.position()
        return {tier: _part(position.get(self._fields[tier])) for tier in _ORDER}

    def _tier(self, chat_key: str) -> Tier | None:
        return next((tier for tier in _ORDER if chat_key in self._parts[tier]), None)

    def get(self, chat_key: str) -> dict[str, Any] | None:
        """The address recorded for `chat_key` (read again when this process has not seen
        it: with the postgres state backend, another replica may have learned it)."""
        tier = self._tier(chat_key)
        if tier is None:
            self._parts = self._stored()
            tier = self._tier(chat_key)
        return self._parts[tier][chat_key] if tier is not None else None

    def all(self) -> list[dict[str, Any]]:
        """Every recorded address."""
        self._parts = self._stored()
        merged: dict[str, dict[str, Any]] = {}
        for tier in reversed(_ORDER):
            merged.update(self._parts[tier])
        return list(merged.values())

    def remember(self, chat_key: str, address: dict[str, Any]) -> None:
        """Record (durably) where `chat_key`'s chat is, in the part it is in already (a new
        chat: the strangers'); a no-op when nothing changed. The stored record is read
        first, so what other replicas recorded is kept."""
        tier = self._tier(chat_key) or "stranger"
        part = self._parts[tier]
        if part.get(chat_key) == address:
            part[chat_key] = part.pop(chat_key)  # most recently seen last
            return
        self._save(chat_key, address, tier)

    def admit(self, chat_key: str, *, owner: bool = False) -> None:
        """The access check let `chat_key` in: keep its address among the allowed chats (an
        owner's direct chat: among the owners') where strangers cannot push it out."""
        want: Tier = "owner" if owner else "allowed"
        tier = self._tier(chat_key)
        if tier is None:
            self._parts = self._stored()
            tier = self._tier(chat_key)
        if tier is None or tier == want or tier == "owner":
            return
        self._save(chat_key, self._parts[tier][chat_key], want)

    def _save(self, chat_key: str, address: dict[str, Any], tier: Tier) -> None:
        position = self._delivery.position()
        self._parts = self._stored()
        for part in self._parts.values():
            part.pop(chat_key, None)
        self._parts[tier][chat_key] = address
        for name, part in self._parts.items():
            while len(part) > MAX_CHATS:
                del part[next(iter(part))]
            position[self._fields[name]] = part
        self._delivery.save_position(position)
