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
    data = event.get("data") or {}
    post = _json(data.get("post"), {})
    if not isinstance(post, dict):
        return None
    user, post_id, where = post.get("user_id"), post.get("id"), post.get("channel_id")
    if not user or not post_id or not where or user == bot_id or post.get("type"):
        return None
    props = post.get("props") or {}
    if str(props.get("from_bot", "")).lower() == "true" or props.get("from_webhook"):
        return None
    kind = str(data.get("channel_type") or "")
    direct = kind == "D"
    text = str(post.get("message") or "")
    mentioned_ids = _json(data.get("mentions"), [])
    mentioned = (
        direct
        or (isinstance(mentioned_ids, list) and bot_id in mentioned_ids)
        or mentions_name(text, bot_username)
    )
    if mentions_name(text, bot_username):  # also in DMs: `@bot /status` is a chat command
        text = strip_name(text, bot_username)
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
        attachments=_files(post),
        mentioned=bool(mentioned),
        reply_to=str(root) if root else None,
    )
    created = post.get("create_at")
    return Posted(message, str(where), created if type(created) is int and created > 0 else 0)


def _files(post: dict[str, Any]) -> tuple[Attachment, ...]:
    infos = (post.get("metadata") or {}).get("files") or []
    found = []
    for info in infos:
        if not isinstance(info, dict) or not info.get("id"):
            continue
        mime = str(info.get("mime_type") or "")
        kind = {"image": "photo", "audio": "audio"}.get(mime.partition("/")[0], "document")
        size = info.get("size")
        found.append(
            Attachment(
                kind=kind,
                ref=str(info["id"]),
                name=info.get("name"),
                size=size if type(size) is int and size >= 0 else None,
                mime_type=mime or None,
            )
        )
    return tuple(found)
