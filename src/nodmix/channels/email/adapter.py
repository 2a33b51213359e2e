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
from collections.abc import Mapping
from dataclasses import dataclass
from email.utils import formatdate
from pathlib import Path
from typing import Any

import aioimaplib
import aiosmtplib
import anyio

from nodmix.channels.base import InboundSink
from nodmix.channels.delivery import DeliveryLog
from nodmix.channels.email.compose import compose
from nodmix.channels.email.mapping import (
    is_automatic,
    message_id,
    parse,
    spool_attachments,
    thread_info,
    to_inbound,
)
from nodmix.channels.email.threads import ThreadBook
from nodmix.channels.status import ChannelStatus
from nodmix.channels.types import OutboundMessage
from nodmix.config.channel_mail_irc import EmailConfig
from nodmix.config.loader import resolve_secret
from nodmix.errors import ConfigError

log = logging.getLogger("nodmix.channels.email")

TEXT_LIMIT = 50_000
TIMEOUT_SECONDS = 30.0
MAX_BACKOFF_SECONDS = 300.0
POLL_SECONDS = 60.0
SPOOL_KEEP_SECONDS = 86_400.0
_UIDVALIDITY = re.compile(rb"UIDVALIDITY (\d+)")
_UIDNEXT = re.compile(rb"UIDNEXT (\d+)")


@dataclass(frozen=True, slots=True)
class EmailSettings:
    """Resolved `channels.email`."""

    address: str
    imap_host: str
    imap_port: int
    imap_tls: bool
    imap_user: str
    imap_password: str
    mailbox: str
    smtp_host: str
    smtp_port: int
    smtp_security: str
    smtp_user: str | None
    smtp_password: str | None
    idle_seconds: int = 600
    max_attachment_bytes: int = 25 * 1024 * 1024
    channel: str = "email"


def email_settings(section: EmailConfig, env: Mapping[str, str]) -> EmailSettings:
    """Resolve passwords (`${VAR}`) and defaults.

    Raises:
        ConfigError: no IMAP password, or a referenced variable is not set.
    """
    imap, smtp = section.imap, section.smtp
    password = resolve_secret(imap.password, key="channels.email.imap.password", env=env)
    if not password:
        raise ConfigError("no IMAP password", key="channels.email.imap.password")
    user = imap.username or section.address
    smtp_password = resolve_secret(smtp.password, key="channels.email.smtp.password", env=env)
    smtp_user = user if smtp.username is None else smtp.username
    ports = {"tls": 465, "starttls": 587, "none": 25}
    return EmailSettings(
        address=section.address,
        imap_host=imap.host,
        imap_port=imap.port or (993 if imap.tls else 143),
        imap_tls=imap.tls,
        imap_user=user,
        imap_password=password,
        mailbox=imap.mailbox,
        smtp_host=smtp.host,
        smtp_port=smtp.port or ports[smtp.security],
        smtp_security=smtp.security,
        smtp_user=smtp_user or None,
        smtp_password=(smtp_password if smtp.password is not None else password)
        if smtp_user
        else None,
        idle_seconds=section.idle_seconds or 600,
        max_attachment_bytes=(
            section.max_attachment_bytes
            if section.max_attachment_bytes is not None
            else 25 * 1024 * 1024
        ),
    )


class EmailAdapter:
    """One mailbox, as a `ChannelAdapter`."""

    text_limit = TEXT_LIMIT

    def __init__(self, settings: EmailSettings, state_dir: Path) -> None:
        self.settings = settings
        self.channel_id = settings.channel
        self._position = DeliveryLog(state_dir, settings.channel)
        self._spool = self._position.root / "spool"
        self._threads = ThreadBook(self._position.root / "threads.json")

    # ---- IMAP -----------------------------------------------------------------------------

    async def _open(self) -> tuple[aioimaplib.IMAP4, dict[str, int]]:
        s = self.settings
        lost = asyncio.Event()
        kind = aioimaplib.IMAP4_SSL if s.imap_tls else aioimaplib.IMAP4
        imap = kind(
            host=s.imap_host,
            port=s.imap_port,
            timeout=TIMEOUT_SECONDS,
            conn_lost_cb=lambda exc: lost.set(),
        )
        imap.nodmix_lost = lost
        await imap.wait_hello_from_server()
        _ok(await imap.login(s.imap_user, s.imap_password), "login")
        selected = _ok(await imap.select(s.mailbox), f"select {s.mailbox}")
        found: dict[str, int] = {}
        for line in selected.lines:
            if isinstance(line, bytes | bytearray):
                for name, pattern in (("validity", _UIDVALIDITY), ("next", _UIDNEXT)):
                    match = pattern.search(bytes(line))
                    if match:
                        found[name] = int(match.group(1))
        return imap, found

    async def check(self) -> str:
        """Log in to IMAP and select the mailbox, then greet (and log in to) SMTP."""
        imap, _ = await self._open()
        try:
            account = f"{self.settings.imap_user} on {self.settings.imap_host}"
        finally:
            await _logout(imap)
        try:
            await self._check_smtp()
        except (OSError, aiosmtplib.SMTPException) as exc:
            raise ConnectionError(f"smtp {self.settings.smtp_host}: {exc}") from exc
        return account

    async def _check_smtp(self) -> None:
        s = self.settings
        smtp = aiosmtplib.SMTP(
            hostname=s.smtp_host,
            port=s.smtp_port,
            use_tls=s.smtp_security == "tls",
            start_tls=s.smtp_security == "starttls",
            timeout=TIMEOUT_SECONDS,
        )
        await smtp.connect()
        try:
            if s.smtp_user and s.smtp_password:
                await smtp.login(s.smtp_user, s.smtp_password)
        finally:
            await smtp.quit()

    async def run(self, sink: InboundSink, status: ChannelStatus) -> None:
        """Fetch new mail, then IDLE until more arrives; reconnect with backoff."""
        self._clean_spool()
        backoff = 1.0
        while True:
            imap: aioimaplib.IMAP4 | None = None
            try:
                imap, box = await self._open()
                status.connected = True
                status.account = self.settings.address
                backoff = 1.0
                await self._follow(imap, box, sink, status)
            except (OSError, TimeoutError, aioimaplib.AioImapException, _ImapError) as exc:
                status.connected = False
                status.error(f"imap: {exc or type(exc).__name__}")
                log.warning("email: IMAP error: %s (retrying in %gs)", exc, backoff)
            finally:
                if imap is not None:
                    with anyio.CancelScope(shield=True):
                        await _logout(imap)
            await anyio.sleep(backoff)
            backoff = min(backoff * 2, MAX_BACKOFF_SECONDS)

    async def _follow(
        self,
        imap: aioimaplib.IMAP4,
        box: dict[str, int],
        sink: InboundSink,
        status: ChannelStatus,
    ) -> None:
        validity = box.get("validity", 0)
        saved = self._position.position()
        if not saved:  # first start: only mail that arrives from now on
            saved = {"uidValidity": validity, "lastUid": box.get("next", 1) - 1}
            self._save(saved)
        since: float | None = None
        if saved.get("uidValidity") != validity:
            log.warning("email: UIDVALIDITY changed; looking at mail since the last check")
            since = float(saved.get("checkedAt", time.time() - 86_400))
            saved = {"uidValidity": validity, "lastUid": 0}
        last = int(saved.get("lastUid", 0))
        while True:
            last = await self._fetch_new(imap, validity, last, since, sink, status)
            since = None
            await self._wait_for_mail(imap)

    async def _fetch_new(
        self,
        imap: aioimaplib.IMAP4,
        validity: int,
        last: int,
        since: float | None,
        sink: InboundSink,
        status: ChannelStatus,
    ) -> int:
        criteria = ["UID", f"{last + 1}:*"]
        if since is not None:
            criteria = ["SINCE", formatdate(since)[5:16].replace(" ", "-")]
        found = _ok(await imap.uid_search(*criteria, charset=None), "search")
        uids = sorted(
            int(tok) for line in found.lines[:1] for tok in bytes(line).split() if tok.isdigit()
        )
        for uid in (u for u in uids if u > last or since is not None):
            fetched = _ok(await imap.uid("fetch", str(uid), "(BODY.PEEK[])"), "fetch")
            raw = next((bytes(x) for x in fetched.lines if isinstance(x, bytearray)), None)
            if raw is not None:
                await self._hand_on(raw, f"<uid-{validity}-{uid}@nodmix>", sink, status)
            last = max(last, uid)
            self._save({"uidValidity": validity, "lastUid": last})
        return last

    async def _hand_on(
        self, raw: bytes, fallback: str, sink: InboundSink, status: ChannelStatus
    ) -> None:
        mail = parse(raw)
        why = is_automatic(mail, self.settings.address)
        mid = message_id(mail, fallback)
        if why is not None:
            status.count("ignore", why)
            log.info("email: not answering %s: %s", mid, why)
            return
        key = f"{mid}"
        files, notes = spool_attachments(mail, self._spool, key, self.settings.max_attachment_bytes)
        msg = to_inbound(mail, channel=self.channel_id, mid=mid, attachments=files, notes=notes)
        self._threads.remember(thread_info(mail, mid))
        try:
            await sink(msg)
        except Exception as exc:  # one bad message must not stop the channel
            status.error(f"handling message {msg.key}: {exc}")
            log.exception("email: handling message %s failed", msg.key)

    async def _wait_for_mail(self, imap: aioimaplib.IMAP4) -> None:
        """Return when the server announces new mail, or after `idle_seconds`."""
        lost: asyncio.Event = imap.nodmix_lost
        if not imap.has_capability("IDLE"):
            with anyio.move_on_after(POLL_SECONDS):
                await lost.wait()
            if lost.is_set():
                raise _ImapError("connection lost")
            _ok(await imap.noop(), "noop")
            return
        idle = await imap.idle_start(timeout=self.settings.idle_seconds)
        try:
            while imap.has_pending_idle() and not lost.is_set():
                with anyio.move_on_after(5):
                    push = await imap.wait_server_push(timeout=self.settings.idle_seconds + 60)
                    if push == aioimaplib.STOP_WAIT_SERVER_PUSH:
                        break
                    if any(
                        b"EXISTS" in bytes(line)
                        for line in push
                        if isinstance(line, bytes | bytearray)
                    ):
                        break
        finally:
            if lost.is_set():
                idle.cancel()
                raise _ImapError("connection lost")
            imap.idle_done()
            with anyio.fail_after(TIMEOUT_SECONDS):
                await asyncio.shield(idle)

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
        await aiosmtplib.send(
            mail,
            hostname=s.smtp_host,
            port=s.smtp_port,
            username=s.smtp_user,
            password=s.smtp_password,
            use_tls=s.smtp_security == "tls",
            start_tls=s.smtp_security == "starttls",
            timeout=TIMEOUT_SECONDS,
        )
        return [str(mail["Message-ID"])]

    async def typing(self, chat_id: str, thread_id: str | None) -> None:
        """Mail has no typing indicator."""

    async def download(self, ref: str, target: Path) -> Path:
        """Move a spooled attachment into the workspace."""
        source = Path(ref)
        if source.parent != self._spool or not source.is_file():
            raise FileNotFoundError(f"{source.name}: not in the spool")
        suffix = source.suffix
        if suffix and not target.suffix:
            target = target.with_suffix(suffix)
        await anyio.to_thread.run_sync(shutil.move, source, target)
        return target

    async def aclose(self) -> None:
        """Nothing stays open between calls."""


class _ImapError(Exception):
    """The server refused a command or the connection dropped."""


def _ok(response: Any, what: str) -> Any:
    if getattr(response, "result", None) != "OK":
        lines = getattr(response, "lines", [])
        detail = bytes(lines[-1]).decode("utf-8", "replace") if lines else "no answer"
        raise _ImapError(f"{what} refused: {detail}")
    return response


async def _logout(imap: aioimaplib.IMAP4) -> None:
    try:
        with anyio.fail_after(5):
            await imap.logout()
    except Exception as exc:
        log.debug("email: logout failed: %s", exc)
