"""Matrix events as our `InboundMessage`, and our replies as Matrix message content.

Works on the raw event JSON (`event.source` of matrix-nio's parsed events), so what is read is
exactly what the homeserver sent: `m.mentions`, `m.relates_to` (replies and threads) and the
media `url` of images and files.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from nodmix.channels.types import Attachment, InboundMessage

TEXT_TYPES = ("m.text", "m.emote")
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
    """Whether the message mentions the bot: `m.mentions`, a link to it, or its name."""
    declared = content.get("m.mentions")
    if isinstance(declared, dict):
        ids = declared.get("user_ids")
        if isinstance(ids, list) and me.user_id in ids:
            return True
    formatted = content.get("formatted_body")
    if isinstance(formatted, str) and f"matrix.to/#/{me.user_id}" in formatted:
        return True
    body = content.get("body")
    if not isinstance(body, str):
        return False
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
    if not is_message(event):
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
