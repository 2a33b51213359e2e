"""The webhook side of the scripted Bot API (`nodmix.testing.telegram_server`): while a webhook
is set, queued updates are POSTed to it in order with `X-Telegram-Bot-Api-Secret-Token`, each
again until it is answered 200, as Telegram does."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import anyio
import httpx2

REDELIVER_SECONDS = 0.2
"""Wait before posting an update again that the webhook did not answer 200."""
POST_TIMEOUT_SECONDS = 10.0


@dataclass
class WebhookDelivery:
    """One POST of an update to the webhook."""

    update_id: int
    status: int
    """The HTTP status the webhook answered (0: no answer)."""


class WebhookPoster:
    """The registered webhook and the POSTs made to it (thread-safe under the server's lock)."""

    def __init__(self, lock: threading.Lock, queue: Callable[[], list[dict[str, Any]]]) -> None:
        self._lock = lock
        self._queue = queue
        self.webhook: dict[str, Any] | None = None
        """The `setWebhook` parameters while a webhook is set."""
        self.proxy: str | None = None
        """`http://host:port` that POSTs go to instead of the URL's own origin (the reverse
        proxy in front of a gateway)."""
        self.deliveries: list[WebhookDelivery] = []
        self._delivered: dict[int, dict[str, Any]] = {}
        self._wake: anyio.Event | None = None

    def wake_event(self) -> anyio.Event | None:
        """Set (on the server's loop) when the webhook or the queue changed."""
        return self._wake

    def target(self, hook: dict[str, Any]) -> tuple[str, dict[str, str]]:
        """The URL a POST goes to (through `proxy`) and its secret header."""
        url = str(hook.get("url", ""))
        if self.proxy is not None:
            parts = url.split("/", 3)  # "https:", "", "host:port", "path..."
            url = self.proxy.rstrip("/") + "/" + (parts[3] if len(parts) > 3 else "")
        secret = hook.get("secret_token")
        return url, {"X-Telegram-Bot-Api-Secret-Token": str(secret)} if secret else {}

    def post(self, update: int | dict[str, Any], secret: str | None) -> int:
        """POST an update (one delivered before, by id) from the test's thread; the status."""
        with self._lock:
            if isinstance(update, int):
                update = self._delivered[update]
            hook = dict(self.webhook or {})
        if secret is not None:
            hook["secret_token"] = secret
        url, headers = self.target(hook)
        with httpx2.Client(timeout=POST_TIMEOUT_SECONDS) as client:
            return client.post(url, json=update, headers=headers).status_code

    async def run(self) -> None:
        """Deliver queued updates while a webhook is set (on the server's loop)."""
        async with httpx2.AsyncClient(timeout=POST_TIMEOUT_SECONDS) as client:
            while True:
                with self._lock:
                    hook = dict(self.webhook) if self.webhook is not None else None
                    queue = self._queue()
                    update = queue[0] if queue and hook else None
                    self._wake = anyio.Event()
                    wake = self._wake
                if hook is None or update is None:
                    await wake.wait()
                    continue
                url, headers = self.target(hook)
                try:
                    status = (await client.post(url, json=update, headers=headers)).status_code
                except httpx2.HTTPError:
                    status = 0
                with self._lock:
                    self.deliveries.append(WebhookDelivery(update["update_id"], status))
                    self._delivered[update["update_id"]] = update
                    queue = self._queue()
                    if status == 200 and queue and queue[0] is update:
                        queue.pop(0)
                if status != 200:
                    with anyio.move_on_after(REDELIVER_SECONDS):
                        await wake.wait()  # a new webhook or update: try at once
