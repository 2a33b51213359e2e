"""The email adapter: IMAP IDLE for new mail, SMTP for replies.

The position (the mailbox's UIDVALIDITY and the last UID handed on) is saved after each
message was accepted, so a restart resumes after the last message and fetches nothing twice;
a message fetched again after a crash is recognised by its Message-ID and not answered twice.
When UIDVALIDITY changes (the mailbox was rebuilt) UIDs mean nothing any more: the adapter
looks at the mail since the last check's date and relies on the Message-IDs. On the very
first start mail already in the mailbox is left alone.
"""

from __future__ import annotations

import asyncio
import logging
import re
import shutil
import time
from collections.abc import Awaitable
from dataclasses import dataclass
from email.message import EmailMessage
from email.utils import formatdate
from pathlib import Path
from typing import Any, TypeVar

import aioimaplib
import aiosmtplib
import anyio

from nodmix.channels.attachments import check_declared
from nodmix.channels.base import InboundSink
from nodmix.channels.delivery import open_delivery_log
from nodmix.channels.email.authentication import check_sender
from nodmix.channels.email.compose import compose
from nodmix.channels.email.connection import ImapConnection
from nodmix.channels.email.mapping import (
    message_id,
    parse,
    spool_attachments,
    thread_info,
    to_inbound,
)
from nodmix.channels.email.outbox import check_smtp, send_mail
from nodmix.channels.email.reply_limit import ReplyLimit
from nodmix.channels.email.screen import Sender, is_automatic, sender_of
from nodmix.channels.email.settings import EmailSettings
from nodmix.channels.email.threads import ThreadBook
from nodmix.channels.status import ChannelStatus
from nodmix.channels.types import OutboundMessage

log = logging.getLogger("nodmix.channels.email")

TEXT_LIMIT = 50_000
TIMEOUT_SECONDS = 30.0
MAX_BACKOFF_SECONDS = 300.0
POLL_SECONDS = 60.0
SPOOL_KEEP_SECONDS = 86_400.0
_UIDVALIDITY = re.compile(rb"UIDVALIDITY (\d+)")
_UIDNEXT = re.compile(rb"UIDNEXT (\d+)")
_SIZE = re.compile(rb"RFC822\.SIZE (\d+)")
_BYE = re.compile(rb"(\* )?BYE\b", re.IGNORECASE)
_T = TypeVar("_T")


class EmailAdapter:
    """One mailbox, as a `ChannelAdapter`."""

    text_limit = TEXT_LIMIT

    def __init__(self, settings: EmailSettings, state_dir: Path) -> None:
        self.settings = settings
        self.channel_id = settings.channel
        self._position = open_delivery_log(state_dir, settings.channel)
        self._spool = self._position.root / "spool"
        self._threads = ThreadBook(self._position.root / "threads.json")
        self._replies = ReplyLimit(settings.reply_limit, settings.reply_window_seconds)

    # ---- IMAP -----------------------------------------------------------------------------

    async def _open(self) -> _Box:
        s = self.settings
        lost = asyncio.Event()
        imap = ImapConnection(
            s.imap_host,
            s.imap_port,
            tls=s.imap_tls,
            timeout=TIMEOUT_SECONDS,
            conn_lost_cb=lambda exc: lost.set(),
        )
        box = _Box(imap, lost)
        try:
            with anyio.fail_after(TIMEOUT_SECONDS):  # the library waits for a greeting forever
                await _unless_lost(lost, imap.wait_hello_from_server())
            _ok(await _unless_lost(lost, imap.login(s.imap_user, s.imap_password)), "login")
            selected = _ok(await _unless_lost(lost, imap.select(s.mailbox)), f"select {s.mailbox}")
        except BaseException:
            with anyio.CancelScope(shield=True):
                await _logout(box)
            raise
        for line in selected.lines:
            if isinstance(line, bytes | bytearray):
                if match := _UIDVALIDITY.search(bytes(line)):
                    box.validity = int(match.group(1))
                if match := _UIDNEXT.search(bytes(line)):
                    box.next_uid = int(match.group(1))
        return box

    async def check(self) -> str:
        """Log in to IMAP and select the mailbox, then greet (and log in to) SMTP."""
        box = await self._open()
        try:
            account = f"{self.settings.imap_user} on {self.settings.imap_host}"
        finally:
            await _logout(box)
        try:
            await check_smtp(self.settings)
        except (OSError, aiosmtplib.SMTPException) as exc:
            raise ConnectionError(f"smtp {self.settings.smtp_host}: {exc}") from exc
        return account

    async def run(self, sink: InboundSink, status: ChannelStatus) -> None:
        """Fetch new mail, then IDLE until more arrives; reconnect with backoff."""
        self._clean_spool()
        backoff = 1.0
        while True:
            box: _Box | None = None
            try:
                box = await self._open()
                status.connected = True
                status.account = self.settings.address
                backoff = 1.0
                await self._follow(box, sink, status)
            except (OSError, TimeoutError, aioimaplib.AioImapException, _ImapError) as exc:
                status.connected = False
                status.error(f"imap: {exc or type(exc).__name__}")
                log.warning("email: IMAP error: %s (retrying in %gs)", exc, backoff)
            finally:
                if box is not None:
                    with anyio.CancelScope(shield=True):
                        await _logout(box)
            await anyio.sleep(backoff)
            backoff = min(backoff * 2, MAX_BACKOFF_SECONDS)

    async def _follow(self, box: _Box, sink: InboundSink, status: ChannelStatus) -> None:
        validity = box.validity
        saved = self._position.position()
        if not saved:  # first start: only mail that arrives from now on
            saved = {"uidValidity": validity, "lastUid": box.next_uid - 1}
            self._save(saved)
        since: float | None = None
        if saved.get("uidValidity") != validity:
            log.warning("email: UIDVALIDITY changed; looking at mail since the last check")
            since = float(saved.get("checkedAt", time.time() - 86_400))
            saved = {"uidValidity": validity, "lastUid": 0}
        last = int(saved.get("lastUid", 0))
        while True:
            # The search sees the mailbox as the server last took it in; mail that came
            # later shows only as an announcement, which a later IDLE does not repeat. So
            # idle only when the search found nothing and nothing was announced since it
            # began (after mail was handled, look again anyway).
            box.imap.announced.clear()
            newest = await self._fetch_new(box, validity, last, since, sink, status)
            since, found, last = None, newest != last, newest
            if not found and not box.imap.announced.is_set():
                await self._wait_for_mail(box)

    async def _fetch_new(
        self,
        box: _Box,
        validity: int,
        last: int,
        since: float | None,
        sink: InboundSink,
        status: ChannelStatus,
    ) -> int:
        criteria = ["UID", f"{last + 1}:*"]
        if since is not None:
            criteria = ["SINCE", formatdate(since)[5:16].replace(" ", "-")]
        found = _ok(
            await _unless_lost(box.lost, box.imap.uid_search(*criteria, charset=None)), "search"
        )
        uids = sorted(
            int(tok) for line in found.lines[:1] for tok in bytes(line).split() if tok.isdigit()
        )
        for uid in (u for u in uids if u > last or since is not None):
            raw, size = await self._read(box, uid)
            if raw is not None:
                fallback = f"<uid-{validity}-{uid}@nodmix>"
                await self._hand_on(raw, fallback, sink, status, oversize=size)
            last = max(last, uid)
            self._save({"uidValidity": validity, "lastUid": last})
        return last

    async def _read(self, box: _Box, uid: int) -> tuple[bytes | None, int | None]:
        """The message (without marking it read), or only its header when it is larger than
        attachments may be (then also its size)."""
        limit = int(self.settings.max_attachment_bytes * 1.4) + 65_536  # base64 and text
        imap, lost = box.imap, box.lost
        sized = _ok(
            await _unless_lost(lost, imap.uid("fetch", str(uid), "(RFC822.SIZE)")), "fetch size"
        )
        match = next((_SIZE.search(bytes(x)) for x in sized.lines if _SIZE.search(bytes(x))), None)
        size = int(match.group(1)) if match else 0
        part = "BODY.PEEK[HEADER]" if size > limit else "BODY.PEEK[]"
        fetched = _ok(await _unless_lost(lost, imap.uid("fetch", str(uid), f"({part})")), "fetch")
        raw = next((bytes(x) for x in fetched.lines if isinstance(x, bytearray)), None)
        return raw, (size if size > limit else None)

    async def _hand_on(
        self,
        raw: bytes,
        fallback: str,
        sink: InboundSink,
        status: ChannelStatus,
        *,
        oversize: int | None = None,
    ) -> None:
        mail = parse(raw)
        mid = message_id(mail, fallback)
        sender = self._screen(mail, mid, status)
        if sender is None:
            return
        key = f"{mid}"
        files, notes = spool_attachments(mail, self._spool, key, self.settings.max_attachment_bytes)
        if oversize is not None:
            notes.append(f"[a mail of {oversize} bytes, too large to read: only its headers]")
        msg = to_inbound(
            mail, sender=sender, channel=self.channel_id, mid=mid, attachments=files, notes=notes
        )
        self._threads.remember(thread_info(mail, mid))
        try:
            await sink(msg)
        except Exception as exc:  # one bad message must not stop the channel
            status.error(f"handling message {msg.key}: {exc}")
            log.exception("email: handling message %s failed", msg.key)

    def _screen(self, mail: EmailMessage, mid: str, status: ChannelStatus) -> Sender | None:
        """The mail's sender when the mail may be handed on; else None (counted, logged)."""
        sender = sender_of(mail)
        verdict, why = "refuse", sender if isinstance(sender, str) else None
        if isinstance(sender, Sender):
            why = is_automatic(mail, sender, self.settings.address)
            if why is not None:
                verdict = "ignore"
            else:
                why = check_sender(mail, sender.domain, self.settings.authentication)
            if why is None and self._replies.exhausted(sender.address):
                verdict, why = "ignore", "reply limit reached"
        if why is None:
            return sender if isinstance(sender, Sender) else None
        status.count(verdict, why)
        log.info("email: not answering %s: %s", mid, why)
        return None

    async def _wait_for_mail(self, box: _Box) -> None:
        """Return when the server announces new mail, or after `idle_seconds`; raise
        `_ImapError` as soon as the connection closes (EOF, reset or `* BYE`)."""
        imap, lost = box.imap, box.lost
        if not imap.has_capability("IDLE"):
            with anyio.move_on_after(POLL_SECONDS):
                await lost.wait()
            _ok(await _unless_lost(lost, imap.noop()), "noop")
            return
        with anyio.fail_after(TIMEOUT_SECONDS):  # the library waits for the answer forever
            idle = await _unless_lost(lost, imap.idle_start(timeout=self.settings.idle_seconds))
        try:
            await self._idle_until_news(box)
        finally:
            if lost.is_set():
                idle.cancel()
            else:  # a live server, maybe slow: it gets its full time to end the IDLE
                imap.idle_done()
                with anyio.fail_after(TIMEOUT_SECONDS):
                    await _unless_lost(lost, asyncio.shield(idle))

    async def _idle_until_news(self, box: _Box) -> None:
        """Wait for the server's pushes: return on new mail or the end of the IDLE period.
        Each wait is raced against the connection's end, so a closed connection is noticed
        at once rather than at the next poll."""
        imap = box.imap
        while imap.has_pending_idle():
            push = await _unless_lost(
                box.lost, imap.wait_server_push(timeout=self.settings.idle_seconds + 60)
            )
            if push == aioimaplib.STOP_WAIT_SERVER_PUSH:
                return
            # untagged lines, without their "* " (the library strips it)
            lines = [bytes(line) for line in push if isinstance(line, bytes | bytearray)]
            if bye := next((line for line in lines if _BYE.match(line)), None):
                box.lost.set()  # the server ends the session; nothing more will come
                raise _ImapError(bye.decode("utf-8", "replace"))
            if any(b"EXISTS" in line for line in lines):
                return

    def _save(self, position: dict[str, Any]) -> None:
        self._position.save_position({**position, "checkedAt": time.time()})

    def _clean_spool(self) -> None:
        if not self._spool.is_dir():
            return
        cutoff = time.time() - SPOOL_KEEP_SECONDS
        for path in self._spool.iterdir():
            if path.stat().st_mtime < cutoff:
                path.unlink(missing_ok=True)

    # ---- SMTP -----------------------------------------------------------------------------

    async def send(self, message: OutboundMessage) -> list[str]:
        """One mail: a reply in the thread of `thread_id` when known."""
        s = self.settings
        thread = self._threads.get(message.thread_id) if message.thread_id else None
        mail = compose(message, sender=s.address, thread=thread)
        await send_mail(s, mail)
        self._replies.record(message.chat_id)
        return [str(mail["Message-ID"])]

    async def typing(self, chat_id: str, thread_id: str | None) -> None:
        """Mail has no typing indicator."""

    async def download(self, ref: str, target: Path, *, max_bytes: int) -> Path:
        """Move a spooled attachment into the workspace."""
        source = Path(ref)
        if source.parent != self._spool or not source.is_file():
            raise FileNotFoundError(f"{source.name}: not in the spool")
        check_declared(source.stat().st_size, max_bytes)
        suffix = source.suffix
        if suffix and not target.suffix:
            target = target.with_suffix(suffix)
        await anyio.to_thread.run_sync(shutil.move, source, target)
        return target

    async def aclose(self) -> None:
        """Nothing stays open between calls."""


@dataclass(slots=True)
class _Box:
    """An open IMAP connection with the mailbox selected."""

    imap: ImapConnection
    lost: asyncio.Event
    validity: int = 0
    next_uid: int = 1


class _ImapError(Exception):
    """The server refused a command or the connection dropped."""


def _ok(response: Any, what: str) -> Any:
    if getattr(response, "result", None) != "OK":
        lines = getattr(response, "lines", [])
        detail = bytes(lines[-1]).decode("utf-8", "replace") if lines else "no answer"
        raise _ImapError(f"{what} refused: {detail}")
    return response


async def _unless_lost(lost: asyncio.Event, step: Awaitable[_T]) -> _T:
    """`step`'s result, or `_ImapError` as soon as the connection is lost.

    aioimaplib leaves a command pending when the connection closes under it, so without this
    a lost connection would only show as each command's own timeout."""
    task = asyncio.ensure_future(step)
    if lost.is_set():
        task.cancel()
        raise _ImapError("connection lost")
    watch = asyncio.ensure_future(lost.wait())
    try:
        await asyncio.wait({task, watch}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        watch.cancel()
        if not task.done():
            task.cancel()
    if task.done() and not task.cancelled():
        return task.result()
    raise _ImapError("connection lost")


async def _logout(box: _Box) -> None:
    try:
        if not box.lost.is_set():  # else nobody is left to say goodbye to
            with anyio.fail_after(5):
                await _unless_lost(box.lost, box.imap.logout())
    except Exception as exc:
        log.debug("email: logout failed: %s", exc)
    finally:  # the socket closes now, not when the server's EOF is read (maybe never)
        transport = box.imap.protocol.transport
        if transport is not None:
            transport.close()
