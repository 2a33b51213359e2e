"""The IRC adapter: one pydle client per connection, reconnecting and rejoining after a
disconnect, and sending replies as byte-limited lines through a flood gate.

IRC has no message ids and no history, so delivery is at most once: a message that arrives
while the bot is disconnected is never seen. A message already accepted when the gateway
stops is kept by the channel layer and answered after the restart.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pydle

from nodmix.channels.base import InboundSink
from nodmix.channels.irc.client import Event, IrcClient, quit_quietly
from nodmix.channels.irc.lines import FloodGate, split_lines, text_budget
from nodmix.channels.irc.mapping import identity, irc_lower, is_mask
from nodmix.channels.status import ChannelStatus
from nodmix.channels.types import OutboundMessage
from nodmix.config.channel_mail_irc import IrcConfig
from nodmix.config.loader import resolve_secret

log = logging.getLogger("nodmix.channels.irc")

TEXT_LIMIT = 4000
"""Characters per reply piece; each piece is then sent as lines of at most 512 bytes."""
CONNECT_TIMEOUT_SECONDS = 30.0
MAX_BACKOFF_SECONDS = 60.0
DEFAULT_LINE_DELAY = 1.0
QUEUE_LIMIT = 1000
NICK_RETRY_SECONDS = 10.0
USERHOST_TIMEOUT_SECONDS = 15.0


class NickChangedHands(ConnectionError):
    """A DM's nick is held by someone other than the user and host it was written to."""


@dataclass(frozen=True, slots=True)
class IrcSettings:
    """Resolved `channels.irc`."""

    host: str
    port: int
    tls: bool
    nick: str
    channels: tuple[str, ...] = ()
    password: str | None = None
    sasl_username: str | None = None
    sasl_password: str | None = None
    line_delay: float = DEFAULT_LINE_DELAY
    channel: str = "irc"


def irc_settings(section: IrcConfig, env: Mapping[str, str]) -> IrcSettings:
    """Resolve passwords (`${VAR}`) and the default port.

    Raises:
        ConfigError: a referenced variable is not set.
    """
    password = resolve_secret(section.password, key="channels.irc.password", env=env)
    sasl_password = None
    if section.sasl is not None:
        sasl_password = resolve_secret(
            section.sasl.password, key="channels.irc.sasl.password", env=env
        )
    return IrcSettings(
        host=section.host,
        port=section.port or (6697 if section.tls else 6667),
        tls=section.tls,
        nick=section.nick,
        channels=tuple(section.channels),
        password=password,
        sasl_username=section.sasl.username if section.sasl else None,
        sasl_password=sasl_password,
        line_delay=(
            section.line_delay_seconds
            if section.line_delay_seconds is not None
            else DEFAULT_LINE_DELAY
        ),
    )


class IrcAdapter:
    """One IRC network, as a `ChannelAdapter`."""

    text_limit = TEXT_LIMIT

    def __init__(self, settings: IrcSettings, state_dir: Path) -> None:
        self.settings = settings
        self.channel_id = settings.channel
        self._client: IrcClient | None = None
        self._online = asyncio.Event()
        self._running = False
        self._gate = FloodGate(settings.line_delay)

    def _new_client(self, events: asyncio.Queue[Event]) -> IrcClient:
        s = self.settings
        sasl: dict[str, Any] = {}
        if s.sasl_username and s.sasl_password:
            sasl = {
                "sasl_username": s.sasl_username,
                "sasl_password": s.sasl_password,
                "sasl_identity": s.sasl_username,
            }
        return IrcClient(
            events,
            s.channel,
            nickname=s.nick,
            fallback_nicknames=[f"{s.nick}_", f"{s.nick}__"],
            realname="Nodmix",
            **sasl,
        )

    async def _connect(self, events: asyncio.Queue[Event], *, join: bool = True) -> IrcClient:
        s = self.settings
        client = self._new_client(events)
        try:
            with anyio.fail_after(CONNECT_TIMEOUT_SECONDS):
                await client.connect(
                    s.host,
                    s.port,
                    tls=s.tls,
                    tls_verify=s.tls,
                    password=s.password,
                    channels=list(s.channels) if join else [],
                )
                await client.welcomed.wait()
            if s.sasl_username and not client.sasl_ok:
                # Never go on unauthenticated: the nick or the channels may need the account.
                raise ConnectionError("SASL login refused (or not offered by the server)")
        except BaseException:
            await quit_quietly(client)
            raise
        return client

    async def check(self) -> str:
        """Connect, register (without joining), and leave."""
        client = await self._connect(asyncio.Queue(QUEUE_LIMIT), join=False)
        try:
            nick = client.welcome_nick or client.nickname
            return f"{nick} on {self.settings.host}:{self.settings.port}"
        finally:
            await quit_quietly(client)

    async def run(self, sink: InboundSink, status: ChannelStatus) -> None:
        """Stay connected (reconnecting with backoff) and hand on every message."""
        self._running = True
        try:
            await self._stay_connected(sink, status)
        finally:
            self._running = False

    async def _stay_connected(self, sink: InboundSink, status: ChannelStatus) -> None:
        backoff = 1.0
        while True:
            events: asyncio.Queue[Event] = asyncio.Queue(QUEUE_LIMIT)
            try:
                self._client = await self._connect(events)
            except (OSError, TimeoutError, pydle.Error) as exc:  # ConnectionError is an OSError
                status.connected = False
                status.error(f"connection: {exc or type(exc).__name__}")
                log.warning("irc connection failed: %s (retrying in %gs)", exc, backoff)
                await anyio.sleep(backoff)
                backoff = min(backoff * 2, MAX_BACKOFF_SECONDS)
                continue
            backoff = 1.0
            self._online.set()
            status.connected = True
            nick = self._client.welcome_nick or self.settings.nick
            status.account = f"{nick}@{self.settings.host}"
            log.info("irc connected to %s as %s", self.settings.host, nick)
            try:
                await self._pump(self._client, events, sink, status)
            finally:
                self._online.clear()
                status.connected = False
                client, self._client = self._client, None
                with anyio.CancelScope(shield=True):
                    await quit_quietly(client)
            status.error("disconnected")
            log.warning("irc disconnected from %s, reconnecting", self.settings.host)
            await anyio.sleep(backoff)

    async def _pump(
        self,
        client: IrcClient,
        events: asyncio.Queue[Event],
        sink: InboundSink,
        status: ChannelStatus,
    ) -> None:
        while True:
            try:
                with anyio.fail_after(NICK_RETRY_SECONDS):
                    kind, msg = await events.get()
            except TimeoutError:
                if irc_lower(client.nickname or "") != irc_lower(self.settings.nick):
                    await client.set_nickname(self.settings.nick)  # a ghost may have gone
                continue
            finally:
                if client.registered and client.nickname:
                    status.account = f"{client.nickname}@{self.settings.host}"
            if kind == "lost" or msg is None:
                return
            try:
                await sink(msg)
            except Exception as exc:  # one bad message must not stop the channel
                status.error(f"handling message {msg.key}: {exc}")
                log.exception("irc: handling message %s failed", msg.key)

    async def send(self, message: OutboundMessage) -> list[str]:
        """PRIVMSG the text as lines that fit, paced by the flood gate (waiting a while for
        the connection when it is down; outside the gateway, on a connection of its own)."""
        if not self._running:
            log.debug("irc: a connection of its own for a message to %s", message.chat_id)
            own = await self._connect(asyncio.Queue(QUEUE_LIMIT), join=False)
            try:
                ids = await self._send_lines(own, message)
                with anyio.fail_after(CONNECT_TIMEOUT_SECONDS):
                    await own.flush()
                return ids
            finally:
                await quit_quietly(own)
        try:
            with anyio.fail_after(CONNECT_TIMEOUT_SECONDS):
                await self._online.wait()
        except TimeoutError:
            raise ConnectionError("not connected to IRC") from None
        client = self._client
        if client is None or not client.connected:
            raise ConnectionError("not connected to IRC")
        return await self._send_lines(client, message)

    async def _send_lines(self, client: IrcClient, message: OutboundMessage) -> list[str]:
        target = await self._recipient(client, message.chat_id)
        text = message.text
        for attachment in message.attachments:
            name = attachment.name or (attachment.path.name if attachment.path else "file")
            text += f"\n(file {name} not sent: IRC carries text only)"
        sent = 0
        for line in split_lines(text, text_budget(client.nickname, target)):
            await self._gate.wait()
            await client.rawmsg("PRIVMSG", target, line)
            sent += 1
        log.debug("irc: sent %d line(s) to %s", sent, target)
        return [f"{target}:{i}" for i in range(sent)]

    async def _recipient(self, client: IrcClient, chat_id: str) -> str:
        """The PRIVMSG target for `chat_id`: a channel or nick as given; for a DM's
        `nick!user@host` the nick, once the server shows the same user and host still hold it
        (whoever took the nick since must not get the reply)."""
        if not is_mask(chat_id):
            return chat_id
        nick = chat_id.split("!", 1)[0]
        with anyio.fail_after(USERHOST_TIMEOUT_SECONDS):
            holder = await client.holder(nick)
        if holder is None or identity(holder) != identity(chat_id):
            log.warning("irc: reply to %s withheld: the nick is now %s", chat_id, holder)
            now = "is not online" if holder is None else f"is now {holder}"
            raise NickChangedHands(f"{nick} {now}, not {chat_id}: reply withheld")
        return nick

    async def typing(self, chat_id: str, thread_id: str | None) -> None:
        """IRC has no typing indicator."""

    async def download(self, ref: str, target: Path, *, max_bytes: int) -> Path:
        """IRC messages carry no files."""
        raise ValueError("IRC messages carry no attachments")

    async def aclose(self) -> None:
        """Quit."""
        client, self._client = self._client, None
        await quit_quietly(client)
