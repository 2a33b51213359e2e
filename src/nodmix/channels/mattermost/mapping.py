"""Mattermost WebSocket events as our `InboundMessage` (the only place that reads Mattermost's
event and post shapes).

A direct message (channel type `D`) is keyed by the sender's user id, so `allowFrom`, pairing
and the `message` tool speak of user ids (the adapter finds the DM channel); a channel
message (public `O`, private `P`, group message `G`) by the channel id, with the thread's
root post id as `thread_id`.
"""

from __future__ import annotations

import json
import re
from typing import Any, NamedTuple

from nodmix.channels.types import Attachment, InboundMessage

DEFAULT_TEXT_LIMIT = 16000
"""Characters per post: the server refuses posts over 16383."""


def _json(value: Any, default: Any) -> Any:
    """Mattermost sends nested objects as JSON strings inside the event."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return default
    return value if value is not None else default


def mentions_name(text: str, username: str) -> bool:
    """Whether `text` holds `@username` as a word."""
    if not username:
        return False
    pattern = rf"(?<![\w.\-])@{re.escape(username)}(?![\w\-]|\.\w)"
    return re.search(pattern, text, flags=re.IGNORECASE) is not None


def strip_name(text: str, username: str) -> str:
    """`text` without `@username` (the rest as the sender wrote it)."""
    pattern = rf"(?<![\w.\-])@{re.escape(username)}(?![\w\-]|\.\w)[:,]?\s*"
    return re.sub(pattern, "", text, flags=re.IGNORECASE).strip()


class Posted(NamedTuple):
    """A post the channel layer handles."""

    message: InboundMessage
    channel_id: str
    """The Mattermost channel it was posted in (for a DM: the DM channel)."""
    created: int
    """Its `create_at` (ms; 0 when the server sent none)."""


def posted_inbound(
    event: dict[str, Any], *, channel: str, bot_id: str, bot_username: str
) -> Posted | None:
    """A `posted` event (or a post read back, wrapped as one), or None for posts the layer
    does not handle (the bot's own, other bots', system messages, edits)."""
    if event.get("event") != "posted":
        return None
    data = _object(event.get("data"))
    post = _object(_json(data.get("post"), {}))
    user, post_id, where = post.get("user_id"), post.get("id"), post.get("channel_id")
    if not all(isinstance(v, str) and v for v in (user, post_id, where)):
        return None  # not a post (a malformed event is skipped, never fatal)
    if user == bot_id or post.get("type"):
        return None
    props = _object(post.get("props"))
    if str(props.get("from_bot", "")).lower() == "true" or props.get("from_webhook"):
        return None
    kind = str(data.get("channel_type") or "")
    direct = kind == "D"
    message = post.get("message")
    text = message if isinstance(message, str) else ""
    mentioned_ids = _json(data.get("mentions"), [])
    mentioned = (
        direct
        or (isinstance(mentioned_ids, list) and bot_id in mentioned_ids)
        or mentions_name(text, bot_username)
    )
    if mentions_name(text, bot_username):  # also in DMs: `@bot /status` is a chat command
        text = strip_name(text, bot_username)
    files = _files(post)
    if not text.strip() and not files:
        return None  # nothing to answer (a post whose files could not be read)
    root = post.get("root_id") or None
    sender_name = str(data.get("sender_name") or "").lstrip("@")
    message = InboundMessage(
        channel=channel,
        chat_type="dm" if direct else "group",
        chat_id=str(user) if direct else str(where),
        message_id=str(post_id),
        sender_id=str(user),
        sender_name=sender_name,
        text=text.strip(),
        thread_id=str(root) if root and not direct else None,
        attachments=files,
        mentioned=bool(mentioned),
        reply_to=str(root) if root else None,
    )
    created = post.get("create_at")
    return Posted(message, str(where), created if type(created) is int and created > 0 else 0)


def _object(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _files(post: dict[str, Any]) -> tuple[Attachment, ...]:
    infos = _object(post.get("metadata")).get("files")
    found = []
    for info in infos if isinstance(infos, list) else []:
        file_id = info.get("id") if isinstance(info, dict) else None
        if not isinstance(file_id, str) or not (file_id.isascii() and file_id.isalnum()):
            continue  # ids are 26 letters and digits: nothing else goes into the file URL
        mime = str(info.get("mime_type") or "")
        kind = {"image": "photo", "audio": "audio"}.get(mime.partition("/")[0], "document")
        size = info.get("size")
        found.append(
            Attachment(
                kind=kind,
                ref=file_id,
                name=info["name"] if isinstance(info.get("name"), str) else None,
                size=size if type(size) is int and size >= 0 else None,
                mime_type=mime or None,
            )
        )
    return tuple(found)
