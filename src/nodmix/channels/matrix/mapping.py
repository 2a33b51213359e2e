"""Matrix events as our `InboundMessage`, and our replies as Matrix message content.

Works on the raw event JSON (`event.source` of matrix-nio's parsed events), so what is read is
exactly what the homeserver sent: `m.mentions`, `m.relates_to` (replies and threads) and the
media `url` of images and files.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from nodmix.channels.types import Attachment, InboundMessage

TEXT_TYPES = ("m.text", "m.emote")
_MX_REPLY = re.compile(r"(?is)<mx-reply>.*?</mx-reply>")
MEDIA_KINDS = {
    "m.image": "photo",
    "m.file": "document",
    "m.audio": "audio",
    "m.video": "document",
}


@dataclass(frozen=True, slots=True)
class Me:
    """Who the bot is in this room: its user id and the display names it answers to."""

    user_id: str
    names: tuple[str, ...] = ()


def is_message(event: dict[str, Any]) -> bool:
    """An `m.room.message` a person could have written (not a notice: bots speak in notices)."""
    content = event.get("content")
    return (
        event.get("type") == "m.room.message"
        and isinstance(content, dict)
        and content.get("msgtype") != "m.notice"
    )


def is_edit(event: dict[str, Any]) -> bool:
    """An `m.replace` edit of an earlier message (edits of edits too): never a new turn."""
    content = event.get("content")
    rel = content.get("m.relates_to") if isinstance(content, dict) else None
    return isinstance(rel, dict) and rel.get("rel_type") == "m.replace"


def sender_label(user_id: str, display_name: object) -> str:
    """How a sender is named to the model: the user id, which nobody else can have, and the
    display name (which anyone can set to anything, another user id included) marked as
    such, on one line and without the brackets that frame the sender in the prompt."""
    name = " ".join(str(display_name or "").split())
    name = "".join(c for c in name if c.isprintable() and c not in '[]"')[:64].strip()
    if not name or name.casefold() in (user_id.casefold(), user_id.split(":")[0][1:].casefold()):
        return user_id
    return f'{user_id} (display name "{name}")'


def is_encrypted(event: dict[str, Any]) -> bool:
    """An end-to-end encrypted event (which this channel cannot read)."""
    return event.get("type") == "m.room.encrypted"


def relation(content: dict[str, Any]) -> tuple[str | None, str | None]:
    """`(thread root, replied-to event)` of a message."""
    rel = content.get("m.relates_to")
    if not isinstance(rel, dict):
        return None, None
    thread = rel.get("event_id") if rel.get("rel_type") == "m.thread" else None
    reply = rel.get("m.in_reply_to")
    reply_id = reply.get("event_id") if isinstance(reply, dict) else None
    if thread is not None and rel.get("is_falling_back"):
        reply_id = None  # a plain message in a thread, not a reply to someone
    return (
        thread if isinstance(thread, str) else None,
        reply_id if isinstance(reply_id, str) else None,
    )


def mentions(content: dict[str, Any], me: Me) -> bool:
    """Whether the message mentions the bot. A client that sends `m.mentions` (intentional
    mentions) says exactly whom it mentions, and only that counts. For older clients: a link
    to the bot or its name in the message's own text, never in the quoted reply fallback."""
    if "m.mentions" in content:
        declared = content["m.mentions"]
        ids = declared.get("user_ids") if isinstance(declared, dict) else None
        return isinstance(ids, list) and me.user_id in ids
    formatted = content.get("formatted_body")
    if isinstance(formatted, str):
        own = _MX_REPLY.sub("", formatted)
        if f"matrix.to/#/{me.user_id}" in own or f"matrix.to/#/{quote(me.user_id)}" in own:
            return True
    body = content.get("body")
    if not isinstance(body, str):
        return False
    body = strip_reply_fallback(body)
    needles = (me.user_id, *me.names)
    return any(_contains_word(body, n) for n in needles if n)


def _contains_word(text: str, needle: str) -> bool:
    return re.search(rf"(?i)(?<![\w@]){re.escape(needle)}(?!\w)", text) is not None


def strip_mention(text: str, me: Me) -> str:
    """The text without a leading `Name:` / `@user:server` address."""
    for needle in sorted((me.user_id, *me.names), key=len, reverse=True):
        if needle:
            stripped = re.sub(rf"(?i)^\s*{re.escape(needle)}\s*[:,]?\s*", "", text, count=1)
            if stripped != text:
                return stripped
    return text


def strip_reply_fallback(body: str) -> str:
    """Drop the quoted `> <@user> ...` lines older clients put in front of a reply."""
    lines = body.split("\n")
    if not lines or not lines[0].startswith("> <"):
        return body
    while lines and lines[0].startswith(">"):
        lines.pop(0)
    return "\n".join(lines).lstrip("\n")


def media_attachment(content: dict[str, Any], kind: str, url: str, name: str | None) -> Attachment:
    """A media event's file, with the size and type its `info` declares (a voice message
    is `m.audio` marked `org.matrix.msc3245.voice`)."""
    info = content.get("info")
    info = info if isinstance(info, dict) else {}
    size = info.get("size")
    mime = info.get("mimetype")
    if kind == "audio" and "org.matrix.msc3245.voice" in content:
        kind = "voice"
    return Attachment(
        kind=kind,
        ref=url,
        name=name,
        size=size if type(size) is int and size >= 0 else None,
        mime_type=mime if isinstance(mime, str) else None,
    )


def to_inbound(
    event: dict[str, Any],
    *,
    channel: str,
    room_id: str,
    direct: bool,
    me: Me,
    sender_name: str,
    replied_to_me: bool,
) -> InboundMessage | None:
    """A room message as an `InboundMessage`; None for what the layer does not handle."""
    if not is_message(event) or is_edit(event):
        return None
    sender = event.get("sender")
    event_id = event.get("event_id")
    if not isinstance(sender, str) or not isinstance(event_id, str) or sender == me.user_id:
        return None
    content: dict[str, Any] = event["content"]
    thread, reply = relation(content)
    body = content.get("body")
    text = strip_reply_fallback(body) if isinstance(body, str) else ""
    mentioned = replied_to_me or mentions(content, me)
    if mentioned:
        text = strip_mention(text, me)
    attachments: tuple[Attachment, ...] = ()
    kind = MEDIA_KINDS.get(str(content.get("msgtype")))
    url = content.get("url")
    if kind is not None and isinstance(url, str) and url.startswith("mxc://"):
        attachments = (media_attachment(content, kind, url, text or None),)
        text = ""
    return InboundMessage(
        channel=channel,
        chat_type="dm" if direct else "group",
        chat_id=room_id,
        message_id=event_id,
        sender_id=sender,
        sender_name=sender_name,
        text=text,
        thread_id=thread,
        attachments=attachments,
        mentioned=mentioned,
        reply_to=reply,
    )


def text_content(text: str, *, thread_id: str | None, reply_to: str | None) -> dict[str, Any]:
    """An `m.text` message, in a thread (with the reply fallback) or replying to an event."""
    content: dict[str, Any] = {"msgtype": "m.text", "body": text, "m.mentions": {}}
    if thread_id is not None:
        content["m.relates_to"] = {
            "rel_type": "m.thread",
            "event_id": thread_id,
            "is_falling_back": True,
            "m.in_reply_to": {"event_id": reply_to or thread_id},
        }
    elif reply_to is not None:
        content["m.relates_to"] = {"m.in_reply_to": {"event_id": reply_to}}
    return content


def notice_content(text: str) -> dict[str, Any]:
    """An `m.notice` (what bots send for status lines)."""
    return {"msgtype": "m.notice", "body": text, "m.mentions": {}}


def edit_content(text: str, event_id: str) -> dict[str, Any]:
    """An `m.replace` edit of our message `event_id` to show `text` (the `* ` body is what
    clients without edit support show)."""
    return {
        "msgtype": "m.text",
        "body": f"* {text}",
        "m.mentions": {},
        "m.new_content": {"msgtype": "m.text", "body": text, "m.mentions": {}},
        "m.relates_to": {"rel_type": "m.replace", "event_id": event_id},
    }
