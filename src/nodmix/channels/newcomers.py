"""Senders the channel does not know yet: a pairing code, said once and not in a flood.

The code itself, and the bounds that keep a few accounts from locking others out, are the
pairing store's (`nodmix.channels.pairing`); this module only answers the sender.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable

from nodmix import offload
from nodmix.channels.pairing import PairingStore
from nodmix.channels.status import ChannelStatus
from nodmix.channels.types import InboundMessage, OutboundMessage

log = logging.getLogger("nodmix.channels")

PAIRING_REPEAT_SECONDS = 600.0
"""An unknown sender who keeps writing is told their code again at most this often."""
MAX_TOLD = 64

Send = Callable[[str, OutboundMessage], Awaitable[None]]


def pairing_reply(code: str, channel: str) -> str:
    """What an unknown sender is told."""
    return (
        "This assistant does not know you yet. Your pairing code is "
        f"{code}. Ask its owner to run: nodmix pairing approve {channel} {code}"
    )


class Newcomers:
    """Hands out pairing codes (`dmPolicy: pairing`) and tells each sender theirs."""

    def __init__(self, pairing: PairingStore) -> None:
        self.pairing = pairing
        self._told: dict[tuple[str, str], float] = {}

    async def answer(self, msg: InboundMessage, status: ChannelStatus, send: Send) -> None:
        """Give `msg`'s sender a code (theirs again, at most every few minutes), or nothing
        when they or the channel are over the pairing rate limits."""
        request, created = await offload.call(
            self.pairing,
            self.pairing.request,
            msg.channel,
            msg.sender_id,
            sender_name=msg.sender_name,
            chat_id=msg.chat_id,
        )
        if request is None:
            status.count("refuse", "pairing rate limit")
            log.info("%s: no pairing code for %s: rate limit", msg.channel, msg.sender_id)
            return
        if created:
            status.pairing_requests += 1
        status.count("refuse", "awaiting pairing")
        if not self._may_tell((msg.channel, msg.sender_id), fresh=created):
            return  # a flood of messages must not become a flood of replies
        await send(
            msg.channel,
            OutboundMessage(
                chat_id=msg.chat_id,
                text=pairing_reply(request.code, msg.channel),
                thread_id=msg.thread_id,  # in the sender's topic or mail thread
            ),
        )

    def _may_tell(self, sender: tuple[str, str], *, fresh: bool) -> bool:
        now = time.monotonic()
        last = self._told.get(sender)
        if not fresh and last is not None and now - last < PAIRING_REPEAT_SECONDS:
            return False
        if len(self._told) > MAX_TOLD:  # only senders with a pending code get here: few
            self._told = {k: t for k, t in self._told.items() if now - t < PAIRING_REPEAT_SECONDS}
        self._told[sender] = now
        return True
