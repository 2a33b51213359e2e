"""Bot API objects the scripted Bot API (`nodmix.testing.telegram_server`) hands out: the
bot's own user and the messages tests inject."""

from __future__ import annotations

import time
from typing import Any


def bot_user(bot_id: int, username: str) -> dict[str, Any]:
    """The bot's `User` (what getMe answers)."""
    return {
        "id": bot_id,
        "is_bot": True,
        "first_name": "Nodmix Test",
        "username": username,
        "can_join_groups": True,
        "can_read_all_group_messages": False,
        "supports_inline_queries": False,
    }


def text_message(
    *,
    chat: tuple[int, str],
    sender: tuple[int, str],
    text: str,
    bot: dict[str, Any],
    thread_id: int | None = None,
    mention: bool = False,
    reply_to_bot: bool = False,
    document: tuple[str, str, bytes] | None = None,
) -> dict[str, Any]:
    """A `Message` from a user: `chat` is (id, type), `sender` (id, name); `document` is
    (file id, name, bytes) and carries `text` as its caption; with `mention` the text starts
    with `@<bot username> `."""
    chat_id, chat_type = chat
    username = str(bot["username"])
    if mention:
        text = f"@{username} {text}"
    message: dict[str, Any] = {
        "chat": {"id": chat_id, "type": chat_type, "title": f"chat {chat_id}"},
        "from": {"id": sender[0], "is_bot": False, "first_name": sender[1]},
    }
    if document is not None:
        file_id, name, data = document
        message["document"] = {
            "file_id": file_id,
            "file_unique_id": file_id,
            "file_name": name,
            "file_size": len(data),
        }
        message["caption"] = text
    else:
        message["text"] = text
    if mention:
        message["entities" if document is None else "caption_entities"] = [
            {"type": "mention", "offset": 0, "length": len(username) + 1}
        ]
    if thread_id is not None:
        message["message_thread_id"] = thread_id
        message["is_topic_message"] = True
    if reply_to_bot:
        message["reply_to_message"] = {
            "message_id": 1,
            "date": int(time.time()),
            "chat": message["chat"],
            "from": bot,
            "text": "earlier answer",
        }
    return message


def media_message(
    *,
    chat: tuple[int, str],
    sender: tuple[int, str],
    kind: str,
    file_id: str,
    size: int,
    caption: str = "",
    file_name: str | None = None,
    mime_type: str | None = None,
) -> dict[str, Any]:
    """A `Message` carrying a photo, voice note, audio file or document (`kind`), declaring
    `size` bytes."""
    chat_id, chat_type = chat
    ids = {"file_id": file_id, "file_unique_id": file_id, "file_size": size}
    message: dict[str, Any] = {
        "chat": {"id": chat_id, "type": chat_type, "title": f"chat {chat_id}"},
        "from": {"id": sender[0], "is_bot": False, "first_name": sender[1]},
    }
    if kind == "photo":
        message["photo"] = [{**ids, "width": 1280, "height": 960}]
    elif kind == "voice":
        message["voice"] = {**ids, "duration": 2, "mime_type": mime_type or "audio/ogg"}
    elif kind == "audio":
        message["audio"] = {
            **ids,
            "duration": 2,
            "mime_type": mime_type or "audio/mpeg",
            "file_name": file_name or "audio.mp3",
        }
    else:
        message["document"] = {**ids, "file_name": file_name or "file", "mime_type": mime_type}
    if caption:
        message["caption"] = caption
    return message
