"""The WhatsApp adapter: signed webhooks in (`webhook.py`), the Graph API out through pywa's
async client (text, images, voice notes, audio and documents; read receipts and the typing
indicator), with retries on the platform's failures (`graph.py`) and the 24-hour
customer-service window checked before every send (`window.py`).

The Cloud API cannot edit a business's messages, so a reply goes out when its turn ends
(`streaming: "edit"` has no effect). The Graph API base is `apiBaseUrl` (the scripted server in
`nodmix.testing.whatsapp_server` in tests).
"""

from __future__ import annotations

import logging
import mimetypes
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path

import anyio
from pywa_async.client import WhatsApp

from nodmix.channels.attachments import check_declared, write_capped
from nodmix.channels.base import InboundSink
from nodmix.channels.delivery import open_delivery_log
from nodmix.channels.status import ChannelStatus
from nodmix.channels.types import Attachment, OutboundMessage
from nodmix.channels.whatsapp import graph
from nodmix.channels.whatsapp.mapping import TEXT_LIMIT, WINDOW_CLOSED_CODE
from nodmix.channels.whatsapp.settings import WhatsAppSettings
from nodmix.channels.whatsapp.webhook import Receiving, WebhookHandler, verify
from nodmix.channels.whatsapp.window import (
    FileWhatsAppStore,
    OutsideWindow,
    WhatsAppStore,
    window_open,
)

log = logging.getLogger("nodmix.channels.whatsapp")

MAX_BACKOFF_SECONDS = 30.0
DOWNLOAD_SECONDS = 300.0
TYPING_EVERY_SECONDS = 20.0
"""WhatsApp shows the indicator for up to 25 s (or until the reply)."""
CHATS_KEPT = 1000


class WhatsAppAdapter:
    """A WhatsApp Business number, as a `ChannelAdapter` (also a `WebhookReceiver`)."""

    text_limit = TEXT_LIMIT
    sends_voice = True
    """Outbound `voice` attachments go as voice notes (OGG/Opus audio with `voice: true`)."""

    def __init__(
        self,
        settings: WhatsAppSettings,
        state_dir: Path,
        *,
        store: WhatsAppStore | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.settings = settings
        self.channel_id = settings.channel
        self._clock = clock
        self._http = graph.http_client(settings.timeout_seconds)
        self._call_seconds = min(graph.CALL_SECONDS, settings.timeout_seconds * 1.5)
        self.wa: WhatsApp = graph.new_client(
            settings.phone_number_id,
            settings.access_token,
            self._http,
            api_base_url=settings.api_base_url,
            api_version=settings.api_version,
        )
        self.store = store or FileWhatsAppStore(open_delivery_log(state_dir, settings.channel))
        self._latest: OrderedDict[str, tuple[str, bool, float]] = OrderedDict()
        """chat → (its newest inbound message id, marked read, last typing indicator)."""
        self._webhook = WebhookHandler(
            channel=settings.channel,
            phone_number_id=settings.phone_number_id,
            app_secret=settings.app_secret,
            store=self.store,
            on_inbound=self._arrived,
            clock=clock,
        )
        self._receiving: Receiving | None = None
        self._status: ChannelStatus | None = None
        self._trouble = anyio.Event()

    # ---- connection -----------------------------------------------------------------------

    async def check(self) -> str:
        """The business number and its verified name (also checks the token)."""
        number, name = await self._number()
        return f"{number} ({name})" if name else number

    async def _number(self, *, retry: bool = True) -> tuple[str, str]:
        """The number and its verified name; `retry=False` tries once (`run` has its own
        backoff between checks)."""
        what = "reading the business number"
        read = self.wa.get_business_phone_number
        if retry:
            info = await graph.retrying(read, what, seconds=self._call_seconds)
        else:
            info = await graph.bounded(read, self._call_seconds)
        return str(info.display_phone_number or ""), str(info.verified_name or "")

    async def run(self, sink: InboundSink, status: ChannelStatus) -> None:
        """Verify the number (retried with backoff), then take webhook updates until
        cancelled; when the Graph API keeps failing, check it again until it answers."""
        self._status = status
        try:
            while True:
                number = await self._connect(status)
                self._receiving = Receiving(sink=sink, status=status, own_number=number)
                await self._trouble.wait()
                self._trouble = anyio.Event()
                status.connected = False
        finally:
            self._receiving = None
            self._status = None

    async def _connect(self, status: ChannelStatus) -> str:
        backoff = 1.0
        while True:
            try:
                number, name = await self._number(retry=False)
            except Exception as exc:
                status.connected = False
                kind = "token refused" if _auth_error(exc) else "Graph API"
                status.error(f"{kind}: {graph.describe(exc)}")
                log.warning("whatsapp %s: %s (retrying in %gs)", kind, exc, backoff)
                await anyio.sleep(backoff)
                backoff = min(backoff * 2, MAX_BACKOFF_SECONDS)
                continue
            if not status.connected:
                status.connected = True
                status.account = f"{number} ({name})" if name else number
                path = self.settings.webhook_path
                log.info("whatsapp connected as %s (webhook %s)", number, path)
            return number

    def _unavailable(self, exc: graph.GraphUnavailable) -> None:
        """A call gave up: say so and have `run` check the API until it answers again."""
        if self._status is not None:
            self._status.connected = False
            self._status.error(f"Graph API: {exc}")
        self._trouble.set()
        log.warning("whatsapp: %s", exc)

    # ---- webhook --------------------------------------------------------------------------

    def verify_webhook(self, query: Mapping[str, str]) -> tuple[int, str]:
        """Meta's `hub.challenge` check."""
        return verify(query, self.settings.verify_token)

    async def receive_webhook(
        self, headers: Mapping[str, str], body: Callable[[], Awaitable[bytes]]
    ) -> int:
        """One posted update (signature first, then each message once)."""
        return await self._webhook.receive(self._receiving, headers, body)

    def _arrived(self, chat_id: str, message_id: str) -> None:
        self._latest[chat_id] = (message_id, False, 0.0)
        self._latest.move_to_end(chat_id)
        while len(self._latest) > CHATS_KEPT:
            self._latest.popitem(last=False)

    # ---- outbound -------------------------------------------------------------------------

    async def _call(
        self, make: Callable[[], Awaitable[object]], what: str, chat: str = ""
    ) -> object:
        try:
            return await graph.retrying(make, what, seconds=self._call_seconds)
        except graph.GraphUnavailable as exc:
            self._unavailable(exc)
            raise
        except graph.GraphRefused as exc:
            if exc.code == WINDOW_CLOSED_CODE:
                raise OutsideWindow(chat, None) from exc
            raise

    def _check_window(self, chat_id: str) -> None:
        if _is_group(chat_id):
            return  # groups have no per-user window; WhatsApp's answer decides
        if not window_open(self.store, chat_id, now=self._clock()):
            raise OutsideWindow(chat_id, None)

    async def send(self, message: OutboundMessage) -> list[str]:
        """The text, then each file; refused at once outside the customer-service window.

        Raises:
            OutsideWindow: the chat's user has not written in the last 24 hours.
            graph.GraphUnavailable: the Graph API kept failing.
        """
        chat = message.chat_id
        self._check_window(chat)
        await self._mark_read(chat)
        ids: list[str] = []
        reply = message.reply_to
        if message.text:
            sent = await self._call(
                lambda: self.wa.send_message(chat, message.text, reply_to_message_id=reply),
                "sending a message",
                chat,
            )
            ids.append(str(getattr(sent, "id", "")))
        for attachment in message.attachments:
            if attachment.path is None and attachment.data is None:
                continue

            async def send_file(a: Attachment = attachment) -> object:
                return await self._send_file(chat, a)

            sent = await self._call(send_file, "sending a file", chat)
            ids.append(str(getattr(sent, "id", "")))
        return ids

    async def _send_file(self, chat: str, attachment: Attachment) -> object:
        path = attachment.path
        data = attachment.data
        if data is None:
            assert path is not None
            data = await anyio.Path(path).read_bytes()
        name = attachment.name or (path.name if path is not None else attachment.kind)
        mime = attachment.mime_type or mimetypes.guess_type(name)[0] or "application/octet-stream"
        if attachment.kind == "voice":
            return await self.wa.send_audio(chat, data, is_voice=True, mime_type="audio/ogg")
        if attachment.kind == "audio" or mime.startswith("audio/"):
            return await self.wa.send_audio(chat, data, mime_type=mime)
        if attachment.kind == "photo" and mime in ("image/jpeg", "image/png"):
            return await self.wa.send_image(chat, data, mime_type=mime)
        return await self.wa.send_document(chat, data, filename=name, mime_type=mime)

    async def _mark_read(self, chat: str) -> None:
        """Read receipt for the chat's newest message, once, before the first reply to it."""
        latest = self._latest.get(chat)
        if latest is None or latest[1]:
            return
        self._latest[chat] = (latest[0], True, latest[2])
        try:
            await graph.bounded(lambda: self.wa.mark_message_as_read(latest[0]), self._call_seconds)
        except Exception as exc:  # a missing receipt must not hold up the reply
            log.info("whatsapp: read receipt for %s failed: %s", chat, graph.describe(exc))

    async def typing(self, chat_id: str, thread_id: str | None) -> None:
        """The typing indicator (it also marks the message read), at most every 20 s."""
        latest = self._latest.get(chat_id)
        now = time.monotonic()
        if latest is None or now - latest[2] < TYPING_EVERY_SECONDS:
            return
        self._latest[chat_id] = (latest[0], True, now)
        await graph.bounded(lambda: self.wa.indicate_typing(latest[0]), self._call_seconds)

    async def download(self, ref: str, target: Path, *, max_bytes: int) -> Path:
        """The media URL (its declared size checked first), then the file under the cap."""
        media = await self._call(lambda: self.wa.get_media_url(ref), "reading a media URL")
        size = getattr(media, "file_size", None)
        check_declared(size if isinstance(size, int) else None, max_bytes)
        mime = str(getattr(media, "mime_type", "") or "").split(";")[0].strip()
        suffix = mimetypes.guess_extension(mime) if mime else None
        if suffix and not target.suffix:
            target = target.with_suffix(".ogg" if mime == "audio/ogg" else suffix)
        url = str(getattr(media, "url", ""))
        chunks = self.wa.stream_media(url)
        await graph.bounded(lambda: write_capped(chunks, target, max_bytes), DOWNLOAD_SECONDS)
        return target

    async def aclose(self) -> None:
        """Close the HTTP client."""
        await self._http.aclose()


def _is_group(chat_id: str) -> bool:
    """Group ids are not WhatsApp ids (digits) or business-scoped user ids (`US.123`)."""
    head, _, tail = chat_id.partition(".")
    return not chat_id.isdigit() and not (len(head) == 2 and head.isupper() and tail.isdigit())


def _auth_error(exc: BaseException) -> bool:
    return isinstance(exc, graph.GraphRefused) and exc.auth
