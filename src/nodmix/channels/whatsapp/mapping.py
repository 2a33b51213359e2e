"""WhatsApp webhook payloads as our `InboundMessage` (the only place that reads them).

The payload is decoded with typed msgspec structs rather than the client library's update
classes: a delivery may batch several entries, changes and messages (the library reads the
first of each), a sender may come with a business-scoped user id instead of a phone number,
and whatever a hostile request holds, a wrong type is one `ValidationError` (answered 400),
never a half-read message.

Chats: a DM's chat and sender id is the user's WhatsApp id (their number's digits, `wa_id`),
or their business-scoped user id (`US.123...`) when Meta sends no number; a group message
(`group_id`, Cloud API groups) is keyed by the group id. In groups the business is mentioned
by `@<its number's digits>` in the text, or by a reply to one of its messages.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import msgspec

from nodmix.channels.types import Attachment, InboundMessage

TEXT_LIMIT = 4096
WINDOW_CLOSED_CODE = 131047
"""Meta's "re-engagement message" error: outside the 24-hour window."""


class _Profile(msgspec.Struct, frozen=True):
    name: str = ""


class _Contact(msgspec.Struct, frozen=True):
    wa_id: str | None = None
    user_id: str | None = None
    profile: _Profile = _Profile()


class _Text(msgspec.Struct, frozen=True):
    body: str = ""


class _Media(msgspec.Struct, frozen=True):
    id: str
    mime_type: str | None = None
    caption: str | None = None
    filename: str | None = None
    voice: bool = False


class _Location(msgspec.Struct, frozen=True):
    latitude: float
    longitude: float
    name: str | None = None
    address: str | None = None


class _Context(msgspec.Struct, frozen=True, rename={"from_": "from"}):
    id: str | None = None
    from_: str | None = None


class _Message(msgspec.Struct, frozen=True, rename={"from_": "from"}):
    id: str
    type: str
    timestamp: str = "0"
    from_: str | None = None
    from_user_id: str | None = None
    group_id: str | None = None
    text: _Text | None = None
    image: _Media | None = None
    audio: _Media | None = None
    document: _Media | None = None
    video: _Media | None = None
    sticker: _Media | None = None
    location: _Location | None = None
    context: _Context | None = None


class _Error(msgspec.Struct, frozen=True):
    code: int
    title: str = ""
    message: str = ""


class _Status(msgspec.Struct, frozen=True):
    id: str
    status: str
    recipient_id: str | None = None
    errors: list[_Error] = []


class _Metadata(msgspec.Struct, frozen=True):
    display_phone_number: str = ""
    phone_number_id: str = ""


class _Value(msgspec.Struct, frozen=True):
    metadata: _Metadata = _Metadata()
    contacts: list[_Contact] = []
    messages: list[_Message] = []
    statuses: list[_Status] = []


class _Change(msgspec.Struct, frozen=True):
    field: str = ""
    value: _Value | None = None


class _Entry(msgspec.Struct, frozen=True):
    id: str = ""
    changes: list[_Change] = []


class _Update(msgspec.Struct, frozen=True):
    object: str = ""
    entry: list[_Entry] = []


@dataclass(frozen=True, slots=True)
class Arrived:
    """One inbound message and when its sender wrote it (epoch seconds)."""

    message: InboundMessage
    sent_at: float


@dataclass(frozen=True, slots=True)
class Failed:
    """A message of ours that WhatsApp could not deliver (a `failed` status)."""

    recipient: str
    code: int
    title: str


@dataclass(frozen=True, slots=True)
class Parsed:
    """What one webhook request carried for our number."""

    messages: list[Arrived]
    failures: list[Failed]
    skipped: int
    """Messages of kinds the channel does not handle (reactions, buttons, ...)."""


def decode(body: bytes) -> _Update:
    """The payload (after its signature was checked).

    Raises:
        msgspec.DecodeError: not JSON, or not the webhook's shape.
    """
    return msgspec.json.decode(body, type=_Update)


def parse(update: _Update, *, channel: str, phone_number_id: str, own_number: str) -> Parsed:
    """The messages and failed statuses `update` carries for `phone_number_id` (changes for
    other numbers of the same app are left alone)."""
    arrived: list[Arrived] = []
    failed: list[Failed] = []
    skipped = 0
    for entry in update.entry:
        for change in entry.changes:
            value = change.value
            if change.field != "messages" or value is None:
                continue
            if value.metadata.phone_number_id != phone_number_id:
                continue
            for message in value.messages:
                inbound = _inbound(message, value.contacts, channel, own_number)
                if inbound is None:
                    skipped += 1
                else:
                    arrived.append(Arrived(inbound, _epoch(message.timestamp)))
            for status in value.statuses:
                if status.status == "failed":
                    error = status.errors[0] if status.errors else _Error(code=0)
                    title = error.title or error.message or "failed"
                    failed.append(Failed(status.recipient_id or "?", error.code, title))
    return Parsed(arrived, failed, skipped)


def digits(number: str) -> str:
    """`+1 555-010-4242` → `15550104242`."""
    return re.sub(r"\D", "", number)


def _inbound(
    message: _Message, contacts: list[_Contact], channel: str, own_number: str
) -> InboundMessage | None:
    contact = _contact_of(message, contacts)
    sender = message.from_ or message.from_user_id or (contact.user_id if contact else None)
    if not sender:
        return None
    text, attachments = _content(message)
    if not text and not attachments:
        return None
    mentioned = False
    if message.group_id is not None:
        mentioned, text = _mention(message, text, own_number)
    context = message.context
    return InboundMessage(
        channel=channel,
        chat_type="group" if message.group_id is not None else "dm",
        chat_id=message.group_id or sender,
        message_id=message.id,
        sender_id=sender,
        sender_name=contact.profile.name if contact else "",
        text=text,
        attachments=attachments,
        mentioned=mentioned,
        reply_to=context.id if context is not None else None,
    )


def _contact_of(message: _Message, contacts: list[_Contact]) -> _Contact | None:
    for contact in contacts:
        if message.from_ and contact.wa_id == message.from_:
            return contact
        if message.from_user_id and contact.user_id == message.from_user_id:
            return contact
    return contacts[0] if len(contacts) == 1 else None


def _content(message: _Message) -> tuple[str, tuple[Attachment, ...]]:
    if message.type == "text" and message.text is not None:
        return message.text.body, ()
    if message.type == "location" and message.location is not None:
        place = message.location
        label = ", ".join(p for p in (place.name, place.address) if p)
        where = f"{place.latitude:.6f}, {place.longitude:.6f}"
        return f"[location: {where}{' (' + label + ')' if label else ''}]", ()
    kinds = {
        "image": ("photo", message.image, "photo.jpg"),
        "audio": ("audio", message.audio, "audio"),
        "document": ("document", message.document, None),
        "video": ("video", message.video, "video.mp4"),
        "sticker": ("photo", message.sticker, "sticker.webp"),
    }
    found = kinds.get(message.type)
    if found is None or found[1] is None:
        return "", ()
    kind, media, name = found
    assert media is not None
    if kind == "audio" and media.voice:
        kind, name = "voice", "voice.ogg"
    attachment = Attachment(
        kind=kind, ref=media.id, name=media.filename or name, mime_type=media.mime_type
    )
    return media.caption or "", (attachment,)


def _mention(message: _Message, text: str, own_number: str) -> tuple[bool, str]:
    own = digits(own_number)
    context = message.context
    replied = bool(own and context is not None and digits(context.from_ or "") == own)
    if not own:
        return replied, text
    pattern = re.compile(rf"(?<![\w@])@\+?{re.escape(own)}\b")
    if pattern.search(text):
        return True, pattern.sub("", text).strip()
    return replied, text


def _epoch(timestamp: str) -> float:
    try:
        return float(int(timestamp))
    except ValueError:
        return 0.0
