"""The Telegram adapter: long polling `getUpdates`, sending with flood-control retries.

Requests go to `<apiBaseUrl>/bot<token>/<method>` (a self-hosted Bot API server, or the
scripted one in `nodmix.testing.telegram_server`). The update offset is saved in the
channel's delivery state after each batch was accepted, so a restart resumes where the last
run stopped. Network errors reconnect with exponential backoff; a 429's `retry_after` is
waited out.
"""

from __future__ import annotations

import datetime
import logging
import ssl
import warnings
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import anyio
import httpx

from nodmix.channels.base import InboundSink
from nodmix.channels.delivery import DeliveryLog
from nodmix.channels.status import ChannelStatus
from nodmix.channels.telegram.mapping import TEXT_LIMIT, to_inbound
from nodmix.channels.types import OutboundMessage
from nodmix.config.channel_schema import TelegramConfig
from nodmix.config.loader import resolve_secret
from nodmix.errors import ConfigError
from telegram import Bot
from telegram.error import InvalidToken, RetryAfter, TelegramError
from telegram.request import HTTPXRequest

log = logging.getLogger("nodmix.channels.telegram")

DEFAULT_API = "https://api.telegram.org"
DEFAULT_POLL_SECONDS = 25
MAX_BACKOFF_SECONDS = 60.0
MAX_RETRY_AFTER_SECONDS = 120.0
SEND_ATTEMPTS = 3
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class TelegramSettings:
    """Resolved `channels.telegram`."""

    token: str
    api_base_url: str = DEFAULT_API
    poll_timeout_seconds: int = DEFAULT_POLL_SECONDS
    channel: str = "telegram"


def telegram_settings(section: TelegramConfig, env: Mapping[str, str]) -> TelegramSettings:
    """Resolve the token (`botToken`, `${VAR}`, or `TELEGRAM_BOT_TOKEN`) and the API URL.

    Raises:
        ConfigError: no token.
    """
    token = resolve_secret(section.bot_token, key="channels.telegram.botToken", env=env)
    token = token or env.get("TELEGRAM_BOT_TOKEN")
    if not token:
        raise ConfigError(
            "no bot token: set channels.telegram.botToken or TELEGRAM_BOT_TOKEN",
            key="channels.telegram.botToken",
        )
    return TelegramSettings(
        token=token,
        api_base_url=(section.api_base_url or DEFAULT_API).rstrip("/"),
        poll_timeout_seconds=(
            section.poll_timeout_seconds
            if section.poll_timeout_seconds is not None
            else DEFAULT_POLL_SECONDS
        ),
    )


def _wait_seconds(exc: RetryAfter) -> float:
    """The flood-control wait (capped); the attribute's type changes across library versions,
    and reading it as an int warns, so read it either way without the warning."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        value = exc.retry_after
    seconds = value.total_seconds() if isinstance(value, datetime.timedelta) else float(value)
    return min(seconds, MAX_RETRY_AFTER_SECONDS)


class TelegramAdapter:
    """A Telegram bot, as a `ChannelAdapter`."""

    text_limit = TEXT_LIMIT

    def __init__(
        self, settings: TelegramSettings, state_dir: Path, tls: ssl.SSLContext | None = None
    ) -> None:
        self.settings = settings
        self.channel_id = settings.channel
        api = settings.api_base_url
        # Left alone, each of the bot's two HTTP clients builds a context with its own copy of
        # the CA bundle (~0.8 MB each); one shared context makes a further bot cost ~0.1 MB.
        shared = {"verify": tls if tls is not None else httpx.create_ssl_context()}
        self.bot = Bot(
            settings.token,
            base_url=f"{api}/bot",
            base_file_url=f"{api}/file/bot",
            request=HTTPXRequest(connection_pool_size=16, read_timeout=30.0, httpx_kwargs=shared),
            get_updates_request=HTTPXRequest(
                read_timeout=settings.poll_timeout_seconds + 15.0,
                connect_timeout=10.0,
                httpx_kwargs=shared,
            ),
        )
        self._position = DeliveryLog(state_dir, settings.channel)
        self._ready = False

    async def _connect(self) -> None:
        if not self._ready:
            await self.bot.initialize()  # getMe: checks the token, learns the bot's name
            self._ready = True

    async def check(self) -> str:
        """getMe."""
        me = await self.bot.get_me()
        return f"@{me.username}"

    async def run(self, sink: InboundSink, status: ChannelStatus) -> None:
        """Long-poll until cancelled."""
        offset = self._position.position().get("offset")
        backoff = 1.0
        while True:
            try:
                await self._connect()
                if not status.connected:
                    status.connected = True
                    status.account = f"@{self.bot.username}"
                    log.info("telegram connected as @%s", self.bot.username)
                updates = await self.bot.get_updates(
                    offset=offset,
                    timeout=self.settings.poll_timeout_seconds,
                    allowed_updates=["message"],
                )
                backoff = 1.0
            except RetryAfter as exc:
                await anyio.sleep(_wait_seconds(exc))
                continue
            except (TelegramError, OSError) as exc:
                status.connected = False
                kind = "token refused" if isinstance(exc, InvalidToken) else "connection"
                status.error(f"{kind}: {exc}")
                log.warning("telegram %s error: %s (retrying in %gs)", kind, exc, backoff)
                await anyio.sleep(backoff)
                backoff = min(backoff * 2, MAX_BACKOFF_SECONDS)
                continue
            for update in updates:
                msg = to_inbound(
                    update,
                    channel=self.channel_id,
                    bot_id=self.bot.id,
                    bot_username=self.bot.username,
                )
                if msg is not None:
                    try:
                        await sink(msg)
                    except Exception as exc:  # one bad message must not stop the channel
                        status.error(f"handling message {msg.key}: {exc}")
                        log.exception("telegram: handling message %s failed", msg.key)
                offset = update.update_id + 1
            if updates:
                self._position.save_position({"offset": offset})

    async def _retrying(self, call: Callable[[], Awaitable[T]]) -> T:
        for attempt in range(SEND_ATTEMPTS):
            try:
                return await call()
            except RetryAfter as exc:
                if attempt == SEND_ATTEMPTS - 1:
                    raise
                await anyio.sleep(_wait_seconds(exc))
        raise AssertionError("unreachable")

    async def send(self, message: OutboundMessage) -> list[str]:
        """sendMessage, then sendDocument per attachment."""
        await self._connect()
        chat = int(message.chat_id)
        thread = int(message.thread_id) if message.thread_id else None
        ids: list[str] = []
        if message.text:
            sent = await self._retrying(
                lambda: self.bot.send_message(chat, message.text, message_thread_id=thread)
            )
            ids.append(str(sent.message_id))
        for attachment in message.attachments:
            path = attachment.path
            if path is None:
                continue
            data = attachment.data if attachment.data is not None else path.read_bytes()
            name = attachment.name or path.name
            sent = await self._retrying(
                lambda data=data, name=name: self.bot.send_document(  # type: ignore[misc]
                    chat, data, filename=name, message_thread_id=thread
                )
            )
            ids.append(str(sent.message_id))
        return ids

    async def typing(self, chat_id: str, thread_id: str | None) -> None:
        """sendChatAction typing."""
        await self.bot.send_chat_action(
            int(chat_id), "typing", message_thread_id=int(thread_id) if thread_id else None
        )

    async def download(self, ref: str, target: Path) -> Path:
        """getFile, then the file download."""
        await self._connect()
        file = await self.bot.get_file(ref)
        suffix = Path(file.file_path or "").suffix
        if suffix and not target.suffix:
            target = target.with_suffix(suffix)
        await file.download_to_drive(custom_path=target)
        return target

    async def aclose(self) -> None:
        """Close the HTTP clients."""
        if self._ready:
            self._ready = False
            await self.bot.shutdown()
