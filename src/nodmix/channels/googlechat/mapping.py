"""Google Chat events as our `InboundMessage`, and our Markdown as Chat's text format (the
only place that reads Chat's shapes).

Both event formats are read: the Chat API's own (`{"type": "MESSAGE", "message": ...}`) and
the Google Workspace add-on one (`{"chat": {"messagePayload": ...}}`).

People are known by their user resource name (`users/123...`), with their email as the
longer form `allowFrom` patterns may match (`*@example.org`). A direct message is keyed by the
sender (replies go to the DM space the adapter remembers for them), a space by its name
(`spaces/AAA`); a reply in a thread carries the thread's name as `thread_id`.

In a space the app is mentioned only when Chat says so: a `USER_MENTION` annotation of a
Chat app (Chat computes `argumentText`, the text without the app's mention, from it) or a
slash command. Text that merely reads `@Assistant` mentions nobody.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from nodmix.channels.types import Attachment, InboundMessage

TEXT_LIMIT = 4096
_BOLD = re.compile(r"\*\*(?=\S)(.+?)(?<=\S)\*\*")
_HEADING = re.compile(r"(?m)^#{1,6}\s+(.+?)\s*#*$")
_LINK = re.compile(r"(?<!!)\[([^\]\n]+)\]\((https?://[^\s)]+)\)")
_MENTION = re.compile(r"<(users/|spaces/)")


@dataclass(frozen=True, slots=True)
class ChatEvent:
    """The parts of an event the channel uses."""

    kind: str
    message: dict[str, Any]
    space: dict[str, Any]


def read_event(event: Any) -> ChatEvent | None:
    """The event's type, message and space, in either format (None: not an event)."""
    if not isinstance(event, dict):
        return None
    chat = event.get("chat")
    if isinstance(chat, dict):
        payload = chat.get("messagePayload") or chat.get("addedToSpacePayload") or {}
        if not isinstance(payload, dict):
            return None
        message = _dict(payload.get("message"))
        space = _dict(payload.get("space") or message.get("space"))
        kind = "MESSAGE" if "messagePayload" in chat else "ADDED_TO_SPACE"
        return ChatEvent(kind, message, space)
    message = _dict(event.get("message"))
    space = _dict(event.get("space") or message.get("space"))
    return ChatEvent(str(event.get("type") or ""), message, space)


def is_direct(space: dict[str, Any]) -> bool:
    """A direct message between one person and the app."""
    return space.get("spaceType") == "DIRECT_MESSAGE" or space.get("type") == "DM"


def to_inbound(event: ChatEvent, *, channel: str) -> InboundMessage | None:
    """A message from a person (None for other events, bots, and messages without a name)."""
    if event.kind not in ("MESSAGE", "ADDED_TO_SPACE"):
        return None
    message, space = event.message, event.space
    sender = _dict(message.get("sender"))
    name, space_name = message.get("name"), space.get("name")
    if not isinstance(name, str) or not isinstance(space_name, str) or not name:
        return None
    if sender.get("type") == "BOT" or not isinstance(sender.get("name"), str):
        return None
    direct = is_direct(space)
    mentioned = _mentions_app(message)
    text = message.get("argumentText") if mentioned else message.get("text")
    thread = _dict(message.get("thread")).get("name")
    thread_id = str(thread) if thread and message.get("threadReply") and not direct else None
    email = sender.get("email")
    return InboundMessage(
        channel=channel,
        chat_type="dm" if direct else "group",
        chat_id=str(sender["name"]) if direct else space_name,
        message_id=name,
        sender_id=str(sender["name"]),
        sender_name=str(sender.get("displayName") or ""),
        sender_mask=str(email).lower() if isinstance(email, str) and email else None,
        text=str(text or "").strip(),
        thread_id=thread_id,
        attachments=_attachments(message),
        mentioned=True if direct else mentioned,
    )


def _mentions_app(message: dict[str, Any]) -> bool:
    if message.get("slashCommand"):
        return True
    for note in _list(message.get("annotations")):
        if not isinstance(note, dict) or note.get("type") not in ("USER_MENTION", "SLASH_COMMAND"):
            continue
        if note.get("type") == "SLASH_COMMAND":
            return True
        user = _dict(_dict(note.get("userMention")).get("user"))
        if user.get("type") == "BOT":
            return True
    return False


def _attachments(message: dict[str, Any]) -> tuple[Attachment, ...]:
    found = []
    for item in _list(message.get("attachment") or message.get("attachments")):
        if not isinstance(item, dict):
            continue
        ref = _dict(item.get("attachmentDataRef")).get("resourceName")
        if not isinstance(ref, str) or not ref:
            continue  # a Drive file: only its owner's credentials can read it
        mime = str(item.get("contentType") or "")
        kind = {"image": "photo", "audio": "audio"}.get(mime.partition("/")[0], "document")
        found.append(
            Attachment(
                kind=kind,
                ref=ref,
                name=str(item.get("contentName") or "") or None,
                mime_type=mime or None,
            )
        )
    return tuple(found)


def to_chat_text(markdown: str) -> str:
    """Markdown as Chat's format (`*bold*`, `<url|label>` links, headings in bold). A reply
    mentions no one: `<users/...>` (and `<users/all>`) typed into it stays text."""
    text = _MENTION.sub(lambda m: "<\u200b" + m.group(1), markdown)
    text = _HEADING.sub(r"*\1*", text)
    text = _BOLD.sub(r"*\1*", text)
    return _LINK.sub(lambda m: f"<{m.group(2)}|{m.group(1).replace('|', '/')}>", text)


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []
