"""The Microsoft Teams adapter: the Bot Framework's messaging endpoint on the gateway's port,
replies through the Bot Connector REST API with the Microsoft 365 Agents SDK's
`ConnectorClient`.

Teams posts each activity to `path` with a Bot Framework JWT; `auth.py` checks it from the
headers before the body is read. Accepted messages go through the channel layer (access
control, pairing, the delivery log, which also answers an activity Teams posts again only
once). Replies go to the service URL and conversation the adapter recorded for the chat
(`conversations.py`), with the bot's client-credentials token (`token.py`); a 5xx, a 429 or a
network error is retried with backoff, a refused token (401) is renewed once at once, and a
call that keeps failing marks the channel disconnected until one goes through.
"""

from __future__ import annotations

import base64
import json
import logging
import mimetypes
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import anyio
from microsoft_agents.activity import Activity, Attachment, ChannelAccount, ConversationAccount
from microsoft_agents.hosting.core.connector.client import ConnectorClient
from pydantic import ValidationError

from nodmix.channels.attachments import fetch_capped
from nodmix.channels.base import InboundSink
from nodmix.channels.conversations import ChatAddresses
from nodmix.channels.delivery import open_delivery_log
from nodmix.channels.links import Origin, fetch_link, origin_of
from nodmix.channels.msteams.auth import DEFAULT_METADATA_URL, BotFrameworkAuth, TokenRefused
from nodmix.channels.msteams.mapping import (
    TEXT_LIMIT,
    conversation_for,
    tenant_of,
    to_inbound,
    where,
)
from nodmix.channels.msteams.token import BotToken, TokenError, token_url
from nodmix.channels.retry import status_delay, with_retries
from nodmix.channels.status import ChannelStatus
from nodmix.channels.types import OutboundMessage
from nodmix.channels.webhook_bot import WebhookBot, with_token
from nodmix.config.channel_schema import MsTeamsConfig
from nodmix.config.channel_teams_chat import endpoint_path
from nodmix.config.loader import resolve_secret
from nodmix.errors import ConfigError

log = logging.getLogger("nodmix.channels.msteams")
# The SDK logs every refused call at ERROR; the adapter reports what matters itself.
logging.getLogger("microsoft_agents.hosting.core.connector").setLevel(logging.CRITICAL)

REQUEST_TIMEOUT_SECONDS = 30.0
MAX_SESSIONS = 16
"""aiohttp sessions kept, one per service URL (Teams uses a few per region)."""
INLINE_IMAGE_BYTES = 1 << 20
"""Largest image sent inline (a data URL in the activity); Teams bots cannot upload files
without the user accepting a consent card."""


@dataclass(frozen=True, slots=True)
class MsTeamsSettings:
    """Resolved `channels.msteams`."""

    app_id: str
    app_password: str
    tenant_id: str | None
    path: str
    metadata_url: str
    token_url: str
    channel: str = "msteams"


def msteams_settings(section: MsTeamsConfig, env: Mapping[str, str]) -> MsTeamsSettings:
    """Resolve the App ID and password (`${VAR}`, or `MSTEAMS_APP_ID`/`MSTEAMS_APP_PASSWORD`).

    Raises:
        ConfigError: one of them is missing.
    """
    app_id = resolve_secret(section.app_id, key="channels.msteams.appId", env=env)
    app_id = app_id or env.get("MSTEAMS_APP_ID")
    if not app_id:
        raise ConfigError(
            "no App ID: set channels.msteams.appId or MSTEAMS_APP_ID", key="channels.msteams.appId"
        )
    password = resolve_secret(section.app_password, key="channels.msteams.appPassword", env=env)
    password = password or env.get("MSTEAMS_APP_PASSWORD")
    if not password:
        raise ConfigError(
            "no app password: set channels.msteams.appPassword or MSTEAMS_APP_PASSWORD",
            key="channels.msteams.appPassword",
        )
    return MsTeamsSettings(
        app_id=app_id,
        app_password=password,
        tenant_id=section.tenant_id,
        path=endpoint_path("msteams", section),
        metadata_url=section.open_id_metadata_url or DEFAULT_METADATA_URL,
        token_url=token_url(section.tenant_id, section.token_url),
    )


class ConnectorError(Exception):
    """The Bot Connector answered an error status."""

    def __init__(self, status: int, retry_after: str = "") -> None:
        super().__init__(f"the Bot Connector answered HTTP {status}")
        self.status = status
        self.retry_after = retry_after


BOT = WebhookBot(
    platform="Bot Framework",
    request_refused=TokenRefused,
    token_errors=(TokenError,),
    token_refused=lambda exc: isinstance(exc, TokenError) and exc.refused,
    log=log,
)


def _transient(exc: Exception) -> float | None:
    """The wait before retrying `exc`, or None when retrying cannot help."""
    if isinstance(exc, ConnectorError):
        return status_delay(exc.status, exc.retry_after)
    if isinstance(exc, TokenError):
        return None if exc.refused else 0.0
    if isinstance(exc, aiohttp.ClientError | TimeoutError | OSError):
        return 0.0
    return None


def _unauthorized(exc: Exception) -> bool:
    return isinstance(exc, ConnectorError) and exc.status == 401


class MsTeamsAdapter:
    """A Teams bot, as a `ChannelAdapter` and `WebhookReceiver`."""

    text_limit = TEXT_LIMIT

    def __init__(self, settings: MsTeamsSettings, state_dir: Path) -> None:
        self.settings = settings
        self.channel_id = settings.channel
        self.auth = BotFrameworkAuth(settings.app_id, settings.metadata_url)
        self.token = BotToken(settings.token_url, settings.app_id, settings.app_password)
        self._chats = ChatAddresses(open_delivery_log(state_dir, settings.channel))
        self._sessions: dict[str, aiohttp.ClientSession] = {}
        self._closing: list[aiohttp.ClientSession] = []
        self._inbound: tuple[InboundSink, ChannelStatus] | None = None
        self._status: ChannelStatus | None = None

    # ---- connection -----------------------------------------------------------------------

    async def check(self) -> str:
        """Fetch the bot's token (the App ID and password are right) and the signing keys."""
        await self.token.get()
        await self.auth.keys.key("")
        return f"app {self.settings.app_id}"

    async def run(self, sink: InboundSink, status: ChannelStatus) -> None:
        """Take activities from the endpoint until cancelled; the token is fetched first (with
        backoff while the endpoint is down) so wrong credentials show at start."""
        self._status = status
        status.account = f"app {self.settings.app_id}"
        await BOT.first_token(self.token.get, status)
        log.info("msteams ready: app %s at %s", self.settings.app_id, self.settings.path)
        self._inbound = (sink, status)
        try:
            await anyio.sleep_forever()
        finally:
            self._inbound = None

    # ---- inbound --------------------------------------------------------------------------

    async def receive_webhook(
        self, headers: Mapping[str, str], body: Callable[[], Awaitable[bytes]]
    ) -> int:
        """One activity: the token checked from the headers, then the body against it."""
        inbound = self._inbound
        if inbound is None:
            return 503
        sink, status = inbound
        grant = await BOT.admit(self.auth.check, headers, status)
        if isinstance(grant, int):
            return grant
        try:
            activity = Activity.model_validate(json.loads(await body()))
        except (ValueError, ValidationError) as exc:
            status.count("ignore", "malformed activity")
            log.warning("msteams: malformed activity: %s", str(exc)[:200])
            return 400
        if not grant.admits(str(activity.channel_id or ""), str(activity.service_url or "")):
            status.count("refuse", "activity does not match its token")
            return 401
        tenant = self.settings.tenant_id
        if tenant is not None and (tenant_of(activity) or "").lower() != tenant.lower():
            status.count("refuse", "activity from another tenant")
            return 403
        await self._hand_on(activity, sink, status)
        return 200

    async def _hand_on(self, activity: Activity, sink: InboundSink, status: ChannelStatus) -> None:
        place = where(activity)
        msg = to_inbound(activity, channel=self.channel_id)
        if place is None or msg is None:
            return
        self._chats.remember(
            place.chat_id,
            {"conversation": place.conversation_id, "serviceUrl": str(activity.service_url)},
        )
        await BOT.hand_on(msg, sink, status)

    # ---- outbound -------------------------------------------------------------------------

    def _address(self, chat_id: str, thread_id: str | None) -> tuple[str, str]:
        found = self._chats.get(chat_id)
        if found is None:
            raise LookupError(
                f"no Teams conversation with {chat_id} yet: they must message the bot first"
            )
        return str(found["serviceUrl"]), conversation_for(str(found["conversation"]), thread_id)

    def _session(self, service_url: str) -> aiohttp.ClientSession:
        base = service_url if service_url.endswith("/") else service_url + "/"
        session = self._sessions.get(base)
        if session is None or session.closed:
            if len(self._sessions) >= MAX_SESSIONS:
                oldest = next(iter(self._sessions))
                self._closing.append(self._sessions.pop(oldest))  # closed by the next call
            timeout = aiohttp.ClientTimeout(total=REQUEST_TIMEOUT_SECONDS, connect=10.0)
            session = aiohttp.ClientSession(base_url=base, timeout=timeout)
            self._sessions[base] = session
        return session

    async def _once(self, service_url: str, op: Callable[[ConnectorClient], Any]) -> Any:
        """`op` with the bot's token; a token the Bot Connector refuses (revoked, or expired
        early) is renewed and the call made once more."""
        while self._closing:
            await self._closing.pop().close()

        async def attempt(token: str) -> Any:
            client = ConnectorClient(service_url, token, session=self._session(service_url))
            try:
                return await op(client)
            except aiohttp.ClientResponseError as exc:
                after = str(exc.headers.get("Retry-After", "")) if exc.headers else ""
                raise ConnectorError(exc.status, after) from None

        return await with_token(
            attempt, token=self.token.get, forget=self.token.forget, refused=_unauthorized
        )

    async def _call(self, service_url: str, what: str, op: Callable[[ConnectorClient], Any]) -> Any:
        return await with_retries(
            lambda: self._once(service_url, op),
            transient=_transient,
            status=self._status,
            what=what,
        )

    def _activity(self, conversation: str, **fields: Any) -> Activity:
        return Activity(
            conversation=ConversationAccount(id=conversation),
            from_property=ChannelAccount(id=f"28:{self.settings.app_id}"),
            **fields,
        )

    async def send(self, message: OutboundMessage) -> list[str]:
        """The text as one message (Markdown), then images inline; other files are named in a
        line, since a bot cannot upload them without the user's consent."""
        service_url, conversation = self._address(message.chat_id, message.thread_id)
        ids: list[str] = []
        text = message.text
        images: list[Attachment] = []
        for attachment in message.attachments:
            inline = _inline_image(attachment)
            if inline is not None:
                images.append(inline)
            else:
                name = attachment.name or (attachment.path.name if attachment.path else "file")
                text += f"\n\n(The file {name} cannot be sent in Teams.)"
        if text.strip() or images:
            fields: dict[str, Any] = {"attachments": images} if images else {}
            activity = self._activity(
                conversation, type="message", text=text.strip(), text_format="markdown", **fields
            )
            sent = await self._call(
                service_url,
                "Bot Connector",
                lambda c: c.conversations.send_to_conversation(conversation, activity),
            )
            if sent.id:
                ids.append(str(sent.id))
        return ids

    async def edit_text(self, chat_id: str, message_id: str, text: str) -> None:
        """`PUT .../activities/{id}` (streamed replies; no retries: editing then stops)."""
        service_url, conversation = self._address(chat_id, None)
        activity = self._activity(
            conversation, type="message", id=message_id, text=text, text_format="markdown"
        )
        await self._once(
            service_url,
            lambda c: c.conversations.update_activity(conversation, message_id, activity),
        )

    async def typing(self, chat_id: str, thread_id: str | None) -> None:
        """A `typing` activity."""
        service_url, conversation = self._address(chat_id, thread_id)
        activity = self._activity(conversation, type="typing")
        await self._once(
            service_url, lambda c: c.conversations.send_to_conversation(conversation, activity)
        )

    async def download(self, ref: str, target: Path, *, max_bytes: int) -> Path:
        """A file's pre-authorised download URL (public, or on a Bot Connector a chat came
        from), or an inline image from the Bot Connector (with the bot's token, only on the
        host of a service URL Teams used)."""
        kind, _, url = ref.partition(":")
        if kind == "inline":
            if not self._known_service_host(url):
                raise PermissionError("an inline attachment outside the Bot Connector")
            headers = {"Authorization": f"Bearer {await self.token.get()}"}
            return await fetch_capped(url, target, max_bytes, headers=headers)
        if kind != "file":
            raise ValueError(f"not a Teams attachment reference: {ref[:40]}")
        known = self._service_origins()
        return await fetch_link(url, target, max_bytes=max_bytes, known=known)

    def _known_service_host(self, url: str) -> bool:
        host = urlsplit(url).netloc.lower()
        known = {urlsplit(str(a.get("serviceUrl", ""))).netloc.lower() for a in self._chats.all()}
        return bool(host) and host in known

    def _service_origins(self) -> frozenset[Origin]:
        found = {origin_of(str(a.get("serviceUrl", ""))) for a in self._chats.all()}
        return frozenset(o for o in found if o is not None)

    async def aclose(self) -> None:
        """Close the HTTP sessions."""
        sessions, self._sessions = list(self._sessions.values()), {}
        for session in [*sessions, *self._closing]:
            await session.close()
        self._closing.clear()


def _inline_image(attachment: Any) -> Attachment | None:
    """An outbound image as a data-URL attachment, when it is small enough."""
    data = attachment.data
    if data is None and attachment.path is not None:
        data = attachment.path.read_bytes()
    mime = attachment.mime_type or mimetypes.guess_type(attachment.name or "x")[0] or ""
    if not mime and attachment.path is not None:
        mime = mimetypes.guess_type(attachment.path.name)[0] or ""
    if data is None or not mime.startswith("image/") or len(data) > INLINE_IMAGE_BYTES:
        return None
    url = f"data:{mime};base64,{base64.b64encode(data).decode()}"
    return Attachment(content_type=mime, content_url=url, name=attachment.name)
