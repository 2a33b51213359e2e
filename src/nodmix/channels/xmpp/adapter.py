"""The XMPP adapter: one slixmpp session per connection, reconnecting with backoff and
rejoining its rooms; replies as `chat` or `groupchat` messages, streamed replies as XEP-0308
corrections where the chat shows them.

Files: links clients share (XEP-0066) are downloaded by the channel layer like any channel's
attachments; files a reply carries are uploaded through the server's XEP-0363 service and sent
as links (`files.py`).

Direct messages sent while the bot was offline are kept by the server and delivered when it
comes back (they carry a delay stamp and are answered as usual); room messages from that time
are not replayed (a room's history is skipped on joining, so nothing is answered twice).
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import slixmpp
from slixmpp.plugins.xep_0363 import FileTooBig, FileUploadError, UploadServiceNotFound

from nodmix.channels.base import InboundSink
from nodmix.channels.links import Origin
from nodmix.channels.status import ChannelStatus
from nodmix.channels.types import OutboundMessage
from nodmix.channels.xmpp.client import CertificateRefused, Event, LoginRefused, XmppClient
from nodmix.channels.xmpp.files import download_link, upload, upload_origins
from nodmix.channels.xmpp.mapping import bare
from nodmix.config.channel_xmpp_mm import XmppConfig
from nodmix.config.loader import resolve_secret
from nodmix.errors import ConfigError

log = logging.getLogger("nodmix.channels.xmpp")
logging.getLogger("slixmpp").setLevel(logging.WARNING)

DEFAULT_TEXT_LIMIT = 10000
"""Characters per message: far below the stanza sizes servers accept (Prosody: 256 KB)."""
CONNECT_TIMEOUT_SECONDS = 30.0
SEND_TIMEOUT_SECONDS = 30.0
MAX_BACKOFF_SECONDS = 60.0
STABLE_SECONDS = 30.0
"""A session up this long resets the backoff (one that keeps dropping sooner backs off)."""
QUEUE_LIMIT = 1000


class CorrectionsUnsupported(RuntimeError):
    """The chat's client does not show XEP-0308 corrections."""


@dataclass(frozen=True, slots=True)
class XmppSettings:
    """Resolved `channels.xmpp`."""

    jid: str
    password: str
    server: str | None = None
    port: int | None = None
    tls: str = "starttls"
    rooms: tuple[str, ...] = ()
    nick: str = "nodmix"
    ca_file: Path | None = None
    text_limit: int = DEFAULT_TEXT_LIMIT
    channel: str = "xmpp"


def xmpp_settings(section: XmppConfig, env: Mapping[str, str]) -> XmppSettings:
    """Resolve the password (`${VAR}`, or `XMPP_PASSWORD`) and the defaults.

    Raises:
        ConfigError: the JID is not `local@domain`, or the password is missing.
    """
    jid = section.jid.strip()
    local, at, domain = jid.partition("@")
    if not (local and at and domain) or "/" in domain:
        raise ConfigError(
            f"{jid!r} is not a bare JID like nodmix@example.org", key="channels.xmpp.jid"
        )
    password = resolve_secret(section.password, key="channels.xmpp.password", env=env)
    password = password or env.get("XMPP_PASSWORD")
    if not password:
        raise ConfigError(
            "no password: set channels.xmpp.password or XMPP_PASSWORD",
            key="channels.xmpp.password",
        )
    ca_file = None
    if section.ca_file:
        ca_file = Path(section.ca_file).expanduser()
        try:
            ssl.create_default_context(cafile=str(ca_file))
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(
                f"cannot read {ca_file} as PEM certificates: {exc}", key="channels.xmpp.caFile"
            ) from None
    port = section.port
    if port is None and section.server:
        port = 5223 if section.tls == "direct" else 5222
    return XmppSettings(
        jid=jid,
        password=password,
        server=section.server,
        port=port,
        tls=section.tls,
        rooms=tuple(bare(r) for r in section.rooms),
        nick=section.nick or local,
        ca_file=ca_file,
        text_limit=section.text_limit or DEFAULT_TEXT_LIMIT,
    )


class XmppAdapter:
    """One XMPP account, as a `ChannelAdapter` (and a `MessageEditor`)."""

    def __init__(self, settings: XmppSettings, state_dir: Path, tls: Any = None) -> None:
        self.settings = settings
        self.channel_id = settings.channel
        self.text_limit = settings.text_limit
        self._tls = tls
        self._own_context: ssl.SSLContext | None = None
        self._client: XmppClient | None = None
        self._online = asyncio.Event()
        self._running = False
        self._uploads: tuple[XmppClient, frozenset[Origin]] | None = None
        """The session the upload service's origins were learned on, and those origins."""

    async def _connect(self, events: asyncio.Queue[Event], *, join: bool = True) -> XmppClient:
        s = self.settings
        context = self._context()
        client = XmppClient(
            s.jid,
            s.password,
            events,
            channel=s.channel,
            nick=s.nick,
            rooms=s.rooms if join else (),
            tls=s.tls,
            ssl_context=context,
        )
        try:
            if s.server and s.port:
                client.connect(s.server, s.port)
            else:
                client.connect()
            with anyio.fail_after(CONNECT_TIMEOUT_SECONDS):
                await client.ready
        except BaseException:
            _close(client)
            raise
        return client

    def _context(self) -> ssl.SSLContext | None:
        """The gateway's shared verifying context, or one that also trusts `caFile` (built
        once per adapter)."""
        s = self.settings
        if s.tls == "off":  # never used; saves slixmpp loading the CA bundle per client
            return ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        if s.ca_file is not None:
            if self._own_context is None:
                self._own_context = ssl.create_default_context()
                self._own_context.load_verify_locations(cafile=str(s.ca_file))
            return self._own_context
        return self._tls.context() if self._tls is not None else None

    async def check(self) -> str:
        """Log in (joining no room) and leave."""
        client = await self._connect(asyncio.Queue(QUEUE_LIMIT), join=False)
        try:
            return f"{client.boundjid.bare}{self._where()}"
        finally:
            await _disconnect(client)

    def _where(self) -> str:
        s = self.settings
        return f" on {s.server}:{s.port}" if s.server else ""

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
                client = await self._connect(events)
            except (OSError, TimeoutError, slixmpp.xmlstream.xmlstream.NotConnectedError) as exc:
                status.connected = False
                kind = (
                    "login refused"
                    if isinstance(exc, LoginRefused)
                    else "certificate refused"
                    if isinstance(exc, CertificateRefused)
                    else "connection"
                )
                status.error(f"{kind}: {exc or type(exc).__name__}")
                log.warning("xmpp %s: %s (retrying in %gs)", kind, exc, backoff)
                await anyio.sleep(backoff)
                backoff = min(backoff * 2, MAX_BACKOFF_SECONDS)
                continue
            up = time.monotonic()
            self._client = client
            self._online.set()
            status.connected = True
            status.account = str(client.boundjid.bare)
            missing = set(self.settings.rooms) - client.joined
            if missing:
                status.error(f"could not join {', '.join(sorted(missing))}")
            log.info("xmpp connected as %s (%d room(s))", client.boundjid, len(client.joined))
            try:
                await self._pump(events, sink, status)
            finally:
                self._online.clear()
                status.connected = False
                self._client = None
                with anyio.CancelScope(shield=True):
                    await _disconnect(client)
            status.error("disconnected")
            if time.monotonic() - up >= STABLE_SECONDS:
                backoff = 1.0  # it was up a while: a fresh drop, not a flapping server
            log.warning("xmpp: disconnected, reconnecting in %gs", backoff)
            await anyio.sleep(backoff)
            backoff = min(backoff * 2, MAX_BACKOFF_SECONDS)

    async def _pump(
        self, events: asyncio.Queue[Event], sink: InboundSink, status: ChannelStatus
    ) -> None:
        while True:
            kind, msg = await events.get()
            if kind == "lost" or msg is None:
                return
            try:
                await sink(msg)
            except Exception as exc:  # one bad message must not stop the channel
                status.error(f"handling message {msg.key}: {exc}")
                log.exception("xmpp: handling message %s failed", msg.key)

    async def _session(self) -> XmppClient:
        try:
            with anyio.fail_after(SEND_TIMEOUT_SECONDS):
                await self._online.wait()
        except TimeoutError:
            raise ConnectionError("not connected to the XMPP server") from None
        client = self._client
        if client is None or not client.is_connected():
            raise ConnectionError("not connected to the XMPP server")
        return client

    async def send(self, message: OutboundMessage) -> list[str]:
        """A `chat` message (or `groupchat` to a joined room); outside the gateway, on a
        session of its own.

        Raises:
            ValueError: the chat id is not a bare JID (a resource would be dropped, and what a
                delivery check allowed is then not where the message goes).
        """
        chat = message.chat_id
        if "/" in chat or chat != chat.strip() or "@" not in chat:
            raise ValueError(f"{chat[:100]!r} is not a bare JID like ann@example.org")
        if not self._running:
            own = await self._connect(asyncio.Queue(QUEUE_LIMIT), join=False)
            try:
                return await self._send(own, message)
            finally:
                await _disconnect(own)
        return await self._send(await self._session(), message)

    async def _send(self, client: XmppClient, message: OutboundMessage) -> list[str]:
        """The text, then one message per file: its uploaded link, marked as out-of-band data
        so clients show the file (a note instead when the server has no upload service)."""
        text, links = message.text, []
        for attachment in message.attachments:
            name = attachment.name or (attachment.path.name if attachment.path else "file")
            data = attachment.data
            if data is None and attachment.path is not None:
                data = attachment.path.read_bytes()
            if data is None:
                continue
            try:
                links.append(await upload(client, name, data, attachment.mime_type))
            except (FileUploadError, OSError, TimeoutError) as exc:
                why = _upload_failure(exc)
                log.warning("xmpp: cannot upload %s: %s", name, why)
                text += f"\n(file {name} not sent: {why})"
        ids = [self._stanza(client, message.chat_id, text)] if text.strip() else []
        return ids + [self._stanza(client, message.chat_id, link, link=link) for link in links]

    def _stanza(self, client: XmppClient, chat_id: str, text: str, link: str | None = None) -> str:
        to = bare(chat_id)
        room = to in client.joined
        stanza: Any = client.make_message(mto=to, mbody=text, mtype="groupchat" if room else "chat")
        stanza_id = client.new_id()
        stanza["id"] = stanza_id
        if link is not None:
            stanza["oob"]["url"] = link
        if not room:
            stanza["chat_state"] = "active"
        stanza.send()
        return str(stanza_id)

    async def edit_text(self, chat_id: str, message_id: str, text: str) -> None:
        """An XEP-0308 correction of `message_id`, when the chat's client shows them.

        Raises:
            CorrectionsUnsupported: the other side would show the correction as a new message.
        """
        client = await self._session()
        to = bare(chat_id)
        if not await client.corrects(to):
            raise CorrectionsUnsupported(f"{to} does not show message corrections")
        room = to in client.joined
        correction: Any = client.plugin["xep_0308"].build_correction(
            message_id, slixmpp.JID(to), mtype="groupchat" if room else "chat", mbody=text
        )
        correction.send()

    async def typing(self, chat_id: str, thread_id: str | None) -> None:
        """XEP-0085 `composing` in a direct chat (rooms get none: every member would see it)."""
        client = self._client
        to = bare(chat_id)
        if client is None or to in client.joined or not client.is_connected():
            return
        stanza: Any = client.make_message(mto=to, mtype="chat")
        stanza["chat_state"] = "composing"
        stanza.send()

    async def download(self, ref: str, target: Path, *, max_bytes: int) -> Path:
        """Fetch a shared link under the cap (a private address only when it is the own
        server's upload service; see `files.py`)."""
        return await download_link(ref, target, max_bytes=max_bytes, own=await self._own())

    async def _own(self) -> frozenset[Origin]:
        """The own upload service's origins, asked for once per session."""
        client = self._client
        if client is None:
            return frozenset()
        if self._uploads is None or self._uploads[0] is not client:
            self._uploads = (client, await upload_origins(client))
        return self._uploads[1]

    async def aclose(self) -> None:
        """Leave the server."""
        client, self._client = self._client, None
        if client is not None:
            await _disconnect(client)


def _upload_failure(exc: BaseException) -> str:
    if isinstance(exc, UploadServiceNotFound):
        return "the XMPP server offers no HTTP File Upload (XEP-0363)"
    if isinstance(exc, FileTooBig):
        return "larger than the server's upload limit"
    if isinstance(exc, TimeoutError):
        return "the upload timed out"
    return f"the upload failed: {exc}"


def _close(client: XmppClient) -> None:
    client.cancel_connection_attempt()
    if client.transport is not None:
        client.abort()
    _stop_filters(client)


def _stop_filters(client: XmppClient) -> None:
    """slixmpp's outgoing-stanza task outlives the stream; end it with the client."""
    filters: Any = getattr(client, "_run_out_filters", None)
    if filters is not None and not filters.done():
        filters.cancel()


async def _disconnect(client: XmppClient) -> None:
    """End the stream politely, or drop it after a short wait."""
    client.cancel_connection_attempt()
    if client.transport is None:
        _stop_filters(client)
        return
    try:
        with anyio.move_on_after(3):
            await client.disconnect(wait=2.0)
    finally:
        if client.transport is not None:
            client.abort()
        _stop_filters(client)
