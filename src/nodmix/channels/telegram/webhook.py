"""Telegram's webhook mode: updates arrive as HTTPS requests to the gateway's own server.

At start the adapter calls `setWebhook` with the URL and a secret token; Telegram then sends
the token in `X-Telegram-Bot-Api-Secret-Token` with every update. A request without the right
token is refused (401) before its body is read as an update. Telegram posts an update again
when it got no `200` in time, so the ids of recently handled updates are kept (with the
channel's delivery position, `position.json`) and a redelivered one is answered `200` without
being handled twice. Switching back to polling calls `deleteWebhook` first (`getUpdates` is
refused while a webhook is set).
"""

from __future__ import annotations

import hmac
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from nodmix.channels.delivery import DeliveryLog

SECRET_HEADER = "x-telegram-bot-api-secret-token"
UPDATES_KEPT = 1000
"""How many handled update ids are remembered against redelivery."""


@dataclass(frozen=True, slots=True)
class WebhookSettings:
    """Resolved `channels.telegram.webhook`."""

    url: str
    secret_token: str
    path: str


def secret_matches(headers: Mapping[str, str], settings: WebhookSettings) -> bool:
    """The request carries the configured secret token (compared in constant time)."""
    given = headers.get(SECRET_HEADER)
    return given is not None and hmac.compare_digest(given.encode(), settings.secret_token.encode())


class HandledUpdates:
    """Ids of recently handled updates, persisted in the channel's position file."""

    def __init__(self, delivery: DeliveryLog) -> None:
        self._delivery = delivery
        kept = delivery.position().get("updates", [])
        self._ids: deque[int] = deque((i for i in kept if isinstance(i, int)), maxlen=UPDATES_KEPT)
        self._set = set(self._ids)

    def seen(self, update_id: int) -> bool:
        """Handled before (a redelivery)."""
        return update_id in self._set

    def add(self, update_id: int) -> None:
        """Remember a handled update (durably)."""
        if len(self._ids) == self._ids.maxlen:
            self._set.discard(self._ids[0])
        self._ids.append(update_id)
        self._set.add(update_id)
        self._save(updates=list(self._ids))

    def mark_webhook(self, url: str | None) -> None:
        """Record that a webhook is set (or deleted), so polling knows to delete it first."""
        self._save(webhook=url)

    def _save(self, **changes: Any) -> None:
        position = self._delivery.position()
        for key, value in changes.items():
            if value is None:
                position.pop(key, None)
            else:
                position[key] = value
        self._delivery.save_position(position)
