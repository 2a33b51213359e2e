"""signal-cli's message envelopes as our `InboundMessage` (the only place that reads them).

Senders are their account id (ACI, a UUID), which stays when a number changes hands; the
daemon may not know a sender's number at all. A DM's chat is the sender, a group's the group
id (base64). A message's id is its timestamp (Signal's own message reference). In groups the
account is mentioned by a mention (`mentions[]` naming its ACI or number) or by quoting one of
its messages; the mention's placeholder (U+FFFC) is removed from the text, other mentions are
written out as `@name`. Edits, reactions, receipts, typing notices, stories, group updates
and the account's own messages from its other devices start no turn.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

import msgspec

from nodmix.channels.types import Attachment, InboundMessage

TEXT_LIMIT = 2000
"""Signal clients show at most 2000 characters of a message body (longer ones go as a
long-text attachment), so replies are split there."""


class _Mention(msgspec.Struct, frozen=True):
    start: int = 0
    length: int = 0
    number: str | None = None
    uuid: str | None = None
    name: str | None = None


class _Quote(msgspec.Struct, frozen=True, rename="camel"):
    id: int = 0
    author_number: str | None = None
    author_uuid: str | None = None


class _Attachment(msgspec.Struct, frozen=True, rename="camel"):
    id: str | None = None
    content_type: str = "application/octet-stream"
    filename: str | None = None
    size: int | None = None


class _Group(msgspec.Struct, frozen=True, rename="camel"):
    group_id: str
    type: str = "DELIVER"


class _Data(msgspec.Struct, frozen=True, rename="camel"):
    timestamp: int = 0
    message: str | None = None
    mentions: list[_Mention] = []
    attachments: list[_Attachment] = []
    quote: _Quote | None = None
    group_info: _Group | None = None
    reaction: dict[str, object] | None = None
    remote_delete: dict[str, object] | None = None
    sticker: dict[str, object] | None = None


class _Envelope(msgspec.Struct, frozen=True, rename="camel"):
    timestamp: int = 0
    source_number: str | None = None
    source_uuid: str | None = None
    source_name: str | None = None
    data_message: _Data | None = None


class _Receive(msgspec.Struct, frozen=True):
    envelope: _Envelope | None = None
    exception: dict[str, object] | None = None


@dataclass(frozen=True, slots=True)
class Me:
    """The account, as mentions and quotes name it."""

    number: str
    uuid: str | None = None

    def is_me(self, number: str | None, uuid: str | None) -> bool:
        return bool((number and number == self.number) or (uuid and uuid == self.uuid))


def to_inbound(params: dict[str, object], *, channel: str, me: Me) -> InboundMessage | None:
    """The message a `receive` notification carries, or None (not one that starts a turn).

    Raises:
        msgspec.ValidationError: the notification does not have the envelope's shape.
    """
    received = msgspec.convert(params, _Receive)
    envelope = received.envelope
    if envelope is None or envelope.data_message is None:
        return None
    data = envelope.data_message
    sender = envelope.source_uuid or envelope.source_number
    if not sender or me.is_me(envelope.source_number, envelope.source_uuid):
        return None
    if data.reaction or data.remote_delete or data.sticker:
        return None
    group = data.group_info
    if group is not None and group.type != "DELIVER":
        return None  # a group update (members, title), not a message
    text, mentioned = _text(data, me)
    chat = group.group_id if group is not None else sender
    attachments = tuple(_attachment(a, group, sender) for a in data.attachments if a.id)
    if not text and not attachments:
        return None
    quote = data.quote
    if quote is not None and me.is_me(quote.author_number, quote.author_uuid):
        mentioned = True
    return InboundMessage(
        channel=channel,
        chat_type="group" if group is not None else "dm",
        chat_id=chat,
        message_id=str(data.timestamp or envelope.timestamp),
        sender_id=sender,
        sender_name=envelope.source_name or "",
        text=text,
        attachments=attachments,
        mentioned=mentioned,
        reply_to=str(quote.id) if quote is not None and quote.id else None,
    )


def _text(data: _Data, me: Me) -> tuple[str, bool]:
    """The body with mention placeholders replaced; whether one of them names the account.
    Mention offsets count UTF-16 code units (as Signal's clients do)."""
    body = data.message or ""
    if not data.mentions:
        return body.strip(), False
    units = body.encode("utf-16-le")
    mentioned = False
    out: list[bytes] = []
    at = 0
    for mention in sorted(data.mentions, key=lambda m: m.start):
        start, end = 2 * mention.start, 2 * (mention.start + mention.length)
        if start < at or end > len(units) or mention.length < 0:
            continue  # overlapping or out of range: leave the text as it is
        out.append(units[at:start])
        if me.is_me(mention.number, mention.uuid):
            mentioned = True
        else:
            name = mention.name or mention.number or (mention.uuid or "someone")[:8]
            out.append(f"@{name}".encode("utf-16-le"))
        at = end
    out.append(units[at:])
    text = b"".join(out).decode("utf-16-le", errors="replace")
    return re.sub(r"[ \t]{2,}", " ", text).strip(), mentioned


def _attachment(item: _Attachment, group: _Group | None, sender: str) -> Attachment:
    mime = item.content_type
    if mime.startswith("image/"):
        kind = "photo"
    elif mime.startswith("audio/"):
        kind = "audio" if item.filename else "voice"  # voice notes come without a name
    elif mime.startswith("video/"):
        kind = "video"
    else:
        kind = "document"
    where = {"groupId": group.group_id} if group is not None else {"recipient": sender}
    return Attachment(
        kind=kind,
        ref=json.dumps({"id": item.id, **where}),
        name=item.filename or _default_name(kind, mime),
        size=item.size,
        mime_type=mime,
    )


def _default_name(kind: str, mime: str) -> str:
    subtype = mime.split("/", 1)[-1].split(";")[0].strip() or "bin"
    ext = {"jpeg": "jpg", "aac": "m4a", "mpeg": "mp3", "quicktime": "mov"}.get(subtype, subtype)
    return f"{kind}.{ext}"
