"""The Telegram adapter: long polling `getUpdates` (or a webhook), sending with
flood-control retries, editing messages for streamed replies.

Requests go to `<apiBaseUrl>/bot<token>/<method>` (a self-hosted Bot API server, or the
scripted one in `nodmix.testing.telegram_server`). The update offset is saved in the
channel's delivery state after each batch was accepted, so a restart resumes where the last
run stopped. Network errors reconnect with exponential backoff; a 429's `retry_after` is
waited out. In webhook mode (`webhook.py`) updates come through the gateway's HTTP server
instead and go through the same path.
"""

from __future__ import annotations

import datetime
import json
import logging
import ssl
import warnings
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import anyio
import httpx

from nodmix import offload
from nodmix.channels.attachments import check_declared, write_capped
from nodmix.channels.base import InboundSink
from nodmix.channels.delivery import open_delivery_log
from nodmix.channels.status import ChannelStatus
from nodmix.channels.telegram.mapping import TEXT_LIMIT, to_inbound
from nodmix.channels.telegram.webhook import HandledUpdates, WebhookSettings, secret_matches
from nodmix.channels.types import OutboundMessage
from nodmix.config.channel_schema import TelegramConfig
from nodmix.config.channel_webhook import check_secret_token, webhook_path
from nodmix.config.loader import resolve_secret
from nodmix.errors import ConfigError
from telegram import Bot, Update
from telegram.error import BadRequest, InvalidToken, RetryAfter, TelegramError
from telegram.request import HTTPXRequest

log = logging.getLogger("nodmix.channels.telegram")

DEFAULT_API = "https://api.telegram.org"
DEFAULT_POLL_SECONDS = 25
MAX_BACKOFF_SECONDS = 60.0
MAX_RETRY_AFTER_SECONDS = 120.0
SEND_ATTEMPTS = 3
DOWNLOAD_SECONDS = 300.0
DOWNLOAD_IDLE_SECONDS = 30.0
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class TelegramSettings:
    """Resolved `channels.telegram`."""

    token: str
    api_base_url: str = DEFAULT_API
    poll_timeout_seconds: int = DEFAULT_POLL_SECONDS
    channel: str = "telegram"
    webhook: WebhookSettings | None = None
    """Webhook mode; None: long polling."""


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
    webhook = None
    if section.webhook is not None:
        key = "channels.telegram.webhook.secretToken"
        secret = resolve_secret(section.webhook.secret_token, key=key, env=env) or ""
        check_secret_token(secret, key=key)
        webhook = WebhookSettings(
            url=section.webhook.url, secret_token=secret, path=webhook_path(section.webhook)
        )
    return TelegramSettings(
        token=token,
        webhook=webhook,
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
    sends_voice = True
    """Outbound `voice` attachments go as voice messages (OGG/Opus, `sendVoice`)."""

    def __init__(
        self, settings: TelegramSettings, state_dir: Path, tls: ssl.SSLContext | None = None
    ) -> None:
        self.settings = settings
        self.channel_id = settings.channel
        api = settings.api_base_url
        # Left alone, each of the bot's two HTTP clients builds a context with its own copy of
        # the CA bundle (~0.8 MB each); one shared context makes a further bot cost ~0.1 MB.
        self._verify = tls if tls is not None else httpx.create_ssl_context()
        shared = {"verify": self._verify}
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
        self._position = open_delivery_log(state_dir, settings.channel)
        self._handled = HandledUpdates(self._position)
        self._ready = False
        self._inbound: tuple[InboundSink, ChannelStatus] | None = None
        """Where webhook updates go, while `run` serves the webhook."""
        self._webhook_lock = anyio.Lock()

    async def _connect(self) -> None:
        if not self._ready:
            await self.bot.initialize()  # getMe: checks the token, learns the bot's name
            self._ready = True

    async def check(self) -> str:
        """getMe."""
        me = await self.bot.get_me()
        return f"@{me.username}"

    async def run(self, sink: InboundSink, status: ChannelStatus) -> None:
        """Long-poll (or serve the webhook) until cancelled."""
        if self.settings.webhook is not None:
            await self._serve_webhook(self.settings.webhook, sink, status)
            return
        position = await offload.call(self._position, self._position.position)
        offset = position.get("offset")
        webhook_set = bool(position.get("webhook"))
        backoff = 1.0
        while True:
            try:
                await self._connect()
                if webhook_set:  # getUpdates is refused while a webhook is set
                    await self.bot.delete_webhook()
                    self._handled.mark_webhook(None)
                    webhook_set = False
                    log.info("telegram webhook deleted: back to long polling")
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
                await self._hand_on(update, sink, status)
                offset = update.update_id + 1
            if updates:
                saved = {"offset": offset}
                await offload.call(self._position, self._position.save_position, saved)

    async def _serve_webhook(
        self, webhook: WebhookSettings, sink: InboundSink, status: ChannelStatus
    ) -> None:
        """setWebhook (retried with backoff), then take updates until cancelled."""
        backoff = 1.0
        while True:
            try:
                await self._connect()
                await self.bot.set_webhook(
                    webhook.url, secret_token=webhook.secret_token, allowed_updates=["message"]
                )
                break
            except RetryAfter as exc:
                await anyio.sleep(_wait_seconds(exc))
            except (TelegramError, OSError) as exc:
                kind = "token refused" if isinstance(exc, InvalidToken) else "setWebhook"
                status.error(f"{kind}: {exc}")
                log.warning("telegram %s error: %s (retrying in %gs)", kind, exc, backoff)
                await anyio.sleep(backoff)
                backoff = min(backoff * 2, MAX_BACKOFF_SECONDS)
        self._handled.mark_webhook(webhook.url)
        status.connected = True
        status.account = f"@{self.bot.username}"
        log.info("telegram connected as @%s (webhook %s)", self.bot.username, webhook.path)
        self._inbound = (sink, status)
        try:
            await anyio.sleep_forever()
        finally:
            self._inbound = None

    async def receive_webhook(
        self, headers: Mapping[str, str], body: Callable[[], Awaitable[bytes]]
    ) -> int:
        """One update Telegram posted: secret checked first, redeliveries answered once."""
        webhook, inbound = self.settings.webhook, self._inbound
        if webhook is None or inbound is None:
            return 503  # not serving yet: Telegram posts it again later
        sink, status = inbound
        if not secret_matches(headers, webhook):
            status.count("refuse", "wrong webhook secret token")
            return 401
        try:
            data = json.loads(await body())
            if not isinstance(data, dict) or type(data.get("update_id")) is not int:
                raise TypeError("an update is a JSON object with an integer update_id")
            update = Update.de_json(data, self.bot)
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            status.count("ignore", "malformed webhook update")
            log.warning("telegram: malformed webhook update: %s", exc)
            return 400
        async with self._webhook_lock:  # one at a time: the handled ids stay in order
            if self._handled.seen(update.update_id):
                return 200
            await self._hand_on(update, sink, status)
            self._handled.add(update.update_id)
        return 200

    async def _hand_on(self, update: Update, sink: InboundSink, status: ChannelStatus) -> None:
        msg = to_inbound(
            update, channel=self.channel_id, bot_id=self.bot.id, bot_username=self.bot.username
        )
        if msg is None:
            return
        try:
            await sink(msg)
        except Exception as exc:  # one bad message must not stop the channel
            status.error(f"handling message {msg.key}: {exc}")
            log.exception("telegram: handling message %s failed", msg.key)

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
        """sendMessage, then per attachment sendVoice (`voice`), sendAudio (`audio`) or
        sendDocument."""
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
            send = {"voice": self.bot.send_voice, "audio": self.bot.send_audio}.get(
                attachment.kind, self.bot.send_document
            )
            sent = await self._retrying(
                lambda send=send, data=data, name=name: send(  # type: ignore[misc]
                    chat, data, filename=name, message_thread_id=thread
                )
            )
            ids.append(str(sent.message_id))
        return ids

    async def edit_text(self, chat_id: str, message_id: str, text: str) -> None:
        """editMessageText (no retries: a refused edit ends editing for that reply)."""
        try:
            await self.bot.edit_message_text(text, chat_id=int(chat_id), message_id=int(message_id))
        except BadRequest as exc:
            if "not modified" not in str(exc).lower():  # the same text again is no failure
                raise

    async def typing(self, chat_id: str, thread_id: str | None) -> None:
        """sendChatAction typing."""
        await self.bot.send_chat_action(
            int(chat_id), "typing", message_thread_id=int(thread_id) if thread_id else None
        )

    async def download(self, ref: str, target: Path, *, max_bytes: int) -> Path:
        """getFile (its declared size checked first), then the file, streamed under the cap."""
        await self._connect()
        file = await self.bot.get_file(ref)
        check_declared(file.file_size, max_bytes)
        suffix = Path(file.file_path or "").suffix
        if suffix and not target.suffix:
            target = target.with_suffix(suffix)
        url = file.file_path or ""
        if not url.startswith(("http://", "https://")):  # a local Bot API server's path
            await file.download_to_drive(custom_path=target)
            return target
        timeout = httpx.Timeout(DOWNLOAD_IDLE_SECONDS, connect=10.0)
        with anyio.fail_after(DOWNLOAD_SECONDS):
            async with (
                httpx.AsyncClient(verify=self._verify, timeout=timeout) as client,
                client.stream("GET", url) as response,
            ):
                response.raise_for_status()
                length = response.headers.get("content-length")
                check_declared(int(length) if length and length.isdigit() else None, max_bytes)
                await write_capped(response.aiter_bytes(), target, max_bytes)
        return target

    async def aclose(self) -> None:
        """Close the HTTP clients."""
        if self._ready:
            self._ready = False
            await self.bot.shutdown()
