"""Telegram updates as our `InboundMessage` (the only place that reads telegram objects)."""

from __future__ import annotations

import re

from nodmix.channels.types import Attachment, InboundMessage
from telegram import Message, MessageEntity, Update

TEXT_LIMIT = 4096


def to_inbound(
    update: Update, *, channel: str, bot_id: int, bot_username: str
) -> InboundMessage | None:
    """The update's message, or None for updates the layer does not handle."""
    message = update.message
    if message is None or message.from_user is None or message.from_user.is_bot:
        return None
    chat = message.chat
    if chat.type not in ("private", "group", "supergroup"):
        return None
    text = message.text or message.caption or ""
    mentioned = _mentions_bot(message, bot_id, bot_username)
    if mentioned and bot_username:
        text = re.sub(rf"(?i)(?<!\w)@{re.escape(bot_username)}\b", "", text).strip()
    reply = message.reply_to_message
    thread = message.message_thread_id if message.is_topic_message else None
    return InboundMessage(
        channel=channel,
        chat_type="dm" if chat.type == "private" else "group",
        chat_id=str(chat.id),
        message_id=str(message.message_id),
        sender_id=str(message.from_user.id),
        sender_name=message.from_user.full_name,
        text=text,
        thread_id=str(thread) if thread is not None else None,
        attachments=_attachments(message),
        mentioned=mentioned,
        reply_to=str(reply.message_id) if reply is not None else None,
    )


def _mentions_bot(message: Message, bot_id: int, username: str) -> bool:
    reply = message.reply_to_message
    if reply is not None and reply.from_user is not None and reply.from_user.id == bot_id:
        return True
    handle = f"@{username}".lower()
    entities = message.parse_entities() or message.parse_caption_entities()
    for entity, value in entities.items():
        if entity.type == MessageEntity.MENTION and value.lower() == handle:
            return True
        if entity.type == MessageEntity.TEXT_MENTION and entity.user and entity.user.id == bot_id:
            return True
        if entity.type == MessageEntity.BOT_COMMAND and value.lower().endswith(handle):
            return True
    return False


def _attachments(message: Message) -> tuple[Attachment, ...]:
    found: list[Attachment] = []
    if message.photo:
        largest = message.photo[-1]
        found.append(
            Attachment(
                kind="photo",
                ref=largest.file_id,
                name="photo.jpg",
                size=largest.file_size,
                mime_type="image/jpeg",
            )
        )
    if message.voice is not None:
        voice = message.voice
        found.append(
            Attachment(
                kind="voice",
                ref=voice.file_id,
                name="voice.ogg",
                size=voice.file_size,
                mime_type=voice.mime_type or "audio/ogg",
            )
        )
    if message.audio is not None:
        audio = message.audio
        found.append(
            Attachment(
                kind="audio",
                ref=audio.file_id,
                name=audio.file_name or "audio",
                size=audio.file_size,
                mime_type=audio.mime_type,
            )
        )
    if message.document is not None:
        doc = message.document
        found.append(
            Attachment(
                kind="document",
                ref=doc.file_id,
                name=doc.file_name,
                size=doc.file_size,
                mime_type=doc.mime_type,
            )
        )
    return tuple(found)
