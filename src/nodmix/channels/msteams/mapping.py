"""Teams activities as our `InboundMessage` (the only place that reads their shapes).

Senders are known by their Microsoft Entra object id (`from.aadObjectId`, the same for every
bot and shown in the Entra admin center), else by their Bot Framework id (`29:...`). A personal
chat is keyed by the sender's id (replies go to the conversation the adapter remembers for
them), a group chat by its conversation id, a channel by its channel id with the thread's root
message id as `thread_id` (a channel post and its replies are one thread in Teams).

The bot is mentioned only when the activity's `entities` hold a mention of the bot's own id
(`recipient.id`); text that merely looks like a mention (`<at>Bot</at>` typed out, `@Bot`) does
not count. The bot's mention is removed from the text the agent sees.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from typing import Any

from microsoft_agents.activity import Activity

from nodmix.channels.types import Attachment, InboundMessage

TEXT_LIMIT = 7000
"""Teams refuses messages over about 28 KB; 7000 characters stay under it whatever the
script (4 bytes per character at most), with room for the activity around the text."""
FILE_DOWNLOAD = "application/vnd.microsoft.teams.file.download.info"
_TAGS = re.compile(r"<[^>]{0,200}>")
_BREAKS = re.compile(r"(?i)<br\s*/?>|</p>\s*<p[^>]*>")
_THREAD = re.compile(r";messageid=(\d+)$")


@dataclass(frozen=True, slots=True)
class Where:
    """Where an activity came from: the chat key and the conversation replies go to."""

    chat_id: str
    chat_type: str
    conversation_id: str
    thread_id: str | None


def sender_of(activity: Activity) -> str:
    """The sender's id as `allowFrom` and pairing know it."""
    sender: Any = activity.from_property
    return str(sender.aad_object_id or sender.id or "") if sender is not None else ""


def where(activity: Activity) -> Where | None:
    """The chat an activity belongs to (None: no conversation)."""
    conversation = activity.conversation
    if conversation is None or not conversation.id:
        return None
    kind = conversation.conversation_type or ("groupChat" if conversation.is_group else "personal")
    if kind == "personal":
        return Where(sender_of(activity), "dm", conversation.id, None)
    if kind == "channel":
        base, thread = _split_thread(conversation.id)
        channel = _channel_data(activity).get("channel")
        chat = str(channel.get("id")) if isinstance(channel, dict) and channel.get("id") else base
        return Where(chat, "group", base, thread or activity.id)
    return Where(conversation.id, "group", conversation.id, None)


def conversation_for(conversation_id: str, thread_id: str | None) -> str:
    """The conversation id that reaches a channel thread (or the conversation itself)."""
    if thread_id and not _THREAD.search(conversation_id):
        return f"{conversation_id};messageid={thread_id}"
    return conversation_id


def tenant_of(activity: Activity) -> str | None:
    """The tenant an activity comes from."""
    tenant = _channel_data(activity).get("tenant")
    if isinstance(tenant, dict) and tenant.get("id"):
        return str(tenant["id"])
    conversation = activity.conversation
    return conversation.tenant_id if conversation is not None else None


def to_inbound(activity: Activity, *, channel: str) -> InboundMessage | None:
    """A `message` activity from a person, or None for anything else (edits, deletions,
    reactions, members joining, the bot's own messages, other bots)."""
    if activity.type != "message" or not activity.id:
        return None
    sender, bot = activity.from_property, activity.recipient
    if sender is None or bot is None or not sender.id or sender.id == bot.id:
        return None
    if sender.id.startswith("28:") or (sender.role or "") == "bot":
        return None
    place = where(activity)
    if place is None:
        return None
    mentioned, text = _mentions(activity, str(bot.id))
    return InboundMessage(
        channel=channel,
        chat_type="dm" if place.chat_type == "dm" else "group",
        chat_id=place.chat_id,
        message_id=str(activity.id),
        sender_id=sender_of(activity),
        sender_name=str(sender.name or ""),
        text=text,
        thread_id=place.thread_id,
        attachments=_attachments(activity),
        mentioned=True if place.chat_type == "dm" else mentioned,
        reply_to=activity.reply_to_id,
    )


def _mentions(activity: Activity, bot_id: str) -> tuple[bool, str]:
    """Whether an entity mentions the bot, and the text without the bot's mention."""
    text = str(activity.text or "")
    mentioned = False
    for entity in activity.entities or []:
        data = entity.model_dump(by_alias=True)
        if data.get("type") != "mention":
            continue
        who = data.get("mentioned") or {}
        if str(who.get("id", "")) != bot_id:
            continue
        mentioned = True
        tag = data.get("text")
        if isinstance(tag, str) and tag:
            text = text.replace(tag, " ")
    return mentioned, plain_text(text)


def plain_text(text: str) -> str:
    """Teams' HTML-ish message text as plain text: line breaks kept, other tags dropped,
    entities decoded."""
    text = _BREAKS.sub("\n", text)
    text = _TAGS.sub("", text)
    return html.unescape(text).replace("\xa0", " ").strip()


def _attachments(activity: Activity) -> tuple[Attachment, ...]:
    found = []
    for item in activity.attachments or []:
        kind = str(item.content_type or "")
        content = item.content if isinstance(item.content, dict) else {}
        if kind == FILE_DOWNLOAD and isinstance(content.get("downloadUrl"), str):
            file_type = str(content.get("fileType") or "")
            found.append(
                Attachment(
                    kind=_kind_of(file_type),
                    ref=f"file:{content['downloadUrl']}",
                    name=item.name,
                )
            )
        elif kind.startswith(("image/", "audio/", "video/")) and item.content_url:
            found.append(
                Attachment(
                    kind="photo" if kind.startswith("image/") else "audio",
                    ref=f"inline:{item.content_url}",
                    name=item.name,
                    mime_type=kind,
                )
            )
    return tuple(found)


def _kind_of(file_type: str) -> str:
    lowered = file_type.lower()
    if lowered in ("png", "jpg", "jpeg", "gif", "webp", "bmp"):
        return "photo"
    if lowered in ("mp3", "m4a", "ogg", "oga", "wav", "opus"):
        return "audio"
    return "document"


def _channel_data(activity: Activity) -> dict[str, Any]:
    data = activity.channel_data
    if isinstance(data, dict):
        return data
    dump = getattr(data, "model_dump", None)
    return dump(by_alias=True) if callable(dump) else {}


def _split_thread(conversation_id: str) -> tuple[str, str | None]:
    found = _THREAD.search(conversation_id)
    if found is None:
        return conversation_id, None
    return conversation_id[: found.start()], found.group(1)
