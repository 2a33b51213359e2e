"""The Mattermost adapter: events from the server's WebSocket, replies and edits through
REST API v4 with `mattermostautodriver` (the generated, maintained API client).

The WebSocket is the adapter's own (aiohttp, as the driver's is): the driver's socket loop
retries forever inside and only logs, so its caller can neither tell that the connection is
down nor pace the retries. Here a token the server refuses, a socket that closes, or one whose
pings go unanswered (`HEARTBEAT_SECONDS`) marks the channel disconnected, and it reconnects
with backoff. Posts made while the socket was down are read back after each `hello`
(`backlog.py`).
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import anyio
from mattermostautodriver import AsyncTypedDriver
from mattermostautodriver.exceptions import (
    MattermostError,
    NoAccessTokenProvided,
    ResourceNotFound,
)

from nodmix.channels.attachments import fetch_capped
from nodmix.channels.base import InboundSink
from nodmix.channels.mattermost.backlog import Backlog
from nodmix.channels.mattermost.mapping import DEFAULT_TEXT_LIMIT, posted_inbound
from nodmix.channels.status import ChannelStatus
from nodmix.channels.types import OutboundMessage
from nodmix.config.channel_xmpp_mm import MattermostConfig
from nodmix.config.loader import resolve_secret
from nodmix.errors import ConfigError

log = logging.getLogger("nodmix.channels.mattermost")
logging.getLogger("mattermostautodriver").setLevel(logging.CRITICAL)  # it logs every 4xx

REQUEST_TIMEOUT_SECONDS = 30
CONNECT_TIMEOUT_SECONDS = 30.0
HEARTBEAT_SECONDS = 30.0
MAX_BACKOFF_SECONDS = 60.0
STABLE_SECONDS = 30.0
"""A connection up this long resets the backoff (one that keeps dropping sooner backs off)."""
KEPT = 1000
SEEN_KEPT = 2000


class TokenRefused(ConnectionError):
    """The server refused the bot's token."""


@dataclass(frozen=True, slots=True)
class MattermostSettings:
    """Resolved `channels.mattermost`."""

    scheme: str
    host: str
    port: int
    token: str
    text_limit: int = DEFAULT_TEXT_LIMIT
    channel: str = "mattermost"

    @property
    def base(self) -> str:
        return f"{self.scheme}://{self.host}:{self.port}"


def mattermost_settings(section: MattermostConfig, env: Mapping[str, str]) -> MattermostSettings:
    """Resolve the token (`${VAR}`, or `MATTERMOST_TOKEN`) and split the URL.

    Raises:
        ConfigError: the URL is not `http(s)://host[:port]`, or the token is missing.
    """
    parts = urlsplit(section.url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.path.strip("/"):
        raise ConfigError(
            f"{section.url!r} is not a server address like https://chat.example.org "
            "(a server under a sub-path is not supported)",
            key="channels.mattermost.url",
        )
    token = resolve_secret(section.token, key="channels.mattermost.token", env=env)
    token = token or env.get("MATTERMOST_TOKEN")
    if not token:
        raise ConfigError(
            "no token: set channels.mattermost.token or MATTERMOST_TOKEN",
            key="channels.mattermost.token",
        )
    return MattermostSettings(
        scheme=parts.scheme,
        host=parts.hostname,
        port=parts.port or (443 if parts.scheme == "https" else 80),
        token=token,
        text_limit=section.text_limit or DEFAULT_TEXT_LIMIT,
    )


class MattermostAdapter:
    """A Mattermost bot account, as a `ChannelAdapter` (and a `MessageEditor`)."""

    def __init__(self, settings: MattermostSettings, state_dir: Path, tls: Any = None) -> None:
        self.settings = settings
        self.channel_id = settings.channel
        self.text_limit = settings.text_limit
        # the gateway's shared context, also for http: httpx builds one per client otherwise
        self._tls = tls.context() if tls is not None else None
        self.api: Any = AsyncTypedDriver(
            {
                "scheme": settings.scheme,
                "url": settings.host,
                "port": settings.port,
                "token": settings.token,
                "request_timeout": REQUEST_TIMEOUT_SECONDS,
                "verify": self._tls if self._tls is not None else True,
                "max_retries": 1,
            }
        )
        self.api.client.token = settings.token
        self._me: dict[str, Any] = {}
        self._dm: dict[str, str] = {}
        """User id -> the bot's DM channel with them."""
        self._channels: dict[str, str] = {}
        """Chat ids already resolved to a channel id."""
        self._names: dict[str, str] = {}
        """User id -> username, for posts read back (events carry the name)."""
        self._backlog = Backlog(state_dir, settings.channel)
        self._seen: deque[str] = deque(maxlen=SEEN_KEPT)
        """Post ids handled by this process (a post both live and read back is handled once)."""

    # ---- connection -----------------------------------------------------------------------

    async def _who_am_i(self) -> dict[str, Any]:
        try:
            me: dict[str, Any] = await self.api.users.get_user("me")
        except NoAccessTokenProvided as exc:
            raise TokenRefused(f"the server refused the token: {exc}") from None
        self._me = me
        return me

    async def check(self) -> str:
        """`GET /users/me` with the token."""
        me = await self._who_am_i()
        return f"@{me.get('username')} on {self.settings.host}"

    async def run(self, sink: InboundSink, status: ChannelStatus) -> None:
        """Connect and receive until cancelled, reconnecting with backoff."""
        backoff = 1.0
        while True:
            try:
                me = await self._who_am_i()
                status.account = f"@{me.get('username')} on {self.settings.host}"
                started = time.monotonic()
                await self._socket(sink, status)
                if time.monotonic() - started >= STABLE_SECONDS:
                    backoff = 1.0  # it was up a while: a fresh drop, not a flapping server
                status.error("disconnected")
                log.warning("mattermost: the connection closed, reconnecting")
            except (OSError, TimeoutError, aiohttp.ClientError, MattermostError) as exc:
                kind = "token refused" if isinstance(exc, TokenRefused) else "connection"
                status.error(f"{kind}: {exc or type(exc).__name__}")
                log.warning("mattermost %s: %s (retrying in %gs)", kind, exc, backoff)
            finally:
                status.connected = False
            await anyio.sleep(backoff)
            backoff = min(backoff * 2, MAX_BACKOFF_SECONDS)

    async def _socket(self, sink: InboundSink, status: ChannelStatus) -> None:
        """One WebSocket connection: authenticate, then hand on posts until it closes.

        Raises:
            TimeoutError: the upgrade, or the server's `hello` after it, did not come within
                `CONNECT_TIMEOUT_SECONDS` (a server or proxy that takes the connection and
                hangs would otherwise hold the channel forever, neither up nor retrying).
        """
        s = self.settings
        url = f"{'wss' if s.scheme == 'https' else 'ws'}://{s.host}:{s.port}/api/v4/websocket"
        headers = {"Authorization": f"Bearer {s.token}"}
        timeout = aiohttp.ClientTimeout(total=None, connect=CONNECT_TIMEOUT_SECONDS)
        deadline = anyio.current_time() + CONNECT_TIMEOUT_SECONDS
        with anyio.CancelScope(deadline=deadline) as greeting:
            async with (
                aiohttp.ClientSession(timeout=timeout) as session,
                session.ws_connect(
                    url,
                    headers=headers,
                    heartbeat=HEARTBEAT_SECONDS,
                    ssl=self._tls if self._tls is not None and s.scheme == "https" else True,
                ) as ws,
            ):
                challenge = {
                    "seq": 1,
                    "action": "authentication_challenge",
                    "data": {"token": s.token},
                }
                await ws.send_str(json.dumps(challenge))
                try:
                    await self._receive(ws, sink, status, greeting)
                finally:
                    self._backlog.save()
        if greeting.cancelled_caught:
            raise TimeoutError(
                f"the WebSocket was not up (no hello) within {CONNECT_TIMEOUT_SECONDS:g} s"
            )

    async def _receive(
        self,
        ws: aiohttp.ClientWebSocketResponse,
        sink: InboundSink,
        status: ChannelStatus,
        greeting: anyio.CancelScope,
    ) -> None:
        async for frame in ws:
            if frame.type != aiohttp.WSMsgType.TEXT:
                continue
            try:
                event = json.loads(frame.data)
            except ValueError:
                continue
            if not isinstance(event, dict):
                continue
            if event.get("seq_reply") == 1 and event.get("status") == "FAIL":
                raise TokenRefused("the server refused the token on the WebSocket")
            if event.get("event") == "hello":
                greeting.deadline = math.inf  # up: from now on the heartbeat watches it
                status.connected = True
                log.info("mattermost connected as %s", status.account)
                await self._catch_up(sink, status)
                self._backlog.alive(force=True)
                continue
            await self._handle(event, sink, status)
            self._backlog.alive()  # after: a post whose handling failed is read back

    async def _catch_up(self, sink: InboundSink, status: ChannelStatus) -> None:
        """Hand on the posts made while the socket was down, oldest first per channel."""
        count = 0
        async for kind, post in self._backlog.missed(self.api):
            user = str(post.get("user_id", ""))
            data = {"channel_type": kind, "post": post, "sender_name": await self._name(user)}
            count += await self._handle({"event": "posted", "data": data}, sink, status)
        if count:
            log.info("mattermost: read back %d post(s) made while disconnected", count)

    async def _name(self, user: str) -> str:
        if user and user not in self._names:
            try:
                found = await self.api.users.get_user(user)
            except MattermostError:
                return ""
            _remember(self._names, user, str(found.get("username") or ""))
        return self._names.get(user, "")

    async def _handle(self, event: dict[str, Any], sink: InboundSink, status: ChannelStatus) -> int:
        """Hand on a `posted` event's post (once per process); 1 when it was one."""
        me = self._me
        found = posted_inbound(
            event,
            channel=self.channel_id,
            bot_id=str(me.get("id", "")),
            bot_username=str(me.get("username", "")),
        )
        if found is None:
            return 0
        msg, channel_id, created = found
        if msg.message_id in self._seen:
            return 0
        self._seen.append(msg.message_id)
        if msg.chat_type == "dm":
            _remember(self._dm, msg.chat_id, channel_id)
        try:
            await sink(msg)
        except Exception as exc:  # one bad message must not stop the channel
            status.error(f"handling message {msg.key}: {exc}")
            log.exception("mattermost: handling message %s failed", msg.key)
        self._backlog.mark(channel_id, created)
        return 1

    # ---- outbound -------------------------------------------------------------------------

    async def _channel(self, chat_id: str) -> str:
        """The channel id of `chat_id`: a user id becomes the bot's DM channel with them."""
        if chat_id in self._dm:
            return self._dm[chat_id]
        if chat_id in self._channels:
            return self._channels[chat_id]
        try:
            await self.api.users.get_user(chat_id)
        except ResourceNotFound:
            _remember(self._channels, chat_id, chat_id)  # not a user: a channel id
            return chat_id
        me = self._me or await self._who_am_i()
        opened = await self.api.channels.create_direct_channel([str(me["id"]), chat_id])
        _remember(self._dm, chat_id, str(opened["id"]))
        return self._dm[chat_id]

    async def send(self, message: OutboundMessage) -> list[str]:
        """One post (in the thread the message came from), its files uploaded first."""
        channel = await self._channel(message.chat_id)
        file_ids: list[str] = []
        for attachment in message.attachments:
            data = attachment.data
            if data is None and attachment.path is not None:
                data = attachment.path.read_bytes()
            if data is None:
                continue
            name = attachment.name or (attachment.path.name if attachment.path else "file")
            uploaded = await self.api.files.upload_file(channel_id=channel, files=(name, data))
            file_ids += [str(info["id"]) for info in uploaded.get("file_infos", [])]
        if not message.text and not file_ids:
            return []
        post = await self.api.posts.create_post(
            channel_id=channel,
            message=message.text,
            root_id=message.thread_id,
            file_ids=file_ids[:5] or None,
        )
        return [str(post["id"])]

    async def edit_text(self, chat_id: str, message_id: str, text: str) -> None:
        """Patch the post's message (streamed replies)."""
        await self.api.posts.patch_post(message_id, message=text)

    async def typing(self, chat_id: str, thread_id: str | None) -> None:
        """Publish a typing event for the bot in the chat."""
        me = self._me
        if not me:
            return
        channel = await self._channel(chat_id)
        await self.api.users.publish_user_typing(str(me["id"]), channel, parent_id=thread_id)

    async def download(self, ref: str, target: Path, *, max_bytes: int) -> Path:
        """Fetch a file by id with the bot's token, streamed under the cap."""
        headers = {"Authorization": f"Bearer {self.settings.token}"}
        return await fetch_capped(
            f"{self.settings.base}/api/v4/files/{ref}", target, max_bytes, headers=headers
        )

    async def aclose(self) -> None:
        """Close the HTTP client."""
        await self.api.close()


def _remember(cache: dict[str, str], key: str, value: str) -> None:
    if key not in cache and len(cache) >= KEPT:
        cache.clear()
    cache[key] = value
