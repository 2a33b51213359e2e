"""The Discord adapter: discord.py's Gateway client for inbound messages and slash commands,
its REST client for replies, typing and attachments.

The REST base is `apiBaseUrl` (default Discord's v10 API) and the Gateway URL is read from its
`GET /gateway/bot`, so the same code talks to Discord or to the scripted server in
`nodmix.testing.discord_server`. discord.py keeps both in class attributes, so a process runs
one Discord account. A slash command is answered "thinking…" at once and its reply arrives as
the interaction's follow-up (an embed); other replies are plain messages, at most 2000
characters each. Replies, typing and downloads run as their own asyncio task (`calls.py`), so
a cancelled one leaves discord.py's rate limits intact. Network errors reconnect with backoff
(discord.py resumes the Gateway session itself; a refused token is retried with a growing delay
and reported in the status).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import anyio
import yarl

import discord
from discord import app_commands
from discord.gateway import DiscordWebSocket
from discord.http import Route
from nodmix.channels.attachments import fetch_capped
from nodmix.channels.base import InboundSink
from nodmix.channels.discord.backlog import Backlog
from nodmix.channels.discord.calls import cancelled_once
from nodmix.channels.discord.mapping import (
    TEXT_LIMIT,
    allowed_mentions,
    command_inbound,
    guild_of,
    to_inbound,
)
from nodmix.channels.status import ChannelStatus
from nodmix.channels.types import InboundMessage, OutboundMessage
from nodmix.config.channel_schema import DiscordConfig
from nodmix.config.loader import resolve_secret
from nodmix.errors import ConfigError

log = logging.getLogger("nodmix.channels.discord")


class _NoVoiceNotice(logging.Filter):
    """discord.py warns on every start that voice support is not installed; we use no voice."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "voice will NOT be supported" not in record.getMessage()


logging.getLogger("discord.client").addFilter(_NoVoiceNotice())

DEFAULT_API = "https://discord.com/api/v10"
MAX_BACKOFF_SECONDS = 60.0
KNOWN_KEPT = 5000
"""DM channels and channel ids remembered (then forgotten at once and looked up again)."""
INTERACTION_TTL_SECONDS = 14 * 60.0
"""A follow-up must be sent within 15 minutes of the interaction."""
NO_CONTENT_INTENT = (
    "the Message Content intent is off: switch it on in the developer portal, "
    "Bot > Privileged Gateway Intents"
)
SLASH_COMMANDS = {
    "new": "Start a fresh session (the old one is kept)",
    "compact": "Summarise older history now",
    "status": "This chat's session and queue",
    "stop": "Stop the running turn",
    "help": "List the chat commands",
}


@dataclass(frozen=True, slots=True)
class DiscordSettings:
    """Resolved `channels.discord`."""

    token: str
    api_base_url: str = DEFAULT_API
    guilds: frozenset[str] = frozenset()
    slash_commands: bool = True
    mentions: frozenset[str] = frozenset()
    """`allowedMentions`: what replies may ping (nothing by default)."""
    channel: str = "discord"


def discord_settings(section: DiscordConfig, env: Mapping[str, str]) -> DiscordSettings:
    """Resolve the token (`token`, `${VAR}`, or `DISCORD_BOT_TOKEN`).

    Raises:
        ConfigError: no token.
    """
    token = resolve_secret(section.token, key="channels.discord.token", env=env)
    token = token or env.get("DISCORD_BOT_TOKEN")
    if not token:
        raise ConfigError(
            "no bot token: set channels.discord.token or DISCORD_BOT_TOKEN",
            key="channels.discord.token",
        )
    return DiscordSettings(
        token=token,
        api_base_url=(section.api_base_url or DEFAULT_API).rstrip("/"),
        guilds=frozenset(str(g) for g in section.guilds or []),
        slash_commands=section.slash_commands is not False,
        mentions=frozenset(section.allowed_mentions or ()),
    )


def _intents() -> discord.Intents:
    intents = discord.Intents.none()
    intents.guilds = True
    intents.guild_messages = True
    intents.dm_messages = True
    intents.message_content = True  # privileged: switch it on in the developer portal
    return intents


class _Client(discord.Client):
    """discord.py's client with our event handlers and slash commands."""

    def __init__(self, adapter: DiscordAdapter) -> None:
        super().__init__(
            intents=_intents(),
            max_messages=None,
            chunk_guilds_at_startup=False,
            allowed_mentions=allowed_mentions(adapter.settings.mentions),
        )
        self.adapter = adapter
        self.tree = app_commands.CommandTree(self)
        if adapter.settings.slash_commands:
            for name, description in SLASH_COMMANDS.items():
                self.tree.add_command(
                    app_commands.Command(
                        name=name, description=description, callback=_slash(adapter, name)
                    )
                )

    async def setup_hook(self) -> None:
        """Register the slash commands when the registered set differs."""
        if not self.adapter.settings.slash_commands:
            return
        remote = {command.name for command in await self.tree.fetch_commands()}
        if remote != set(SLASH_COMMANDS):
            await self.tree.sync()
            log.info("discord registered slash commands %s", ", ".join(SLASH_COMMANDS))

    async def on_connect(self) -> None:
        """READY arrived (`on_ready` waits a further 2 s for the guilds)."""
        self.adapter._on_ready()

    async def on_ready(self) -> None:
        """A new session with the guilds known: read back what was missed."""
        await self.adapter._catch_up()

    async def on_disconnect(self) -> None:
        if self.adapter._status is not None:
            self.adapter._status.connected = False

    async def on_message(self, message: discord.Message) -> None:
        await self.adapter._on_message(message)


def _slash(adapter: DiscordAdapter, name: str) -> Any:
    async def callback(interaction: discord.Interaction) -> None:
        await adapter._on_command(interaction, name)

    return callback


class DiscordAdapter:
    """A Discord bot, as a `ChannelAdapter`."""

    text_limit = TEXT_LIMIT

    def __init__(self, settings: DiscordSettings, state_dir: Path) -> None:
        self.settings = settings
        self.channel_id = settings.channel
        self._state_dir = state_dir
        Route.BASE = settings.api_base_url  # class-wide in discord.py: one account a process
        self.client: _Client | None = None
        self._sink: InboundSink | None = None
        self._status: ChannelStatus | None = None
        self._dm_channels: dict[str, int] = {}
        """user id -> DM channel id, learnt from inbound DMs."""
        self._interactions: dict[tuple[str, str | None], tuple[discord.Interaction, float]] = {}
        """(chat, thread) -> the slash command waiting for its answer."""
        self._channels: set[str] = set()
        """Ids known to be guild channels (not users) from `GET /channels/{id}`."""
        self._rest: discord.Client | None = None
        self._rest_lock = anyio.Lock()
        self._backlog = Backlog(state_dir, settings.channel)
        self._sessions = 0
        """Gateway sessions that became ready since the last connection error."""

    # ---- connection -----------------------------------------------------------------------

    async def _login(self) -> _Client:
        client = _Client(self)
        try:
            await client.login(self.settings.token)
            _, url, _ = await client.http.get_bot_gateway()
        except BaseException:
            with anyio.CancelScope(shield=True):
                await client.close()
            raise
        DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(url)
        self.client = client  # only a logged-in client: `send` may use it at once
        return client

    def _on_ready(self) -> None:
        status, client = self._status, self.client
        if status is None or client is None or client.user is None:
            return
        self._sessions += 1
        status.connected = True
        status.account = f"@{client.user.name}"
        log.info("discord connected as @%s", client.user.name)

    async def check(self) -> str:
        """`GET /users/@me` with the token; notes a Message Content intent that is off."""
        http = discord.http.HTTPClient(asyncio.get_running_loop())
        try:
            me = await http.static_login(self.settings.token)
            app = await http.application_info()
        finally:
            await http.close()
        flags = discord.ApplicationFlags._from_value(int(app.get("flags") or 0))
        if not (flags.gateway_message_content or flags.gateway_message_content_limited):
            return f"@{me['username']} ({NO_CONTENT_INTENT})"
        return f"@{me['username']}"

    async def run(self, sink: InboundSink, status: ChannelStatus) -> None:
        """Connect and receive until cancelled."""
        self._sink, self._status = sink, status
        backoff = 1.0
        while True:
            try:
                client = await self._login()
                await client.connect(reconnect=True)
            except Exception as exc:  # the library's errors, network errors, a bad payload
                status.connected = False
                kind, detail = "connection", str(exc)
                if isinstance(exc, discord.LoginFailure):
                    kind = "token refused"
                elif isinstance(exc, discord.PrivilegedIntentsRequired):
                    kind, detail = "refused", NO_CONTENT_INTENT
                status.error(f"{kind}: {detail}")
                log.warning("discord %s: %s (retrying in %gs)", kind, detail, backoff)
            finally:
                with anyio.CancelScope(shield=True):
                    await self._close_client()
            if self._sessions:  # it was connected: start the delays afresh
                self._sessions, backoff = 0, 1.0
            await anyio.sleep(backoff)
            backoff = min(backoff * 2, MAX_BACKOFF_SECONDS)

    async def _close_client(self) -> None:
        client, self.client = self.client, None
        if client is not None and not client.is_closed():
            await client.close()

    # ---- inbound --------------------------------------------------------------------------

    async def _deliver(self, msg: InboundMessage | None, guild: str | None) -> None:
        sink, status = self._sink, self._status
        if msg is None or sink is None or status is None:
            return
        if guild is not None and self.settings.guilds and guild not in self.settings.guilds:
            status.count("ignore", "guild not in guilds")
            return
        try:
            await sink(msg)
        except Exception as exc:  # one bad message must not stop the channel
            status.error(f"handling message {msg.key}: {exc}")
            log.exception("discord: handling message %s failed", msg.key)

    async def _on_message(self, message: discord.Message) -> None:
        client = self.client
        if client is None or client.user is None or self._backlog.seen(message.id):
            return
        msg = to_inbound(message, channel=self.channel_id, bot_id=client.user.id)
        if msg is not None and msg.chat_type == "dm":
            self._remember_dm(msg.chat_id, message.channel.id)
        await self._deliver(msg, guild_of(message))
        if msg is not None:
            self._backlog.mark(message.channel.id, message.id)

    def _remember_dm(self, user_id: str, channel_id: int) -> None:
        if len(self._dm_channels) >= KNOWN_KEPT:  # bounded: forgotten ones are looked up again
            self._dm_channels.clear()
        self._dm_channels[user_id] = channel_id

    async def _catch_up(self) -> None:
        client = self.client
        if client is None:
            return
        count = 0
        async for message in self._backlog.missed(client):
            count += 1
            await self._on_message(message)
        if count:
            log.info("discord: read back %d message(s) sent while disconnected", count)

    async def _on_command(self, interaction: discord.Interaction, name: str) -> None:
        await interaction.response.defer(thinking=True)
        msg = command_inbound(interaction, channel=self.channel_id, name=name)
        if msg is None:
            return
        if msg.chat_type == "dm" and interaction.channel_id is not None:
            self._remember_dm(msg.chat_id, interaction.channel_id)
        self._interactions[(msg.chat_id, msg.thread_id)] = (interaction, time.monotonic())
        guild = str(interaction.guild_id) if interaction.guild_id is not None else None
        await self._deliver(msg, guild)

    # ---- outbound -------------------------------------------------------------------------

    async def _connected(self) -> discord.Client:
        """The Gateway client while `run` is connected, else a REST-only client (logged in on
        first use: `nodmix message send` sends without a Gateway connection)."""
        if self.client is not None and not self.client.is_closed():
            return self.client
        async with self._rest_lock:
            if self._rest is None or self._rest.is_closed():
                rest = discord.Client(
                    intents=_intents(), allowed_mentions=allowed_mentions(self.settings.mentions)
                )
                await rest.login(self.settings.token)
                self._rest = rest
            return self._rest

    async def _target(self, chat_id: str, thread_id: str | None) -> int:
        """The channel id to post in: the thread, a known channel, or the user's DM channel."""
        if thread_id:
            return int(thread_id)
        if chat_id in self._dm_channels:
            return self._dm_channels[chat_id]
        client = await self._connected()
        if chat_id in self._channels or client.get_channel(int(chat_id)) is not None:
            return int(chat_id)
        try:
            await client.fetch_channel(int(chat_id))  # a guild channel or thread?
        except discord.NotFound:
            pass  # not a channel: a user id
        else:
            if len(self._channels) >= KNOWN_KEPT:
                self._channels.clear()
            self._channels.add(chat_id)
            return int(chat_id)
        dm = await client.create_dm(discord.Object(int(chat_id)))
        self._remember_dm(chat_id, dm.id)
        return dm.id

    def _pending_interaction(self, message: OutboundMessage) -> discord.Interaction | None:
        found = self._interactions.pop((message.chat_id, message.thread_id), None)
        if found is None or time.monotonic() - found[1] > INTERACTION_TTL_SECONDS:
            return None
        return found[0]

    @cancelled_once
    async def send(self, message: OutboundMessage) -> list[str]:
        """Post the text (a slash command's answer as its follow-up embed), then the files."""
        client = await self._connected()
        files = [
            discord.File(a.path, filename=a.name or a.path.name)
            for a in message.attachments
            if a.path is not None
        ]
        interaction = self._pending_interaction(message) if message.text else None
        ids: list[str] = []
        if interaction is not None:
            embed = discord.Embed(description=message.text)
            sent = await interaction.followup.send(
                embed=embed, wait=True, allowed_mentions=allowed_mentions(self.settings.mentions)
            )
            ids.append(str(sent.id))
            if not files:
                return ids
            message = OutboundMessage(chat_id=message.chat_id, thread_id=message.thread_id)
        target = await self._target(message.chat_id, message.thread_id)
        posted = await client.get_partial_messageable(target).send(
            content=message.text or None,
            files=files,
            allowed_mentions=allowed_mentions(self.settings.mentions),
        )
        ids.append(str(posted.id))
        return ids

    @cancelled_once  # a turn ending cancels typing mid-request: see calls.py
    async def typing(self, chat_id: str, thread_id: str | None) -> None:
        """`POST /channels/{id}/typing`."""
        target = await self._target(chat_id, thread_id)
        await (await self._connected()).http.send_typing(target)

    @cancelled_once
    async def download(self, ref: str, target: Path, *, max_bytes: int) -> Path:
        """Fetch an attachment's (signed) URL, streamed under the cap."""
        suffix = Path(unquote(urlparse(ref).path)).suffix
        if suffix and not target.suffix:
            target = target.with_suffix(suffix)
        return await fetch_capped(ref, target, max_bytes)

    async def aclose(self) -> None:
        """Close the Gateway connection and the HTTP sessions."""
        await self._close_client()
        rest, self._rest = self._rest, None
        if rest is not None and not rest.is_closed():
            await rest.close()
