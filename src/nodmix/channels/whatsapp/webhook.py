"""The WhatsApp webhook on the gateway's port: Meta's verification `GET` and signed updates.

The verification request (`hub.mode=subscribe&hub.verify_token=...&hub.challenge=...`) is
answered with the challenge only when the verify token matches (compared in constant time).
An update is refused (401) when its `X-Hub-Signature-256` is missing or malformed, before its
body is read, and when it does not match the HMAC-SHA256 of the raw body keyed with the app
secret, before anything parses it. Only then is it decoded (400 when it is not the webhook's
shape) and its messages handed on one by one, each once: ids already handled (Meta posts an
update again until it gets a 200; a replayed request is the same bytes) and messages older
than the 24-hour window are dropped.
"""

from __future__ import annotations

import hmac
import logging
import re
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

import anyio
import msgspec

from nodmix import offload
from nodmix.channels.base import InboundSink
from nodmix.channels.status import ChannelStatus
from nodmix.channels.whatsapp.mapping import WINDOW_CLOSED_CODE, Parsed, decode, parse
from nodmix.channels.whatsapp.signature import presented_signature, signature_matches
from nodmix.channels.whatsapp.window import WhatsAppStore, stale

log = logging.getLogger("nodmix.channels.whatsapp")

_CHALLENGE = re.compile(r"[A-Za-z0-9_.\-]{1,256}")


@dataclass(slots=True)
class Receiving:
    """Where verified updates go while `run` serves the channel."""

    sink: InboundSink
    status: ChannelStatus
    own_number: str
    """The business number (`+1 555-...`), for mentions in groups."""


def verify(query: Mapping[str, str], verify_token: str) -> tuple[int, str]:
    """Meta's subscription check: `(200, challenge)` for the right token, else 403/400."""
    given = query.get("hub.verify_token", "")
    if query.get("hub.mode") != "subscribe" or not hmac.compare_digest(
        given.encode("utf-8", "replace"), verify_token.encode("utf-8")
    ):
        return 403, "verification refused"
    challenge = query.get("hub.challenge", "")
    if not _CHALLENGE.fullmatch(challenge):
        return 400, "malformed hub.challenge"
    return 200, challenge


class WebhookHandler:
    """Checks and hands on posted updates (one at a time, so handled ids stay in order)."""

    def __init__(
        self,
        *,
        channel: str,
        phone_number_id: str,
        app_secret: str,
        store: WhatsAppStore,
        on_inbound: Callable[[str, str], None],
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.channel = channel
        self.phone_number_id = phone_number_id
        self._secret = app_secret
        self._store = store
        self._on_inbound = on_inbound
        """Told `(chat_id, message_id)` of each message handed on (read receipts, typing)."""
        self._clock = clock
        self._lock = anyio.Lock()

    async def receive(
        self,
        receiving: Receiving | None,
        headers: Mapping[str, str],
        body: Callable[[], Awaitable[bytes]],
    ) -> int:
        """One posted update; the HTTP status to answer."""
        if receiving is None:
            return 503  # not serving yet: Meta posts it again later
        status = receiving.status
        presented = presented_signature(headers)
        if presented is None:
            status.count("refuse", "unsigned webhook request")
            return 401
        raw = await body()
        if not signature_matches(presented, raw, self._secret):
            status.count("refuse", "wrong webhook signature")
            log.warning("whatsapp: refused a webhook request with a wrong signature")
            return 401
        try:
            update = decode(raw)
        except msgspec.DecodeError as exc:
            status.count("ignore", "malformed webhook update")
            log.warning("whatsapp: malformed webhook update: %s", exc)
            return 400
        parsed = parse(
            update,
            channel=self.channel,
            phone_number_id=self.phone_number_id,
            own_number=receiving.own_number,
        )
        async with self._lock:
            await self._hand_on(parsed, receiving)
        return 200

    async def _hand_on(self, parsed: Parsed, receiving: Receiving) -> None:
        status = receiving.status
        for _ in range(parsed.skipped):
            status.count("ignore", "unsupported message type")
        for failure in parsed.failures:
            if failure.code == WINDOW_CLOSED_CODE:
                line = (
                    f"WhatsApp did not deliver a message to {failure.recipient}: outside the "
                    "24-hour customer-service window a reply needs a template message"
                )
            else:
                line = f"WhatsApp did not deliver a message to {failure.recipient}: {failure.title}"
            status.error(line)
            log.warning("%s", line)
        now = self._clock()
        for arrived in parsed.messages:
            msg = arrived.message
            # Under `self._lock`: one update at a time reads and records the ids.
            store = self._store
            if await offload.call(store, store.handled, msg.message_id, arrived.sent_at):
                continue  # posted again, or replayed
            if stale(arrived.sent_at, now=now):
                status.count("ignore", "older than the 24-hour window")
                continue
            self._store.opened(msg.chat_id, arrived.sent_at)
            self._on_inbound(msg.chat_id, msg.message_id)
            try:
                await receiving.sink(msg)
            except Exception as exc:  # one bad message must not stop the channel
                status.error(f"handling message {msg.key}: {exc}")
                log.exception("whatsapp: handling message %s failed", msg.key)
            await offload.call(store, store.remember, msg.message_id, arrived.sent_at)
