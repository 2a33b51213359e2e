"""Inbound mail as our `InboundMessage` (stdlib `email`): subject, body without the quoted
history, attachments spooled to disk. Which mail gets here at all (a strictly parsed sender,
no robots) is `screen.py`'s decision."""

from __future__ import annotations

import email
import email.policy
import hashlib
import html
import re
from dataclasses import dataclass
from email.message import EmailMessage
from pathlib import Path

from nodmix.channels.email.screen import Sender
from nodmix.channels.types import Attachment, InboundMessage

_SAFE = re.compile(r"[^A-Za-z0-9._-]+")
_WROTE = re.compile(r"^(On .{0,200} wrote:|-----Original Message-----)\s*$")


@dataclass(frozen=True, slots=True)
class ThreadInfo:
    """What a reply to a message needs: its id, subject and references."""

    message_id: str
    subject: str
    references: tuple[str, ...]


def parse(raw: bytes) -> EmailMessage:
    """The message in `raw` (RFC 5322 bytes)."""
    msg = email.message_from_bytes(raw, policy=email.policy.default)
    assert isinstance(msg, EmailMessage)
    return msg


def message_id(msg: EmailMessage, fallback: str) -> str:
    """The `Message-ID` (with angle brackets), or `fallback`."""
    value = str(msg.get("Message-ID", "")).strip()
    return value if value else fallback


def thread_info(msg: EmailMessage, mid: str) -> ThreadInfo:
    """How to reply to `msg` in its thread."""
    refs = str(msg.get("References", "")).split()
    parent = str(msg.get("In-Reply-To", "")).strip()
    if parent and parent not in refs:
        refs.append(parent)
    return ThreadInfo(message_id=mid, subject=str(msg.get("Subject", "")), references=tuple(refs))


def body_text(msg: EmailMessage) -> str:
    """The plain-text body (HTML turned into text), without the quoted history."""
    part = msg.get_body(preferencelist=("plain", "html"))
    if part is None or not isinstance(part, EmailMessage):
        return ""
    try:
        text = part.get_content()
    except (LookupError, ValueError):
        payload = part.get_payload(decode=True)
        text = payload.decode("utf-8", "replace") if isinstance(payload, bytes) else ""
    if not isinstance(text, str):
        return ""
    if part.get_content_subtype() == "html":
        text = re.sub(r"(?is)<(script|style).*?</\1>", "", text)
        text = re.sub(r"(?i)<br\s*/?>|</p>|</div>", "\n", text)
        text = html.unescape(re.sub(r"<[^>]+>", "", text))
    return _without_quote(text.replace("\r\n", "\n")).strip()


def _without_quote(text: str) -> str:
    lines = text.split("\n")
    end = len(lines)
    while end and (not lines[end - 1].strip() or lines[end - 1].startswith(">")):
        end -= 1
    if end < len(lines) and end and _WROTE.match(lines[end - 1].strip()):
        end -= 1
    return "\n".join(lines[:end]) if end else text


def spool_attachments(
    msg: EmailMessage, spool: Path, key: str, max_bytes: int
) -> tuple[tuple[Attachment, ...], list[str]]:
    """Save the attachments under `spool`; the attachments (ref: the saved path; one larger
    than `max_bytes` is not saved and has no ref, only its size, and is refused) and notes."""
    found: list[Attachment] = []
    notes: list[str] = []
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    for i, part in enumerate(msg.iter_attachments()):
        name = part.get_filename() or f"attachment-{i}"
        data = part.get_payload(decode=True)
        if not isinstance(data, bytes):
            continue
        maintype = part.get_content_maintype()
        kind = {"image": "photo", "audio": "audio"}.get(maintype, "document")
        mime = part.get_content_type()
        if len(data) > max_bytes:
            found.append(Attachment(kind=kind, name=name, size=len(data), mime_type=mime))
            continue
        spool.mkdir(parents=True, exist_ok=True)
        path = spool / f"{digest}-{i}-{_SAFE.sub('_', name)[:80]}"
        path.write_bytes(data)
        found.append(
            Attachment(kind=kind, ref=str(path), name=name, size=len(data), mime_type=mime)
        )
    return tuple(found), notes


def to_inbound(
    msg: EmailMessage,
    *,
    sender: Sender,
    channel: str,
    mid: str,
    attachments: tuple[Attachment, ...],
    notes: list[str],
) -> InboundMessage:
    """The inbound message of an (already screened) mail from `sender`."""
    subject = str(msg.get("Subject", "")).strip()
    body = body_text(msg)
    parts = []
    # A body that starts with `/` is a chat command (`/approve <id>`): the subject would hide it.
    command = body.startswith("/") and body[1:2].isalpha()
    if subject and not command and not subject.lower().startswith(("re:", "aw:", "sv:")):
        parts.append(f"Subject: {subject}")
    parts += [body, *notes]
    return InboundMessage(
        channel=channel,
        chat_type="dm",
        chat_id=sender.address,
        message_id=mid,
        sender_id=sender.address,
        sender_name=sender.name,
        sender_mask=sender.address,
        text="\n\n".join(p for p in parts if p),
        thread_id=mid,
        attachments=attachments,
    )
