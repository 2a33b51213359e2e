"""The Slack adapter: a Bolt app receiving `message` and `app_mention` events over Socket Mode
(or, with `mode: http`, the Events API on a local port), replying with the Web API.

The app runs with `process_before_response`, so an event is acknowledged only after the
channel layer accepted it (and wrote it to the delivery log): an event lost in a crash is
sent again by Slack, and one sent twice is recognised and not answered twice. A message that
mentions the app arrives both as `message` and as `app_mention`; the second is dropped.
Replies are converted from Markdown to mrkdwn and go into the thread they came from. The Web
API base is `apiBaseUrl` (the scripted server in `nodmix.testing.slack_server` in tests).
"""

from __future__ import annotations

import logging
import re
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import msgspec
from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
from slack_bolt.app.async_app import AsyncApp
from slack_bolt.authorization import AuthorizeResult
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from nodmix.channels.attachments import fetch_capped
from nodmix.channels.base import InboundSink
from nodmix.channels.slack.backlog import Backlog
from nodmix.channels.slack.mapping import TEXT_LIMIT, command_inbound, to_inbound, to_mrkdwn
from nodmix.channels.status import ChannelStatus
from nodmix.channels.types import InboundMessage, OutboundMessage
from nodmix.config.channel_schema import SlackConfig
from nodmix.config.loader import resolve_secret
from nodmix.errors import ConfigError

log = logging.getLogger("nodmix.channels.slack")
# Bolt and the Socket Mode client log every (re)connection at INFO; the adapter logs its own
# connection once, so only their warnings and errors are kept.
logging.getLogger("nodmix.channels.slack.bolt").setLevel(logging.WARNING)

DEFAULT_API = "https://slack.com/api/"
MAX_BACKOFF_SECONDS = 60.0
REQUEST_TIMEOUT_SECONDS = 30
CONNECTION_CHECK_SECONDS = 2.0
SEEN_KEPT = 500
NAMES_KEPT = 1000


@dataclass(frozen=True, slots=True)
class SlackSettings:
    """Resolved `channels.slack`."""

    bot_token: str
    app_token: str | None
    mode: str = "socket"
    signing_secret: str | None = None
    http_host: str = "127.0.0.1"
    http_port: int = 3000
    api_base_url: str = DEFAULT_API
    channel: str = "slack"


def slack_settings(section: SlackConfig, env: Mapping[str, str]) -> SlackSettings:
    """Resolve the tokens (`botToken`/`appToken`, `${VAR}`, or `SLACK_BOT_TOKEN`/
    `SLACK_APP_TOKEN`) and the mode.

    Raises:
        ConfigError: a token the mode needs is missing.
    """
    bot = resolve_secret(section.bot_token, key="channels.slack.botToken", env=env)
    bot = bot or env.get("SLACK_BOT_TOKEN")
    if not bot:
        raise ConfigError(
            "no bot token: set channels.slack.botToken or SLACK_BOT_TOKEN",
            key="channels.slack.botToken",
        )
    app = resolve_secret(section.app_token, key="channels.slack.appToken", env=env)
    app = app or env.get("SLACK_APP_TOKEN")
    mode = section.mode or "socket"
    secret = resolve_secret(section.signing_secret, key="channels.slack.signingSecret", env=env)
    secret = secret or env.get("SLACK_SIGNING_SECRET")
    if mode == "socket" and not app:
        raise ConfigError(
            "Socket Mode needs an app-level token: set channels.slack.appToken or "
            "SLACK_APP_TOKEN (or mode: http)",
            key="channels.slack.appToken",
        )
    if mode == "http" and not secret:
        raise ConfigError(
            "mode http needs the signing secret: set channels.slack.signingSecret or "
            "SLACK_SIGNING_SECRET",
            key="channels.slack.signingSecret",
        )
    base = section.api_base_url or DEFAULT_API
    return SlackSettings(
        bot_token=bot,
        app_token=app,
        mode=mode,
        signing_secret=secret,
        http_host=section.http_host or "127.0.0.1",
        http_port=section.http_port if section.http_port is not None else 3000,
        api_base_url=base if base.endswith("/") else base + "/",
    )


class SlackAdapter:
    """A Slack app, as a `ChannelAdapter`."""

    text_limit = TEXT_LIMIT

    def __init__(self, settings: SlackSettings, state_dir: Path) -> None:
        self.settings = settings
        self.channel_id = settings.channel
        self.web = AsyncWebClient(
            token=settings.bot_token,
            base_url=settings.api_base_url,
            timeout=REQUEST_TIMEOUT_SECONDS,
        )
        self._bot_user = ""
        self._auth: AuthorizeResult | None = None
        self._inbound = anyio.Lock()
        """Events are handled concurrently by slack_sdk; this keeps them in arrival order."""
        self._sink: InboundSink | None = None
        self._status: ChannelStatus | None = None
        self._seen: deque[str] = deque(maxlen=SEEN_KEPT)
        self._names: dict[str, str] = {}
        self._dm_channels: dict[str, str] = {}
        self._backlog = Backlog(state_dir, settings.channel)

    # ---- connection -----------------------------------------------------------------------

    async def check(self) -> str:
        """`auth.test` with the bot token."""
        me = await self.web.auth_test()
        return f"@{me['user']} ({me['team']})"

    def _app(self) -> AsyncApp:
        # Bolt passes arguments by the names a function declares, so plain functions here.
        async def authorize() -> AuthorizeResult:
            """Bolt's authorization from the `auth.test` made at connect: no request per
            event (concurrent first requests would also reorder the first events)."""
            if self._auth is None:
                raise ConnectionError("slack is not connected")
            return self._auth

        async def on_event(event: dict[str, Any]) -> None:
            async with self._inbound:  # taken before any await: arrival order is kept
                await self._handle(event)

        bolt_client = AsyncWebClient(
            base_url=self.settings.api_base_url, timeout=REQUEST_TIMEOUT_SECONDS
        )
        app = AsyncApp(
            client=bolt_client,
            authorize=authorize,
            signing_secret=self.settings.signing_secret,
            process_before_response=True,
            request_verification_enabled=self.settings.mode == "http",
            logger=logging.getLogger("nodmix.channels.slack.bolt"),
        )

        async def on_command(ack: Any, command: dict[str, Any]) -> None:
            await ack()  # Slack wants an answer within 3 s; the reply follows as a message
            msg = command_inbound(command, channel=self.channel_id)
            if msg is not None:
                async with self._inbound:
                    await self._deliver(msg)

        app.event("message")(on_event)
        app.event("app_mention")(on_event)
        app.command(re.compile(r"^/"))(on_command)
        return app

    async def run(self, sink: InboundSink, status: ChannelStatus) -> None:
        """Connect and receive until cancelled."""
        self._sink, self._status = sink, status
        app = self._app()
        backoff = 1.0
        while True:
            try:
                me = await self.web.auth_test()
                self._bot_user = str(me["user_id"])
                self._auth = AuthorizeResult.from_auth_test_response(
                    bot_token=self.settings.bot_token, auth_test_response=me
                )
                status.account = f"@{me['user']} ({me['team']})"
                if self.settings.mode == "http":
                    # Bolt's Starlette handler and uvicorn: only an Events API app loads them.
                    from nodmix.channels.slack.http_events import serve_events

                    status.connected = True
                    async with anyio.create_task_group() as group:
                        group.start_soon(self._catch_up)
                        await serve_events(app, self.settings.http_host, self.settings.http_port)
                else:
                    await self._socket_mode(app, status)
            except Exception as exc:  # the library's errors, network errors
                status.connected = False
                refused = isinstance(exc, SlackApiError) and exc.response.get("error") in (
                    "invalid_auth",
                    "not_authed",
                    "account_inactive",
                    "token_revoked",
                )
                kind = "token refused" if refused else "connection"
                status.error(f"{kind}: {exc}")
                log.warning("slack %s error: %s (retrying in %gs)", kind, exc, backoff)
            await anyio.sleep(backoff)
            backoff = min(backoff * 2, MAX_BACKOFF_SECONDS)

    async def _socket_mode(self, app: AsyncApp, status: ChannelStatus) -> None:
        handler = AsyncSocketModeHandler(app, self.settings.app_token)
        try:
            await handler.connect_async()  # type: ignore[no-untyped-call]
            log.info("slack connected (Socket Mode) as %s", status.account)
            await self._catch_up()
            while True:  # slack_sdk reconnects by itself; mirror its state
                status.connected = await handler.client.is_connected()
                await anyio.sleep(CONNECTION_CHECK_SECONDS)
        finally:
            status.connected = False
            with anyio.CancelScope(shield=True):
                await handler.close_async()  # type: ignore[no-untyped-call]

    # ---- inbound --------------------------------------------------------------------------

    async def _handle(self, event: dict[str, Any]) -> None:
        sink, status = self._sink, self._status
        if sink is None or status is None:
            return
        seen = f"{event.get('channel')}:{event.get('ts')}"
        if seen in self._seen:
            return  # the app_mention twin of a message (or the other way round)
        msg = to_inbound(event, channel=self.channel_id, bot_user=self._bot_user)
        if msg is None:
            return
        self._seen.append(seen)
        if msg.chat_type == "dm":
            if len(self._dm_channels) >= NAMES_KEPT:  # bounded: looked up again when needed
                self._dm_channels.clear()
            self._dm_channels[msg.chat_id] = str(event.get("channel"))
        await self._deliver(msg)
        thread = event.get("thread_ts") if event.get("thread_ts") != event.get("ts") else None
        self._backlog.mark(str(event.get("channel")), thread, str(event["ts"]))

    async def _catch_up(self) -> None:
        count = 0
        async for event in self._backlog.missed(self.web):
            count += 1
            async with self._inbound:
                await self._handle(event)
        if count:
            log.info("slack: read back %d message(s) sent while disconnected", count)

    async def _deliver(self, msg: InboundMessage) -> None:
        sink, status = self._sink, self._status
        if sink is None or status is None:
            return
        msg = msgspec.structs.replace(msg, sender_name=await self._name(msg.sender_id))
        try:
            await sink(msg)
        except Exception as exc:  # one bad message must not stop the channel
            status.error(f"handling message {msg.key}: {exc}")
            log.exception("slack: handling message %s failed", msg.key)

    async def _name(self, user: str) -> str:
        if user not in self._names:
            try:
                info = (await self.web.users_info(user=user))["user"]
                profile = info.get("profile") or {}
                name = profile.get("display_name") or info.get("real_name") or info.get("name")
            except SlackApiError:
                name = user
            if len(self._names) >= NAMES_KEPT:
                self._names.clear()
            self._names[user] = str(name or user)
        return self._names[user]

    # ---- outbound -------------------------------------------------------------------------

    async def _channel(self, chat_id: str) -> str:
        """A channel id for `chat_id` (a user id becomes the app's DM with them)."""
        if not chat_id.startswith(("U", "W")):
            return chat_id
        if chat_id not in self._dm_channels:
            opened = await self.web.conversations_open(users=chat_id)
            self._dm_channels[chat_id] = str(opened["channel"]["id"])
        return self._dm_channels[chat_id]

    async def send(self, message: OutboundMessage) -> list[str]:
        """`chat.postMessage` (mrkdwn, in the thread), then one upload per file."""
        ids: list[str] = []
        if message.text:
            sent = await self.web.chat_postMessage(
                channel=message.chat_id,
                text=to_mrkdwn(message.text),
                thread_ts=message.thread_id,
                mrkdwn=True,
            )
            ids.append(str(sent["ts"]))
        files = [a for a in message.attachments if a.path is not None]
        if files:
            channel = await self._channel(message.chat_id)
            for attachment in files:
                assert attachment.path is not None
                await self.web.files_upload_v2(
                    channel=channel,
                    file=str(attachment.path),
                    filename=attachment.name or attachment.path.name,
                    thread_ts=message.thread_id,
                )
        return ids

    async def edit_text(self, chat_id: str, message_id: str, text: str) -> None:
        """`chat.update` (streamed replies; it takes the DM's channel id, not the user's)."""
        channel = await self._channel(chat_id)
        await self.web.chat_update(channel=channel, ts=message_id, text=to_mrkdwn(text))

    async def typing(self, chat_id: str, thread_id: str | None) -> None:
        """Slack shows no typing indicator for apps; nothing to do."""

    async def download(self, ref: str, target: Path, *, max_bytes: int) -> Path:
        """Fetch a file's private URL with the bot token, streamed under the cap."""
        suffix = Path(ref.split("?", 1)[0]).suffix
        if suffix and not target.suffix:
            target = target.with_suffix(suffix)
        headers = {"Authorization": f"Bearer {self.settings.bot_token}"}
        return await fetch_capped(ref, target, max_bytes, headers=headers)

    async def aclose(self) -> None:
        """Nothing stays open between calls (the Socket Mode handler closes with `run`)."""
