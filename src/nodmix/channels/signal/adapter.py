"""The Signal adapter: a `signal-cli` daemon's event stream in, its `send` out (`rpc.py`).

The daemon holds the account (registered or linked with signal-cli) and does the Signal
protocol; Nodmix connects to its HTTP endpoint or UNIX socket, reads incoming messages from
the event stream, and reconnects with backoff (1 s doubling to 60 s) when the stream drops,
the daemon restarts or stops answering. Calls made while it is away wait for the connection
(up to the request timeout) and then fail with one line. Replies may be streamed by editing
the message (`editTimestamp`), at most `MAX_EDITS` times, as Signal's clients show no more.
"""

from __future__ import annotations

import base64
import json
import logging
import mimetypes
import time
from collections import OrderedDict
from pathlib import Path
from typing import Any

import anyio
import msgspec

from nodmix import offload
from nodmix.channels.attachments import check_declared, write_capped
from nodmix.channels.base import InboundSink
from nodmix.channels.delivery import open_delivery_log
from nodmix.channels.signal.mapping import TEXT_LIMIT, Me, to_inbound
from nodmix.channels.signal.rpc import (
    DaemonUnavailable,
    HttpTransport,
    RpcError,
    SocketTransport,
    Transport,
)
from nodmix.channels.signal.settings import SignalSettings
from nodmix.channels.status import ChannelStatus
from nodmix.channels.types import Attachment, OutboundMessage

log = logging.getLogger("nodmix.channels.signal")

MAX_BACKOFF_SECONDS = 60.0
STABLE_SECONDS = 30.0
"""A stream up this long resets the backoff (one that keeps dropping sooner backs off)."""
TYPING_EVERY_SECONDS = 10.0
MAX_EDITS = 10
TRACKED = 500
_ATTACHMENT_ID = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")


METHOD_NOT_FOUND = -32601


class SendFailed(Exception):
    """The daemon took the message but Signal delivered it to nobody."""


class NotLinked(Exception):
    """The daemon does not hold the configured account."""

    def __init__(self, account: str, where: str) -> None:
        super().__init__(
            f"signal-cli at {where} has no account {account}: link it to your phone "
            "(`signal-cli link -n Nodmix`, then scan the QR code in Signal → Settings → Linked "
            "devices) or register the number, then restart the daemon"
        )


def make_transport(settings: SignalSettings) -> Transport:
    """The HTTP or socket transport the settings name."""
    limits = {"timeout": settings.timeout_seconds, "max_message_bytes": settings.max_message_bytes}
    if settings.http_url is not None:
        return HttpTransport(settings.http_url, **limits)  # type: ignore[arg-type]
    assert settings.socket_path is not None
    return SocketTransport(settings.socket_path, **limits)  # type: ignore[arg-type]


class SignalAdapter:
    """A Signal account behind a signal-cli daemon, as a `ChannelAdapter`."""

    text_limit = TEXT_LIMIT
    sends_voice = True
    """Outbound `voice` attachments go as voice notes (`voiceNote`)."""

    def __init__(
        self, settings: SignalSettings, state_dir: Path, transport: Transport | None = None
    ) -> None:
        self.settings = settings
        self.channel_id = settings.channel
        self.rpc = transport or make_transport(settings)
        self.me = Me(number=settings.account)
        self._position = open_delivery_log(state_dir, settings.channel)
        self._typing: OrderedDict[str, float] = OrderedDict()
        self._edits: OrderedDict[str, int] = OrderedDict()
        self._latest: OrderedDict[str, tuple[str, str]] = OrderedDict()
        """chat → (sender, timestamp) of its newest message not yet marked read."""

    # ---- connection -----------------------------------------------------------------------

    async def check(self) -> str:
        """The daemon's version, and that it holds this account.

        Raises:
            NotLinked: the daemon serves other accounts only.
        """
        version = await self.rpc.call("version")
        name = version.get("version", "?") if isinstance(version, dict) else "?"
        try:
            accounts = await self.rpc.call("listAccounts")
        except RpcError as exc:
            if exc.code != METHOD_NOT_FOUND:
                raise
            accounts = None  # a single-account daemon (`signal-cli -a NUMBER daemon`)
        if isinstance(accounts, list):
            numbers = {a.get("number") for a in accounts if isinstance(a, dict)}
            if self.settings.account not in numbers:
                raise NotLinked(self.settings.account, self.settings.where)
        return f"{self.settings.account} (signal-cli {name})"

    async def _call(self, method: str, params: dict[str, Any]) -> Any:
        """An account-scoped call (`account` names it to a multi-account daemon)."""
        return await self.rpc.call(method, {"account": self.settings.account, **params})

    async def _learn_me(self) -> None:
        """The account's ACI, which mentions and quotes may name instead of the number."""
        try:
            found = await self._call(
                "listContacts", {"recipient": [self.settings.account], "allRecipients": True}
            )
        except (RpcError, DaemonUnavailable) as exc:
            log.info("signal: own account id not known (%s); mentions by number only", exc)
            return
        for contact in found if isinstance(found, list) else []:
            if isinstance(contact, dict) and contact.get("number") == self.settings.account:
                uuid = contact.get("uuid")
                if isinstance(uuid, str) and uuid:
                    self.me = Me(number=self.settings.account, uuid=uuid)

    async def run(self, sink: InboundSink, status: ChannelStatus) -> None:
        """Read the event stream until cancelled, reconnecting with backoff."""
        if isinstance(self.rpc, HttpTransport):  # resume where the last holder stopped
            position = await offload.call(self._position, self._position.position)
            saved = position.get("lastEventId")  # (another replica, maybe)
            self.rpc.last_event_id = saved if isinstance(saved, str) else ""
        backoff = 1.0
        while True:
            up: float | None = None
            try:
                async with self.rpc.listen() as events:
                    await self._connected(status)
                    up = time.monotonic()
                    async for params in events:
                        status.last_event_at = time.time()
                        if await self._hand_on(params, sink, status):
                            self._handed_on()
                raise DaemonUnavailable("the daemon ended the event stream")
            except (DaemonUnavailable, RpcError, NotLinked) as exc:
                status.connected = False
                status.error(f"signal-cli at {self.settings.where}: {exc}")
                log.warning("signal: %s (reconnecting in %gs)", exc, backoff)
            if up is not None and time.monotonic() - up >= STABLE_SECONDS:
                backoff = 1.0  # it was up a while: a fresh drop, not a flapping daemon
            await anyio.sleep(backoff)
            backoff = min(backoff * 2, MAX_BACKOFF_SECONDS)

    async def _connected(self, status: ChannelStatus) -> None:
        version = await self.check()
        await self._learn_me()
        if not status.connected:
            status.connected = True
            status.account = self.settings.account
            log.info("signal connected: %s at %s", version, self.settings.where)

    async def _hand_on(self, params: dict[str, Any], sink: InboundSink, status: Any) -> bool:
        """Hand on the message a notification carries; whether there was one (receipts,
        typing notices and the like are not kept track of)."""
        account = params.get("account")
        if isinstance(account, str) and account not in (self.settings.account, self.me.uuid):
            return False  # another account of a multi-account daemon
        if isinstance(params.get("exception"), dict) and params.get("envelope") is None:
            status.count("ignore", "message signal-cli could not decrypt")
            return False
        try:
            msg = to_inbound(params, channel=self.channel_id, me=self.me)
        except msgspec.ValidationError as exc:
            status.count("ignore", "malformed message from signal-cli")
            log.warning("signal: skipped a malformed message: %s", exc)
            return False
        if msg is None:
            return False
        self._arrived(msg.chat_id, msg.sender_id, msg.message_id)
        try:
            await sink(msg)
        except Exception as exc:  # one bad message must not stop the channel
            status.error(f"handling message {msg.key}: {exc}")
            log.exception("signal: handling message %s failed", msg.key)
        return True

    def _handed_on(self) -> None:
        """Keep the event stream's position once a message was taken (durably, by the channel
        layer), so a restarted gateway resumes after it rather than from now."""
        if isinstance(self.rpc, HttpTransport) and self.rpc.last_event_id:
            self._position.save_position({"lastEventId": self.rpc.last_event_id})

    # ---- outbound -------------------------------------------------------------------------

    def _to(self, chat_id: str) -> dict[str, Any]:
        """`recipient` for a person (an ACI or a number), `groupId` for a group (base64,
        which may start with `+` too, so only `+` and digits are a number)."""
        if _is_number(chat_id) or _is_uuid(chat_id):
            return {"recipient": [chat_id]}
        return {"groupId": chat_id}

    async def send(self, message: OutboundMessage) -> list[str]:
        """One `send` with the text and the files (as data URIs)."""
        await self._mark_read(message.chat_id)
        params: dict[str, Any] = {**self._to(message.chat_id), "message": message.text}
        files = [a for a in message.attachments if a.data is not None or a.path is not None]
        if files:
            params["attachments"] = [await _data_uri(a) for a in files]
            if any(a.kind == "voice" for a in files):
                params["voiceNote"] = True
        result = await self._call("send", params)
        return [_sent_timestamp(result)]

    def _arrived(self, chat_id: str, sender: str, message_id: str) -> None:
        self._latest[chat_id] = (sender, message_id)
        self._latest.move_to_end(chat_id)
        while len(self._latest) > TRACKED:
            self._latest.popitem(last=False)

    async def _mark_read(self, chat_id: str) -> None:
        """A read receipt to the sender of the chat's newest message, before the first reply
        to it (a missing receipt never holds up the reply)."""
        latest = self._latest.pop(chat_id, None)
        if latest is None or not latest[1].isdigit():
            return
        sender, stamp = latest
        params = {"recipient": [sender], "targetTimestamp": [int(stamp)], "type": "read"}
        try:
            await self._call("sendReceipt", params)
        except (RpcError, DaemonUnavailable) as exc:
            log.info("signal: read receipt for %s failed: %s", chat_id, exc)

    async def edit_text(self, chat_id: str, message_id: str, text: str) -> None:
        """Send an edit of message `message_id` (at most `MAX_EDITS` per message).

        Raises:
            SendFailed: the message was edited `MAX_EDITS` times already.
        """
        count = self._edits.get(message_id, 0)
        if count >= MAX_EDITS:
            raise SendFailed(f"Signal shows at most {MAX_EDITS} edits of a message")
        self._edits[message_id] = count + 1
        self._edits.move_to_end(message_id)
        while len(self._edits) > TRACKED:
            self._edits.popitem(last=False)
        params = {**self._to(chat_id), "message": text, "editTimestamp": int(message_id)}
        _sent_timestamp(await self._call("send", params))

    async def typing(self, chat_id: str, thread_id: str | None) -> None:
        """`sendTyping`, at most every 10 s per chat (Signal shows it for about 15 s)."""
        now = time.monotonic()
        if now - self._typing.get(chat_id, 0.0) < TYPING_EVERY_SECONDS:
            return
        self._typing[chat_id] = now
        self._typing.move_to_end(chat_id)
        while len(self._typing) > TRACKED:
            self._typing.popitem(last=False)
        await self._call("sendTyping", self._to(chat_id))

    async def download(self, ref: str, target: Path, *, max_bytes: int) -> Path:
        """From the daemon's attachments folder when configured, else `getAttachment`."""
        where = json.loads(ref)
        attachment_id = str(where.pop("id", ""))
        if not attachment_id or not set(attachment_id) <= _ATTACHMENT_ID or ".." in attachment_id:
            raise ValueError("not an attachment id signal-cli gives")
        if not target.suffix and Path(attachment_id).suffix:
            target = target.with_suffix(Path(attachment_id).suffix)
        folder = self.settings.attachments_dir
        if folder is not None:
            source = anyio.Path(folder / attachment_id)
            check_declared((await source.stat()).st_size, max_bytes)
            async with await anyio.open_file(source, "rb") as handle:
                return await write_capped(_chunks(handle), target, max_bytes)
        found = await self._call("getAttachment", {"id": attachment_id, **where})
        data = found.get("data") if isinstance(found, dict) else None
        if not isinstance(data, str):
            raise DaemonUnavailable("getAttachment answered without data")
        check_declared(len(data) * 3 // 4, max_bytes)
        raw = base64.b64decode(data, validate=True)
        return await write_capped(_once(raw), target, max_bytes)

    async def aclose(self) -> None:
        """Close the daemon connections."""
        await self.rpc.aclose()


def _sent_timestamp(result: Any) -> str:
    """The sent message's timestamp (its id).

    Raises:
        SendFailed: every recipient failed.
    """
    if not isinstance(result, dict):
        raise DaemonUnavailable("send answered without a timestamp")
    outcomes = result.get("results")
    if isinstance(outcomes, list) and outcomes:
        kinds = [r.get("type") for r in outcomes if isinstance(r, dict)]
        if "SUCCESS" not in kinds:
            listed = ", ".join(map(str, kinds))
            raise SendFailed(f"Signal delivered the message to nobody ({listed})")
    return str(result.get("timestamp", ""))


async def _data_uri(attachment: Attachment) -> str:
    data = attachment.data
    if data is None:
        assert attachment.path is not None
        data = await anyio.Path(attachment.path).read_bytes()
    name = attachment.name or (attachment.path.name if attachment.path else attachment.kind)
    mime = attachment.mime_type or mimetypes.guess_type(name)[0] or "application/octet-stream"
    if attachment.kind == "voice":
        mime = "audio/ogg"
    safe = "".join(c for c in name if c.isalnum() or c in "._-") or "file"
    return f"data:{mime};filename={safe};base64,{base64.b64encode(data).decode('ascii')}"


def _is_number(value: str) -> bool:
    """An E.164 number (`+` and 7 to 15 digits)."""
    return (
        value.startswith("+")
        and value[1:].isascii()
        and value[1:].isdigit()
        and (7 <= len(value) - 1 <= 15)
    )


def _is_uuid(value: str) -> bool:
    parts = value.split("-")
    return [len(p) for p in parts] == [8, 4, 4, 4, 12] and all(
        c in "0123456789abcdefABCDEF" for c in value.replace("-", "")
    )


async def _chunks(handle: Any) -> Any:
    while chunk := await handle.read(65536):
        yield chunk


async def _once(data: bytes) -> Any:
    yield data
