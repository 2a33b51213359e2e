"""The Google Chat adapter: the app's HTTP endpoint on the gateway's port, replies through
the Chat REST API with the app's service account.

Chat posts each event to `path` with a Google-signed JWT; `auth.py` checks it from the headers
before the body is read. Messages go through the channel layer (access control, pairing, the
delivery log, which answers an event Chat posts again only once). The endpoint answers `{}`
at once and the reply follows through the API (`spaces.messages.create`, in the thread it came
from; `spaces.messages.patch` for streamed replies). A 5xx, a 429 or a network error is
retried with backoff; a call that keeps failing marks the channel disconnected until one goes
through.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx2
from google.auth import exceptions as google_errors

from nodmix.channels.base import InboundSink
from nodmix.channels.conversations import ChatAddresses
from nodmix.channels.delivery import open_delivery_log
from nodmix.channels.googlechat.api import (
    DEFAULT_API,
    ChatApi,
    TokenRefused,
    load_credentials,
    read_key_file,
)
from nodmix.channels.googlechat.auth import ChatRequestAuth
from nodmix.channels.googlechat.auth import TokenRefused as RequestRefused
from nodmix.channels.googlechat.mapping import (
    TEXT_LIMIT,
    is_direct,
    read_event,
    to_chat_text,
    to_inbound,
)
from nodmix.channels.retry import status_delay, with_retries
from nodmix.channels.status import ChannelStatus
from nodmix.channels.types import OutboundMessage
from nodmix.channels.webhook_bot import WebhookBot
from nodmix.config.channel_schema import GoogleChatConfig
from nodmix.config.channel_teams_chat import endpoint_path
from nodmix.config.loader import resolve_secret
from nodmix.errors import ConfigError

log = logging.getLogger("nodmix.channels.googlechat")

_SPACE_NAME = re.compile(r"spaces/[A-Za-z0-9_-]{1,200}")


@dataclass(frozen=True, slots=True)
class GoogleChatSettings:
    """Resolved `channels.googlechat`."""

    key: dict[str, Any]
    audience: str
    path: str
    certs_url: str | None
    api_base_url: str
    channel: str = "googlechat"


def googlechat_settings(section: GoogleChatConfig, env: Mapping[str, str]) -> GoogleChatSettings:
    """Read the service-account key (`serviceAccountFile`, `credentials`, or the file named by
    `GOOGLE_APPLICATION_CREDENTIALS`).

    Raises:
        ConfigError: no key, or one that cannot be read.
    """
    inline = resolve_secret(section.credentials, key="channels.googlechat.credentials", env=env)
    path = section.service_account_file or (
        None if inline else env.get("GOOGLE_APPLICATION_CREDENTIALS")
    )
    key_name = "credentials" if inline and not path else "serviceAccountFile"
    if not path and not inline:
        raise ConfigError(
            "no service account key: set channels.googlechat.serviceAccountFile or credentials",
            key="channels.googlechat.serviceAccountFile",
        )
    try:
        key = read_key_file(path, inline)
        load_credentials(key)
    except (OSError, ValueError) as exc:
        raise ConfigError(
            f"cannot use the service account key: {exc}", key=f"channels.googlechat.{key_name}"
        ) from None
    return GoogleChatSettings(
        key=key,
        audience=section.audience.strip(),
        path=endpoint_path("googlechat", section),
        certs_url=section.certs_url,
        api_base_url=section.api_base_url or DEFAULT_API,
    )


BOT = WebhookBot(
    platform="Google Chat",
    request_refused=RequestRefused,
    token_errors=(TokenRefused, google_errors.GoogleAuthError),
    token_refused=lambda exc: isinstance(exc, TokenRefused),
    log=log,
)


def _transient(exc: Exception) -> float | None:
    if isinstance(exc, httpx2.HTTPStatusError):
        return status_delay(exc.response.status_code, exc.response.headers.get("retry-after", ""))
    if isinstance(exc, httpx2.TransportError | google_errors.TransportError | TimeoutError):
        return 0.0
    return None


class GoogleChatAdapter:
    """A Google Chat app, as a `ChannelAdapter` and `WebhookReceiver`."""

    text_limit = TEXT_LIMIT

    def __init__(self, settings: GoogleChatSettings, state_dir: Path) -> None:
        self.settings = settings
        self.channel_id = settings.channel
        self.auth = ChatRequestAuth(settings.audience, settings.certs_url)
        self.api = ChatApi(load_credentials(settings.key), settings.api_base_url)
        self._spaces = ChatAddresses(open_delivery_log(state_dir, settings.channel))
        self._inbound: tuple[InboundSink, ChannelStatus] | None = None
        self._status: ChannelStatus | None = None

    async def check(self) -> str:
        """Get an access token for the service account, and the signing certificates."""
        await self.api.token()
        await self.auth.keys.key("")
        return self.api.account

    async def run(self, sink: InboundSink, status: ChannelStatus) -> None:
        """Take events from the endpoint until cancelled (a token is fetched first, with
        backoff while the token endpoint is down, so a bad key shows at start)."""
        self._status = status
        status.account = self.api.account
        await BOT.first_token(self.api.token, status)
        log.info("googlechat ready: %s at %s", self.api.account, self.settings.path)
        self._inbound = (sink, status)
        try:
            await anyio.sleep_forever()
        finally:
            self._inbound = None

    async def receive_webhook(
        self, headers: Mapping[str, str], body: Callable[[], Awaitable[bytes]]
    ) -> int:
        """One event: the token checked from the headers, then the body read."""
        inbound = self._inbound
        if inbound is None:
            return 503
        sink, status = inbound
        claims = await BOT.admit(self.auth.check, headers, status)
        if isinstance(claims, int):
            return claims
        try:
            event = read_event(json.loads(await body()))
        except ValueError:
            event = None
        if event is None:
            status.count("ignore", "malformed event")
            return 400
        msg = to_inbound(event, channel=self.channel_id)
        if msg is None:
            return 200
        if is_direct(event.space):
            self._spaces.remember(msg.chat_id, {"space": str(event.space.get("name"))})
        await BOT.hand_on(msg, sink, status)
        return 200

    # ---- outbound -------------------------------------------------------------------------

    def _space(self, chat_id: str) -> str:
        """The space a chat id names (a DM: the one remembered for the person).

        Raises:
            ValueError: a `spaces/...` id that is not a bare space name (it becomes part of
                the request's URL: `spaces/X/messages#@example.org` passes an allowFrom
                pattern and would post to space X).
            LookupError: no DM space is known for the person yet.
        """
        if chat_id.startswith("spaces/"):
            if not _SPACE_NAME.fullmatch(chat_id):
                raise ValueError(f"{chat_id[:80]!r} is not a Chat space like spaces/AAAA1234")
            return chat_id
        found = self._spaces.get(chat_id)
        if found is None:
            raise LookupError(f"no direct message with {chat_id} yet: they must message the app")
        return str(found["space"])

    async def _call(self, call: Callable[[], Awaitable[Any]]) -> Any:
        return await with_retries(call, transient=_transient, status=self._status, what="Chat API")

    async def send(self, message: OutboundMessage) -> list[str]:
        """`spaces.messages.create` (in the thread); files are named in the text, since an
        app cannot upload attachments with its own credentials."""
        space = self._space(message.chat_id)
        text = message.text
        for attachment in message.attachments:
            name = attachment.name or (attachment.path.name if attachment.path else "file")
            text += f"\n\n(The file {name} cannot be sent in Google Chat.)"
        if not text.strip():
            return []
        chat_text = to_chat_text(text.strip())
        name = await self._call(
            lambda: self.api.create_message(space, chat_text, message.thread_id)
        )
        return [name] if name else []

    async def edit_text(self, chat_id: str, message_id: str, text: str) -> None:
        """`spaces.messages.patch` (streamed replies; no retries: editing then stops)."""
        await self.api.update_message(message_id, to_chat_text(text))

    async def typing(self, chat_id: str, thread_id: str | None) -> None:
        """Google Chat shows no typing indicator for apps; nothing to do."""

    async def download(self, ref: str, target: Path, *, max_bytes: int) -> Path:
        """`media.download` of the attachment's resource, under the cap."""
        return await self.api.download(ref, target, max_bytes)

    async def aclose(self) -> None:
        """Close the HTTP client."""
        await self.api.aclose()
