"""What the channels of bots that a platform posts to with a signed token, and that answer
through the platform's REST API with a token of their own, share (Microsoft Teams, Google
Chat): the token fetched at start with backoff (so wrong credentials show at once), each
request's token checked before its body is read, a message handed on so that one bad message
never stops the channel, and a call whose token the platform refuses (revoked, or expired
early) made once more with a renewed token.

A `WebhookBot` per platform says how its errors are told apart; each adapter keeps the rest
of its specifics: how its token is fetched, how a request's token is checked, and how its API
answers."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TypeVar

import anyio

from nodmix.channels.base import InboundSink
from nodmix.channels.signing_keys import KeysUnavailable
from nodmix.channels.status import ChannelStatus
from nodmix.channels.types import InboundMessage

T = TypeVar("T")
G = TypeVar("G")

FIRST_BACKOFF_SECONDS = 1.0
MAX_BACKOFF_SECONDS = 60.0


@dataclass(frozen=True, slots=True)
class WebhookBot:
    """One platform's webhook bot: how its errors are told apart, and where it logs."""

    platform: str
    """Named in refusals: `invalid <platform> token`."""
    request_refused: type[Exception]
    """What checking a request's token raises when the token is not valid."""
    token_errors: tuple[type[Exception], ...]
    """What fetching the bot's own token raises when it fails."""
    token_refused: Callable[[Exception], bool]
    """Whether such an error is the credentials being refused (not the endpoint down)."""
    log: logging.Logger

    async def first_token(
        self, fetch: Callable[[], Awaitable[object]], status: ChannelStatus
    ) -> None:
        """`fetch()` the bot's token, again with backoff while it fails (the status says
        whether the credentials were refused); then the channel is connected."""
        backoff = FIRST_BACKOFF_SECONDS
        while True:
            try:
                await fetch()
                break
            except self.token_errors as exc:
                kind = "token refused" if self.token_refused(exc) else "token"
                status.error(f"{kind}: {exc}")
                self.log.warning("%s %s: %s (retrying in %gs)", status.channel, kind, exc, backoff)
            await anyio.sleep(backoff)
            backoff = min(backoff * 2, MAX_BACKOFF_SECONDS)
        status.connected = True

    async def admit(
        self,
        check: Callable[[str | None], Awaitable[G]],
        headers: Mapping[str, str],
        status: ChannelStatus,
    ) -> G | int:
        """What `check` grants the request's `Authorization` header, or the status to answer:
        401 for a token that is not valid, 503 while the signing keys cannot be fetched (the
        platform posts again later; the channel shows disconnected until they can)."""
        try:
            grant = await check(headers.get("authorization"))
        except self.request_refused as exc:
            status.count("refuse", f"invalid {self.platform} token")
            self.log.warning("%s: refused a request: %s", status.channel, exc)
            return 401
        except KeysUnavailable as exc:
            status.connected = False
            status.error(str(exc))
            self.log.warning("%s: %s", status.channel, exc)
            return 503
        if not status.connected:
            status.connected = True
            self.log.info("%s: signing keys reachable again", status.channel)
        return grant

    async def hand_on(self, msg: InboundMessage, sink: InboundSink, status: ChannelStatus) -> None:
        """`sink(msg)`; a failure is logged and shown in the status, never raised."""
        try:
            await sink(msg)
        except Exception as exc:  # one bad message must not stop the channel
            status.error(f"handling message {msg.key}: {exc}")
            self.log.exception("%s: handling message %s failed", status.channel, msg.key)


async def with_token(
    call: Callable[[str], Awaitable[T]],
    *,
    token: Callable[[], Awaitable[str]],
    forget: Callable[[], None],
    refused: Callable[[Exception], bool],
) -> T:
    """`call(token)`; when it fails with an error `refused` says is the platform refusing the
    token, the token is forgotten, fetched again and the call made once more (its error, if
    it fails again, is raised)."""
    try:
        return await call(await token())
    except Exception as exc:
        if not refused(exc):
            raise
    forget()
    return await call(await token())
